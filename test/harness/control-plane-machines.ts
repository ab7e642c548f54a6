// Control-plane Machines as Cluster API v1beta2 serves them, parsed the way the webhook parses a
// listing, for the removal suites (webhook/domain/removal*.test.ts): each suite says the name,
// age, Node, domain and conditions it is about, and the rest of the object is the same.
import { machineFromObject, type ControlPlaneMachine } from '../../functions/domain/machines.js';

/** KCP's control-plane component conditions on a Machine (controlplane/kubeadm's MachineXxxHealthy). */
export const KCP_COMPONENTS = [
  'APIServerPodHealthy',
  'ControllerManagerPodHealthy',
  'SchedulerPodHealthy',
  'EtcdPodHealthy',
  'EtcdMemberHealthy',
];

export interface ControlPlaneMachineSpec {
  name: string;
  /** metadata.creationTimestamp, as the apiserver writes it. */
  created: string;
  /** status.nodeRef.name; null: no nodeRef yet. */
  node: string | null;
  /** spec.version. */
  version: string;
  failureDomain?: string;
  /** The cluster.x-k8s.io/delete-machine annotation KCP picks first. */
  annotated?: boolean;
  /** metadata.deletionTimestamp. */
  deletedAt?: string;
  labels?: Record<string, string>;
  /** status.phase. */
  phase?: string;
  conditions: Record<string, unknown>[];
}

export function controlPlaneMachine(spec: ControlPlaneMachineSpec): ControlPlaneMachine {
  const parsed = machineFromObject({
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Machine',
    metadata: {
      name: spec.name,
      namespace: 'default',
      creationTimestamp: spec.created,
      ...(spec.labels === undefined ? {} : { labels: spec.labels }),
      ...(spec.annotated === true ? { annotations: { 'cluster.x-k8s.io/delete-machine': '' } } : {}),
      ...(spec.deletedAt === undefined ? {} : { deletionTimestamp: spec.deletedAt }),
    },
    spec: {
      clusterName: 'prod',
      version: spec.version,
      ...(spec.failureDomain === undefined ? {} : { failureDomain: spec.failureDomain }),
    },
    status: {
      ...(spec.phase === undefined ? {} : { phase: spec.phase }),
      ...(spec.node === null ? {} : { nodeRef: { name: spec.node } }),
      conditions: spec.conditions,
    },
  });
  if (parsed === null) throw new Error('fixture Machine has no name');
  return parsed;
}
