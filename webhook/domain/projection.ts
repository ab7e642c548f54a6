// Projects a membership change onto etcd the way the controller carries it out: one member at a
// time, and a new member counts as unhealthy until it has started (Cluster API's KCP scale.go and
// etcd's membership rules). Pure, and O(voting) whatever numbers the request carries: a plan walks
// at most voting + 2 joins and `voting` removals (longer runs cannot fail where those held), and a
// rollout is walked as ONE replacement, since each replacement ends in the counts it started from
// once its joiner has started; the steps walked stand for every step the controller takes.
//
// - Any membership change needs the CURRENT cluster to have quorum: a conf change must commit.
// - scale up by k, and rollout (a template/version change surges one new member before removing
//   an old one, i.e. a scale up by 1): all voting members healthy, no learner, no alarm, a leader,
//   and the evaluation passed (Degraded allows; the caller turns its reasons into warnings).
//   Exception: a 1-member cluster may grow (it cannot without a moment below quorum); a warning says so.
// - scale down by k: a leader, no alarm, no learner, and for every step j = 1..k the members left
//   keep quorum, where the member that leaves at step j is the one the controller removes when that
//   is determined (`removalOrder`, or each of `removalOrders` when the controller's rule leaves
//   several open, see removal.ts), else a HEALTHY one (the worst case). Never below
//   1 replica. The verdict may be Unhealthy — that is how an operator removes a dead member — and
//   then a warning names the unhealthy members.
// - KCP with maxSurge 0 (`removeBeforeAdd`) removes an old member before adding its replacement:
//   denied below 3 replicas (KCP's own rule) and projected remove-then-add; a maxSurge the guard
//   cannot read is projected both ways.
// - a learner (a member joining) blocks every membership change: etcd takes one learner at a time.
// - an enabled etcd downgrade (3.6+) blocks every change that adds a member (downgradeReason).
// - alarms of the member KCP deletes first do not count for a scale down (`excusedAlarms`): KCP's
//   scale-down preflight skips that Machine (cluster-api controlplane/kubeadm/internal/controllers/scale.go).
// - KCP with external etcd (`externalEtcd`): replicas are API servers, not etcd members; no
//   membership projection, no size warnings; the target's evaluation must pass for anything but a
//   scale down.
// - a rollout that also changes replicas gets both sets of rules, in either order.
// - even target sizes and target sizes below 3 are allowed with a warning.
import { quorumOf, type Evaluation, type Verdict } from '../../functions/domain/evaluation-document.js';
import type { MembershipChange } from './contract.js';
import type { ProjectionOptions, RemovedMember } from '../../functions/domain/kinds/kind.js';

export interface MembershipState {
  voting: number;
  healthyVoting: number;
  learners: number;
  leaderPresent: boolean;
  /** Number of active alarms across members (NOSPACE, CORRUPT, ...). */
  alarms: number;
  verdict: Verdict;
  /** The version an enabled etcd downgrade (3.6+) goes to, when a member reports one. */
  downgradeTarget?: string;
}

// What a removal takes and how a controller carries a change out are told by each kind's module.
export type { ProjectionOptions, RemovedMember } from '../../functions/domain/kinds/kind.js';

export interface ProjectionResult {
  allowed: boolean;
  warnings: string[];
  /** Why it was refused (empty when allowed), most important first. */
  reasons: string[];
  /** How to make the controller's choice determined, when a worst-case assumption caused the denial. */
  hint?: string;
}

/** etcd admits one learner at a time (its --experimental-max-learners defaults to 1); kubeadm joins as a learner. */
export const JOINING_REASON =
  'a member is joining (learner not yet promoted); etcd takes one learner at a time, so membership changes wait until it is promoted';
const DOWNGRADE_REASON_START = 'etcd has a downgrade to ';
export const isDowngradeReason = (reason: string): boolean => reason.startsWith(DOWNGRADE_REASON_START);
/**
 * An etcd downgrade (`etcdctl downgrade enable`) replaces members in place, one by one, with the
 * older minor, and completes only once every member runs it. A member added meanwhile runs the
 * etcd its object names, which is rarely the target: it holds the downgrade up, and the change
 * stacks a membership change on a procedure etcd runs one member at a time. Removing a member
 * adds no etcd and stays possible (e.g. a dead one), under the usual quorum rules.
 */
export function downgradeReason(target: string): string {
  return `${DOWNGRADE_REASON_START}${target} enabled (etcdctl downgrade enable): a member added now would hold it up; add members once it completes or is cancelled`;
}
export const ONE_MEMBER_GROWTH_WARNING = 'a 1-member etcd has no quorum until its new member starts';
/** KCP's own admission rule for `rollout.strategy.rollingUpdate.maxSurge: 0`. */
export const REMOVE_FIRST_MIN_REPLICAS = 3;

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

/** The replica count the object will have after the change. */
export function targetSizeOf(change: MembershipChange): number {
  return change.kind === 'rollout' ? change.replicas : change.to;
}

interface Counts {
  voting: number;
  healthy: number;
}

/** One step of the controller's plan: a member joins (unstarted), or one leaves (null: not determined). */
type Step = 'add' | RemovedMember | null;

interface Walk {
  /** The first step that left the cluster below quorum, described; null when every step held. */
  failure: string | null;
  /** The 1-member growth exception was used (allowed with a warning). */
  singleMemberGrowth: boolean;
  /** A worst-case removal (not the controller's determined choice) happened before the failure. */
  worstCaseUsed: boolean;
}

/** Runs the steps from `voting` and `healthy` members; an undetermined removal takes the worst case, a healthy member. */
function walk(voting: number, healthy: number, steps: readonly Step[]): Walk {
  const state: Counts = { voting, healthy };
  const result: Walk = { failure: null, singleMemberGrowth: false, worstCaseUsed: false };
  let removed = 0;
  let added = 0;
  for (const step of steps) {
    if (step === 'add') {
      state.voting += 1;
      added += 1;
      const held = state.healthy >= quorumOf(state.voting);
      // The joiner starts before the next step (KCP waits for it).
      state.healthy += 1;
      if (held) continue;
      if (state.voting === 2 && state.healthy === 2) {
        result.singleMemberGrowth = true;
        continue;
      }
      result.failure = `adding member ${added} would leave ${state.healthy - 1} healthy of ${state.voting} voting, below quorum ${quorumOf(state.voting)}`;
      return result;
    }
    removed += 1;
    if (step === null) result.worstCaseUsed = true;
    const leaving = step ?? (state.healthy > 0 ? 'healthy' : 'unhealthy');
    if (leaving === 'none') continue;
    state.voting -= 1;
    if (leaving === 'healthy') state.healthy -= 1;
    const quorum = quorumOf(Math.max(state.voting, 0));
    if (state.voting >= 1 && state.healthy >= quorum) continue;
    result.failure = `removing ${plural(removed, 'member')} would leave ${Math.max(state.healthy, 0)} healthy of ${Math.max(state.voting, 0)} voting, below quorum ${quorum}`;
    return result;
  }
  return result;
}

/**
 * The step sequences the controller may take, each O(voting) long: beyond voting + 2 adds the
 * growth condition only gets easier (every joiner starts), and beyond `voting` worst-case removals
 * nothing is left to remove, so longer runs cannot fail where the short one held.
 */
// Array(n).fill: Array.from over an array-like was a visible share of a cached allow; and these
// are functions of their own, not closures made per projection.
function adds(state: MembershipState, count: number): Step[] {
  return new Array<Step>(Math.max(0, Math.min(count, state.voting + 2))).fill('add');
}

/** Every removal sequence the controller may take (`removalOrders`, else the one `removalOrder` or the worst case). */
function removals(state: MembershipState, options: ProjectionOptions, count: number): Step[][] {
  if (options.removalOrders !== undefined && options.removalOrders.length > 0)
    return options.removalOrders.map((order) => [...order]);
  return [
    options.removalOrder !== undefined
      ? [...options.removalOrder]
      : new Array<Step>(Math.max(0, Math.min(count, state.voting))).fill(null),
  ];
}

function stepPlans(state: MembershipState, change: MembershipChange, options: ProjectionOptions): Step[][] {
  if (change.kind === 'scale-up') return [adds(state, change.to - change.from)];
  if (change.kind === 'scale-down') {
    // If etcd already has more voting members than the object declared (e.g. mid-rollout surge),
    // the controller ends up removing them too: count every removal down to the target size.
    return removals(state, options, Math.max(change.from - change.to, state.voting - change.to));
  }
  const previous = change.previousReplicas ?? change.replicas;
  // A rollout replaces members that are all healthy (a precondition), so its removal is a healthy one.
  const replaces: Step[][] =
    options.removeBeforeAdd === 'unknown'
      ? [
          ['add', 'healthy'],
          ['healthy', 'add'],
        ]
      : [options.removeBeforeAdd === true ? ['healthy', 'add'] : ['add', 'healthy']];
  const scales =
    previous <= change.replicas
      ? [adds(state, change.replicas - previous)]
      : removals(state, options, previous - change.replicas);
  // The controller may scale first and replace afterwards or the other way round: both must hold.
  return scales.flatMap((scale) =>
    replaces.flatMap((replace) => [
      [...scale, ...replace],
      [...replace, ...scale],
    ]),
  );
}

/** Rules every change needs, whichever members move. */
function preconditions(state: MembershipState, change: MembershipChange, options: ProjectionOptions): string[] {
  const reasons: string[] = [];
  if (!state.leaderPresent) reasons.push('etcd has no leader');
  const alarms = Math.max(0, state.alarms - (options.excusedAlarms ?? 0));
  if (alarms > 0) reasons.push(`etcd has ${plural(alarms, 'active alarm')}`);
  if (state.learners > 0) reasons.push(JOINING_REASON);
  if (state.voting < 1) reasons.push('etcd has no voting members');
  else if (state.healthyVoting < quorumOf(state.voting)) {
    reasons.push(
      `etcd has no quorum (${state.healthyVoting} of ${state.voting} voting members healthy, quorum ${quorumOf(state.voting)}): no membership change can commit`,
    );
  }
  if (targetSizeOf(change) < 1) reasons.push(`cannot scale etcd below 1 replica (requested ${targetSizeOf(change)})`);
  if (change.kind !== 'scale-down') {
    if (state.downgradeTarget !== undefined) reasons.push(downgradeReason(state.downgradeTarget));
    if (state.verdict === 'Unhealthy') reasons.push('etcd verdict is Unhealthy; adding a member needs a passing evaluation');
    if (state.healthyVoting < state.voting) {
      reasons.push(`only ${state.healthyVoting} of ${state.voting} voting members healthy; adding a member needs all healthy`);
    }
  }
  if (
    change.kind === 'rollout' &&
    options.removeBeforeAdd !== undefined &&
    options.removeBeforeAdd !== false &&
    change.replicas < REMOVE_FIRST_MIN_REPLICAS
  ) {
    reasons.push(
      `a rollout with maxSurge ${options.removeBeforeAdd === true ? '0' : 'unreadable (maybe 0)'} removes a member before adding one and needs at least ${REMOVE_FIRST_MIN_REPLICAS} replicas (has ${change.replicas})`,
    );
  }
  return reasons;
}

/** External etcd: the replicas are API servers; etcd only has to be passing for them to join. */
function projectExternal(state: MembershipState, change: MembershipChange): ProjectionResult {
  if (change.kind === 'scale-down') {
    const warnings = state.verdict === 'Unhealthy' ? ['external etcd verdict is Unhealthy'] : [];
    return { allowed: true, warnings, reasons: [] };
  }
  if (state.verdict === 'Unhealthy') {
    return {
      allowed: false,
      warnings: [],
      reasons: ['external etcd verdict is Unhealthy; new control-plane machines need it passing'],
    };
  }
  return { allowed: true, warnings: [], reasons: [] };
}

/** Adds to `warnings` what the target size tolerates, when that is less than it seems. */
function addSizeWarnings(size: number, warnings: string[]): void {
  if (size >= 1 && size < 3) warnings.push(`etcd with ${plural(size, 'member')} survives no member failure`);
  if (size >= 1 && size % 2 === 0) {
    warnings.push(`even etcd size ${size} tolerates ${plural(size / 2 - 1, 'failure')}, no more than ${size - 1} members would`);
  }
}

/** Pure projection over plain numbers (exhaustively tested). */
export function projectChange(
  state: MembershipState,
  change: MembershipChange,
  options: ProjectionOptions = {},
): ProjectionResult {
  if (options.externalEtcd === true) return projectExternal(state, change);
  const reasons = preconditions(state, change, options);
  const warnings: string[] = [];
  let hint: string | undefined;
  if (reasons.length === 0) {
    for (const plan of stepPlans(state, change, options)) {
      const result = walk(state.voting, state.healthyVoting, plan);
      if (result.singleMemberGrowth && !warnings.includes(ONE_MEMBER_GROWTH_WARNING)) warnings.push(ONE_MEMBER_GROWTH_WARNING);
      if (result.failure === null) continue;
      reasons.push(result.failure);
      // Several orders mean the controller's choice is open too: the hint says how to settle it.
      if (result.worstCaseUsed || (options.removalOrders?.length ?? 0) > 1) hint = options.undeterminedHint;
      break;
    }
  }
  const allowed = reasons.length === 0;
  const shrinks = change.kind === 'scale-down' || (change.kind === 'rollout' && change.replicas < (change.previousReplicas ?? 0));
  if (allowed && shrinks && state.verdict === 'Unhealthy') {
    warnings.push(`etcd verdict is Unhealthy (${state.healthyVoting} of ${state.voting} voting members healthy)`);
  }
  addSizeWarnings(targetSizeOf(change), warnings);
  const projection: ProjectionResult = { allowed, warnings, reasons };
  if (hint !== undefined) projection.hint = hint;
  return projection;
}

function alarmCount(evaluation: Evaluation): number {
  let alarms = 0;
  for (const member of evaluation.members) alarms += member.alarms.length;
  return alarms;
}

/** The membership numbers an evaluation reports. */
export function membershipStateOf(evaluation: Evaluation): MembershipState {
  const state: MembershipState = {
    voting: evaluation.cluster.votingMembers,
    healthyVoting: evaluation.cluster.healthyVoting,
    learners: evaluation.cluster.learners,
    leaderPresent: evaluation.cluster.leaderId !== null,
    alarms: alarmCount(evaluation),
    verdict: evaluation.verdict,
  };
  const downgrade = evaluation.members.find((member) => member.downgrade?.enabled === true)?.downgrade;
  if (downgrade !== undefined) state.downgradeTarget = downgrade.targetVersion || 'an unnamed version';
  return state;
}

/** Projects onto an evaluation; a scale down allowed while Unhealthy names the unhealthy members. */
export function projectOntoEvaluation(
  evaluation: Evaluation,
  change: MembershipChange,
  options: ProjectionOptions = {},
): ProjectionResult {
  const result = projectChange(membershipStateOf(evaluation), change, options);
  if (result.allowed && evaluation.verdict === 'Unhealthy' && options.externalEtcd !== true) {
    const unhealthy = evaluation.members
      .filter((member) => !member.healthy && !member.learner)
      .map((member) => member.name || member.id);
    if (unhealthy.length > 0) {
      result.warnings.unshift(`unhealthy etcd members: ${unhealthy.join(', ')}`);
    }
  }
  return result;
}
