// The EtcdAccess of a Cluster API workload cluster, opened the way KCP reaches its etcd: credentials
// from the management cluster's Secrets (minted client certificate, in memory), and each member
// through the workload API server's port-forward to its static pod kube-system/etcd-<node>:2379.
// kubeadm names a stacked etcd member after its node, so a listed member is reached through the
// listener of the node with its name.
//
// The serving certificate is verified against the cluster's etcd CA with the node name as the
// expected server name (kubeadm puts the node name, localhost, 127.0.0.1 and the node IP into it),
// so a forward that lands on another member or another cluster's etcd is refused. KCP skips the
// host name check and verifies only the chain; we can do better because we know the node.
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Deadline } from '../domain/deadline.js';
import { EtcdAccessError, type EtcdAccess } from '../usecases/etcd-access.js';
import { ClientCertificateMinter, readCapiCredentials, type CapiCluster } from './capi-credentials.js';
import { listWorkloadControlPlaneNodes } from './workload-nodes.js';
import { listenForPodPort, type PortForwardListener } from './pod-port-forward.js';
import type { TlsSessionCache } from './tls-sessions.js';

const ETCD_NAMESPACE = 'kube-system';
const ETCD_CLIENT_PORT = 2379;

/** Certificates minted by this process, reused across evaluations until near expiry. */
const processMinter = new ClientCertificateMinter();

export interface CapiEtcdAccessOptions {
  /** Where minted certificates are kept; the process-wide one by default. */
  minter?: ClientCertificateMinter;
  /** HTTPS_PROXY/NO_PROXY for the workload API servers (default: the process's environment). */
  environment?: Record<string, string | undefined>;
  /** Where TLS sessions to the workload API servers are kept; the process-wide one by default. */
  workloadTlsSessions?: TlsSessionCache;
}

/** "kube-system/etcd-<node>:2379 via port-forward": how a member is named in reasons. */
export function describePodForward(nodeName: string): string {
  return `${ETCD_NAMESPACE}/etcd-${nodeName}:${ETCD_CLIENT_PORT} via port-forward`;
}

/** `management` reads the Cluster's Secrets on the management cluster. */
export async function openCapiEtcdAccess(
  management: CoreV1Api,
  cluster: CapiCluster,
  controlPlaneNodeNames: readonly string[],
  deadline: Deadline,
  options: CapiEtcdAccessOptions = {},
): Promise<EtcdAccess> {
  const nodeNames = [...new Set(controlPlaneNodeNames)].sort();
  if (nodeNames.length === 0) {
    throw new EtcdAccessError(`cluster ${cluster.namespace}/${cluster.clusterName} has no control-plane node to reach etcd on`);
  }
  const credentials = await readCapiCredentials(management, cluster, deadline, options.minter ?? processMinter);
  const listeners = new Map<string, PortForwardListener>();
  const nodeByEndpoint = new Map<string, string>();
  const closeAll = () => Promise.all([...listeners.values()].map((listener) => listener.close())).then(() => undefined);
  try {
    for (const node of nodeNames) {
      const target = { namespace: ETCD_NAMESPACE, pod: `etcd-${node}`, port: ETCD_CLIENT_PORT };
      const listener = await listenForPodPort(
        credentials.workload,
        target,
        deadline,
        options.environment ?? process.env,
        options.workloadTlsSessions,
      );
      listeners.set(node, listener);
      nodeByEndpoint.set(listener.endpoint, node);
    }
  } catch (error) {
    await closeAll();
    throw new EtcdAccessError(`cannot open a port-forward listener: ${(error as Error).message}`);
  }
  const listenerOf = (endpoint: string) => {
    const node = nodeByEndpoint.get(endpoint);
    return node === undefined ? undefined : listeners.get(node);
  };
  // One text for every way the workload API server can fail before a port-forward opens: it is
  // what tenants see in denials, and the kubeconfig's writer picks the server (see pod-port-forward).
  const unreachable =
    `workload API server of ${cluster.namespace}/${cluster.clusterName} unreachable or refused the port-forward ` +
    `(server and credentials from Secret ${cluster.namespace}/${cluster.clusterName}-kubeconfig)`;
  return {
    seedEndpoints: [...listeners.values()].map((listener) => listener.endpoint),
    credentials: credentials.etcd,
    endpointFor: (member) => listeners.get(member.name)?.endpoint,
    serverNameFor: (endpoint) => nodeByEndpoint.get(endpoint),
    describe: (endpoint) => {
      const node = nodeByEndpoint.get(endpoint);
      return node === undefined ? endpoint : describePodForward(node);
    },
    failureDetail: (endpoint) => {
      const failure = listenerOf(endpoint)?.failure();
      return failure?.reachedApiServer === true ? failure.detail : undefined;
    },
    unreachable: (endpoint) => (listenerOf(endpoint)?.failure()?.reachedApiServer === false ? unreachable : undefined),
    // The creation times that date the Machine inventory, read where KCP reads them.
    listControlPlaneNodes: (timeoutMs) => listWorkloadControlPlaneNodes(credentials.workload, timeoutMs),
    close: closeAll,
  };
}
