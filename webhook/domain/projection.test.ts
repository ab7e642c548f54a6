// Exhaustive check of the membership projection against an independent step-by-step simulator:
// every voting size 1–7 × healthy 0..voting × learners 0–1 × leader × alarm × verdict × change.
import { describe, expect, it } from 'vitest';
import type { Verdict } from '../../functions/domain/evaluation-document.js';
import type { MembershipChange } from './contract.js';
import { projectChange, type MembershipState } from './projection.js';

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
      warning: /even etcd size 4 tolerates 1 failure, no more than 3 members would/,
    },
  ];
  it.each(cases)('$name', ({ state, change, allowed, reason, warning }) => {
    const result = projectChange(state, change);
    expect(result.allowed).toBe(allowed);
    if (reason) expect(result.reasons.join(' | ')).toMatch(reason);
    if (warning) expect(result.warnings.join(' | ')).toMatch(warning);
  });
});

// The extended model: which members leave (the controller's determined choice, or any choice when
// it is not determined), KCP's maxSurge 0 (remove before add), and the rule that every membership
// change must commit through the CURRENT quorum. Written from the rules, not from the projection.
type Leaves = 'healthy' | 'unhealthy' | 'none';
type SimStep = 'add' | Leaves;

/** Every step keeps a majority; an add to 1 healthy of 1 is the documented, warned exception. */
function stepsKeepQuorum(voting: number, healthy: number, steps: readonly SimStep[]): { safe: boolean; exception: boolean } {
  let exception = false;
  for (const step of steps) {
    if (step === 'add') {
      voting += 1;
      if (!hasQuorum(healthy, voting)) {
        if (voting === 2 && healthy === 1) exception = true;
        else return { safe: false, exception };
      }
      healthy += 1;
    } else if (step !== 'none') {
      voting -= 1;
      if (step === 'healthy') healthy -= 1;
      if (!hasQuorum(healthy, voting)) return { safe: false, exception };
    }
  }
  return { safe: true, exception };
}

/** Every removal sequence of `length` that the member counts allow (a controller free to pick any). */
function anyChoice(length: number, healthy: number, unhealthy: number, kinds: readonly Leaves[]): Leaves[][] {
  if (length === 0) return [[]];
  const sequences: Leaves[][] = [];
  for (const kind of kinds) {
    if (kind === 'healthy' && healthy === 0) continue;
    if (kind === 'unhealthy' && unhealthy === 0) continue;
    const rest = anyChoice(length - 1, healthy - (kind === 'healthy' ? 1 : 0), unhealthy - (kind === 'unhealthy' ? 1 : 0), kinds);
    for (const tail of rest) sequences.push([kind, ...tail]);
  }
  return sequences;
}

interface ExtendedCase {
  name: string;
  /** Replicas before and after, and whether the template changes (a rollout). */
  from: (voting: number) => number;
  delta: number;
  rollout: boolean;
}

const EXTENDED: ExtendedCase[] = [
  { name: 'scale up by 1', from: (v) => v, delta: 1, rollout: false },
  { name: 'scale up by 2', from: (v) => v, delta: 2, rollout: false },
  { name: 'scale down by 1', from: (v) => v, delta: -1, rollout: false },
  { name: 'scale down by 2', from: (v) => v, delta: -2, rollout: false },
  { name: 'rollout', from: (v) => v, delta: 0, rollout: true },
  { name: 'rollout with scale up by 1', from: (v) => v, delta: 1, rollout: true },
  { name: 'rollout with scale down by 1', from: (v) => v, delta: -1, rollout: true },
];

function changeFor(kase: ExtendedCase, voting: number): MembershipChange {
  const from = kase.from(voting);
  const to = from + kase.delta;
  if (kase.rollout) {
    return kase.delta === 0
      ? { kind: 'rollout', replicas: from, changedPaths: ['/spec/version'] }
      : { kind: 'rollout', replicas: to, previousReplicas: from, changedPaths: ['/spec/version'] };
  }
  return kase.delta > 0 ? { kind: 'scale-up', from, to } : { kind: 'scale-down', from, to };
}

/** The step sequences the controller may run for one choice of leaving members. */
function runsFor(kase: ExtendedCase, leaving: readonly Leaves[], removeFirst: boolean): SimStep[][] {
  const scale: SimStep[] = kase.delta > 0 ? Array.from({ length: kase.delta }, () => 'add' as const) : [...leaving];
  if (!kase.rollout) return [scale];
  const replace: SimStep[] = removeFirst ? ['healthy', 'add'] : ['add', 'healthy'];
  return [
    [...scale, ...replace],
    [...replace, ...scale],
  ];
}

describe('projectChange, extended: which members leave × maxSurge × current quorum', () => {
  for (const kase of EXTENDED) {
    it(`${kase.name}: nothing allowed loses quorum; everything safe under the determined choice is allowed`, () => {
      const violations: string[] = [];
      let allowedCount = 0;
      let deniedCount = 0;
      for (const base of allStates()) {
        const change = changeFor(kase, base.voting);
        const target = targetOf(change);
        const removals = Math.max(0, -kase.delta);
        const unhealthy = base.voting - base.healthyVoting;
        // Determined: each possible choice of the controller; worst case: it may make any of them.
        const determinedChoices = anyChoice(removals, base.healthyVoting, unhealthy, ['healthy', 'unhealthy', 'none']);
        const choices: { order: Leaves[] | undefined; possible: Leaves[][] }[] = [
          ...determinedChoices.map((order) => ({ order, possible: [order] })),
          {
            order: undefined,
            possible: anyChoice(Math.min(removals, base.voting), base.healthyVoting, unhealthy, ['healthy', 'unhealthy']),
          },
        ];
        for (const removeFirst of [false, true]) {
          for (const { order, possible } of choices) {
            const result = projectChange(base, change, {
              removeBeforeAdd: removeFirst,
              ...(order === undefined ? {} : { removalOrder: order }),
            });
            const runs = possible.flatMap((leaving) => runsFor(kase, leaving, removeFirst));
            const outcomes = runs.map((run) => stepsKeepQuorum(base.voting, base.healthyVoting, run));
            const preconditions =
              base.leaderPresent &&
              base.alarms === 0 &&
              base.learners === 0 &&
              target >= 1 &&
              // The contract asks for current quorum even when the Machines that go carry no member.
              hasQuorum(base.healthyVoting, base.voting) &&
              (kase.delta < 0 && !kase.rollout ? true : base.healthyVoting === base.voting && base.verdict !== 'Unhealthy') &&
              (!(kase.rollout && removeFirst) || target >= 3);
            const safe = preconditions && outcomes.every((outcome) => outcome.safe);
            const label = `${JSON.stringify(base)} ${JSON.stringify(change)} order=${JSON.stringify(order)} removeFirst=${removeFirst} → ${JSON.stringify(result)}`;
            if (result.allowed) allowedCount += 1;
            else deniedCount += 1;
            if (result.allowed && !safe) violations.push(`allowed but unsafe: ${label}`);
            if (order !== undefined && safe && !result.allowed)
              violations.push(`safe under the determined choice but denied: ${label}`);
            if (
              result.allowed &&
              outcomes.some((outcome) => outcome.exception) &&
              !result.warnings.some((w) => w.includes('1-member'))
            ) {
              violations.push(`1-member growth allowed without a warning: ${label}`);
            }
          }
        }
      }
      expect(violations.slice(0, 10)).toEqual([]);
      expect(allowedCount).toBeGreaterThan(0);
      expect(deniedCount).toBeGreaterThan(0);
    });
  }

  it('never loops over the requested replica count', () => {
    const healthyThree: MembershipState = {
      voting: 3,
      healthyVoting: 3,
      learners: 0,
      leaderPresent: true,
      alarms: 0,
      verdict: 'Healthy',
    };
    const started = performance.now();
    const huge = Number.MAX_SAFE_INTEGER;
    expect(projectChange(healthyThree, { kind: 'scale-up', from: 3, to: huge }).allowed).toBe(true);
    expect(projectChange(healthyThree, { kind: 'scale-down', from: huge, to: 1 }).allowed).toBe(false);
    expect(
      projectChange(healthyThree, { kind: 'rollout', replicas: huge, previousReplicas: 3, changedPaths: ['/spec/version'] })
        .allowed,
    ).toBe(true);
    expect(performance.now() - started).toBeLessThan(500);
  });
});
