// Reading fields of JSON nobody vouches for (a listed object, an AdmissionReview's object): a
// value of the wrong shape reads as absent instead of throwing, so the caller decides what a
// missing field means and names it. Pure; both deployables use it.

export type Json = Record<string, unknown>;

/** `value` when it is a plain JSON object, else an empty one (arrays and null are not objects). */
export function record(value: unknown): Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {};
}

/** `value` when it is a non-empty string, else absent. */
export function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** The value at `path` below `object`, absent where any step is not an object. */
export function at(object: unknown, ...path: string[]): unknown {
  let current: unknown = object;
  for (const key of path) current = record(current)[key];
  return current;
}
