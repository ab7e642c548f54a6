// Reads a KubeadmControlPlane's Machines (Cluster API), so the webhook can tell which etcd member
// KCP will remove. One bounded list call; v1beta1 first (served by every Cluster API release so
// far), v1beta2 when the management cluster no longer serves v1beta1.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { Deadline } from '../core/deadline.js';
import { machineFromObject, type ControlPlaneMachine } from '../core/machines.js';
import { callKube, KubeApiError, loadKubeConfig } from './kube.js';

export interface MachinesQuery {
  namespace: string;
  /** The KubeadmControlPlane's name; Machines owned by another KCP are left out. */
  controlPlaneName: string;
  /** The KCP's `cluster.x-k8s.io/cluster-name` label; null on a /scale request (no labels). */
  clusterName: string | null;
}

export type MachineReader = (query: MachinesQuery, deadline: Deadline) => Promise<ControlPlaneMachine[]>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Owned by this KCP, or carrying no owner at all (adopted Machines keep none until adoption). */
function ownedBy(item: unknown, controlPlaneName: string): boolean {
  const metadata = isRecord(item) && isRecord(item.metadata) ? item.metadata : {};
  const owners = Array.isArray(metadata.ownerReferences) ? metadata.ownerReferences : [];
  if (owners.length === 0) return true;
  return owners.some((owner) => isRecord(owner) && owner.kind === 'KubeadmControlPlane' && owner.name === controlPlaneName);
}

/** Control-plane Machines: by cluster and the control-plane label, else by the control-plane name label. */
export function machineSelector(query: MachinesQuery): string {
  return query.clusterName !== null
    ? `cluster.x-k8s.io/cluster-name=${query.clusterName},cluster.x-k8s.io/control-plane`
    : `cluster.x-k8s.io/control-plane-name=${query.controlPlaneName}`;
}

export function createMachineReader(loadConfig: () => KubeConfig = () => loadKubeConfig()): MachineReader {
  let api: CustomObjectsApi | undefined;
  return async (query, deadline) => {
    api ??= loadConfig().makeApiClient(CustomObjectsApi);
    const client = api;
    const list = (version: string) =>
      callKube({ verb: 'list', resource: 'machines', namespace: query.namespace }, deadline, (options) =>
        client.listNamespacedCustomObject(
          {
            group: 'cluster.x-k8s.io',
            version,
            namespace: query.namespace,
            plural: 'machines',
            labelSelector: machineSelector(query),
          },
          options,
        ),
      );
    let body: unknown;
    try {
      body = await list('v1beta1');
    } catch (error) {
      if (!(error instanceof KubeApiError && error.isNotFound)) throw error;
      body = await list('v1beta2');
    }
    const items: unknown[] = isRecord(body) && Array.isArray(body.items) ? body.items : [];
    return items
      .filter((item) => ownedBy(item, query.controlPlaneName))
      .map(machineFromObject)
      .filter((machine): machine is ControlPlaneMachine => machine !== null);
  };
}
