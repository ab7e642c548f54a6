// Which guarded fields a request changes: an RFC 6902 diff of oldObject → object, keeping only
// operations at or under a guarded JSON pointer. Pure.
import { createPatch, type Operation } from 'rfc6902';
import type { Pointer } from 'rfc6902';

export interface GuardedChange {
  /** The guarded pointers (as given) whose value differs between oldObject and object. */
  changedPointers: string[];
  /** The diff operations that touched guarded fields (for messages and tests). */
  operations: Operation[];
}

export function unescapePointerToken(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Splits an RFC 6901 pointer ("" or "/a/b") into unescaped tokens; null if it is not a pointer. */
export function pointerTokens(pointer: string): string[] | null {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) return null;
  return pointer.slice(1).split('/').map(unescapePointerToken);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The value at `pointer` in `document`, or undefined when any step is missing. */
export function valueAtPointer(document: unknown, pointer: string): unknown {
  const tokens = pointerTokens(pointer);
  if (tokens === null) return undefined;
  let current: unknown = document;
  for (const token of tokens) {
    if (Array.isArray(current)) {
      if (!/^(0|[1-9]\d*)$/.test(token)) return undefined;
      current = current[Number(token)];
    } else if (isRecord(current)) {
      if (!Object.prototype.hasOwnProperty.call(current, token)) return undefined;
      current = current[token];
    } else {
      return undefined;
    }
  }
  return current;
}

/** Structural equality of JSON values (undefined-valued keys count as absent, as in JSON). */
export function jsonEqual(left: unknown, right: unknown): boolean {
  if (left === right) return true;
  if (Array.isArray(left) || Array.isArray(right)) {
    if (!Array.isArray(left) || !Array.isArray(right) || left.length !== right.length) return false;
    return left.every((item, index) => jsonEqual(item, right[index]));
  }
  if (isRecord(left) && isRecord(right)) {
    const leftKeys = Object.keys(left).filter((key) => left[key] !== undefined);
    const rightKeys = Object.keys(right).filter((key) => right[key] !== undefined);
    if (leftKeys.length !== rightKeys.length) return false;
    return leftKeys.every((key) => Object.prototype.hasOwnProperty.call(right, key) && jsonEqual(left[key], right[key]));
  }
  return false;
}

/** True when `path` is `pointer` itself or lies under it (`/spec/replicasX` is not under `/spec/replicas`). */
export function isAtOrUnder(path: string, pointer: string): boolean {
  return path === pointer || path.startsWith(`${pointer}/`);
}

/**
 * Arrays are compared whole: rfc6902's element-wise Levenshtein walk is quadratic in the array
 * lengths times the cost of comparing elements (measured: 2.9 s for 99 reordered 4 KB elements),
 * and no guarded pointer points inside an array, so "this array changed" is all that matters.
 */
function wholeArrayDiff(input: unknown, output: unknown, pointer: Pointer): Operation[] | void {
  if (Array.isArray(input) && Array.isArray(output)) {
    return jsonEqual(input, output) ? [] : [{ op: 'replace', path: pointer.toString(), value: output }];
  }
  return undefined;
}

/**
 * Diffs only the top-level members the guarded pointers live in (e.g. `spec`), so metadata such as
 * managedFields never costs diff time, then keeps the guarded operations.
 */
export function detectGuardedChange(oldObject: unknown, newObject: unknown, guardedPointers: readonly string[]): GuardedChange {
  const roots = new Set<string>();
  for (const pointer of guardedPointers) {
    const first = pointerTokens(pointer)?.[0];
    if (first !== undefined) roots.add(first);
  }
  const pick = (object: unknown): Record<string, unknown> => {
    const picked: Record<string, unknown> = {};
    if (isRecord(object)) {
      for (const root of roots) {
        if (Object.prototype.hasOwnProperty.call(object, root) && object[root] !== undefined) picked[root] = object[root];
      }
    }
    return picked;
  };
  const operations = createPatch(pick(oldObject), pick(newObject), wholeArrayDiff);

  const changed = new Set<string>();
  const guardedOperations: Operation[] = [];
  for (const operation of operations) {
    const touched = [operation.path, ...('from' in operation ? [operation.from] : [])];
    let counted = false;
    for (const pointer of guardedPointers) {
      for (const path of touched) {
        if (isAtOrUnder(path, pointer)) {
          changed.add(pointer);
          counted = true;
        } else if (isAtOrUnder(pointer, path)) {
          // The op replaced an ancestor (e.g. a whole `spec`); the pointer changed only if its own value did.
          if (!jsonEqual(valueAtPointer(oldObject, pointer), valueAtPointer(newObject, pointer))) {
            changed.add(pointer);
            counted = true;
          }
        }
      }
    }
    if (counted) guardedOperations.push(operation);
  }
  return {
    changedPointers: guardedPointers.filter((pointer) => changed.has(pointer)),
    operations: guardedOperations,
  };
}
