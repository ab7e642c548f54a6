// A Cluster API workload cluster as the product meets it: a real etcd cluster (its own CA), a
// stand-in workload API server serving pod port-forward to each member's static pod
// kube-system/etcd-<node>, and on the management stand-in the two Secrets KCP reads:
// `<cluster>-kubeconfig` (value) and `<cluster>-etcd` (tls.crt, tls.key).
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { guardConfigSchema } from '../../functions/domain/config.js';
import type { Target } from '../../functions/domain/targets.js';
import { createWarmConnections, type WarmConnections } from '../../functions/usecases/reach-target.js';
import { generateTestCerts, type CaKeyType } from './certs.js';
import { startEtcdCluster, type EtcdTestCluster } from './etcd-cluster.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from './fake-kube-apiserver.js';

/**
 * A workload API server stand-in over HTTPS with a CA of its own, which its kubeconfig carries as
 * certificate-authority-data: the product takes only static credentials from a workload
 * kubeconfig and never plain http. `close()` also removes its certificates.
 */
export async function startWorkloadApiServer(): Promise<FakeKubeApiServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'workload-apiserver-'));
  const pki = await generateTestCerts(dir);
  const server = await startFakeKubeApiServer({
    tls: { certFile: pki.serverCertFile, keyFile: pki.serverKeyFile, caFile: pki.caFile },
  });
  const close = server.close;
  server.close = async () => {
    await close();
    await rm(dir, { recursive: true, force: true });
  };
  return server;
}
import { attachPortForward, type PortForwardRelay } from './fake-portforward.js';

export interface CapiWorkload {
  cluster: { namespace: string; clusterName: string };
  etcd: EtcdTestCluster;
  apiServer: FakeKubeApiServer;
  relay: PortForwardRelay;
  /** Control-plane node names: the etcd member names. */
  nodeNames: string[];
  destroy(): Promise<void>;
}

export function secretObject(namespace: string, name: string, data: Record<string, Buffer | string>) {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace },
    type: 'Opaque',
    data: Object.fromEntries(Object.entries(data).map(([key, value]) => [key, Buffer.from(value).toString('base64')])),
  };
}

/** Puts `<cluster>-kubeconfig` and `<cluster>-etcd` for a workload on the management stand-in. */
export async function putCapiSecrets(
  management: FakeKubeApiServer,
  cluster: { namespace: string; clusterName: string },
  workload: { apiServer: FakeKubeApiServer; etcd: EtcdTestCluster },
): Promise<void> {
  const [kubeconfig, caCert, caKey] = await Promise.all([
    readFile(workload.apiServer.kubeconfigFile),
    readFile(workload.etcd.tls.caFile),
    readFile(workload.etcd.tls.caKeyFile),
  ]);
  management.putObject('secrets', secretObject(cluster.namespace, `${cluster.clusterName}-kubeconfig`, { value: kubeconfig }));
  management.putObject(
    'secrets',
    secretObject(cluster.namespace, `${cluster.clusterName}-etcd`, { 'tls.crt': caCert, 'tls.key': caKey }),
  );
}

/** Routes kube-system/etcd-<member> on `relay` to each member of `etcd`. */
export function routeEtcdPods(relay: PortForwardRelay, etcd: EtcdTestCluster): void {
  for (const member of etcd.members) {
    relay.setPod('kube-system', `etcd-${member.name}`, { host: '127.0.0.1', port: Number(new URL(member.clientUrl).port) });
  }
}

export async function startCapiWorkload(
  management: FakeKubeApiServer,
  options: { namespace: string; clusterName: string; caKeyType?: CaKeyType; serverCertNames?: string[] },
): Promise<CapiWorkload> {
  const cluster = { namespace: options.namespace, clusterName: options.clusterName };
  const [etcd, apiServer] = await Promise.all([
    startEtcdCluster({
      name: options.clusterName,
      ...(options.caKeyType ? { caKeyType: options.caKeyType } : {}),
      ...(options.serverCertNames ? { serverCertNames: options.serverCertNames } : {}),
    }),
    startWorkloadApiServer(),
  ]);
  const relay = attachPortForward(apiServer);
  routeEtcdPods(relay, etcd);
  await putCapiSecrets(management, cluster, { apiServer, etcd });
  return {
    cluster,
    etcd,
    apiServer,
    relay,
    nodeNames: etcd.members.map((member) => member.name),
    async destroy() {
      await Promise.all([apiServer.close(), etcd.destroy()]);
    },
  };
}

/**
 * The Cluster API objects discovery reads for a workload, linked both ways as Cluster API links
 * them: a Cluster whose spec.controlPlaneRef names the KCP, the KCP owned by that Cluster (uid)
 * and labelled with its name, and a control-plane Machine per node.
 */
export function putControlPlaneObjects(
  management: FakeKubeApiServer,
  cluster: { namespace: string; clusterName: string },
  nodeNames: readonly string[],
): { kcpName: string } {
  const { namespace, clusterName } = cluster;
  const kcpName = `${clusterName}-control-plane`;
  const clusterUid = createHash('sha256').update(`${namespace}/${clusterName}`).digest('hex').slice(0, 32);
  const label = { 'cluster.x-k8s.io/cluster-name': clusterName };
  const kcpRef = { apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1', kind: 'KubeadmControlPlane', name: kcpName, namespace };
  management.putObject('clusters', {
    apiVersion: 'cluster.x-k8s.io/v1beta1',
    kind: 'Cluster',
    metadata: { name: clusterName, namespace, uid: clusterUid },
    spec: { controlPlaneRef: kcpRef },
  });
  management.putObject('kubeadmcontrolplanes', {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
    kind: 'KubeadmControlPlane',
    metadata: {
      name: kcpName,
      namespace,
      uid: createHash('sha256').update(`${namespace}/${kcpName}`).digest('hex').slice(0, 32),
      labels: label,
      ownerReferences: [
        { apiVersion: 'cluster.x-k8s.io/v1beta1', kind: 'Cluster', name: clusterName, uid: clusterUid, controller: true },
      ],
    },
    spec: { replicas: nodeNames.length, version: 'v1.30.4' },
  });
  for (const node of nodeNames) management.putObject('machines', controlPlaneMachine(cluster, node));
  return { kcpName };
}

/** The control-plane Machine of KCP `<clusterName>-control-plane` on `node`, labelled as KCP labels it. */
export function controlPlaneMachine(cluster: { namespace: string; clusterName: string }, node: string): FakeObject {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta1',
    kind: 'Machine',
    metadata: {
      name: `${node}-machine`,
      namespace: cluster.namespace,
      creationTimestamp: '2026-11-02T09:15:00Z',
      labels: {
        'cluster.x-k8s.io/cluster-name': cluster.clusterName,
        'cluster.x-k8s.io/control-plane': '',
        'cluster.x-k8s.io/control-plane-name': `${cluster.clusterName}-control-plane`,
      },
    },
    status: { nodeRef: { name: node } },
  };
}

/** Puts the control-plane Machine of each of `workload`'s nodes on `management`. */
export function putControlPlaneMachines(management: FakeKubeApiServer, workload: CapiWorkload): void {
  for (const node of workload.nodeNames) management.putObject('machines', controlPlaneMachine(workload.cluster, node));
}

/** The target discovery makes of `workload`'s KubeadmControlPlane: reached and its Machines read through Cluster API. */
export function capiTarget(workload: CapiWorkload, timeout = 2_000): Target {
  const { namespace, clusterName } = workload.cluster;
  return {
    name: `capi-${namespace}-${clusterName}`,
    source: 'capi',
    guards: { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', namespace, name: clusterName },
    reach: { kind: 'capi', ...workload.cluster },
    machines: workload.cluster,
    endpoints: [],
    timeout,
    quotaBackendBytes: 2 * 1024 ** 3,
    match: {},
  };
}

/** The connections a long-running process keeps, as the config's `connections` section sets them. */
export function warmConnectionsFor(connections: Record<string, unknown> = {}, nowMs?: () => number): WarmConnections {
  const warm = createWarmConnections(
    guardConfigSchema.parse({ targets: [{ name: 'unused', endpoints: ['https://127.0.0.1:2379'] }], connections }),
    nowMs,
  );
  if (warm === null) throw new Error('connections.keep is on by default');
  return warm;
}
