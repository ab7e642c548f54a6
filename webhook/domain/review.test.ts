// parseAdmissionReview (webhook/domain/review.ts) on every fixture, then every field of each set to
// a wrong type, removed, or given extra keys: it never throws, keeps only the schema's keys, and
// every refusal names the field that was wrong (or the one above or below it) and what it got.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAdmissionReview } from './review.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/admission');
const fixtures = readdirSync(FIXTURES)
  .filter((name) => name.endsWith('.json'))
  .map((name) => ({ name, body: JSON.parse(readFileSync(path.join(FIXTURES, name), 'utf8')) as Record<string, unknown> }));

/** Field paths a mutation replaces or removes (from the review's root). */
const PATHS: readonly (readonly string[])[] = [
  ['apiVersion'],
  ['kind'],
  ['request'],
  ['request', 'uid'],
  ['request', 'kind'],
  ['request', 'kind', 'group'],
  ['request', 'kind', 'version'],
  ['request', 'kind', 'kind'],
  ['request', 'resource'],
  ['request', 'resource', 'resource'],
  ['request', 'requestKind'],
  ['request', 'requestKind', 'version'],
  ['request', 'requestResource'],
  ['request', 'requestResource', 'group'],
  ['request', 'subResource'],
  ['request', 'requestSubResource'],
  ['request', 'name'],
  ['request', 'namespace'],
  ['request', 'operation'],
  ['request', 'userInfo'],
  ['request', 'userInfo', 'username'],
  ['request', 'userInfo', 'uid'],
  ['request', 'userInfo', 'groups'],
  ['request', 'userInfo', 'extra'],
  ['request', 'userInfo', 'extra', 'scopes'],
  ['request', 'object'],
  ['request', 'oldObject'],
  ['request', 'dryRun'],
  ['request', 'options'],
];

const VALUES: readonly unknown[] = [
  null,
  0,
  1.5,
  '',
  'x',
  'UPDATE',
  true,
  false,
  [],
  ['a'],
  ['a', 2],
  {},
  { group: '', version: 'v1', kind: 'K' },
  { a: ['b'] },
  { a: 'b' },
];

type Mutation = { what: string; apply: (body: Record<string, unknown>) => void };

function parentOf(body: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> | null {
  let current: unknown = body;
  for (const key of keys.slice(0, -1)) {
    if (current === null || typeof current !== 'object') return null;
    const next = (current as Record<string, unknown>)[key];
    if (next === undefined) (current as Record<string, unknown>)[key] = {};
    current = (current as Record<string, unknown>)[key];
  }
  return current !== null && typeof current === 'object' && !Array.isArray(current) ? (current as Record<string, unknown>) : null;
}

const mutations: Mutation[] = [
  { what: 'unchanged', apply: () => {} },
  {
    what: 'extra keys at every level',
    apply: (body) => {
      body.extra = 1;
      const request = body.request as Record<string, unknown>;
      request.unknownField = { a: 1 };
      (request.kind as Record<string, unknown>).extra = 'x';
      (request.userInfo as Record<string, unknown>).extra = { scopes: ['a', 'b'], other: [] };
    },
  },
  {
    what: 'a JSON __proto__ key in userInfo.extra',
    apply: (body) => {
      const userInfo = (body.request as Record<string, unknown>).userInfo as Record<string, unknown>;
      userInfo.extra = JSON.parse('{"__proto__": ["a"], "b": ["c"]}') as unknown;
    },
  },
  ...PATHS.flatMap((keys): Mutation[] => [
    { what: `${keys.join('.')} removed`, apply: (body) => void delete parentOf(body, keys)?.[keys.at(-1) ?? ''] },
    {
      what: `${keys.join('.')} undefined`,
      apply: (body) => {
        const parent = parentOf(body, keys);
        if (parent) parent[keys.at(-1) ?? ''] = undefined;
      },
    },
    ...VALUES.map((value) => ({
      what: `${keys.join('.')} = ${JSON.stringify(value)}`,
      apply: (body: Record<string, unknown>) => {
        const parent = parentOf(body, keys);
        if (parent) parent[keys.at(-1) ?? ''] = structuredClone(value);
      },
    })),
  ]),
];

/** The dotted field paths an "invalid AdmissionReview: a.b: …; c: …" message names. */
function namedFields(message: string): string[] {
  const issues = message.replace(/^invalid AdmissionReview: /, '');
  return [...issues.matchAll(/(?:^|; )([^\s:;]+): /g)].map((match) => match[1] ?? '');
}

/** The request's keys the schema knows, in no particular order. */
const REQUEST_KEYS = new Set([
  'uid',
  'kind',
  'resource',
  'subResource',
  'requestKind',
  'requestResource',
  'requestSubResource',
  'name',
  'namespace',
  'operation',
  'userInfo',
  'object',
  'oldObject',
  'dryRun',
  'options',
]);

describe('parseAdmissionReview on every fixture under mutation', () => {
  for (const fixture of fixtures) {
    it(`${fixture.name}: ${mutations.length} mutations are parsed, or refused naming the field`, () => {
      for (const mutation of mutations) {
        const body = structuredClone(fixture.body);
        mutation.apply(body);
        const parsed = parseAdmissionReview(body);
        if (parsed.ok) {
          const request = parsed.review.request as unknown as Record<string, unknown>;
          expect(
            Object.keys(request).filter((key) => !REQUEST_KEYS.has(key)),
            mutation.what,
          ).toEqual([]);
          expect(Object.keys(request.kind as object).sort(), mutation.what).toEqual(['group', 'kind', 'version']);
          continue;
        }
        const mutated = mutation.what.split(/ (?:removed|undefined|=)/)[0] ?? '';
        const fields = namedFields(parsed.message);
        expect(fields.length, `${mutation.what}: ${parsed.message}`).toBeGreaterThan(0);
        const related = fields.some(
          (field) => field === mutated || mutated.startsWith(`${field}.`) || field.startsWith(`${mutated}.`),
        );
        expect(related, `${mutation.what}: ${parsed.message}`).toBe(true);
        expect(parsed.message, mutation.what).toMatch(/\(got [^)]*\)/);
      }
    });
  }

  it('keeps the well-formed fixtures whole: the request is what was sent, minus unknown keys', () => {
    for (const fixture of fixtures) {
      const parsed = parseAdmissionReview(structuredClone(fixture.body));
      expect(parsed.ok, fixture.name).toBe(true);
      if (parsed.ok) expect(parsed.review.request, fixture.name).toEqual(fixture.body.request);
    }
  });

  it.each([
    { case: 'null', body: null, message: 'body is not an AdmissionReview object (got null)' },
    { case: 'a string', body: 'x', message: 'body is not an AdmissionReview object (got "x")' },
    { case: 'an array', body: [], message: 'body is not an AdmissionReview object (got [])' },
  ])('refuses $case as a body, saying what it got', ({ body, message }) => {
    expect(parseAdmissionReview(body)).toStrictEqual({ ok: false, message });
  });

  it('refuses an object whose fields are only inherited, naming them', () => {
    const parsed = parseAdmissionReview(Object.create({ apiVersion: 'admission.k8s.io/v1' }));
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(namedFields(parsed.message)).toEqual(expect.arrayContaining(['kind', 'request']));
  });

  it('a throwing getter gets the 400 message, not a crash', () => {
    const body = structuredClone(fixtures[0]?.body ?? {});
    Object.defineProperty(body.request, 'uid', {
      get() {
        throw new Error('hostile getter');
      },
      enumerable: true,
    });
    expect(parseAdmissionReview(body)).toStrictEqual({ ok: false, message: 'invalid AdmissionReview: hostile getter' });
  });
});
