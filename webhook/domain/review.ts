// AdmissionReview (admission.k8s.io/v1) in and out. Parsing never throws: anything that is not a
// well-formed review yields a message naming the bad field and the value received. Pure.
import { z } from 'zod';
import { describeValue, formatZodIssues } from '../../functions/shared/zod-issues.js';
import type { AdmissionRequest, AdmissionResponse, AdmissionReviewRequest, AdmissionReviewResponse } from './contract.js';

const groupVersionKind = z.object({ group: z.string(), version: z.string().min(1), kind: z.string().min(1) });
const groupVersionResource = z.object({ group: z.string(), version: z.string().min(1), resource: z.string().min(1) });

const userInfoSchema = z.object({
  username: z.string().optional(),
  uid: z.string().optional(),
  groups: z.array(z.string()).optional(),
  extra: z.record(z.string(), z.array(z.string())).optional(),
});

const admissionRequestSchema = z.object({
  uid: z.string().min(1, 'must be a non-empty string'),
  kind: groupVersionKind,
  resource: groupVersionResource,
  subResource: z.string().optional(),
  requestKind: groupVersionKind.optional(),
  requestResource: groupVersionResource.optional(),
  requestSubResource: z.string().optional(),
  name: z.string().optional(),
  namespace: z.string().optional(),
  operation: z.enum(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']),
  userInfo: userInfoSchema,
  object: z.unknown().optional(),
  oldObject: z.unknown().optional(),
  dryRun: z.boolean().optional(),
  options: z.unknown().optional(),
});

const admissionReviewSchema = z.object({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  request: admissionRequestSchema,
});

const MAX_VALUE_TEXT = 60;
const MAX_ISSUES_IN_MESSAGE = 3;

export type ParseAdmissionReviewResult = { ok: true; review: AdmissionReviewRequest } | { ok: false; message: string };

/** Validates an untrusted body as an AdmissionReview request; never throws. */
export function parseAdmissionReview(body: unknown): ParseAdmissionReviewResult {
  const fast = fastAdmissionRequest(body);
  if (fast !== null) return { ok: true, review: { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: fast } };
  return parseAdmissionReviewWithZod(body);
}

/** The zod schema alone: the reference the fast path must agree with, and every error message. */
export function parseAdmissionReviewWithZod(body: unknown): ParseAdmissionReviewResult {
  try {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return { ok: false, message: `body is not an AdmissionReview object (got ${describeValue(body, MAX_VALUE_TEXT)})` };
    }
    const result = admissionReviewSchema.safeParse(body);
    if (!result.success) {
      const issues = formatZodIssues(result.error, {
        input: body,
        maxValueChars: MAX_VALUE_TEXT,
        maxIssues: MAX_ISSUES_IN_MESSAGE,
      });
      return { ok: false, message: `invalid AdmissionReview: ${issues.join('; ')}` };
    }
    const request: AdmissionRequest = result.data.request;
    return { ok: true, review: { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request } };
  } catch (error) {
    // zod does not throw on safeParse, but hostile getters or proxies could; the server must answer 400, not crash.
    return { ok: false, message: `invalid AdmissionReview: ${error instanceof Error ? error.message : 'unreadable body'}` };
  }
}

/** Wraps a response in the AdmissionReview envelope the API server expects. */
export function buildAdmissionReviewResponse(response: AdmissionResponse): AdmissionReviewResponse {
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

// The fast path: the same schema checked by hand for the common case, a JSON object from the body
// parser (zod 3 spends ~45 µs per review, a fifth of a cached allow). It answers only when every
// field passes and otherwise returns null, so zod judges (and words) every doubtful body; its
// output is what zod's would be: known keys only, in schema order, fresh objects and arrays,
// object/oldObject/options passed through. test/review-fast-path.test.ts holds the two together.

type Plain = Record<string, unknown>;

/** A plain JSON-style object (what zod 3 calls "object"): no array, no class instance, no thenable. */
function plainObject(value: unknown): Plain | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return null;
  return value as Plain;
}

/**
 * Own keys present with undefined, or named __proto__, are zod's corner cases: left to zod. for-in
 * rather than Object.keys (an array per object, a tenth of a cached allow's garbage); it also
 * visits inherited enumerable keys, which only sends more bodies to zod, never fewer.
 */
function hasOddKey(object: Plain): boolean {
  for (const key in object) if (key === '__proto__' || object[key] === undefined) return true;
  return false;
}

function nonEmpty(value: unknown): value is string {
  return typeof value === 'string' && value.length >= 1;
}

// One function per shape, each with a literal: a computed key made every copy a slower object.
function fastKind(value: unknown): Plain | null {
  const object = plainObject(value);
  if (object === null || hasOddKey(object)) return null;
  const { group, version, kind } = object;
  if (typeof group !== 'string' || !nonEmpty(version) || !nonEmpty(kind)) return null;
  return { group, version, kind };
}

function fastResource(value: unknown): Plain | null {
  const object = plainObject(value);
  if (object === null || hasOddKey(object)) return null;
  const { group, version, resource } = object;
  if (typeof group !== 'string' || !nonEmpty(version) || !nonEmpty(resource)) return null;
  return { group, version, resource };
}

function stringArray(value: unknown): string[] | null {
  if (!Array.isArray(value)) return null;
  // Sized once: push grew a 17-slot store for the usual two groups.
  const copy = new Array<string>(value.length);
  for (let index = 0; index < value.length; index++) {
    const item: unknown = value[index];
    if (typeof item !== 'string') return null;
    copy[index] = item;
  }
  return copy;
}

function fastUserInfo(value: unknown): AdmissionRequest['userInfo'] | null {
  const object = plainObject(value);
  if (object === null || hasOddKey(object)) return null;
  const out: AdmissionRequest['userInfo'] = {};
  if ('username' in object) {
    if (typeof object.username !== 'string') return null;
    out.username = object.username;
  }
  if ('uid' in object) {
    if (typeof object.uid !== 'string') return null;
    out.uid = object.uid;
  }
  if ('groups' in object) {
    const groups = stringArray(object.groups);
    if (groups === null) return null;
    out.groups = groups;
  }
  if ('extra' in object) {
    const extra = plainObject(object.extra);
    if (extra === null || hasOddKey(extra)) return null;
    const copy: Record<string, string[]> = {};
    for (const key of Object.keys(extra)) {
      const values = stringArray(extra[key]);
      if (values === null) return null;
      copy[key] = values;
    }
    out.extra = copy;
  }
  return out;
}

/** Optional keys every UPDATE the apiserver sends has, /scale or not. */
const ALWAYS_SENT = ['requestKind', 'requestResource', 'name', 'namespace', 'object', 'oldObject', 'dryRun', 'options'] as const;

/**
 * The request as one literal, in the schema's key order, when the body has the keys the apiserver
 * sends for an UPDATE, with both subresource keys (/scale) or neither; null otherwise. Growing
 * the object key by key reallocated its property store four times per request. The values were
 * checked by the caller.
 */
function wholeRequest(
  input: Plain,
  kind: Plain,
  resource: Plain,
  requestKind: Plain | undefined,
  requestResource: Plain | undefined,
  userInfo: AdmissionRequest['userInfo'],
): Plain | null {
  for (const key of ALWAYS_SENT) if (!(key in input)) return null;
  const { uid, name, namespace, operation, object, oldObject, dryRun, options } = input;
  const viaSubresource = 'subResource' in input;
  if (viaSubresource !== 'requestSubResource' in input) return null;
  if (!viaSubresource) {
    return {
      uid,
      kind,
      resource,
      requestKind,
      requestResource,
      name,
      namespace,
      operation,
      userInfo,
      object,
      oldObject,
      dryRun,
      options,
    };
  }
  return {
    uid,
    kind,
    resource,
    subResource: input.subResource,
    requestKind,
    requestResource,
    requestSubResource: input.requestSubResource,
    name,
    namespace,
    operation,
    userInfo,
    object,
    oldObject,
    dryRun,
    options,
  };
}

const OPERATIONS: ReadonlySet<unknown> = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);
const OPTIONAL_STRINGS = ['subResource', 'requestSubResource', 'name', 'namespace'] as const;

/** The request of a well-formed review, exactly as zod would return it; null for anything else. */
function fastAdmissionRequest(body: unknown): AdmissionRequest | null {
  try {
    const review = plainObject(body);
    if (review === null || review.apiVersion !== 'admission.k8s.io/v1' || review.kind !== 'AdmissionReview') return null;
    const input = plainObject(review.request);
    if (input === null || hasOddKey(input) || !nonEmpty(input.uid) || !OPERATIONS.has(input.operation)) return null;
    const kind = fastKind(input.kind);
    const resource = fastResource(input.resource);
    const requestKind = 'requestKind' in input ? fastKind(input.requestKind) : undefined;
    const requestResource = 'requestResource' in input ? fastResource(input.requestResource) : undefined;
    const userInfo = fastUserInfo(input.userInfo);
    if (kind === null || resource === null || requestKind === null || requestResource === null || userInfo === null) return null;
    for (const key of OPTIONAL_STRINGS) if (key in input && typeof input[key] !== 'string') return null;
    if ('dryRun' in input && typeof input.dryRun !== 'boolean') return null;
    const whole = wholeRequest(input, kind, resource, requestKind, requestResource, userInfo);
    if (whole !== null) return whole as unknown as AdmissionRequest;
    // Built in the schema's key order, each optional key only when the body has it (no closure
    // for this: one per request was garbage of its own).
    const out: Plain = { uid: input.uid, kind, resource };
    if ('subResource' in input) out.subResource = input.subResource;
    if ('requestKind' in input) out.requestKind = requestKind;
    if ('requestResource' in input) out.requestResource = requestResource;
    if ('requestSubResource' in input) out.requestSubResource = input.requestSubResource;
    if ('name' in input) out.name = input.name;
    if ('namespace' in input) out.namespace = input.namespace;
    out.operation = input.operation;
    out.userInfo = userInfo;
    if ('object' in input) out.object = input.object;
    if ('oldObject' in input) out.oldObject = input.oldObject;
    if ('dryRun' in input) out.dryRun = input.dryRun;
    if ('options' in input) out.options = input.options;
    return out as unknown as AdmissionRequest;
  } catch {
    // A hostile getter or proxy: zod's path catches and words it.
    return null;
  }
}
