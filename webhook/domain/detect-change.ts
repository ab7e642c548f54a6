// Which guarded fields a request changes: the children of each guarded JSON pointer whose values
// differ between oldObject and object, outside its harmless children; on request also the RFC 6902
// operations that touched them. Pure.
import { createPatch, type Operation } from 'rfc6902';
import type { Pointer } from 'rfc6902';
import type { GuardedPointer, HarmlessChild } from './rules.js';

export interface GuardedChange {
  /** The changed children of the guarded subtrees (e.g. `/spec/version`), harmless children left out. */
  changedPointers: string[];
  /** The diff operations that touched guarded fields (for messages and tests). */
  operations: Operation[];
}

import { cachedPointerTokens, escapePointerToken, jsonEqual, valueAtPointer } from '../../functions/shared/json-pointer.js';

export {
  escapePointerToken,
  jsonEqual,
  pointerTokens,
  unescapePointerToken,
  valueAtPointer,
} from '../../functions/shared/json-pointer.js';

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** True when `path` is `pointer` itself or lies under it (`/spec/replicasX` is not under `/spec/replicas`). */
export function isAtOrUnder(path: string, pointer: string): boolean {
  return path === pointer || path.startsWith(`${pointer}/`);
}

/**
 * Arrays are compared whole: rfc6902's element-wise Levenshtein walk is quadratic in the array
 * lengths times the cost of comparing elements (seconds for a reordered array of a hundred;
 * BENCHMARKS.md),
 * and no guarded pointer points inside an array, so "this array changed" is all that matters.
 */
function wholeArrayDiff(input: unknown, output: unknown, pointer: Pointer): Operation[] | void {
  if (Array.isArray(input) && Array.isArray(output)) {
    return jsonEqual(input, output) ? [] : [{ op: 'replace', path: pointer.toString(), value: output }];
  }
  return undefined;
}

function childPointer(pointer: string, key: string): string {
  return `${pointer}/${escapePointerToken(key)}`;
}

function differsOutsideHarmless(before: unknown, after: unknown, pointer: string, harmless: readonly HarmlessChild[]): boolean {
  // Most subtrees (a Scale's replicas, a StatefulSet's) have no harmless child: no closures then.
  if (harmless.length === 0) return !jsonEqual(before, after);
  if (harmless.some((child) => isAtOrUnder(pointer, child.pointer))) return false;
  if (!harmless.some((child) => child.pointer.startsWith(`${pointer}/`))) return !jsonEqual(before, after);
  const children = childrenOf(before, after);
  if (children === null) return !jsonEqual(before, after);
  return children.keys.some((key) =>
    differsOutsideHarmless(children.before[key], children.after[key], childPointer(pointer, key), harmless),
  );
}

/** Both sides as records (an absent side counts as empty) with the union of their keys, or null when one is not a record. */
function childrenOf(
  before: unknown,
  after: unknown,
): { before: Record<string, unknown>; after: Record<string, unknown>; keys: string[] } | null {
  const left = before === undefined ? {} : before;
  const right = after === undefined ? {} : after;
  if (!isRecord(left) || !isRecord(right)) return null;
  return { before: left, after: right, keys: [...new Set([...Object.keys(left), ...Object.keys(right)])] };
}

/**
 * The changed children of one guarded subtree, as pointers one level below it (`/spec/version`),
 * or the subtree's own pointer when it is not an object (a Scale's `/spec/replicas`), added to `into`.
 */
function addChangedChildren(oldObject: unknown, newObject: unknown, guarded: GuardedPointer, into: string[]): void {
  const before = valueAtPointer(oldObject, guarded.pointer);
  const after = valueAtPointer(newObject, guarded.pointer);
  const children = isRecord(before) || isRecord(after) ? childrenOf(before, after) : null;
  if (children === null) {
    if (differsOutsideHarmless(before, after, guarded.pointer, guarded.harmless)) into.push(guarded.pointer);
    return;
  }
  const changed = children.keys
    .filter((key) =>
      differsOutsideHarmless(children.before[key], children.after[key], childPointer(guarded.pointer, key), guarded.harmless),
    )
    .map((key) => childPointer(guarded.pointer, key))
    .sort();
  for (const pointer of changed) into.push(pointer);
}

function changedChildren(oldObject: unknown, newObject: unknown, guarded: GuardedPointer): string[] {
  const changed: string[] = [];
  addChangedChildren(oldObject, newObject, guarded, changed);
  return changed;
}

/**
 * What detectGuardedChange returns: a class, so the lazy `operations` is a getter on the
 * prototype (an object literal with a getter cost a closure and its context per request).
 */
class DetectedChange implements GuardedChange {
  #operations: Operation[] | undefined;
  readonly #before: Record<string, unknown>;
  readonly #after: Record<string, unknown>;
  readonly #guardedPointers: readonly GuardedPointer[];

  constructor(
    readonly changedPointers: string[],
    before: Record<string, unknown>,
    after: Record<string, unknown>,
    guardedPointers: readonly GuardedPointer[],
  ) {
    this.#before = before;
    this.#after = after;
    this.#guardedPointers = guardedPointers;
  }

  get operations(): Operation[] {
    this.#operations ??=
      this.changedPointers.length === 0 ? [] : guardedOperations(this.#before, this.#after, this.#guardedPointers);
    return this.#operations;
  }
}

/**
 * Each guarded subtree is compared child by child, skipping its harmless children: a replaced
 * ancestor (a whole new `spec`) counts only for the children whose values really differ. An
 * object that is not a record counts as empty, as an absent root member does.
 *
 * The RFC 6902 operations are computed only when read (nothing on the admission path reads them):
 * the diff was the largest part of classifying a request, and it can only find changes that the
 * child-by-child comparison finds too (webhook/domain/decide.test.ts holds the two together).
 */
export function detectGuardedChange(
  oldObject: unknown,
  newObject: unknown,
  guardedPointers: readonly GuardedPointer[],
): GuardedChange {
  const before = isRecord(oldObject) ? oldObject : {};
  const after = isRecord(newObject) ? newObject : {};
  const changed: string[] = [];
  for (const guarded of guardedPointers) {
    // Only pointers into a member of the object count (the diff of those members never saw others).
    if ((cachedPointerTokens(guarded.pointer)?.length ?? 0) === 0) continue;
    addChangedChildren(before, after, guarded, changed);
  }
  // One subtree's children are distinct already; only several subtrees can name one twice.
  const changedPointers = guardedPointers.length > 1 ? [...new Set(changed)] : changed;
  return new DetectedChange(changedPointers, before, after, guardedPointers);
}

/**
 * Diffs only the top-level members the guarded pointers live in (e.g. `spec`), so metadata such as
 * managedFields never costs diff time, and keeps the operations at, under or above a guarded
 * pointer whose subtree really changed, outside its harmless children.
 */
function guardedOperations(
  oldObject: Record<string, unknown>,
  newObject: Record<string, unknown>,
  guardedPointers: readonly GuardedPointer[],
): Operation[] {
  const roots = new Set<string>();
  for (const guarded of guardedPointers) {
    const first = cachedPointerTokens(guarded.pointer)?.[0];
    if (first !== undefined) roots.add(first);
  }
  const pick = (object: Record<string, unknown>): Record<string, unknown> => {
    const picked: Record<string, unknown> = {};
    for (const root of roots) {
      if (Object.prototype.hasOwnProperty.call(object, root) && object[root] !== undefined) picked[root] = object[root];
    }
    return picked;
  };
  const operations = createPatch(pick(oldObject), pick(newObject), wholeArrayDiff);
  const kept = new Set<Operation>();
  for (const guarded of guardedPointers) {
    if (changedChildren(oldObject, newObject, guarded).length === 0) continue;
    for (const operation of operations) {
      const paths = [operation.path, ...('from' in operation ? [operation.from] : [])];
      const touches = paths.some((path) => isAtOrUnder(path, guarded.pointer) || isAtOrUnder(guarded.pointer, path));
      if (touches && !guarded.harmless.some((child) => isAtOrUnder(operation.path, child.pointer))) kept.add(operation);
    }
  }
  return [...kept];
}
