// Exhaustive check of the membership projection against an independent step-by-step simulator:
// every voting size 1–7 × healthy 0..voting × learners 0–1 × leader × alarm × verdict × change.
import { describe, expect, it } from 'vitest';
import type { Verdict } from '../functions/core/evaluation.js';
import type { MembershipChange } from '../webhook/core/contract.js';
import { projectChange, type MembershipState } from '../webhook/core/projection.js';

// The simulator's own majority rule, written independently of quorumOf.
const hasQuorum = (healthy: number, voting: number): boolean => voting >= 1 && healthy * 2 > voting;

interface Step {
  action: string;
  voting: number;
  healthy: number;
}

interface Simulation {
  steps: Step[];
  /** Every step keeps quorum. */
  safe: boolean;
  /** Every step keeps quorum except adds to a cluster of exactly one healthy member (the documented exception). */
  safeExceptSingleMemberGrowth: boolean;
  usedSingleMemberGrowth: boolean;
}

type Operation = { name: string; change: (voting: number) => MembershipChange | null };

/**
 * Carries out the change one member at a time as KCP does: an added member is unhealthy until it
 * starts; a removed member is a healthy one when any is left (the worst case for quorum).
 * For a rollout that also shrinks, both orders (shrink then surge, surge then shrink) are tried.
 */
function simulate(voting: number, healthy: number, change: MembershipChange): Simulation {
  const runs: Step[][] = [];
  const add = (state: { voting: number; healthy: number }, steps: Step[]) => {
    steps.push({ action: 'add', voting: state.voting + 1, healthy: state.healthy });
    state.voting += 1;
    state.healthy += 1; // it starts before the next step
  };
  const remove = (state: { voting: number; healthy: number }, steps: Step[]) => {
    state.voting -= 1;
    if (state.healthy > 0) state.healthy -= 1;
    steps.push({ action: 'remove', voting: state.voting, healthy: state.healthy });
  };
  const surge = (state: { voting: number; healthy: number }, steps: Step[]) => {
    add(state, steps);
    remove(state, steps);
  };
  if (change.kind === 'scale-up' || change.kind === 'scale-down') {
    const steps: Step[] = [];
    const state = { voting, healthy };
    for (let i = 0; i < Math.abs(change.to - change.from); i += 1) (change.kind === 'scale-up' ? add : remove)(state, steps);
    if (change.to < 1) steps.push({ action: 'below-one', voting: 0, healthy: 0 });
    runs.push(steps);
  } else {
    const previous = change.previousReplicas ?? change.replicas;
    const delta = change.replicas - previous;
    for (const scaleFirst of [true, false]) {
      const steps: Step[] = [];
      const state = { voting, healthy };
      const scale = () => {
        for (let i = 0; i < Math.abs(delta); i += 1) (delta > 0 ? add : remove)(state, steps);
      };
      if (scaleFirst) scale();
      surge(state, steps);
      if (!scaleFirst) scale();
      if (change.replicas < 1) steps.push({ action: 'below-one', voting: 0, healthy: 0 });
      runs.push(steps);
    }
  }
  const all = runs.flat();
  const isException = (step: Step) => step.action === 'add' && step.voting === 2 && step.healthy === 1;
  return {
    steps: all,
    safe: all.every((step) => hasQuorum(step.healthy, step.voting)),
    safeExceptSingleMemberGrowth: all.every((step) => hasQuorum(step.healthy, step.voting) || isException(step)),
    usedSingleMemberGrowth: all.some((step) => !hasQuorum(step.healthy, step.voting) && isException(step)),
  };
}

const OPERATIONS: Operation[] = [
  { name: 'scale up by 1', change: (v) => ({ kind: 'scale-up', from: v, to: v + 1 }) },
  { name: 'scale up by 2', change: (v) => ({ kind: 'scale-up', from: v, to: v + 2 }) },
  { name: 'scale down by 1', change: (v) => ({ kind: 'scale-down', from: v, to: v - 1 }) },
  { name: 'scale down by 2', change: (v) => ({ kind: 'scale-down', from: v, to: v - 2 }) },
  { name: 'rollout', change: (v) => ({ kind: 'rollout', replicas: v, changedPaths: ['/spec/version'] }) },
  {
    name: 'rollout with scale up by 1',
    change: (v) => ({ kind: 'rollout', replicas: v + 1, previousReplicas: v, changedPaths: ['/spec/version'] }),
  },
  {
    name: 'rollout with scale down by 1',
    change: (v) => ({ kind: 'rollout', replicas: v - 1, previousReplicas: v, changedPaths: ['/spec/version'] }),
  },
];

const VERDICTS: Verdict[] = ['Healthy', 'Degraded', 'Unhealthy'];

function* allStates(): Generator<MembershipState> {
  for (let voting = 1; voting <= 7; voting += 1)
    for (let healthyVoting = 0; healthyVoting <= voting; healthyVoting += 1)
      for (const learners of [0, 1])
        for (const leaderPresent of [true, false])
          for (const alarms of [0, 1])
            for (const verdict of VERDICTS) yield { voting, healthyVoting, learners, leaderPresent, alarms, verdict };
}

const targetOf = (change: MembershipChange) => (change.kind === 'rollout' ? change.replicas : change.to);
const grows = (change: MembershipChange) => change.kind !== 'scale-down';

describe('projectChange, exhaustively against a one-member-at-a-time simulator', () => {
  for (const operation of OPERATIONS) {
    it(`${operation.name}: allows exactly the changes that keep quorum at every step`, () => {
      const violations: string[] = [];
      let allowedCount = 0;
      let deniedCount = 0;
      for (const state of allStates()) {
        const change = operation.change(state.voting);
        if (change === null) continue;
        const result = projectChange(state, change);
        const simulation = simulate(state.voting, state.healthyVoting, change);
        const label = `${JSON.stringify(state)} ${JSON.stringify(change)} → ${JSON.stringify(result)}`;
        const clean = state.leaderPresent && state.alarms === 0 && state.learners === 0;
        const allHealthy = state.healthyVoting === state.voting;
        const passing = state.verdict !== 'Unhealthy';
        const target = targetOf(change);
        if (result.allowed) allowedCount += 1;
        else deniedCount += 1;

        if (result.allowed !== (result.reasons.length === 0)) violations.push(`allowed must mean no reasons: ${label}`);
        if (!result.allowed && result.reasons.some((reason) => reason.trim() === '')) violations.push(`empty reason: ${label}`);
        // Safety: nothing allowed may pass through a step without quorum (bar the 1-member growth).
        if (result.allowed && !simulation.safeExceptSingleMemberGrowth) violations.push(`allowed but loses quorum: ${label}`);
        if (result.allowed && !clean) violations.push(`allowed despite no leader / alarm / learner: ${label}`);
        if (result.allowed && target < 1) violations.push(`allowed below 1 replica: ${label}`);
        if (result.allowed && grows(change) && !(allHealthy && passing))
          violations.push(`growth allowed while not all healthy: ${label}`);
        if (result.allowed && simulation.usedSingleMemberGrowth && !result.warnings.some((w) => w.includes('1-member'))) {
          violations.push(`1-member growth allowed without a warning: ${label}`);
        }
        // Liveness: every change that keeps quorum from a fully healthy, clean, passing cluster is allowed.
        if (clean && allHealthy && passing && target >= 1 && simulation.safeExceptSingleMemberGrowth && !result.allowed) {
          violations.push(`safe change denied: ${label}`);
        }
        // Scale down is judged on quorum alone: it is how a dead member gets removed.
        if (change.kind === 'scale-down') {
          const expected = clean && target >= 1 && simulation.safe;
          if (result.allowed !== expected) violations.push(`scale down should be ${expected ? 'allowed' : 'denied'}: ${label}`);
          if (result.allowed && state.verdict === 'Unhealthy' && !result.warnings.some((w) => w.includes('Unhealthy'))) {
            violations.push(`scale down while Unhealthy allowed without a warning: ${label}`);
          }
        }
        if (result.allowed && target % 2 === 0 && !result.warnings.some((w) => w.includes('even'))) {
          violations.push(`even target size without a warning: ${label}`);
        }
        if (result.allowed && target < 3 && !result.warnings.some((w) => w.includes('survives no member failure'))) {
          violations.push(`target below 3 without a warning: ${label}`);
        }
        if (result.warnings.some((w) => w.length >= 120 || /\n/.test(w)))
          violations.push(`warning too long or multi-line: ${label}`);
      }
      expect(violations.slice(0, 10)).toEqual([]);
      // Both outcomes occur, so the assertions above really constrain something.
      expect(allowedCount).toBeGreaterThan(0);
      expect(deniedCount).toBeGreaterThan(0);
    });
  }
});

describe('projectChange, named cases', () => {
  const healthy = (voting: number): MembershipState => ({
    voting,
    healthyVoting: voting,
    learners: 0,
    leaderPresent: true,
    alarms: 0,
    verdict: 'Healthy',
  });
  const cases: {
    name: string;
    state: MembershipState;
    change: MembershipChange;
    allowed: boolean;
    reason?: RegExp;
    warning?: RegExp;
  }[] = [
    { name: 'scales a healthy 3 to 5', state: healthy(3), change: { kind: 'scale-up', from: 3, to: 5 }, allowed: true },
    {
      name: 'refuses to grow 3 with a dead member',
      state: { ...healthy(3), healthyVoting: 2, verdict: 'Unhealthy' },
      change: { kind: 'scale-up', from: 3, to: 4 },
      allowed: false,
      reason: /only 2 of 3 voting members healthy/,
    },
    {
      name: 'removes a dead member from 5 with one down, warning about the verdict',
      state: { ...healthy(5), healthyVoting: 4, verdict: 'Unhealthy' },
      change: { kind: 'scale-down', from: 5, to: 4 },
      allowed: true,
      warning: /Unhealthy/,
    },
    {
      name: 'refuses 3 → 2 with one dead (a healthy one might be removed)',
      state: { ...healthy(3), healthyVoting: 2, verdict: 'Unhealthy' },
      change: { kind: 'scale-down', from: 3, to: 2 },
      allowed: false,
      reason: /below quorum 2/,
    },
    {
      name: 'refuses scaling to 0',
      state: healthy(1),
      change: { kind: 'scale-down', from: 1, to: 0 },
      allowed: false,
      reason: /below 1 replica/,
    },
    {
      name: 'lets a single member grow with a warning',
      state: healthy(1),
      change: { kind: 'scale-up', from: 1, to: 3 },
      allowed: true,
      warning: /1-member/,
    },
    {
      name: 'refuses any change while a learner waits',
      state: { ...healthy(3), learners: 1, verdict: 'Unhealthy' },
      change: { kind: 'scale-down', from: 3, to: 2 },
      allowed: false,
      reason: /learner/,
    },
    {
      name: 'refuses a rollout during an alarm',
      state: { ...healthy(3), alarms: 1, verdict: 'Unhealthy' },
      change: { kind: 'rollout', replicas: 3, changedPaths: ['/spec/version'] },
      allowed: false,
      reason: /alarm/,
    },
    {
      name: 'warns about an even size',
      state: healthy(3),
      change: { kind: 'scale-up', from: 3, to: 4 },
      allowed: true,
      warning: /even etcd size 4/,
    },
  ];
  it.each(cases)('$name', ({ state, change, allowed, reason, warning }) => {
    const result = projectChange(state, change);
    expect(result.allowed).toBe(allowed);
    if (reason) expect(result.reasons.join(' | ')).toMatch(reason);
    if (warning) expect(result.warnings.join(' | ')).toMatch(warning);
  });
});
