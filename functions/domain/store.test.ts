// The rules both stores (file, ConfigMap) share, as pure functions: newest wins, what a stored
// document must be to be used, and what an evaluation must be to be written.
import { describe, expect, it } from 'vitest';
import { invalidEvaluationError, parseSequence, parseStoredEvaluation, StoreError, supersedes } from './store.js';
import { makeEvaluation } from '../../test/harness/evaluation-fixture.js';

describe('supersedes (newest wins, never a future stamp)', () => {
  const NOW = new Date('2026-01-01T00:01:00.000Z');
  it.each([
    { stored: '2026-01-01T00:00:00.000Z', candidate: '2026-01-01T00:00:00.001Z', replaces: true },
    { stored: '2026-01-01T00:00:00.000Z', candidate: '2026-01-01T00:00:00.000Z', replaces: false },
    { stored: '2026-01-01T00:00:01.000Z', candidate: '2026-01-01T00:00:00.000Z', replaces: false },
    // within the clock-skew allowance a stamp still counts as present
    { stored: '2026-01-01T00:00:59.000Z', candidate: '2026-01-01T00:01:04.000Z', replaces: true },
    // a stamp from the future never wins over a present one ...
    { stored: '2026-01-01T00:00:59.000Z', candidate: '2026-01-01T00:02:40.000Z', replaces: false },
    // ... and a present one replaces it
    { stored: '2026-01-01T00:02:40.000Z', candidate: '2026-01-01T00:00:59.000Z', replaces: true },
    // two future stamps: the later one
    { stored: '2026-01-01T00:02:40.000Z', candidate: '2026-01-01T00:03:40.000Z', replaces: true },
    // an Unhealthy verdict is never replaced by an older-stamped healthier one
    { stored: '2026-01-01T00:02:40.000Z', storedVerdict: 'Unhealthy', candidate: '2026-01-01T00:00:59.000Z', replaces: false },
    {
      stored: '2026-01-01T00:02:40.000Z',
      storedVerdict: 'Unhealthy',
      candidate: '2026-01-01T00:00:59.000Z',
      candidateVerdict: 'Unhealthy',
      replaces: true,
    },
  ] as const)(
    'a candidate from $candidate over one from $stored ($storedVerdict) replaces it: $replaces',
    ({ stored, candidate, replaces, ...verdicts }) => {
      const storedEvaluation = makeEvaluation({
        evaluatedAt: stored,
        verdict: 'storedVerdict' in verdicts ? verdicts.storedVerdict : 'Healthy',
      });
      const candidateEvaluation = makeEvaluation({
        evaluatedAt: candidate,
        verdict: 'candidateVerdict' in verdicts ? verdicts.candidateVerdict : 'Healthy',
      });
      expect(supersedes(candidateEvaluation, storedEvaluation, NOW)).toBe(replaces);
    },
  );
});

describe('parseStoredEvaluation', () => {
  const place = { source: 'the-source', holder: 'the-holder' };

  it('returns the evaluation of the asked target', () => {
    const evaluation = makeEvaluation({ target: 'prod' });
    expect(parseStoredEvaluation(JSON.stringify(evaluation), 'prod', place)).toEqual(evaluation);
  });

  it.each([
    { case: 'not JSON', text: '{oops', names: ['the-source', 'not JSON', 'not using it'] },
    { case: 'not an evaluation', text: '{"target":"prod"}', names: ['the-source', 'schemaVersion', 'not using it'] },
    {
      case: "another target's evaluation",
      text: JSON.stringify(makeEvaluation({ target: 'other' })),
      names: ['the-holder holds an evaluation of target "other", not "prod"', 'not using it'],
    },
  ])('$case is a corrupt StoreError naming what is wrong', ({ text, names }) => {
    const result = parseStoredEvaluation(text, 'prod', place);
    expect(result).toBeInstanceOf(StoreError);
    expect((result as StoreError).kind).toBe('corrupt');
    for (const name of names) expect((result as StoreError).message).toContain(name);
  });
});

describe('invalidEvaluationError', () => {
  it('is null for a valid evaluation', () => {
    expect(invalidEvaluationError(makeEvaluation())).toBeNull();
  });

  it('is an invalid StoreError naming the bad field and its problem', () => {
    const error = invalidEvaluationError({ ...makeEvaluation(), durationMs: 'fast' });
    expect(error?.kind).toBe('invalid');
    expect(error?.message).toContain('refusing to store an invalid evaluation');
    expect(error?.message).toContain('durationMs');
  });
});

describe('parseSequence (the stored write sequence)', () => {
  it.each([
    { value: undefined, sequence: 0 },
    { value: '0', sequence: 0 },
    { value: '41', sequence: 41 },
    { value: 41, sequence: 41 },
    { value: '999999999999999', sequence: 999_999_999_999_999 },
  ])('$value reads as $sequence', ({ value, sequence }) => {
    expect(parseSequence(value, 'the-holder')).toBe(sequence);
  });

  it.each([
    { value: '1e99', shown: '"1e99"' },
    { value: '1000000000000000', shown: '"1000000000000000"' },
    { value: '007', shown: '"007"' },
    { value: '-1', shown: '"-1"' },
    { value: 1.5, shown: '1.5' },
    { value: null, shown: 'object' },
  ])('$value is a corrupt StoreError naming the holder and $shown', ({ value, shown }) => {
    const result = parseSequence(value, 'the-holder');
    expect(result).toBeInstanceOf(StoreError);
    expect((result as StoreError).kind).toBe('corrupt');
    expect((result as StoreError).message).toContain(`the-holder has write sequence ${shown}`);
  });
});
