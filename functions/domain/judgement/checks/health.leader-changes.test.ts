// Issue 32, `leader-changes`: raft term increases between the stored evaluation and this one,
// judged against the etcd mixin's etcdHighNumberOfLeaderChanges (4 leader changes in 15 minutes).
// Pure: the probes of a three-member cluster whose leader reports the given term.
import { describe, expect, it } from 'vitest';
import { evaluateCluster, leaderTermOf } from '../evaluate-cluster.js';
import type { EvaluationInput } from '../input.js';
import { probedThree } from '../../../../test/harness/probe-input.js';

const NOW = '2026-01-02T03:04:05.000Z';
const before = (ms: number) => new Date(Date.parse(NOW) - ms).toISOString();
const MINUTE = 60_000;

/** Three members whose Status reports `term` (leader '1' unless told), with the stored leader term given. */
function withTerms(term: number, previous?: { term: number; agoMs: number }, leaderId = '1'): EvaluationInput {
  const input = probedThree({}, NOW);
  input.probes = input.probes.map((probe) =>
    probe.status.ok ? { ...probe, status: { ok: true, value: { ...probe.status.value, raftTerm: term, leaderId } } } : probe,
  );
  if (previous !== undefined) input.previousLeaderTerm = { term: previous.term, evaluatedAt: before(previous.agoMs) };
  return input;
}

const leaderChanges = (input: EvaluationInput) => evaluateCluster(input).checks.find((check) => check.name === 'leader-changes');

describe('leader-changes (issue 32)', () => {
  it.each([
    {
      behaviour: 'passes one election in a minute, with the rate per minute',
      input: withTerms(3, { term: 2, agoMs: MINUTE }),
      status: 'pass',
      message: 'raft term 2 → 3 (1 election) in 60s since the stored evaluation, 1.0 per minute; warns at 4 in 15m',
    },
    {
      behaviour: 'passes no election at all',
      input: withTerms(2, { term: 2, agoMs: MINUTE }),
      status: 'pass',
      message: 'raft term 2 → 2 (0 elections) in 60s since the stored evaluation, 0.0 per minute; warns at 4 in 15m',
    },
    {
      behaviour: 'warns at 4 elections within a minute (the mixin’s count, well inside its window)',
      input: withTerms(6, { term: 2, agoMs: MINUTE }),
      status: 'warn',
      message:
        'leader churn: raft term 2 → 6 (4 elections) in 60s since the stored evaluation, 4.0 per minute; warns at 4 in 15m',
    },
    {
      behaviour: 'warns at 5 elections in 30 s',
      input: withTerms(7, { term: 2, agoMs: MINUTE / 2 }),
      status: 'warn',
      message: 'leader churn: raft term 2 → 7 (5 elections) in 30s since the stored evaluation, 10.0 per minute',
    },
    {
      behaviour: 'passes 3 elections in 14 minutes',
      input: withTerms(5, { term: 2, agoMs: 14 * MINUTE }),
      status: 'pass',
      message: '(3 elections) in 14m since the stored evaluation, 0.2 per minute',
    },
    {
      behaviour: 'warns at 4 elections in exactly 15 minutes',
      input: withTerms(6, { term: 2, agoMs: 15 * MINUTE }),
      status: 'warn',
      message: '(4 elections) in 15m since the stored evaluation',
    },
    {
      behaviour: 'over a longer gap, passes fewer than 4 per 15 minutes on average (5 in 30 minutes)',
      input: withTerms(7, { term: 2, agoMs: 30 * MINUTE }),
      status: 'pass',
      message: '(5 elections) in 30m',
    },
    {
      behaviour: 'over a longer gap, warns at 4 per 15 minutes on average (8 in 30 minutes)',
      input: withTerms(10, { term: 2, agoMs: 30 * MINUTE }),
      status: 'warn',
      message: 'leader churn: raft term 2 → 10 (8 elections) in 30m',
    },
    {
      behaviour: 'does not compare a term below the stored one (a restored or replaced cluster)',
      input: withTerms(2, { term: 40, agoMs: MINUTE }),
      status: 'pass',
      message: 'raft term 2 is below the stored 40: not compared (a restored or replaced cluster)',
    },
  ])('$behaviour', ({ input, status, message }) => {
    const check = leaderChanges(input);
    expect(check?.status).toBe(status);
    expect(check?.message).toContain(message);
    const evaluation = evaluateCluster(input);
    expect(evaluation.verdict).toBe(status === 'warn' ? 'Degraded' : 'Healthy');
    if (status === 'warn') expect(evaluation.reasons).toEqual([check?.message]);
  });

  it.each([
    { behaviour: 'without a stored leader term (the first run, a one-shot evaluate)', input: withTerms(9) },
    { behaviour: 'when the stored evaluation is not older than this one', input: withTerms(9, { term: 2, agoMs: 0 }) },
    { behaviour: 'when no leader is agreed now', input: withTerms(9, { term: 2, agoMs: MINUTE }, '0') },
  ])('is not judged $behaviour', ({ input }) => {
    expect(leaderChanges(input)).toBeUndefined();
  });

  it("takes the stored evaluation's leader's term, and nothing from one without a leader", () => {
    const stored = evaluateCluster(withTerms(7));
    expect(leaderTermOf(stored)).toEqual({ term: 7, evaluatedAt: NOW });
    expect(leaderTermOf({ ...stored, members: stored.members.map((member) => ({ ...member, leader: false })) })).toBeNull();
    expect(leaderTermOf(null)).toBeNull();
  });

  it('sits between latency and member-count in every evaluation', () => {
    const names = evaluateCluster(withTerms(3, { term: 2, agoMs: MINUTE })).checks.map((check) => check.name);
    expect(names.slice(names.indexOf('latency'), names.indexOf('latency') + 3)).toEqual([
      'latency',
      'leader-changes',
      'member-count',
    ]);
  });
});
