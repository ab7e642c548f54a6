// The one formatter of zod issues: the config, the CLI flags, AdmissionReview bodies and stored
// evaluations all name the field, and the first three also the rejected value.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeValue, formatZodIssues } from './zod-issues.js';

const schema = z.object({ name: z.string(), count: z.number(), tags: z.array(z.string()) }).strict();

function issuesOf(input: unknown): z.ZodError {
  const result = schema.safeParse(input);
  if (result.success) throw new Error('expected the input to be rejected');
  return result.error;
}

describe('formatZodIssues', () => {
  it('names each field and, given the input, the value it rejected', () => {
    const input = { name: 7, count: 'x', tags: ['ok', 3] };
    expect(formatZodIssues(issuesOf(input), { input })).toEqual([
      'name: Invalid input: expected string, received number (got 7)',
      'count: Invalid input: expected number, received string (got "x")',
      'tags.1: Invalid input: expected string, received number (got 3)',
    ]);
  });

  it('says "missing" for an absent field and "(root)" for the top level', () => {
    expect(formatZodIssues(issuesOf({ name: 'a', count: 1 }), { input: { name: 'a', count: 1 } })).toEqual([
      'tags: Invalid input: expected array, received undefined (got missing)',
    ]);
    expect(formatZodIssues(issuesOf(null), { input: null })).toEqual([
      '(root): Invalid input: expected object, received null (got null)',
    ]);
  });

  it('echoes no value when no input is given', () => {
    expect(formatZodIssues(issuesOf({ name: 1, count: 1, tags: [] }))).toEqual([
      'name: Invalid input: expected string, received number',
    ]);
  });

  it('cuts long values and counts the issues it leaves out', () => {
    const input = { name: 'n'.repeat(100), count: 'x', tags: 'y', extra: true };
    const lines = formatZodIssues(issuesOf(input), { input, maxValueChars: 10, maxIssues: 2 });
    expect(lines).toEqual([
      'count: Invalid input: expected number, received string (got "x")',
      'tags: Invalid input: expected array, received string (got "y")',
      'and 1 more',
    ]);
    expect(describeValue('n'.repeat(100), 10)).toBe('"nnnnnn...');
  });

  it('describes, for untrusted input, an enum miss by its options and unknown keys by their count', () => {
    const modes = z.object({ mode: z.enum(['enforce', 'warn']) }).strict();
    const input = { mode: 'secret-value', 'other-secret': 1 };
    const result = modes.safeParse(input);
    if (result.success) throw new Error('expected the input to be rejected');
    const lines = formatZodIssues(result.error, { input, untrusted: true });
    expect(lines).toEqual(['mode: not one of "enforce" | "warn"', '(root): 1 unrecognized key(s)']);
    expect(lines.join('\n')).not.toContain('secret');
  });

  it('describes values JSON cannot hold without throwing', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(describeValue(cyclic)).toBe('object');
    expect(describeValue(() => 1)).toBe('function');
    expect(describeValue(10n)).toBe('bigint');
  });
});
