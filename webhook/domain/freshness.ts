// Whether an evaluation is fresh enough to judge a change by, and what the server should do when
// it is not: use it as it is, or refresh inline within the apiserver's budget. Pure: the server
// does the refresh and the metrics; the rules live here once.
import { epochMs, evaluatedAtMs, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { MAX_CLOCK_SKEW_MS } from '../../functions/domain/store.js';

/** Time an inline refresh must leave for the apiserver after the evaluation's own timeout. */
export const INLINE_REFRESH_MARGIN_MS = 1_000;

export type Freshness =
  | { fresh: true; evaluation: Evaluation; ageMs: number }
  /** `why` completes "no fresh etcd evaluation for <target> (...)". */
  | { fresh: false; reason: 'missing' | 'stale'; why: string };

function formatSeconds(ms: number): string {
  return `${Math.round(ms / 1000)}s`;
}

/** `now` may be a Date or milliseconds since the epoch (Date.now()): the same judgement. */
export function judgeFreshness(evaluation: Evaluation | null, now: Date | number, maxAgeSeconds: number): Freshness {
  if (evaluation === null) return { fresh: false, reason: 'missing', why: 'none stored' };
  // The age (evaluationAgeMs) clamps clock skew to 0, so an evaluation stamped in the future would
  // look fresh until that time: beyond a small allowance for clock skew it does not count at all.
  const aheadMs = evaluatedAtMs(evaluation.evaluatedAt) - epochMs(now);
  if (aheadMs > MAX_CLOCK_SKEW_MS) {
    return { fresh: false, reason: 'stale', why: `evaluated ${formatSeconds(aheadMs)} in the future; clock skew?` };
  }
  const ageMs = Math.max(0, -aheadMs);
  if (!Number.isFinite(ageMs) || ageMs > maxAgeSeconds * 1000) {
    return { fresh: false, reason: 'stale', why: `age ${formatSeconds(ageMs)}, max ${maxAgeSeconds}s` };
  }
  return { fresh: true, evaluation, ageMs };
}

export interface EvaluationChoiceInput {
  cached: Evaluation | null;
  /** A Date or milliseconds since the epoch. */
  now: Date | number;
  maxAgeSeconds: number;
  inlineRefresh: boolean;
  /** What is left of the apiserver's budget for this request. */
  remainingMs: number;
  /** The target's evaluation timeout. */
  evaluationTimeoutMs: number;
}

export type EvaluationChoice =
  /** Decide with `evaluation` (fresh, or the best there is, with a note why no fresh one). */
  | { kind: 'use'; evaluation: Evaluation | null; refreshNote?: string; skippedRefresh?: true }
  /** Evaluate now, within `timeoutMs`, so the answer still reaches the apiserver. */
  | { kind: 'refresh'; timeoutMs: number };

/**
 * The cached evaluation when fresh; otherwise an inline refresh when it is on and the remaining
 * budget leaves a margin after the evaluation's timeout; otherwise the cached one with a note.
 */
export function chooseEvaluation(input: EvaluationChoiceInput): EvaluationChoice {
  if (judgeFreshness(input.cached, input.now, input.maxAgeSeconds).fresh) return { kind: 'use', evaluation: input.cached };
  if (!input.inlineRefresh) return { kind: 'use', evaluation: input.cached, refreshNote: 'inline refresh is disabled' };
  const allowanceMs = input.remainingMs - INLINE_REFRESH_MARGIN_MS;
  if (allowanceMs < input.evaluationTimeoutMs) {
    return {
      kind: 'use',
      evaluation: input.cached,
      skippedRefresh: true,
      refreshNote: `inline refresh skipped: apiserver budget ${(input.remainingMs / 1000).toFixed(1)}s cannot fit the ${(input.evaluationTimeoutMs / 1000).toFixed(1)}s evaluation plus a 1s margin`,
    };
  }
  return { kind: 'refresh', timeoutMs: Math.round(allowanceMs) };
}
