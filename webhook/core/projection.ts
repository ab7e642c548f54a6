// Projects a membership change onto etcd the way Cluster API's KubeadmControlPlane carries it out:
// one member at a time, and a new member counts as unhealthy until it has started. Pure.
//
// - scale up by k, and rollout (a template/version change surges one new member before removing
//   an old one, i.e. a scale up by 1): all voting members healthy, no learner, no alarm, a leader,
//   and the evaluation passed (Degraded allows; the caller turns its reasons into warnings).
//   Exception: a 1-member cluster may grow (it cannot without a moment below quorum); a warning says so.
// - scale down by k: a leader, no alarm, no learner, and for every step j = 1..k
//   healthy − j ≥ quorum(voting − j), assuming each removed member is a HEALTHY one (the worst
//   case, since the controller may pick any); never below 1 replica. The verdict may be Unhealthy
//   — that is how an operator removes a dead member — and then a warning names the unhealthy members.
// - a rollout that also changes replicas gets both sets of rules.
// - even target sizes and target sizes below 3 are allowed with a warning.
import { quorumOf, type Evaluation, type Verdict } from '../../functions/core/evaluation.js';
import type { MembershipChange } from './contract.js';

export interface MembershipState {
  voting: number;
  healthyVoting: number;
  learners: number;
  leaderPresent: boolean;
  /** Number of active alarms across members (NOSPACE, CORRUPT, ...). */
  alarms: number;
  verdict: Verdict;
}

export interface ProjectionResult {
  allowed: boolean;
  warnings: string[];
  /** Why it was refused (empty when allowed), most important first. */
  reasons: string[];
}

export const ONE_MEMBER_GROWTH_WARNING = 'a 1-member etcd has no quorum until its new member starts';

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

/** The replica count the object will have after the change. */
export function targetSizeOf(change: MembershipChange): number {
  return change.kind === 'rollout' ? change.replicas : change.to;
}

/** Growth steps: member j joins unstarted, so healthy + j − 1 of voting + j must hold quorum. */
function checkGrowth(state: MembershipState, steps: number, reasons: string[], warnings: string[]): void {
  if (state.verdict === 'Unhealthy') reasons.push('etcd verdict is Unhealthy; adding a member needs a passing evaluation');
  if (state.voting < 1) reasons.push('etcd has no voting members');
  if (state.healthyVoting < state.voting) {
    reasons.push(`only ${state.healthyVoting} of ${state.voting} voting members healthy; adding a member needs all healthy`);
  }
  for (let step = 1; step <= steps; step += 1) {
    const voting = state.voting + step;
    const healthy = state.healthyVoting + step - 1;
    if (healthy >= quorumOf(voting)) continue;
    if (step === 1 && state.voting === 1 && state.healthyVoting === 1) {
      warnings.push(ONE_MEMBER_GROWTH_WARNING);
      continue;
    }
    reasons.push(`adding member ${step} would leave ${healthy} healthy of ${voting} voting, below quorum ${quorumOf(voting)}`);
    return;
  }
}

/** Shrink steps: member j leaves, assumed healthy, so healthy − j of voting − j must hold quorum. */
function checkShrink(state: MembershipState, from: number, to: number, reasons: string[]): void {
  if (to < 1) {
    reasons.push(`cannot scale etcd below 1 replica (requested ${to})`);
    return;
  }
  // If etcd already has more voting members than the object declared (e.g. mid-rollout surge),
  // the controller ends up removing them too: count every removal down to the target size.
  const steps = Math.max(from - to, state.voting - to);
  for (let step = 1; step <= steps; step += 1) {
    const voting = state.voting - step;
    const healthy = state.healthyVoting - step;
    const quorum = quorumOf(Math.max(voting, 0));
    if (voting >= 1 && healthy >= quorum) continue;
    reasons.push(
      `removing ${plural(step, 'member')} would leave ${Math.max(healthy, 0)} healthy of ${Math.max(voting, 0)} voting, below quorum ${quorum}`,
    );
    return;
  }
}

/** Pure projection over plain numbers (exhaustively tested). */
export function projectChange(state: MembershipState, change: MembershipChange): ProjectionResult {
  const reasons: string[] = [];
  const warnings: string[] = [];

  if (!state.leaderPresent) reasons.push('etcd has no leader');
  if (state.alarms > 0) reasons.push(`etcd has ${plural(state.alarms, 'active alarm')}`);
  if (state.learners > 0) reasons.push(`etcd has ${plural(state.learners, 'learner')} not yet promoted`);

  let shrinks = false;
  if (change.kind === 'scale-up') {
    checkGrowth(state, change.to - change.from, reasons, warnings);
  } else if (change.kind === 'scale-down') {
    shrinks = true;
    checkShrink(state, change.from, change.to, reasons);
  } else {
    const previous = change.previousReplicas ?? change.replicas;
    // The rollout itself is a surge of one; a simultaneous scale up adds its own growth steps.
    checkGrowth(state, Math.max(1, change.replicas - previous), reasons, warnings);
    if (change.replicas < previous) {
      shrinks = true;
      checkShrink(state, previous, change.replicas, reasons);
      // The controller may shrink first and surge afterwards: a surge from 1 member has no quorum
      // until the new member starts (allowed, as for any 1-member cluster, with a warning).
      const sizeAfterShrink = state.voting - (previous - change.replicas);
      if (sizeAfterShrink === 1 && !warnings.includes(ONE_MEMBER_GROWTH_WARNING)) warnings.push(ONE_MEMBER_GROWTH_WARNING);
    }
  }

  const allowed = reasons.length === 0;
  if (allowed && shrinks && state.verdict === 'Unhealthy') {
    warnings.push(`etcd verdict is Unhealthy (${state.healthyVoting} of ${state.voting} voting members healthy)`);
  }
  const size = targetSizeOf(change);
  if (size >= 1 && size < 3) warnings.push(`etcd with ${plural(size, 'member')} survives no member failure`);
  if (size >= 1 && size % 2 === 0) warnings.push(`even etcd size ${size} tolerates no more failures than ${size - 1}`);
  return { allowed, warnings, reasons };
}

/** The membership numbers an evaluation reports. */
export function membershipStateOf(evaluation: Evaluation): MembershipState {
  return {
    voting: evaluation.cluster.votingMembers,
    healthyVoting: evaluation.cluster.healthyVoting,
    learners: evaluation.cluster.learners,
    leaderPresent: evaluation.cluster.leaderId !== null,
    alarms: evaluation.members.reduce((sum, member) => sum + member.alarms.length, 0),
    verdict: evaluation.verdict,
  };
}

/** Projects onto an evaluation; a scale down allowed while Unhealthy names the unhealthy members. */
export function projectOntoEvaluation(evaluation: Evaluation, change: MembershipChange): ProjectionResult {
  const result = projectChange(membershipStateOf(evaluation), change);
  if (result.allowed && evaluation.verdict === 'Unhealthy') {
    const unhealthy = evaluation.members
      .filter((member) => !member.healthy && !member.learner)
      .map((member) => member.name || member.id);
    if (unhealthy.length > 0) {
      result.warnings.unshift(`unhealthy etcd members: ${unhealthy.join(', ')}`);
    }
  }
  return result;
}
