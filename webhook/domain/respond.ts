// Every admission response the webhook sends is built here: allowed (with warnings), denied
// (403 Forbidden, one bounded line), or denied because the webhook itself failed (500, fail
// closed). The decision core and the express app both use these, so limits and shapes live once.
import type { AdmissionResponse, Classification, Decision } from './contract.js';

/** The API server truncates long warnings; keep each well under its limit and on one line. */
export const MAX_WARNING_LENGTH = 119;
/** Stored evaluations are untrusted input: a denial message and the warnings as a whole are bounded. */
export const MAX_MESSAGE_LENGTH = 1024;
export const MAX_WARNINGS = 10;

export function oneLine(text: string): string {
  return text
    .replace(/[\r\n\t\u2028\u2029]+/g, ' ')
    .replace(/ {2,}/g, ' ')
    .trim();
}

export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 3)}...` : text;
}

export function shortWarning(text: string): string {
  return clip(oneLine(text), MAX_WARNING_LENGTH);
}

/** Metric labels must stay a small set; free-text reasons collapse into one word. */
export function metricReason(reason: string, fallback: string): string {
  return /^[a-z0-9][a-z0-9-]{0,39}$/.test(reason) ? reason : fallback;
}

/**
 * An allow. `moreWarnings` says where the warnings cut beyond MAX_WARNINGS can all be read, since
 * nothing is cut without saying so.
 */
export function allowDecision(uid: string, reason: string, warnings: readonly string[] = [], moreWarnings = ''): Decision {
  const response: AdmissionResponse = { uid, allowed: true };
  if (warnings.length === 0) return { response, result: 'allowed', reason: metricReason(reason, 'allowed') };
  const unique = [...new Set(warnings.map(shortWarning).filter((warning) => warning !== ''))];
  if (unique.length > MAX_WARNINGS) {
    const cut = unique.length - MAX_WARNINGS + 1;
    unique.splice(MAX_WARNINGS - 1, unique.length, `(+${cut} more warnings${moreWarnings ? `: ${moreWarnings}` : ''})`);
  }
  if (unique.length > 0) response.warnings = unique;
  return { response, result: 'allowed', reason: metricReason(reason, 'allowed') };
}

/** A denial: 403 Forbidden with one bounded line, which kubectl shows after "denied the request:". */
export function denyDecision(uid: string, reason: string, message: string): Decision {
  const response: AdmissionResponse = {
    uid,
    allowed: false,
    status: { code: 403, reason: 'Forbidden', message: clip(oneLine(message), MAX_MESSAGE_LENGTH) },
  };
  return { response, result: 'denied', reason: metricReason(reason, 'denied') };
}

/** The answer to a request the classification settles without an evaluation. */
export function classificationDecision(
  uid: string,
  classification: Extract<Classification, { kind: 'allow' | 'deny' }>,
): Decision {
  if (classification.kind === 'allow') return allowDecision(uid, metricReason(classification.reason, 'not-guarded'));
  return denyDecision(uid, classification.reason, classification.message);
}

/** The webhook could not decide (a bug, an exception): deny, saying so (fail closed). */
export function failClosedResponse(uid: string, message: string): AdmissionResponse {
  return {
    uid,
    allowed: false,
    status: {
      code: 500,
      reason: 'InternalError',
      message: clip(oneLine(`etcd-guard could not decide and denies the change (fail closed): ${message}`), MAX_MESSAGE_LENGTH),
    },
  };
}
