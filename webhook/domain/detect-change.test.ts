// detectGuardedChange compares each guarded subtree child by child and no longer runs an RFC 6902
// diff first to see which subtrees some operation touched (it was the largest part of classifying
// a request). That gate could only ever drop a subtree whose children do not differ, so the
// answers are the same exactly when every subtree with a changed child is touched by the diff.
// This checks that on every admission fixture and thousands of edits of its guarded fields.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createPatch, type Operation, type Pointer } from 'rfc6902';
import { describe, expect, it } from 'vitest';
import { detectGuardedChange, isAtOrUnder, jsonEqual } from './detect-change.js';
import { GUARD_RULES, SCALE_GUARDED, type GuardedPointer } from './rules.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/admission');
const fixtures = readdirSync(FIXTURES)
  .filter((name) => name.endsWith('.json'))
  .map((name) => {
    const review = JSON.parse(readFileSync(path.join(FIXTURES, name), 'utf8')) as {
      request: { object?: unknown; oldObject?: unknown };
    };
    return { name, before: review.request.oldObject, after: review.request.object };
  });

const GUARD_SETS: readonly (readonly GuardedPointer[])[] = [
  ...GUARD_RULES.map((rule) => rule.guarded),
  SCALE_GUARDED,
  [
    {
      pointer: '/spec',
      reason: 'test',
      harmless: [
        { pointer: '/spec/minReadySeconds', reason: 'test' },
        { pointer: '/spec/template/metadata/annotations', reason: 'test' },
      ],
    },
    { pointer: '/metadata/annotations/a.io~1x~0y', reason: 'test', harmless: [] },
  ],
];

const VALUES: readonly unknown[] = [null, 0, -0, 1, 2.5, '', 'x', true, false, [], [1], [1, 2], {}, { a: 1 }, { a: [1] }];

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Every path (as keys) inside `value`, objects and arrays, at most `depth` deep. */
function pathsOf(value: unknown, depth: number, prefix: string[] = []): string[][] {
  if (depth === 0 || value === null || typeof value !== 'object') return [];
  const keys = Array.isArray(value) ? value.map((_item, index) => String(index)) : Object.keys(value);
  return keys.flatMap((key) => [
    [...prefix, key],
    ...pathsOf((value as Record<string, unknown>)[key], depth - 1, [...prefix, key]),
  ]);
}

/** A copy of `object` with the value at `keys` replaced (undefined: removed). */
function edited(object: unknown, keys: readonly string[], value: unknown): unknown {
  const copy = structuredClone(object) as Record<string, unknown>;
  let parent: Record<string, unknown> = copy;
  for (const key of keys.slice(0, -1)) parent = parent[key] as Record<string, unknown>;
  const last = keys.at(-1) ?? '';
  if (value === undefined) {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else {
    parent[last] = structuredClone(value);
  }
  return copy;
}

/** The diff the gate ran: the guarded objects' root members, arrays compared whole. */
function rootDiff(before: unknown, after: unknown, guarded: readonly GuardedPointer[]): Operation[] {
  const roots = new Set(guarded.map((pointer) => pointer.pointer.split('/')[1] ?? ''));
  const pick = (object: unknown) =>
    Object.fromEntries(
      isRecord(object) ? [...roots].filter((root) => object[root] !== undefined).map((root) => [root, object[root]]) : [],
    );
  const wholeArrays = (input: unknown, output: unknown, pointer: Pointer): Operation[] | void => {
    if (Array.isArray(input) && Array.isArray(output))
      return jsonEqual(input, output) ? [] : [{ op: 'replace', path: pointer.toString(), value: output }];
    return undefined;
  };
  return createPatch(pick(before), pick(after), wholeArrays);
}

function checkAgainstDiff(before: unknown, after: unknown, guardSet: readonly GuardedPointer[]): number {
  const operations = rootDiff(before, after, guardSet);
  let changed = 0;
  for (const guarded of guardSet) {
    const children = detectGuardedChange(before, after, [guarded]).changedPointers;
    if (children.length === 0) continue;
    changed += 1;
    const touched = operations.some((operation) =>
      [operation.path, ...('from' in operation ? [operation.from] : [])].some(
        (at) => isAtOrUnder(at, guarded.pointer) || isAtOrUnder(guarded.pointer, at),
      ),
    );
    expect(touched, `${guarded.pointer} changed (${children.join(', ')}) but no diff operation touches it`).toBe(true);
  }
  return changed;
}

describe('detectGuardedChange without the RFC 6902 gate', () => {
  it('finds a changed subtree only where the diff touches it, on every fixture and edit of its fields', () => {
    let cases = 0;
    let changed = 0;
    for (const { before, after } of fixtures) {
      // The guarded subtrees and the test set's annotation; managedFields would only cost time.
      const editable = (object: unknown) =>
        pathsOf(object, 4).filter((keys) => keys[0] === 'spec' || (keys[0] === 'metadata' && keys[1] === 'annotations'));
      for (const guardSet of GUARD_SETS) {
        changed += checkAgainstDiff(before, after, guardSet);
        changed += checkAgainstDiff(after, before, guardSet);
        for (const [from, base] of [
          [before, after],
          [after, before],
        ] as const) {
          for (const keys of editable(base)) {
            for (const value of [undefined, ...VALUES]) {
              changed += checkAgainstDiff(from, edited(base, keys, value), guardSet);
              cases += 1;
            }
          }
        }
      }
    }
    expect(cases).toBeGreaterThan(5_000);
    expect(changed).toBeGreaterThan(1_000);
  });

  it('still reports the operations that touched guarded fields, when asked', () => {
    const before = { spec: { replicas: 3, minReadySeconds: 1 }, metadata: { labels: { a: '1' } } };
    const after = { spec: { replicas: 4, minReadySeconds: 2 }, metadata: { labels: { a: '2' } } };
    const change = detectGuardedChange(before, after, GUARD_SETS[3] ?? []);
    expect(change.changedPointers).toEqual(['/spec/replicas']);
    expect(change.operations).toEqual([{ op: 'replace', path: '/spec/replicas', value: 4 }]);
    expect(detectGuardedChange(before, before, GUARD_SETS[3] ?? []).operations).toEqual([]);
  });
});
