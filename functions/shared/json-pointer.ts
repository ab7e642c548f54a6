// RFC 6901 JSON pointers over untrusted JSON: read a value, compare two values. Pure; the
// webhook's change detection and the controller kinds (which read their objects' fields) share it.

export function unescapePointerToken(token: string): string {
  // Nearly every token has no escape; two regex replaces each were a visible share of a request.
  if (!token.includes('~')) return token;
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

/**
 * pointerTokens of the pointers the rules and the projection ask for, split once: they are a
 * handful of constants, looked up several times per admission request. Bounded all the same.
 */
const TOKENS_KEPT = 256;
const tokensByPointer = new Map<string, readonly string[] | null>();

export function cachedPointerTokens(pointer: string): readonly string[] | null {
  const known = tokensByPointer.get(pointer);
  if (known !== undefined) return known;
  if (tokensByPointer.size >= TOKENS_KEPT) tokensByPointer.clear();
  const tokens = pointerTokens(pointer);
  tokensByPointer.set(pointer, tokens);
  return tokens;
}

/** The value at `pointer` in `document`, or undefined when any step is missing. */
export function valueAtPointer(document: unknown, pointer: string): unknown {
  const tokens = cachedPointerTokens(pointer);
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
