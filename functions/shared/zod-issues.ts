// zod issues as the one-line messages every parser of untrusted input reports:
// "field.path: message (got VALUE)", the field named from the root of what was parsed.
import type { ZodError } from 'zod';

export interface IssueFormatOptions {
  /**
   * The value that was parsed. When given (even as undefined), each line ends with the rejected
   * value, "(got ...)", cut to `maxValueChars`; leave it out where echoing values adds nothing.
   */
  input?: unknown;
  /** Longest echoed value before it is cut with "...". */
  maxValueChars?: number;
  /** At most this many lines; a last line "and N more" counts the rest. */
  maxIssues?: number;
}

const DEFAULT_MAX_VALUE_CHARS = 80;

/** The value at `path` inside `root`, or undefined where the path leaves the object. */
function valueAt(root: unknown, path: readonly (string | number)[]): unknown {
  let current: unknown = root;
  for (const part of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string | number, unknown>)[part];
  }
  return current;
}

/** JSON of a rejected value, cut to `maxChars`; never throws (hostile input may not serialise). */
export function describeValue(value: unknown, maxChars: number = DEFAULT_MAX_VALUE_CHARS): string {
  if (value === undefined) return 'missing';
  try {
    const text = JSON.stringify(value);
    if (text === undefined) return typeof value;
    return text.length > maxChars ? `${text.slice(0, maxChars - 3)}...` : text;
  } catch {
    return typeof value;
  }
}

/** One line per zod issue: "field.path: message", plus " (got VALUE)" when `input` is given. */
export function formatZodIssues(error: ZodError, options: IssueFormatOptions = {}): string[] {
  const echo = 'input' in options;
  const shown = options.maxIssues === undefined ? error.issues : error.issues.slice(0, options.maxIssues);
  const lines = shown.map((issue) => {
    const field = issue.path.length > 0 ? issue.path.join('.') : '(root)';
    if (!echo) return `${field}: ${issue.message}`;
    return `${field}: ${issue.message} (got ${describeValue(valueAt(options.input, issue.path), options.maxValueChars)})`;
  });
  const more = error.issues.length - shown.length;
  return more > 0 ? [...lines, `and ${more} more`] : lines;
}
