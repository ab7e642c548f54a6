// The doors' end-to-end arrangement (test/e2e/door-*.test.ts): the management cluster's stand-in
// serving the owners the webhook reads (a KubeadmControlPlane, a StatefulSet), and real etcd fed
// to the HTTPS webhook by the scheduled run, with no parent cache so every review reads the owner
// as the test last put it.
import { startEtcdWebhook, type EtcdWebhook, type EtcdWebhookOptions } from './etcd-webhook.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from './fake-kube-apiserver.js';

export interface Door {
  management: FakeKubeApiServer;
  e2e: EtcdWebhook;
}

export interface DoorOptions extends Omit<EtcdWebhookOptions, 'timeout'> {
  /** What the stand-in serves before the webhook starts, by resource (e.g. kubeadmcontrolplanes). */
  owners: Record<string, FakeObject[]>;
  /** The target's probe deadline; '5s' unless told. */
  timeout?: string;
}

export async function startDoor({ owners, webhook, timeout = '5s', ...options }: DoorOptions): Promise<Door> {
  const management = await startFakeKubeApiServer();
  try {
    for (const [resource, objects] of Object.entries(owners)) {
      for (const object of objects) management.putObject(resource, object);
    }
    const e2e = await startEtcdWebhook({
      ...options,
      timeout,
      webhook: { ready: true, kubeconfigFile: management.kubeconfigFile, parentCacheTtlMs: 0, ...webhook },
    });
    return { management, e2e };
  } catch (error) {
    await management.close();
    throw error;
  }
}

/** Stops what startDoor started, whatever of it started. */
export async function closeDoor(door: Partial<Door>): Promise<void> {
  await door.e2e?.close();
  await door.management?.close();
}

/** A KubeadmControlPlane of target `target`'s cluster, named `name`, its etcd stacked (local). */
export function doorKcp(
  target: string,
  name: string,
  {
    namespace = 'default',
    metadata = {},
    etcdLocal = {},
  }: { namespace?: string; metadata?: Record<string, unknown>; etcdLocal?: Record<string, unknown> } = {},
): FakeObject {
  return {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlane',
    metadata: { name, namespace, labels: { 'cluster.x-k8s.io/cluster-name': target }, ...metadata },
    spec: { replicas: 3, version: 'v1.33.2', kubeadmConfigSpec: { clusterConfiguration: { etcd: { local: etcdLocal } } } },
  };
}
