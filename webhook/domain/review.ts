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
