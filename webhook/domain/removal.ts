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
import { CLUSTER_NAME_LABEL, KUBEADM_CONTROL_PLANE, isKind } from '../../functions/domain/controller-kinds.js';
import type { Evaluation, MemberReport } from '../../functions/domain/evaluation-document.js';
import { DELETE_MACHINE_ANNOTATION, type ControlPlaneMachine } from '../../functions/domain/machines.js';
import { labelsOf } from './classify.js';
import type { Classification, MembershipChange, TargetMove } from './contract.js';
import { jsonEqual, valueAtPointer } from './detect-change.js';
import type { ProjectionOptions, RemovedMember } from './projection.js';

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
  return isKind(classification.object, KUBEADM_CONTROL_PLANE);
}

/** The server reads Machines only when they decide something: a KCP that shrinks. */
export function needsMachines(classification: Guarded): boolean {
  return isKubeadmControlPlane(classification) && shrinkOf(classification.change) !== null;
}

/** The KCP's cluster name label (absent on a /scale request, whose Scale carries no labels). */
export function clusterNameOf(object: unknown): string | null {
  return labelsOf(object)[CLUSTER_NAME_LABEL] ?? null;
}

/**
 * Whether KCP removes an old member before adding its replacement: maxSurge 0 does; an absent
 * maxSurge is KCP's default 1 (adds first); a value the guard cannot read may be either, so both
 * orders are projected.
 */
export function surgeOf(object: unknown): boolean | 'unknown' {
  const surge =
    valueAtPointer(object, '/spec/rollout/strategy/rollingUpdate/maxSurge') ??
    valueAtPointer(object, '/spec/rolloutStrategy/rollingUpdate/maxSurge');
  if (surge === undefined || surge === null) return false;
  if (surge === 0 || surge === '0' || surge === '0%') return true;
  if (typeof surge === 'number' && Number.isInteger(surge) && surge > 0) return false;
  // KCP reads it with IntValue(), which makes "50%" a 0: only plain numbers are read here.
  if (typeof surge === 'string' && /^[1-9]\d*$/.test(surge)) return false;
  return 'unknown';
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

/** What KCP's removals look like as far as the listed Machines tell. */
export interface KcpRemovalPlan {
  /** Every removal in KCP's order (null: open, the worst case); undefined: every removal is the worst case. */
  order: (RemovedMember | null)[] | undefined;
  determined: boolean;
  /** Why the listing cannot determine anything (it misses Machines), when that is so. */
  incomplete?: string;
  /** The Machine KCP deletes first when exactly one can be it: KCP's preflight ignores its member's alarms. */
  firstPick: ControlPlaneMachine | null;
}

/**
 * Why the listing may miss Machines KCP sees, or null when it accounts for everything: every voting
 * member needs exactly one Machine whose Node carries its name (a member with none, or with two, is
 * unknown), and at least as many live Machines as the current replicas. Without that, KCP may
 * delete a Machine the webhook never saw, so nothing about the removal is known (issue 17).
 */
export function listingGap(
  members: readonly MemberReport[],
  machines: readonly ControlPlaneMachine[],
  from: number,
): string | null {
  const voting = members.filter((member) => !member.learner);
  const unnamed = voting.filter((member) => member.name === '').length;
  if (unnamed > 0) return `${unnamed} voting member(s) report no name, so no Machine can be matched to them`;
  for (const member of voting) {
    const owners = machines.filter((machine) => machine.nodeName === member.name).length;
    if (owners !== 1) return `member ${member.name} has ${owners === 0 ? 'no Machine' : `${owners} Machines`} in the listing`;
  }
  const live = machines.filter((machine) => !machine.deleting).length;
  if (live < from) return `the listing has ${live} live Machine(s) for ${from} replicas`;
  return null;
}

function createdMs(machine: ControlPlaneMachine): number | null {
  const parsed = machine.createdAt === null ? Number.NaN : Date.parse(machine.createdAt);
  return Number.isFinite(parsed) ? parsed : null;
}

/**
 * The Machines KCP may delete next, following selectMachineForScaleDown (cluster-api
 * controlplane/kubeadm/internal/controllers/scale.go): annotated Machines (outdated ones first),
 * else outdated ones with unhealthy components, else outdated ones, else all; then, in the failure
 * domain with the most Machines, the oldest (MachineInFailureDomainWithMostMachines,
 * controlplane/kubeadm/internal/control_plane.go). Outdatedness is known only when every live
 * Machine reports UpToDate=True (then none is outdated); the failure domain only when every live
 * Machine is in the same one; age only from distinct creation times. Anything unknown widens the
 * answer to every Machine the tiers allow.
 */
function possiblePicks(remaining: readonly ControlPlaneMachine[], predictByAge: boolean): readonly ControlPlaneMachine[] {
  const annotated = remaining.filter((machine) => machine.deleteRequested);
  const eligible = annotated.length > 0 ? annotated : remaining;
  if (!predictByAge || eligible.length <= 1) return eligible;
  if (!remaining.every((machine) => machine.upToDate === true)) return eligible;
  const domain = remaining[0]?.failureDomain ?? null;
  if (!remaining.every((machine) => machine.failureDomain === domain)) return eligible;
  const ages = eligible.map(createdMs);
  if (ages.some((age) => age === null)) return eligible;
  const oldest = Math.min(...(ages as number[]));
  const picks = eligible.filter((_machine, index) => ages[index] === oldest);
  return picks.length === 1 ? picks : eligible;
}

/**
 * KCP's removals, step by step. Machines already being deleted go first: KCP's preflight waits for
 * them and they count towards its Machines (scale.go preflightChecks). Then one pick per step
 * until the live Machines are down to `to`. A step is determined when every possible pick removes
 * the same kind of member. Only a complete listing gets here (listingGap), so every voting member
 * sits on exactly one Machine with its Node: a Machine whose Node names no member, or that has no
 * Node yet, holds no voting member and removes none. KCP deletes a Machine only while every other
 * Machine has a Node and a healthy member (preflightChecks), so it takes etcd no lower than `to`:
 * at most max(from, voting) − to removals take a member, as many as when nothing is known; later
 * picks are left out. `predictByAge`: the change is a plain scale down, so the request itself
 * outdates no Machine and KCP's age rule may be applied.
 */
export function kcpRemovalOrder(
  members: readonly MemberReport[],
  machines: readonly ControlPlaneMachine[],
  to: number,
  from: number,
  predictByAge = false,
): KcpRemovalPlan {
  const incomplete = listingGap(members, machines, from);
  if (incomplete !== null) return { order: undefined, determined: false, incomplete, firstPick: null };
  const byName = new Map(members.map((member) => [member.name, member]));
  const kindOf = (machine: ControlPlaneMachine): RemovedMember => removedBy(byName.get(machine.nodeName ?? '')) ?? 'none';
  const voting = members.filter((member) => !member.learner).length;
  const memberRemovals = Math.max(from - to, voting - to, 0);
  const deleting = machines.filter((machine) => machine.deleting);
  let remaining = machines.filter((machine) => !machine.deleting);
  const order: (RemovedMember | null)[] = deleting.map(kindOf);
  let determined = true;
  let firstPick: ControlPlaneMachine | null = null;
  const steps = Math.max(0, remaining.length - to);
  for (let step = 0; step < steps; step += 1) {
    if (order.filter((kind) => kind !== 'none').length >= memberRemovals) break;
    const candidates = possiblePicks(remaining, predictByAge);
    if (step === 0 && deleting.length === 0 && candidates.length === 1) firstPick = candidates[0] ?? null;
    const kinds = new Set(candidates.map(kindOf));
    const chosenKind = kinds.size === 1 ? (candidates.map(kindOf)[0] ?? null) : null;
    if (chosenKind === null) determined = false;
    order.push(chosenKind);
    // Open: drop the candidate whose loss hurts most, as the worst case assumes.
    const dropped =
      WORST_FIRST.map((kind) => candidates.find((machine) => kindOf(machine) === kind)).find(
        (machine) => machine !== undefined,
      ) ?? candidates[0];
    remaining = remaining.filter((machine) => machine !== dropped);
  }
  const kept = order.reduce<{ taken: number; entries: (RemovedMember | null)[] }>(
    (acc, kind) => {
      if (kind !== 'none' && acc.taken >= memberRemovals) return acc;
      return { taken: acc.taken + (kind === 'none' ? 0 : 1), entries: [...acc.entries, kind] };
    },
    { taken: 0, entries: [] },
  );
  return { order: kept.entries, determined, firstPick };
}

/** The order for one known `start`, or undefined when a voting member is not one of the pods. */
function ordinalOrderFrom(
  entries: readonly { member: MemberReport; ordinal: number }[],
  start: number,
  from: number,
  to: number,
): (RemovedMember | null)[] | undefined {
  // A voting member outside the pods' ordinals is not one of these pods: which pod is whose is unknown.
  if (entries.some(({ member, ordinal }) => !member.learner && (ordinal < start || ordinal >= start + from))) return undefined;
  return entries
    .filter(({ ordinal }) => ordinal >= start + to && ordinal < start + from)
    .sort((a, b) => b.ordinal - a.ordinal)
    .map(({ member }) => removedBy(member) ?? null);
}

/**
 * StatefulSet / druid removals: ordinals from start+from−1 down to start+to. Determined only when
 * every voting member is named `<name>-<ordinal>` within the pods' ordinals; a removed ordinal
 * without a member removes none. O(members): the ordinals themselves (which may be absurd
 * numbers) are never walked.
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
  const entries = members
    .map((member) => ({ member, ordinal: ordinalOf(member) }))
    .filter((entry): entry is { member: MemberReport; ordinal: number } => entry.ordinal !== null);
  return ordinalOrderFrom(entries, start, from, to);
}

/**
 * The StatefulSet's first ordinal, as far as the request tells: 0 when spec.ordinals is absent
 * (the default), null when it cannot be told (a /scale request carries a Scale, not the
 * StatefulSet; an unreadable value). etcd-druid names its pods from 0.
 */
function ordinalStartOf(facts: ProjectionFacts): number | null {
  if (facts.classification.object.kind !== 'StatefulSet') return 0;
  if (facts.classification.object.viaScale) return null;
  const value = valueAtPointer(facts.request.oldObject, '/spec/ordinals/start');
  if (value === undefined || value === null) return 0;
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : null;
}

export interface ProjectionFacts {
  classification: Guarded;
  request: { object?: unknown; oldObject?: unknown };
  evaluation: Evaluation;
  /** Read for a shrinking KCP; absent when the server has no way to read them. */
  machines?: MachinesRead;
}

function deadMachineNames(members: readonly MemberReport[], machines: readonly ControlPlaneMachine[]): string[] {
  return machines
    .filter((machine) => {
      const member = members.find((candidate) => candidate.name === machine.nodeName);
      return member !== undefined && !member.healthy && !member.learner && !machine.deleting;
    })
    .map((machine) => machine.name);
}

/** The alarms KCP's scale-down preflight does not look at: those of the member it deletes (scale.go). */
function alarmsOf(members: readonly MemberReport[], machine: ControlPlaneMachine | null): number {
  const member = machine === null ? undefined : members.find((candidate) => candidate.name === machine.nodeName);
  return member === undefined ? 0 : member.alarms.length;
}

function kcpOptions(facts: ProjectionFacts, shrink: { from: number; to: number } | null): ProjectionOptions {
  const { object, oldObject } = facts.request;
  const options: ProjectionOptions = {
    removeBeforeAdd: surgeOf(object),
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
  const { members } = facts.evaluation;
  const plainScaleDown = facts.classification.change.kind === 'scale-down';
  const plan = kcpRemovalOrder(members, machines.machines, shrink.to, shrink.from, plainScaleDown);
  const hint = annotateHint(namespace, deadMachineNames(members, machines.machines));
  if (plan.order === undefined) {
    return {
      ...options,
      undeterminedHint: `the Machines listed do not account for the control plane (${plan.incomplete ?? 'incomplete'}), so KCP may remove any member and a healthy one is assumed to leave; ${hint}`,
    };
  }
  const excused = plainScaleDown ? alarmsOf(members, plan.firstPick) : 0;
  return {
    ...options,
    removalOrder: plan.order,
    ...(excused > 0 ? { excusedAlarms: excused } : {}),
    ...(plan.determined
      ? {}
      : { undeterminedHint: `which Machine KCP removes is not determined, so a healthy member is assumed to leave; ${hint}` }),
  };
}

const DRUID_GROUP = 'druid.gardener.cloud';

/** A KCP rollout path that is only the rollout strategy (v1beta1 rolloutStrategy, v1beta2 rollout.strategy). */
function strategyOnly(path: string, request: { object?: unknown; oldObject?: unknown }): boolean {
  if (path === '/spec/rolloutStrategy') return true;
  if (path !== '/spec/rollout') return false;
  const rest = (object: unknown): Record<string, unknown> => {
    const rollout = valueAtPointer(object, '/spec/rollout');
    if (rollout === null || typeof rollout !== 'object' || Array.isArray(rollout)) return {};
    const { strategy: _strategy, ...others } = rollout as Record<string, unknown>;
    return others;
  };
  return jsonEqual(rest(request.oldObject), rest(request.object));
}

/**
 * The membership change the controller really makes. KCP reads its rollout strategy only while it
 * replaces outdated Machines (cluster-api controlplane/kubeadm/internal/controllers/upgrade.go,
 * upgradeControlPlane); the strategy is not part of what makes a Machine outdated, so a change of
 * the strategy alone starts no rollout: with replicas it is a plain scale, alone it moves nothing (null).
 */
export function effectiveChange(
  classification: Guarded,
  request: { object?: unknown; oldObject?: unknown },
): MembershipChange | TargetMove | null {
  const { change } = classification;
  if (change.kind !== 'rollout' || !isKubeadmControlPlane(classification)) return change;
  if (!change.changedPaths.every((path) => strategyOnly(path, request))) return change;
  const from = change.previousReplicas;
  if (from === undefined || from === change.replicas) return null;
  return { kind: from < change.replicas ? 'scale-up' : 'scale-down', from, to: change.replicas };
}

/** An etcd-druid Etcd going to 0 replicas or coming back from 0 (hibernation and wake-up), as from → to. */
export function hibernationOf(classification: Guarded): { from: number; to: number } | null {
  if (classification.object.group !== DRUID_GROUP) return null;
  const { change } = classification;
  if (change.kind === 'retarget') return null;
  const from = change.kind === 'rollout' ? (change.previousReplicas ?? change.replicas) : change.from;
  const to = change.kind === 'rollout' ? change.replicas : change.to;
  return from === 0 || to === 0 ? { from, to } : null;
}

/** How the guarded object's controller will carry the change out, as far as known. */
export function projectionOptionsFor(facts: ProjectionFacts): ProjectionOptions {
  const { classification } = facts;
  const shrink = shrinkOf(classification.change);
  if (isKubeadmControlPlane(classification)) return kcpOptions(facts, shrink);
  if (shrink === null) return {};
  const start = ordinalStartOf(facts);
  const order =
    start === null
      ? undefined
      : ordinalRemovalOrder(facts.evaluation.members, classification.object.name, start, shrink.from, shrink.to);
  if (order !== undefined) return { removalOrder: order };
  if (start === null) {
    return {
      undeterminedHint: `a /scale request does not carry the StatefulSet's spec.ordinals, so which pods go is unknown and a healthy member is assumed to leave; change spec.replicas with kubectl patch instead`,
    };
  }
  return {
    undeterminedHint: `etcd member names do not follow the pod names ${classification.object.name}-<ordinal>, so a healthy member is assumed to leave`,
  };
}
