// The core's freshness rule and the inline-refresh choice the server acts on, as a table.
import { describe, expect, it } from 'vitest';
import { chooseEvaluation, judgeFreshness, type EvaluationChoiceInput } from './freshness.js';
import { makeEvaluation } from '../../test/harness/evaluation-fixture.js';

const NOW = new Date('2026-11-30T02:00:00.000Z');
const at = (secondsFromNow: number) =>
  makeEvaluation({ evaluatedAt: new Date(NOW.getTime() + secondsFromNow * 1000).toISOString() });

describe('judgeFreshness', () => {
  it.each([
    ['none', null, { fresh: false, reason: 'missing', why: 'none stored' }],
    ['12 s old', at(-12), { fresh: true, ageMs: 12_000 }],
    ['200 s old', at(-200), { fresh: false, reason: 'stale', why: 'age 200s, max 60s' }],
    ['3 s ahead (clock skew allowance)', at(3), { fresh: true, ageMs: 0 }],
    ['100 s ahead', at(100), { fresh: false, reason: 'stale', why: 'evaluated 100s in the future; clock skew?' }],
  ])('%s', (_name, evaluation, expected) => {
    expect(judgeFreshness(evaluation, NOW, 60)).toMatchObject(expected);
  });

  it('judges the same with now as a Date or as milliseconds, on a first and a repeated read', () => {
    for (const seconds of [-12, -200, 3, 100, 0]) {
      const evaluation = at(seconds);
      const byDate = judgeFreshness(evaluation, NOW, 60);
      expect(judgeFreshness(evaluation, NOW.getTime(), 60)).toStrictEqual(byDate);
      expect(judgeFreshness(evaluation, NOW, 60)).toStrictEqual(byDate);
    }
  });

  it('reads a stamp that is not UTC in the time zone of the moment, every time', () => {
    const local = makeEvaluation();
    local.evaluatedAt = '2026-11-30T01:59:48';
    const before = process.env.TZ;
    try {
      process.env.TZ = 'UTC';
      expect(judgeFreshness(local, NOW, 60)).toMatchObject({ fresh: true, ageMs: 12_000 });
      process.env.TZ = 'Etc/GMT+1';
      expect(judgeFreshness(local, NOW, 60)).toMatchObject({ fresh: false, reason: 'stale' });
    } finally {
      if (before === undefined) delete process.env.TZ;
      else process.env.TZ = before;
    }
  });
});

describe('chooseEvaluation', () => {
  // The request arrived 50 ms before NOW; live evidence started at most 1 s before it arrived.
  const arrivedAtMs = NOW.getTime() - 50;
  const base: EvaluationChoiceInput = {
    cached: at(-30),
    arrivedAtMs,
    nowMs: NOW.getTime(),
    decisionMaxAgeMs: 1_000,
    decision: 'live',
    remainingMs: 10_000,
    evaluationTimeoutMs: 2_000,
  };
  it.each([
    [
      'uses a cached evaluation that started within the bound as live',
      { cached: at(-1) },
      { kind: 'use', evidence: { kind: 'live' } },
    ],
    [
      'evaluates live over a cached Healthy younger than maxAgeSeconds but older than the bound',
      {},
      { kind: 'refresh', timeoutMs: 9_000, notBeforeMs: arrivedAtMs - 1_000 },
    ],
    ['evaluates live when the cached one started just before the bound', { cached: at(-1.051) }, { kind: 'refresh' }],
    [
      'a bound of 0 asks for an evaluation that started after the request arrived',
      { decisionMaxAgeMs: 0, cached: at(-0.06) },
      { kind: 'refresh', notBeforeMs: arrivedAtMs },
    ],
    [
      'a per-target bound of 60 s takes a 30 s old one as live',
      { decisionMaxAgeMs: 60_000 },
      { kind: 'use', evidence: { kind: 'live' } },
    ],
    ['evaluates live over one stamped in the future (another clock)', { cached: at(0.5) }, { kind: 'refresh' }],
    ['evaluates live when none is cached', { cached: null }, { kind: 'refresh' }],
    [
      'decision cached: the cached one decides, saying why',
      { decision: 'cached' as const },
      {
        kind: 'use',
        evidence: { kind: 'cached', why: 'the target is configured with decision: cached', decisionMaxAgeMs: 1_000 },
      },
    ],
    [
      'decision cached still takes a young one as live',
      { decision: 'cached' as const, cached: at(-0.5) },
      { kind: 'use', evidence: { kind: 'live' } },
    ],
    [
      'skips when the budget cannot fit the evaluation and the margin: cached evidence saying so',
      { remainingMs: 2_500 },
      {
        kind: 'use',
        skippedRefresh: true,
        evidence: { kind: 'cached', why: expect.stringContaining('budget 2.5s cannot fit the 2.0s evaluation') as unknown },
      },
    ],
  ])('%s', (_name, change, expected) => {
    expect(chooseEvaluation({ ...base, ...change })).toMatchObject(expected);
  });
});
