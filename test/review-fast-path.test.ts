// The hand-written fast path of parseAdmissionReview must answer exactly as the zod schema does:
// the same verdict, the same request (keys, order, values) and zod's message whenever it refuses.
// Every fixture, then every field of each set to a wrong type, removed, or given extra keys.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAdmissionReview, parseAdmissionReviewWithZod } from '../webhook/domain/review.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/admission');
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

describe('parseAdmissionReview fast path agrees with the zod schema', () => {
  for (const fixture of fixtures) {
    it(`${fixture.name}: ${mutations.length} mutations give zod's verdict, request and message`, () => {
      for (const mutation of mutations) {
        const body = structuredClone(fixture.body);
        mutation.apply(body);
        const fast = parseAdmissionReview(body);
        const reference = parseAdmissionReviewWithZod(body);
        expect(fast, mutation.what).toStrictEqual(reference);
        // toStrictEqual ignores key order; the request's keys must come in zod's order too.
        expect(JSON.stringify(fast), mutation.what).toBe(JSON.stringify(reference));
      }
    });
  }

  it('refuses what is not a plain object the way zod does', () => {
    for (const body of [null, 'x', 1, [], new Date(0), new Map(), Object.create({ apiVersion: 'admission.k8s.io/v1' })]) {
      expect(parseAdmissionReview(body)).toStrictEqual(parseAdmissionReviewWithZod(body));
    }
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
