// What a decision rests on (SPEC "Decision", step 3): an allow rests on what etcd says now, an
// evaluation of the target that started at most decisionMaxAgeMs before the request arrived; the
// server evaluates inline within the apiserver's budget when it has none. Only where no live
// evaluation can run may the cached one decide, within maxAgeSeconds (judgeFreshness), and then
// the answer says so. Pure: the server does the evaluation and the metrics; the rules live here once.
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

/**
 * Whether `evaluation` is live evidence for a request that arrived at `arrivedAtMs`: it started
 * (evaluatedAt is the moment an evaluation starts reaching etcd) at most `decisionMaxAgeMs`
 * before the request arrived, and not after `nowMs` (a stamp from a clock ahead of ours, e.g.
 * another replica's, says nothing about when it really started).
 */
export function isLiveEvidence(
  evaluation: Pick<Evaluation, 'evaluatedAt'> | null,
  arrivedAtMs: number,
  decisionMaxAgeMs: number,
  nowMs: number,
): boolean {
  if (evaluation === null) return false;
  const startedMs = evaluatedAtMs(evaluation.evaluatedAt);
  return startedMs >= arrivedAtMs - decisionMaxAgeMs && startedMs <= nowMs;
}

/**
 * What an allow rests on. `live`: an evaluation that started within decisionMaxAgeMs of the
 * request. `cached`: no live one could run (`why`), so the cached evaluation decides within
 * maxAgeSeconds and the answer says so. `failed`: a live evaluation was due and did not come
 * (`why`): nothing older may stand in for it.
 */
export type Evidence =
  { kind: 'live' } | { kind: 'cached'; why: string; decisionMaxAgeMs: number } | { kind: 'failed'; why: string };

export interface EvaluationChoiceInput {
  cached: Evaluation | null;
  /** Wall-clock milliseconds since the epoch: when the request arrived, and now. */
  arrivedAtMs: number;
  nowMs: number;
  decisionMaxAgeMs: number;
  /** `cached`: the webhook cannot reach etcd, never evaluate inline. */
  decision: 'live' | 'cached';
  /** What is left of the apiserver's budget for this request. */
  remainingMs: number;
  /** The target's evaluation timeout. */
  evaluationTimeoutMs: number;
}

export type EvaluationChoice =
  /** Decide with `evaluation` on `evidence` (live, or cached with why no live one ran). */
  | { kind: 'use'; evaluation: Evaluation | null; evidence: Evidence; skippedRefresh?: true }
  /**
   * Evaluate now, within `timeoutMs`, so the answer still reaches the apiserver; an evaluation in
   * flight may be shared only if it started at or after `notBeforeMs`.
   */
  | { kind: 'refresh'; timeoutMs: number; notBeforeMs: number };

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

/**
 * The cached evaluation when it is live evidence; otherwise a live evaluation inline when the
 * target may reach etcd and the remaining budget leaves the margin after the evaluation's
 * timeout; otherwise the cached one, as cached evidence saying why no live one ran.
 */
export function chooseEvaluation(input: EvaluationChoiceInput): EvaluationChoice {
  const { cached, decisionMaxAgeMs } = input;
  if (isLiveEvidence(cached, input.arrivedAtMs, decisionMaxAgeMs, input.nowMs)) {
    return { kind: 'use', evaluation: cached, evidence: { kind: 'live' } };
  }
  if (input.decision === 'cached') {
    return {
      kind: 'use',
      evaluation: cached,
      evidence: { kind: 'cached', why: 'the target is configured with decision: cached', decisionMaxAgeMs },
    };
  }
  const allowanceMs = input.remainingMs - INLINE_REFRESH_MARGIN_MS;
  if (allowanceMs < input.evaluationTimeoutMs) {
    const why = `no live evaluation: apiserver budget ${seconds(input.remainingMs)} cannot fit the ${seconds(input.evaluationTimeoutMs)} evaluation plus a 1s margin`;
    return { kind: 'use', evaluation: cached, evidence: { kind: 'cached', why, decisionMaxAgeMs }, skippedRefresh: true };
  }
  return { kind: 'refresh', timeoutMs: Math.round(allowanceMs), notBeforeMs: input.arrivedAtMs - decisionMaxAgeMs };
}
