// Cluster API control-plane Machines, reduced to what etcd-guard reads: which Machines belong to a
// control plane (Cluster API's labels, owned by the kind its module names in `machines.ownerKind`),
// which Node (and so which stacked etcd member: kubeadm names the member after the Node) a Machine
// stands for, whether the user asked for it to go first, and when it was made. Pure; shared by the
// webhook's projection and the evaluation's inventory (capi-machines.ts does the listing).

import type { ControlPlaneNode } from '../ports/etcd-probe.js';

export const DELETE_MACHINE_ANNOTATION = 'cluster.x-k8s.io/delete-machine';
/** The service account Cluster API's KubeadmControlPlane controller runs as, as clusterctl installs it. */
export const KCP_CONTROLLER_USER = 'system:serviceaccount:capi-kubeadm-control-plane-system:capi-kubeadm-control-plane-manager';

export interface ControlPlaneMachine {
  name: string;
  /** `status.nodeRef.name`; null until the Machine has a Node. */
  nodeName: string | null;
  /** Carries the delete-machine annotation. */
  deleteRequested: boolean;
  /** Has a deletionTimestamp: already leaving, not a candidate. */
  deleting: boolean;
  /** RFC 3339 creation time, null when absent. */
  createdAt: string | null;
  /** `spec.failureDomain`; null when absent. */
  failureDomain: string | null;
  /**
   * The Machine's `UpToDate` condition as KCP last set it (v1beta2 `status.conditions`, v1beta1
   * `status.v1beta2.conditions`): true or false, null when the Machine does not report it.
   */
  upToDate: boolean | null;
  /**
   * Whether KCP last counted the Machine as needing rollout: its UpToDate condition False for the
   * reason NotUpToDate (KCP's reconcileMachineUpToDateCondition; False for "Updating" is an
   * in-place update or a kubelet catching up, not a rollout); null when the condition is absent.
   */
  kcpOutdated: boolean | null;
  /** `spec.version`; null when absent. */
  version: string | null;
  /**
   * Every control-plane component condition KCP sets on the Machine (APIServerPodHealthy,
   * ControllerManagerPodHealthy, SchedulerPodHealthy, EtcdPodHealthy, EtcdMemberHealthy) reads
   * True. Otherwise KCP's scale-down may take it first among the outdated ones
   * (UnhealthyMachinesWithUnhealthyControlPlaneComponents).
   */
  componentsHealthy: boolean;
}

/** The Machine conditions KCP's HasUnhealthyControlPlaneComponents reads (stacked etcd). */
const COMPONENT_CONDITIONS = [
  'APIServerPodHealthy',
  'ControllerManagerPodHealthy',
  'SchedulerPodHealthy',
  'EtcdPodHealthy',
  'EtcdMemberHealthy',
] as const;

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function recordAt(value: unknown, key: string): Record<string, unknown> {
  const child = isRecord(value) ? value[key] : undefined;
  return isRecord(child) ? child : {};
}

/** Condition `type` in a Kubernetes conditions list, when it is there. */
function conditionOf(conditions: unknown, type: string): Record<string, unknown> | null {
  if (!Array.isArray(conditions)) return null;
  const found: unknown = conditions.find((condition) => isRecord(condition) && condition.type === type);
  return isRecord(found) ? found : null;
}

/** The status of condition `type` in a Kubernetes conditions list: true, false, or null (absent/Unknown). */
function conditionStatus(conditions: unknown, type: string): boolean | null {
  const found = conditionOf(conditions, type);
  if (found === null) return null;
  return found.status === 'True' ? true : found.status === 'False' ? false : null;
}

export interface MachinesQuery {
  namespace: string;
  /** The control plane's name; Machines owned by another control plane are left out. */
  controlPlaneName: string;
  /** The owner reference kind of the control plane's Machines (its kind's `machines.ownerKind`; KCP's when absent). */
  ownerKind?: string;
  /** The KCP's `cluster.x-k8s.io/cluster-name` label; null on a /scale request (no labels). */
  clusterName: string | null;
}

/**
 * The control-plane failure domains of the Cluster a control plane belongs to, as KCP reads them
 * (ControlPlane.FailureDomains, cluster-api controlplane/kubeadm/pkg/control_plane.go: those with
 * controlPlane true; v1beta2 status.failureDomains is a list, v1beta1 a map by name); none when
 * the Cluster reports none, as for KCP. Null when the Cluster's spec.controlPlaneRef does not
 * name this control plane: then it is not its Cluster and nothing is known.
 */
export function controlPlaneFailureDomains(cluster: unknown, query: MachinesQuery): string[] | null {
  const ref = recordAt(recordAt(cluster, 'spec'), 'controlPlaneRef');
  if (ref.name !== query.controlPlaneName || ref.kind !== (query.ownerKind ?? 'KubeadmControlPlane')) return null;
  if (typeof ref.namespace === 'string' && ref.namespace !== query.namespace) return null;
  const domains: unknown = recordAt(cluster, 'status').failureDomains;
  if (domains === undefined || domains === null) return [];
  const entries: [unknown, unknown][] = Array.isArray(domains)
    ? domains.map((domain) => [isRecord(domain) ? domain.name : undefined, domain])
    : isRecord(domains)
      ? Object.entries(domains)
      : [];
  return entries.flatMap(([name, domain]) =>
    typeof name === 'string' && name !== '' && isRecord(domain) && domain.controlPlane === true ? [name] : [],
  );
}

/** Owned by this control plane, or carrying no owner at all (adopted Machines keep none until adoption). */
export function ownedBy(item: unknown, controlPlaneName: string, ownerKind: string): boolean {
  const metadata = isRecord(item) && isRecord(item.metadata) ? item.metadata : {};
  const owners = Array.isArray(metadata.ownerReferences) ? metadata.ownerReferences : [];
  if (owners.length === 0) return true;
  return owners.some((owner) => isRecord(owner) && owner.kind === ownerKind && owner.name === controlPlaneName);
}

/** Control-plane Machines: by cluster and the control-plane label, else by the control-plane name label. */
export function machineSelector(query: MachinesQuery): string {
  return query.clusterName !== null
    ? `cluster.x-k8s.io/cluster-name=${query.clusterName},cluster.x-k8s.io/control-plane`
    : `cluster.x-k8s.io/control-plane-name=${query.controlPlaneName}`;
}

/** A Machine as the apiserver returns it (either API version); null when it has no name. */
export function machineFromObject(object: unknown): ControlPlaneMachine | null {
  const metadata = recordAt(object, 'metadata');
  const name = typeof metadata.name === 'string' && metadata.name !== '' ? metadata.name : null;
  if (name === null) return null;
  const status = recordAt(object, 'status');
  const nodeName = recordAt(status, 'nodeRef').name;
  const annotations = recordAt(object, 'metadata').annotations;
  const failureDomain = recordAt(object, 'spec').failureDomain;
  // v1beta2 Machines carry KCP's conditions in status.conditions, v1beta1 ones in status.v1beta2.conditions.
  const v1beta2 = recordAt(status, 'v1beta2').conditions;
  const conditions = conditionOf(status.conditions, 'UpToDate') !== null ? status.conditions : v1beta2;
  const upToDate = conditionStatus(conditions, 'UpToDate');
  const upToDateReason = conditionOf(conditions, 'UpToDate')?.reason;
  const version = recordAt(object, 'spec').version;
  const componentConditions = conditionOf(status.conditions, 'EtcdMemberHealthy') !== null ? status.conditions : v1beta2;
  return {
    name,
    nodeName: typeof nodeName === 'string' && nodeName !== '' ? nodeName : null,
    deleteRequested: isRecord(annotations) && typeof annotations[DELETE_MACHINE_ANNOTATION] === 'string',
    deleting: typeof metadata.deletionTimestamp === 'string',
    createdAt: typeof metadata.creationTimestamp === 'string' ? metadata.creationTimestamp : null,
    failureDomain: typeof failureDomain === 'string' && failureDomain !== '' ? failureDomain : null,
    upToDate,
    kcpOutdated: upToDate === null ? null : upToDate === false && upToDateReason === 'NotUpToDate',
    version: typeof version === 'string' && version !== '' ? version : null,
    componentsHealthy: COMPONENT_CONDITIONS.every((type) => conditionStatus(componentConditions, type) === true),
  };
}

/**
 * Machine inventory entries dated by their Nodes: a Node's grace to run an etcd member (and a
 * learner's age) counts from the Node's creation, as KCP counts it; a Machine is made before its
 * Node, so its own creation (kept when the Node is not listed) only shortens the grace. Without
 * `nodes` the entries stay as they are.
 */
export function datedByNodes(
  entries: readonly ControlPlaneNode[],
  nodes: readonly ControlPlaneNode[] | null,
): ControlPlaneNode[] {
  const createdByName = new Map(
    (nodes ?? []).flatMap((node) => (node.createdAt === undefined ? [] : [[node.name, node.createdAt]])),
  );
  return entries.map((entry) => {
    const created = entry.provisioning === true ? undefined : createdByName.get(entry.name);
    return created === undefined ? entry : { ...entry, createdAt: created };
  });
}
