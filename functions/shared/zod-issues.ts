// zod issues as the one-line messages every parser of untrusted input reports:
// "field.path: message (got VALUE)", the field named from the root of what was parsed.
import type { ZodError } from 'zod';
import { redactUrlUserinfo } from './redact.js';

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
  /**
   * The input is untrusted content (a stored document): zod messages that quote what was received
   * (enum values, unknown keys) are replaced by ones that describe it.
   */
  untrusted?: boolean;
}

type ZodIssue = ZodError['issues'][number];

const DEFAULT_MAX_VALUE_CHARS = 80;

/** The value at `path` inside `root`, or undefined where the path leaves the object. */
function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let current: unknown = root;
  for (const part of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[part];
  }
  return current;
}

/**
 * JSON of a rejected value, cut to `maxChars`, URL credentials redacted; never throws (hostile
 * input may not serialise).
 */
export function describeValue(value: unknown, maxChars: number = DEFAULT_MAX_VALUE_CHARS): string {
  if (value === undefined) return 'missing';
  try {
    const serialised = JSON.stringify(value);
    const text = serialised === undefined ? undefined : redactUrlUserinfo(serialised);
    if (text === undefined) return typeof value;
    return text.length > maxChars ? `${text.slice(0, maxChars - 3)}...` : text;
  } catch {
    return typeof value;
  }
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length} items`;
  if (typeof value === 'string') return `a string of ${value.length} characters`;
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** The issue's message, without the received value when the input is untrusted. */
function issueMessage(issue: ZodIssue, untrusted: boolean): string {
  if (!untrusted) return issue.message;
  if (issue.code === 'invalid_value') return `not one of ${issue.values.map((value) => describeValue(value)).join(' | ')}`;
  if (issue.code === 'unrecognized_keys') return `${issue.keys.length} unrecognized key(s)`;
  return issue.message;
}

/**
 * One line per zod issue: "field.path: message", plus " (got VALUE)" when `input` is given and
 * the field is not the root (a whole document echoed back would quote a file that is not what it
 * claims to be, e.g. a link to a secret).
 */
export function formatZodIssues(error: ZodError, options: IssueFormatOptions = {}): string[] {
  const echo = 'input' in options && options.untrusted !== true;
  const shown = options.maxIssues === undefined ? error.issues : error.issues.slice(0, options.maxIssues);
  const lines = shown.map((issue) => {
    const field = issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
    const message = issueMessage(issue, options.untrusted === true);
    if (!echo) return `${field}: ${message}`;
    const got =
      issue.path.length > 0 ? describeValue(valueAt(options.input, issue.path), options.maxValueChars) : typeOf(options.input);
    return `${field}: ${message} (got ${got})`;
  });
  const more = error.issues.length - shown.length;
  return more > 0 ? [...lines, `and ${more} more`] : lines;
}
