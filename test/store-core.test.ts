// The rules both stores (file, ConfigMap) share, as pure functions: newest wins, what a stored
// document must be to be used, and what an evaluation must be to be written.
import { describe, expect, it } from 'vitest';
import { invalidEvaluationError, parseStoredEvaluation, StoreError, supersedes } from '../functions/core/store.js';
import { makeEvaluation } from './harness/evaluation-fixture.js';

describe('supersedes (newest wins)', () => {
  it.each([
    { stored: '2026-01-01T00:00:00.000Z', candidate: '2026-01-01T00:00:00.001Z', replaces: true },
    { stored: '2026-01-01T00:00:00.000Z', candidate: '2026-01-01T00:00:00.000Z', replaces: false },
    { stored: '2026-01-01T00:00:01.000Z', candidate: '2026-01-01T00:00:00.000Z', replaces: false },
  ])('a candidate from $candidate over one from $stored replaces it: $replaces', ({ stored, candidate, replaces }) => {
    expect(supersedes(makeEvaluation({ evaluatedAt: candidate }), makeEvaluation({ evaluatedAt: stored }))).toBe(replaces);
  });
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
