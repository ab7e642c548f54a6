// Which etcd members a controller removes when it shrinks, as far as its rules determine that, and
// the rest of what the projection needs to know about how the controller carries a change out.
// Pure: the server hands in the Machines it read (or why it could not).
//
// Facts, from the controllers' sources:
// - KCP (cluster-api controlplane/kubeadm/internal/controllers/scale.go, selectMachineForScaleDown):
//   one Machine per step, chosen among the Machines annotated `cluster.x-k8s.io/delete-machine`
//   (outdated ones first), else outdated ones with unhealthy control-plane components, else
//   outdated ones, else all; then by failure domain and age. kubeadm names a stacked etcd member
//   after its Node, and a Machine reaches its Node through `status.nodeRef.name`.
// - StatefulSet (and etcd-druid, whose StatefulSet carries the Etcd's name): the highest ordinal
//   goes first; pods, and so the members, are named `<name>-<ordinal>`.
// Where the rules leave the choice open (which outdated Machine, which failure domain), the step
// is undetermined and the projection assumes the worst case: a healthy member leaves.
import type { Evaluation, MemberReport } from '../../functions/core/evaluation.js';
import { DELETE_MACHINE_ANNOTATION, type ControlPlaneMachine } from '../../functions/core/machines.js';
import { labelsOf } from './classify.js';
import type { Classification, MembershipChange, TargetMove } from './contract.js';
import { valueAtPointer } from './detect-change.js';
import type { ProjectionOptions, RemovedMember } from './projection.js';

export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
const KCP_GROUP = 'controlplane.cluster.x-k8s.io';

export type MachinesRead = { ok: true; machines: ControlPlaneMachine[] } | { ok: false; error: string };

type Guarded = Extract<Classification, { kind: 'needs-evaluation' }>;

/** Replicas before and after, when the change shrinks the object; null when it does not. */
export function shrinkOf(change: MembershipChange | TargetMove): { from: number; to: number } | null {
  if (change.kind === 'scale-down') return { from: change.from, to: change.to };
  if (change.kind === 'rollout' && change.previousReplicas !== undefined && change.previousReplicas > change.replicas) {
    return { from: change.previousReplicas, to: change.replicas };
  }
  return null;
}

export function isKubeadmControlPlane(classification: Guarded): boolean {
  return classification.object.group === KCP_GROUP;
}

/** The server reads Machines only when they decide something: a KCP that shrinks. */
export function needsMachines(classification: Guarded): boolean {
  return isKubeadmControlPlane(classification) && shrinkOf(classification.change) !== null;
}

/** The KCP's cluster name label (absent on a /scale request, whose Scale carries no labels). */
export function clusterNameOf(object: unknown): string | null {
  return labelsOf(object)[CLUSTER_NAME_LABEL] ?? null;
}

function maxSurgeIsZero(object: unknown): boolean {
  const surge =
    valueAtPointer(object, '/spec/rollout/strategy/rollingUpdate/maxSurge') ??
    valueAtPointer(object, '/spec/rolloutStrategy/rollingUpdate/maxSurge');
  return surge === 0 || surge === '0' || surge === '0%';
}

function hasExternalEtcd(object: unknown): boolean {
  const external = valueAtPointer(object, '/spec/kubeadmConfigSpec/clusterConfiguration/etcd/external');
  return external !== undefined && external !== null;
}

function removedBy(member: MemberReport | undefined): RemovedMember | undefined {
  if (member === undefined) return undefined;
  if (member.learner) return 'none';
  return member.healthy ? 'healthy' : 'unhealthy';
}

const WORST_FIRST: readonly RemovedMember[] = ['healthy', 'unhealthy', 'none'];

function annotateHint(namespace: string, machines: readonly string[]): string {
  const names = machines.length > 0 ? machines : ['<machine>'];
  const commands = names.map((name) => `kubectl -n ${namespace} annotate machine ${name} ${DELETE_MACHINE_ANNOTATION}=""`);
  return `to choose the Machine KCP removes: ${commands.join('; ')}`;
}

/**
 * KCP's removals, step by step: candidates are the annotated Machines when any is left, else all
 * (the outdated tiers are not told apart: that only widens the candidates). A step is determined
 * when every candidate removes the same kind of member; a Machine whose Node names no member
 * removes none, but only when every voting member has a Machine (else its member is unknown).
 */
export function kcpRemovalOrder(
  members: readonly MemberReport[],
  machines: readonly ControlPlaneMachine[],
  to: number,
  from: number,
): { order: (RemovedMember | null)[]; determined: boolean } {
  const byName = new Map(members.filter((member) => member.name !== '').map((member) => [member.name, member]));
  const voting = members.filter((member) => !member.learner);
  const everyMemberHasMachine = voting.every((member) => machines.some((machine) => machine.nodeName === member.name));
  const kindOf = (machine: ControlPlaneMachine): RemovedMember | null =>
    removedBy(byName.get(machine.nodeName ?? '')) ?? (machine.nodeName !== null && everyMemberHasMachine ? 'none' : null);
  let remaining = machines.filter((machine) => !machine.deleting);
  const steps = Math.min(remaining.length, Math.max(from - to, remaining.length - to));
  const order: (RemovedMember | null)[] = [];
  let determined = true;
  for (let step = 0; step < steps; step += 1) {
    const annotated = remaining.filter((machine) => machine.deleteRequested);
    const candidates = annotated.length > 0 ? annotated : remaining;
    const kinds = new Set(candidates.map(kindOf));
    const chosenKind = kinds.size === 1 && !kinds.has(null) ? (candidates.map(kindOf)[0] ?? null) : null;
    if (chosenKind === null) determined = false;
    order.push(chosenKind);
    // Undetermined: drop the candidate whose loss hurts most, as the worst case assumes.
    const dropped =
      WORST_FIRST.map((kind) => candidates.find((machine) => (kindOf(machine) ?? 'healthy') === kind)).find(
        (machine) => machine !== undefined,
      ) ?? candidates[0];
    remaining = remaining.filter((machine) => machine !== dropped);
  }
  return { order, determined };
}

/**
 * StatefulSet / druid removals: ordinals from start+from−1 down to start+to. Determined only when
 * every voting member is named `<name>-<ordinal>`; a removed ordinal without a member removes none.
 * O(members): the ordinals themselves (which may be absurd numbers) are never walked.
 */
export function ordinalRemovalOrder(
  members: readonly MemberReport[],
  name: string,
  start: number,
  from: number,
  to: number,
): (RemovedMember | null)[] | undefined {
  const ordinalOf = (member: MemberReport): number | null => {
    const match = /^(.*)-(\d+)$/.exec(member.name);
    return match && match[1] === name ? Number(match[2]) : null;
  };
  const voting = members.filter((member) => !member.learner);
  if (voting.length === 0 || voting.some((member) => ordinalOf(member) === null)) return undefined;
  return members
    .map((member) => ({ member, ordinal: ordinalOf(member) }))
    .filter((entry): entry is { member: MemberReport; ordinal: number } => entry.ordinal !== null)
    .filter(({ ordinal }) => ordinal >= start + to && ordinal < start + from)
    .sort((a, b) => b.ordinal - a.ordinal)
    .map(({ member }) => removedBy(member) ?? null);
}

export interface ProjectionFacts {
  classification: Guarded;
  request: { object?: unknown; oldObject?: unknown };
  evaluation: Evaluation;
  /** Read for a shrinking KCP; absent when the server has no way to read them. */
  machines?: MachinesRead;
}

function kcpOptions(facts: ProjectionFacts, shrink: { from: number; to: number } | null): ProjectionOptions {
  const { object, oldObject } = facts.request;
  const options: ProjectionOptions = {
    removeBeforeAdd: maxSurgeIsZero(object),
    externalEtcd: hasExternalEtcd(object) || hasExternalEtcd(oldObject),
  };
  if (shrink === null || options.externalEtcd === true) return options;
  const namespace = facts.classification.object.namespace;
  const machines = facts.machines;
  if (machines === undefined || !machines.ok) {
    const why = machines === undefined ? 'no Kubernetes client to read Machines' : machines.error;
    return {
      ...options,
      undeterminedHint: `the KCP's Machines could not be read (${why}), so a healthy member is assumed to leave; ${annotateHint(namespace, [])}`,
    };
  }
  const { order, determined } = kcpRemovalOrder(facts.evaluation.members, machines.machines, shrink.to, shrink.from);
  const deadMachines = machines.machines
    .filter((machine) => {
      const member = facts.evaluation.members.find((candidate) => candidate.name === machine.nodeName);
      return member !== undefined && !member.healthy && !member.learner && !machine.deleting;
    })
    .map((machine) => machine.name);
  return {
    ...options,
    removalOrder: order,
    ...(determined
      ? {}
      : {
          undeterminedHint: `which Machine KCP removes is not determined, so a healthy member is assumed to leave; ${annotateHint(namespace, deadMachines)}`,
        }),
  };
}

/** How the guarded object's controller will carry the change out, as far as known. */
export function projectionOptionsFor(facts: ProjectionFacts): ProjectionOptions {
  const { classification } = facts;
  const shrink = shrinkOf(classification.change);
  if (isKubeadmControlPlane(classification)) return kcpOptions(facts, shrink);
  if (shrink === null) return {};
  const startValue = valueAtPointer(facts.request.oldObject, '/spec/ordinals/start');
  const start = typeof startValue === 'number' && Number.isInteger(startValue) && startValue >= 0 ? startValue : 0;
  const order = ordinalRemovalOrder(facts.evaluation.members, classification.object.name, start, shrink.from, shrink.to);
  if (order !== undefined) return { removalOrder: order };
  return {
    undeterminedHint: `etcd member names do not follow the pod names ${classification.object.name}-<ordinal>, so a healthy member is assumed to leave`,
  };
}
