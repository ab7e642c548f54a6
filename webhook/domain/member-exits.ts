// The doors besides replica counts and rollouts through which an etcd member goes (issue 28), as
// DELETE requests. Pure.
//
// - A control-plane Machine (Cluster API): its stacked etcd member, the one named after its Node,
//   leaves for good. KCP's pre-terminate hook removes the member only after the delete was
//   admitted and the Node drained, and a delete cannot be undone (cluster-api#10197), so the
//   delete itself is judged like a shrink that removes that member. A Machine without a nodeRef
//   may already hold a member (cluster-api#11772): which one is undetermined, never "none".
// - An etcd pod of a guarded etcd-druid Etcd or StatefulSet: its member is down until the pod
//   returns (a PodDisruptionBudget covers evictions, not deletes), so it is denied when the
//   healthy voting members left would be fewer than quorum.
//
// Which owner is whose: a Machine's KubeadmControlPlane owner reference, a pod's StatefulSet
// owner reference. Both are tenant-writable, so they only point at an owner whose own target then
// judges (a discovered target guarding it by identity, or a static target that matches it), and a
// pod only reaches a target that guards its StatefulSet (or the druid Etcd it is named after) by
// namespace and name. The owner itself is read (the server's parent read) for what the DELETE
// does not say: a teardown (the owner being deleted, or gone: KCP and the garbage collector then
// delete these objects, and deleting the KCP or the Cluster stays allowed) and a StatefulSet's
// own scale-down (pods at or beyond spec.replicas, a shrink judged when replicas changed).
import type { GuardConfig, TargetConfig } from '../../functions/domain/config.js';
import { quorumOf, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { DRUID_ETCD } from '../../functions/domain/kinds/druid-etcd.js';
import { KUBEADM_CONTROL_PLANE } from '../../functions/domain/kinds/kubeadm-control-plane.js';
import type { RemovedMember } from '../../functions/domain/kinds/kind.js';
import { removedBy } from '../../functions/domain/kinds/ordinal-removal.js';
import { STATEFUL_SET } from '../../functions/domain/kinds/statefulset.js';
import { DELETE_MACHINE_ANNOTATION } from '../../functions/domain/machines.js';
import { targetGuarding, type FleetView, type Target } from '../../functions/domain/targets.js';
import { printableExcerpt as clipped } from '../../functions/shared/redact.js';
import { valueAtPointer } from '../../functions/shared/json-pointer.js';
import { describeObject, labelsOf, LABELS_UNKNOWN } from './classify.js';
import type {
  AdmissionRequest,
  Classification,
  GuardedObjectRef,
  MemberExit,
  ParentLabels,
  ParentObjectRef,
} from './contract.js';
import { discoveryOwnership } from './discovery-scope.js';
import { matchTarget, targetsNaming } from './match-target.js';
import { membershipStateOf, projectOntoEvaluation } from './projection.js';
import { hasOwners, ownersOf } from './owner-references.js';
import { record, text } from '../../functions/shared/records.js';

export const MACHINE = { group: 'cluster.x-k8s.io', kind: 'Machine', resource: 'machines' } as const;
export const POD = { group: '', kind: 'Pod', resource: 'pods' } as const;
/** Cluster API's label on every control-plane Machine (worker Machines have none). */
export const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';
/** Cluster API's label naming a Machine's control plane; read when no owner reference names it. */
export const CONTROL_PLANE_NAME_LABEL = 'cluster.x-k8s.io/control-plane-name';
/** KCP remediates a Machine so annotated (deletes and replaces it), checking etcd before it does. */
export const REMEDIATE_MACHINE_ANNOTATION = 'cluster.x-k8s.io/remediate-machine';

/** What the owner read keeps for a DELETE of its Machine or pod (the reader's cache holds no whole spec). */
export const OWNER_POINTERS: readonly string[] = [
  '/metadata/deletionTimestamp',
  '/spec/kubeadmConfigSpec/clusterConfiguration/etcd/external',
  '/spec/replicas',
  '/spec/ordinals/start',
];

const allow = (reason: string): Classification => ({ kind: 'allow', reason });

/** The version to read an owner at: the owner reference's when the kind serves it, else `fallback`. */
export function readVersion(version: string | undefined, served: readonly string[], fallback: string): string {
  return version !== undefined && served.includes(version) ? version : fallback;
}

/** The deleted object's reference: a DELETE names it in the request and carries it as oldObject. */
function deletedRef(request: AdmissionRequest, id: { group: string; kind: string }): GuardedObjectRef {
  const metadata = record(record(request.oldObject).metadata);
  return {
    group: id.group,
    kind: id.kind,
    namespace: text(request.namespace) ?? text(metadata.namespace) ?? '',
    name: text(request.name) ?? text(metadata.name) ?? '',
    viaScale: false,
  };
}

/**
 * DELETE: a control-plane Machine or an etcd pod is judged as its member leaving or going down;
 * every other DELETE (the KCP, the Cluster, an Etcd or StatefulSet itself: teardown) is allowed.
 */
export function classifyDelete(
  request: AdmissionRequest,
  config: GuardConfig,
  parent: ParentLabels | undefined,
  targets: readonly Target[],
  fleet: FleetView | undefined,
  how: OwnerReading = DELETING,
): Classification {
  const { group, resource } = request.resource;
  if ((request.subResource ?? '') !== '') return allow('delete');
  // Already terminating: an earlier DELETE was admitted and only the API server sets this. The
  // apiserver validates a graceful delete again when it removes the object, and the kubelet's
  // final grace-0 DELETE of a terminated pod arrives once its member is down: refusing a repeat
  // stops nothing and would leave the object stuck terminating.
  if (text(record(record(request.oldObject).metadata).deletionTimestamp) !== undefined) return allow('already-terminating');
  if (group === MACHINE.group && resource === MACHINE.resource)
    return classifyMachineDelete(request, config, parent, targets, fleet, how);
  if (group === POD.group && resource === POD.resource) return classifyPodDelete(request, parent, targets, how);
  return allow('delete');
}

/** What a request does to the object whose owner (or control plane) is read, for the messages. */
export interface OwnerReading {
  /** `deleting`, or `changing` (a Cluster's topology, cluster-topology.ts). */
  doing: string;
  /** How the read object relates to it: `the owner of`, `the control plane of`. */
  relation: string;
}

const DELETING: OwnerReading = { doing: 'deleting', relation: 'the owner of' };

/**
 * What reading the owner says: go on with its labels and object, or the classification it
 * settles. Gone or being deleted: a teardown, nothing left to judge.
 */
export function ownerRead(
  deleted: GuardedObjectRef,
  owner: ParentObjectRef & { kind: string },
  parent: ParentLabels | undefined,
  how: OwnerReading = DELETING,
): { labels: Readonly<Record<string, string>>; object: unknown } | Classification {
  const what = `${owner.kind} ${owner.namespace}/${owner.name}`;
  if (parent === undefined) {
    return {
      kind: 'deny',
      reason: LABELS_UNKNOWN,
      parent: {
        group: owner.group,
        version: owner.version,
        resource: owner.resource,
        namespace: owner.namespace,
        name: owner.name,
      },
      object: deleted,
      message: `etcd-guard cannot judge ${how.doing} ${describeObject(deleted)}: it reads its ${what} first (is it being torn down, which target guards it) and has no way to`,
    };
  }
  // Gone: its dependents are the garbage collector's to delete, the end of a teardown.
  if (!parent.ok) {
    if (parent.notFound === true) return allow('teardown');
    return {
      kind: 'deny',
      reason: 'parent-unreadable',
      object: deleted,
      message: `etcd-guard cannot judge ${how.doing} ${describeObject(deleted)}: reading its ${what} failed: ${parent.message}`,
    };
  }
  if (text(record(record(parent.object).metadata).deletionTimestamp) !== undefined) return allow('teardown');
  return { labels: parent.labels, object: parent.object };
}

/**
 * The target judging `owner`, as classifyRequest finds it for a change of the owner itself: its
 * discovered target by identity; else, unless discovery owns it unresolved, the static targets
 * (only those naming it where discovery leaves it to them) matched by its labels.
 */
export function ownerTarget(
  config: GuardConfig,
  deleted: GuardedObjectRef,
  owner: GuardedObjectRef,
  labels: Readonly<Record<string, string>>,
  targets: readonly Target[],
  fleet: FleetView | undefined,
  how: OwnerReading = DELETING,
): TargetConfig | Classification {
  const own = targetGuarding(targets, owner);
  if (own !== undefined) return own;
  const ownership = discoveryOwnership(config, owner, [labels], fleet);
  if (ownership.kind === 'unresolved' || ownership.kind === 'labels-unknown') {
    const message = ownership.kind === 'unresolved' ? ownership.message : 'its labels are unknown';
    return {
      kind: 'deny',
      reason: 'unresolved',
      object: deleted,
      message: `etcd-guard cannot judge ${how.doing} ${describeObject(deleted)}: ${message}`,
    };
  }
  const statics = targets.filter((target) => target.guards === null);
  const candidates = ownership.kind === 'static-may-judge' ? targetsNaming(statics, owner.namespace, owner.name) : statics;
  const matched = matchTarget(candidates, { namespace: owner.namespace, name: owner.name, labels });
  if (matched.kind === 'matched') return matched.target;
  return {
    kind: 'deny',
    reason: 'no-target',
    object: deleted,
    message: `no etcd-guard target matches ${describeObject(owner)}, ${how.relation} ${describeObject(deleted)}; add a target whose match selects it`,
  };
}

/** The KubeadmControlPlane a control-plane Machine belongs to, or the classification that settles it. */
export function machineOwner(
  old: unknown,
  deleted: GuardedObjectRef,
  how: OwnerReading = DELETING,
): { name: string; version: string | undefined } | Classification {
  const owners = ownersOf(old, KUBEADM_CONTROL_PLANE);
  if (owners.length > 1) {
    return {
      kind: 'deny',
      reason: 'invalid',
      object: deleted,
      message: `etcd-guard cannot judge ${how.doing} ${describeObject(deleted)}: it has ${owners.length} KubeadmControlPlane owner references; exactly one is expected`,
    };
  }
  if (owners[0] !== undefined) return owners[0];
  // Another control-plane provider's Machine (Talos, k0smotron): not a KCP member.
  if (hasOwners(old)) return allow('not-guarded');
  // Not adopted yet: KCP adopts a control-plane Machine without owner by its labels.
  const named = text(labelsOf(old)[CONTROL_PLANE_NAME_LABEL]);
  return named === undefined ? allow('no-control-plane-owner') : { name: named, version: undefined };
}

function hasExternalEtcd(kcp: unknown): boolean {
  const external = valueAtPointer(kcp, '/spec/kubeadmConfigSpec/clusterConfiguration/etcd/external');
  return external !== undefined && external !== null;
}

function classifyMachineDelete(
  request: AdmissionRequest,
  config: GuardConfig,
  parent: ParentLabels | undefined,
  targets: readonly Target[],
  fleet: FleetView | undefined,
  how: OwnerReading,
): Classification {
  const old = request.oldObject;
  if (!(CONTROL_PLANE_LABEL in labelsOf(old))) return allow('not-control-plane');
  const deleted = deletedRef(request, MACHINE);
  const owner = machineOwner(old, deleted, how);
  if ('kind' in owner) return owner;
  const kcp: GuardedObjectRef = { ...KUBEADM_CONTROL_PLANE, namespace: deleted.namespace, name: owner.name, viaScale: false };
  const version = readVersion(owner.version, ['v1beta1', 'v1beta2'], 'v1beta1');
  const read = ownerRead(deleted, { ...KUBEADM_CONTROL_PLANE, version, namespace: kcp.namespace, name: kcp.name }, parent, how);
  if ('kind' in read) return read;
  // With external etcd the control-plane Machines run no etcd member.
  if (hasExternalEtcd(read.object)) return allow('external-etcd');
  const target = ownerTarget(config, deleted, kcp, read.labels, targets, fleet, how);
  if ('kind' in target) return target;
  const nodeName = text(record(record(record(old).status).nodeRef).name) ?? null;
  return {
    kind: 'needs-evaluation',
    target,
    object: deleted,
    change: { kind: 'machine-delete', machine: deleted.name, nodeName, controlPlane: kcp.name },
  };
}

/** The pod's ordinal when it is named `<statefulSet>-<ordinal>`, else null. */
function ordinalOf(pod: string, statefulSet: string): number | null {
  if (!pod.startsWith(`${statefulSet}-`)) return null;
  const rest = pod.slice(statefulSet.length + 1);
  return /^(0|[1-9]\d{0,8})$/.test(rest) ? Number(rest) : null;
}

/** Whether the StatefulSet's own spec already drops the pod (its ordinal at or beyond start + replicas). */
function beyondReplicas(statefulSet: unknown, ordinal: number | null): boolean {
  if (ordinal === null) return false;
  const replicas = valueAtPointer(statefulSet, '/spec/replicas') ?? 1;
  const start = valueAtPointer(statefulSet, '/spec/ordinals/start') ?? 0;
  if (typeof replicas !== 'number' || typeof start !== 'number') return false;
  return ordinal >= start + replicas;
}

function classifyPodDelete(
  request: AdmissionRequest,
  parent: ParentLabels | undefined,
  targets: readonly Target[],
  how: OwnerReading,
): Classification {
  const old = request.oldObject;
  const deleted = deletedRef(request, POD);
  const owners = ownersOf(old, STATEFUL_SET);
  if (owners.length === 0) return allow('not-guarded');
  if (owners.length > 1) {
    return {
      kind: 'deny',
      reason: 'invalid',
      object: deleted,
      message: `etcd-guard cannot judge ${how.doing} ${describeObject(deleted)}: it has ${owners.length} StatefulSet owner references; exactly one is expected`,
    };
  }
  const statefulSet = owners[0]?.name ?? '';
  const { namespace } = deleted;
  // Only a target that guards this StatefulSet, or the druid Etcd it is named after, by identity or by name.
  const byIdentity =
    targetGuarding(targets, { ...DRUID_ETCD, namespace, name: statefulSet }) ??
    targetGuarding(targets, { ...STATEFUL_SET, namespace, name: statefulSet });
  const naming = targetsNaming(
    targets.filter((target) => target.guards === null),
    namespace,
    statefulSet,
  );
  if (byIdentity === undefined && naming.length === 0) return allow('not-guarded');
  const read = ownerRead(deleted, { ...STATEFUL_SET, version: 'v1', namespace, name: statefulSet }, parent, how);
  if ('kind' in read) return read;
  if (beyondReplicas(read.object, ordinalOf(deleted.name, statefulSet))) return allow('scale-down');
  let target: TargetConfig | undefined = byIdentity;
  if (target === undefined) {
    const matched = matchTarget(naming, { namespace, name: statefulSet, labels: read.labels });
    if (matched.kind !== 'matched') {
      return {
        kind: 'deny',
        reason: 'no-target',
        object: deleted,
        message: `no etcd-guard target matches StatefulSet ${namespace}/${statefulSet}, the owner of ${describeObject(deleted)}, by its labels`,
      };
    }
    target = matched.target;
  }
  return { kind: 'needs-evaluation', target, object: deleted, change: { kind: 'pod-delete', pod: deleted.name, statefulSet } };
}

// ---- the judgement, on the evaluation the decision found fresh enough ----

export type ExitJudgement =
  { allowed: true; reason: string; warnings: string[] } | { allowed: false; reason: string; reasons: string[]; hint: string };

interface MemberFound {
  /** What taking it out removes; null: undetermined (the worst case, a healthy member, is assumed). */
  removed: RemovedMember | null;
  /** Names the member, or says why it is unknown. */
  note: string;
}

const NO_MEMBER_LIST: MemberFound = {
  removed: null,
  note: 'the evaluation has no member list, so which member it holds is undetermined and a healthy one is assumed',
};

/** The member named `name` (kubeadm: the Node; druid and StatefulSets: the pod), as far as the evaluation tells. */
function memberNamed(evaluation: Evaluation, name: string): MemberFound {
  // No member list (every endpoint failed to answer it): "no member is named so" would be a guess.
  if (evaluation.members.length === 0) return NO_MEMBER_LIST;
  const member = evaluation.members.find((candidate) => candidate.name === name);
  const shown = clipped(name);
  if (member !== undefined) {
    const removed = removedBy(member) ?? 'none';
    const state = removed === 'none' ? 'a learner' : removed;
    return { removed, note: `etcd member ${shown} is ${state}` };
  }
  const unnamed = evaluation.members.filter((candidate) => !candidate.learner && candidate.name === '').length;
  if (unnamed > 0) {
    return {
      removed: null,
      note: `no etcd member is named ${shown}, but ${unnamed} voting member(s) report no name and may be it, so a healthy member is assumed`,
    };
  }
  return { removed: 'none', note: `no etcd member is named ${shown}` };
}

function machineMember(evaluation: Evaluation, change: Extract<MemberExit, { kind: 'machine-delete' }>): MemberFound {
  if (evaluation.members.length === 0) return NO_MEMBER_LIST;
  if (change.nodeName !== null) return memberNamed(evaluation, change.nodeName);
  return {
    removed: null,
    note: 'it has no nodeRef yet and may already run a member (cluster-api#11772): which one is undetermined, so a healthy one is assumed',
  };
}

function machineSafePath(change: Extract<MemberExit, { kind: 'machine-delete' }>, namespace: string): string {
  const machine = clipped(change.machine);
  const kcp = clipped(change.controlPlane);
  return (
    `the safe paths: kubectl -n ${namespace} annotate machine ${machine} ${REMEDIATE_MACHINE_ANNOTATION}="" ` +
    `(KCP remediates it, checking etcd first), or kubectl -n ${namespace} annotate machine ${machine} ${DELETE_MACHINE_ANNOTATION}="" ` +
    `and scale KubeadmControlPlane ${kcp} down by one (judged as a shrink)`
  );
}

/** A control-plane Machine's member leaves: allowed when it is dead, absent or a learner, or when a shrink removing it keeps quorum. */
function judgeMachineDelete(
  evaluation: Evaluation,
  change: Extract<MemberExit, { kind: 'machine-delete' }>,
  namespace: string,
): ExitJudgement {
  const found = machineMember(evaluation, change);
  const machine = `Machine ${clipped(change.machine)}`;
  if (found.removed === 'none')
    return {
      allowed: true,
      reason: 'no-member',
      warnings: [`etcd-guard: ${machine} holds no voting etcd member (${found.note})`],
    };
  if (found.removed === 'unhealthy') {
    return { allowed: true, reason: 'member-unhealthy', warnings: [`etcd-guard: deleting ${machine} removes its ${found.note}`] };
  }
  const voting = evaluation.cluster.votingMembers;
  if (found === NO_MEMBER_LIST || voting === 0) {
    return {
      allowed: false,
      reason: 'undetermined',
      reasons: [`deleting ${machine}: ${NO_MEMBER_LIST.note}`],
      hint: machineSafePath(change, namespace),
    };
  }
  const projection = projectOntoEvaluation(
    evaluation,
    { kind: 'scale-down', from: voting, to: voting - 1 },
    { removalOrder: [found.removed], undeterminedHint: found.note },
  );
  if (projection.allowed) return { allowed: true, reason: evaluation.verdict.toLowerCase(), warnings: projection.warnings };
  const leaving = found.removed === null ? found.note : `its ${found.note} and leaves with it`;
  return {
    allowed: false,
    reason: found.removed === null ? 'undetermined' : evaluation.verdict === 'Unhealthy' ? 'unhealthy' : 'quorum',
    reasons: [`deleting ${machine}: ${leaving}`, ...projection.reasons],
    hint: machineSafePath(change, namespace),
  };
}

/** An etcd pod's member goes down until the pod returns: denied when the healthy voting members left fall below quorum. */
function judgePodDelete(
  evaluation: Evaluation,
  change: Extract<MemberExit, { kind: 'pod-delete' }>,
  target: string,
): ExitJudgement {
  const found = memberNamed(evaluation, change.pod);
  const pod = `pod ${clipped(change.pod)}`;
  if (found.removed === 'none')
    return { allowed: true, reason: 'no-member', warnings: [`etcd-guard: ${pod} holds no voting etcd member (${found.note})`] };
  if (found.removed === 'unhealthy')
    return { allowed: true, reason: 'member-unhealthy', warnings: [`etcd-guard: ${pod}'s ${found.note} already`] };
  const state = membershipStateOf(evaluation);
  const quorum = quorumOf(state.voting);
  const left = state.healthyVoting - 1;
  if (left >= quorum) {
    const warnings = left === quorum ? [`etcd ${target}: while ${pod} is down, etcd tolerates no further member failure`] : [];
    return { allowed: true, reason: evaluation.verdict.toLowerCase(), warnings };
  }
  const tolerance = Math.max(0, state.healthyVoting - quorum);
  return {
    allowed: false,
    reason: found.removed === null ? 'undetermined' : 'quorum',
    reasons: [
      `deleting ${pod} takes its member down until it returns (${found.note}): ${Math.max(left, 0)} of ${state.voting} voting members ` +
        `would be healthy, below quorum ${quorum} (fault tolerance now ${tolerance})`,
    ],
    hint: `wait until the other members are healthy (GET /evaluations/${target}) before deleting the pod`,
  };
}

/** Judges a member-bearing DELETE, or the UPDATE that would let it go unseen, on a fresh evaluation. */
export function judgeMemberExit(
  evaluation: Evaluation,
  change: MemberExit,
  object: GuardedObjectRef,
  target: string,
): ExitJudgement {
  const exit =
    change.kind === 'machine-delete'
      ? judgeMachineDelete(evaluation, change, object.namespace)
      : judgePodDelete(evaluation, change, target);
  if (change.strip === undefined) return exit;
  if (exit.allowed) {
    // Kept short: the API server cuts long warnings, and the strip is what the user needs to read.
    const unseen = `etcd-guard: this change ${change.strip}: deleting it afterwards goes unseen`;
    return { ...exit, warnings: [unseen, ...exit.warnings] };
  }
  const keep = change.kind === 'machine-delete' ? 'keep its labels and owner reference' : 'keep its owner reference and image';
  return { ...exit, hint: `${keep}; ${exit.hint}` };
}

/** How a member-bearing DELETE, or the UPDATE that would let it go unseen, reads in a denial. */
export function describeExit(change: MemberExit): string {
  if (change.strip !== undefined) return `change (${change.strip}: its deletion would go unseen)`;
  return change.kind === 'machine-delete'
    ? 'deletion (its etcd member leaves)'
    : 'deletion (its etcd member is down until the pod returns)';
}
