// What every evaluation store (file, ConfigMap) offers. Adapters implement it and turn their
// library's errors into StoreError, so callers never see a Kubernetes or fs error shape.
import {
  FORMAT_REVISION,
  evaluationSchema,
  formatRevisionOf,
  parseEvaluationJson,
  type Evaluation,
} from './evaluation-document.js';
import { formatZodIssues } from '../shared/zod-issues.js';

export type WriteOutcome =
  /**
   * `stampCorrectedByMs`: the writer's clock was that far ahead of the store's (negative: behind),
   * so the evaluation was stored with its stamp moved onto the store's clock (see writeDecision).
   */
  | { written: true; stampCorrectedByMs?: number }
  /** The store already held an evaluation at least as new; it was kept. */
  | { written: false; keptEvaluatedAt: string };

/**
 * A stored evaluation with the store's write sequence: 1 for the first write of a target, +1 for
 * each accepted write after it, so a higher sequence was written later whatever the stamps say.
 * 0 for a document written before stores kept sequences.
 */
export interface SequencedEvaluation {
  evaluation: Evaluation;
  sequence: number;
}

export interface EvaluationStore {
  /** The stored evaluation for a target, or null when there is none. Throws StoreError. */
  read(target: string): Promise<Evaluation | null>;
  /** As read, with the write sequence. Optional: a store without it orders by the clock rules alone. */
  readSequenced?(target: string): Promise<SequencedEvaluation | null>;
  /** Writes unless the store holds a newer evaluation for the same target. Throws StoreError. */
  write(evaluation: Evaluation): Promise<WriteOutcome>;
  /** Human-readable location, e.g. "file:/var/lib/etcd-guard" or "configmap:etcd-guard". */
  describe(): string;
  /**
   * Every stored evaluation in one read, whatever the target names (discovered targets have names
   * nobody configured). Optional: a store without it is read target by target. Throws StoreError.
   */
  readAll?(): Promise<StoredEvaluations>;
}

export interface StoredEvaluations {
  evaluations: SequencedEvaluation[];
  /** Stored documents that could not be used, e.g. a corrupt evaluation.json; one line each. */
  problems: string[];
}

export type StoreErrorKind = 'corrupt' | 'forbidden' | 'too-large' | 'conflict' | 'unavailable' | 'invalid';

export class StoreError extends Error {
  constructor(
    readonly kind: StoreErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StoreError';
  }
}

/** Why a store refuses to write `evaluation` (kind 'invalid', naming each bad field), or null when it is valid. */
export function invalidEvaluationError(evaluation: unknown): StoreError | null {
  const checked = evaluationSchema.safeParse(evaluation);
  if (checked.success) return null;
  return new StoreError('invalid', `refusing to store an invalid evaluation: ${formatZodIssues(checked.error).join('; ')}`);
}

/**
 * How far into the future an evaluation's stamp may be and still count as "now": the CronJob and
 * the webhook run on different nodes whose clocks drift a little. Beyond this, the stamp is a lie
 * (a skewed writer clock) and the evaluation never wins over a present one, nor counts as fresh.
 */
export const MAX_CLOCK_SKEW_MS = 5_000;

/**
 * Newest wins, judged by a clock the writer does not control: `now` is the clock of whoever
 * compares (the store's writer at write time, the webhook at read time). A store replaces what it
 * holds only with a strictly newer evaluation, so a slow writer finishing late never rolls the
 * result back (equal times keep the stored one). A stamp beyond now + MAX_CLOCK_SKEW_MS is a
 * skewed clock, not news: such an evaluation never wins over a present one, and a present one
 * replaces it, except that an Unhealthy verdict is never replaced by an older-stamped healthier
 * one (failing closed beats trusting either clock).
 */
export function supersedes(candidate: Evaluation, stored: Evaluation, now: Date): boolean {
  const candidateAt = Date.parse(candidate.evaluatedAt);
  const storedAt = Date.parse(stored.evaluatedAt);
  const presentUntil = now.getTime() + MAX_CLOCK_SKEW_MS;
  const candidateFromFuture = candidateAt > presentUntil;
  const storedFromFuture = storedAt > presentUntil;
  if (candidateFromFuture && !storedFromFuture) return false;
  if (storedFromFuture && !candidateFromFuture) return stored.verdict !== 'Unhealthy' || candidate.verdict === 'Unhealthy';
  return candidateAt > storedAt;
}

/**
 * Which of two stored documents wins, `held` being the one a reader (the webhook's cache) has and
 * `candidate` one it reads now; either may lack a sequence (an inline refresh held in memory). A
 * higher sequence was written later, and the store only accepted it because it superseded what it
 * held then, so it replaces `held` even when the reader's clock would rank the stamps otherwise;
 * except that an Unhealthy evaluation is never replaced by an older-stamped healthier one. Without
 * two sequences to compare, or when the candidate's is not higher (a recreated ConfigMap starts at
 * 1 again), the clock rules of supersedes decide.
 */
export function storedSupersedes(
  candidate: { evaluation: Evaluation; sequence?: number },
  held: { evaluation: Evaluation; sequence?: number },
  now: Date,
): boolean {
  if (candidate.sequence !== undefined && held.sequence !== undefined && candidate.sequence > held.sequence) {
    const olderHealthierOverUnhealthy =
      held.evaluation.verdict === 'Unhealthy' &&
      candidate.evaluation.verdict !== 'Unhealthy' &&
      Date.parse(candidate.evaluation.evaluatedAt) < Date.parse(held.evaluation.evaluatedAt);
    return !olderHealthierOverUnhealthy;
  }
  return supersedes(candidate.evaluation, held.evaluation, now);
}

/**
 * The largest write sequence a reader accepts: sequences are decimal text (annotation, JSON) of at
 * most 15 digits, so they stay below 2^53 and +1 is exact. Writers and readers share this one rule.
 */
export const MAX_SEQUENCE = 999_999_999_999_999;
const SEQUENCE_PATTERN = /^(0|[1-9][0-9]{0,14})$/;

/**
 * The sequence a writer stores after `stored`: +1, wrapping to 1 past MAX_SEQUENCE (a forged or
 * very old count), so a writer never produces a value its own readers refuse. After a wrap,
 * readers order by the stamps, as for a recreated document (see storedSupersedes).
 */
export function nextSequence(stored: number): number {
  return Number.isSafeInteger(stored) && stored >= 0 && stored < MAX_SEQUENCE ? stored + 1 : 1;
}

/**
 * What a writer stores, judged by the store's clock when it knows one (the API server's Date
 * header, the filesystem's mtime): `storeNowMs`. A writer whose own clock (`writerNowMs`) is off
 * by more than MAX_CLOCK_SKEW_MS stamped its evaluation wrong by that much: stored as is, it would
 * look stale or from the future to every reader and displace a fresh, present evaluation. Its
 * verdict is still the newest truth, so the stamp is moved onto the store's clock and the usual
 * newest-wins rule then decides against the stored document by that clock. Without a store clock,
 * the writer's clock decides, as before.
 */
export function writeDecision(
  candidate: Evaluation,
  stored: Evaluation | null,
  clocks: { writerNowMs: number; storeNowMs?: number | undefined },
): { write: false } | { write: true; evaluation: Evaluation; stampCorrectedByMs?: number } {
  const { writerNowMs, storeNowMs } = clocks;
  let evaluation = candidate;
  let correction: number | undefined;
  if (storeNowMs !== undefined && Number.isFinite(storeNowMs)) {
    const errorMs = Math.round(writerNowMs - storeNowMs);
    if (Math.abs(errorMs) > MAX_CLOCK_SKEW_MS) {
      const corrected = Date.parse(candidate.evaluatedAt) - errorMs;
      if (Number.isFinite(corrected) && corrected > 0) {
        evaluation = { ...candidate, evaluatedAt: new Date(corrected).toISOString() };
        correction = errorMs;
      }
    }
  }
  const now = new Date(storeNowMs !== undefined && Number.isFinite(storeNowMs) ? storeNowMs : writerNowMs);
  if (stored !== null && !supersedes(evaluation, stored, now)) return { write: false };
  if (stored !== null && keepsNewerFormat(evaluation, stored, now)) return { write: false };
  evaluation = withCarriedMemory(evaluation, stored);
  return correction === undefined ? { write: true, evaluation } : { write: true, evaluation, stampCorrectedByMs: correction };
}

/**
 * What the stored evaluation remembers and the candidate does not know (its writer could not read
 * the stored one in time): carried into the write, so a slow read never erases it. Done under the
 * write's own precondition, where the stored document is the one being replaced.
 */
function withCarriedMemory(candidate: Evaluation, stored: Evaluation | null): Evaluation {
  if (stored === null) return candidate;
  let carried = candidate;
  if (carried.lastMembership === undefined && stored.lastMembership !== undefined) {
    carried = { ...carried, lastMembership: stored.lastMembership };
  }
  if (carried.clusterIdPin === undefined && stored.clusterIdPin !== undefined) {
    carried = { ...carried, clusterIdPin: stored.clusterIdPin };
  }
  return carried;
}

/**
 * The write sequence stored as `value` (an annotation's text or a JSON field): 0 when absent (a
 * document from before sequences), else a 'corrupt' StoreError naming `where` and the value.
 */
export function parseSequence(value: unknown, where: string): number | StoreError {
  if (value === undefined) return 0;
  const text = typeof value === 'number' ? String(value) : value;
  if (typeof text === 'string' && SEQUENCE_PATTERN.test(text)) return Number(text);
  const shown =
    typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : typeof value === 'number' ? String(value) : typeof value;
  return new StoreError('corrupt', `${where} has write sequence ${shown}, not a whole number below 10^15; not using it`);
}

/**
 * How long a document from a newer format revision is kept from an older writer. During a rolling
 * upgrade both writers run; the newer one judges with checks the older lacks, so the older must not
 * replace its verdict with a laxer one. After this long without a newer write (the upgrade was
 * rolled back), the older writer takes over rather than leave the target without fresh evaluations.
 */
export const NEWER_FORMAT_HOLD_MS = 10 * 60_000;

/**
 * True when `candidate`, from an older format revision than `stored`, must not replace it: the
 * stored one is fresh by `now` and the candidate would not fail closed (an Unhealthy verdict from
 * any writer is always safe to store).
 */
export function keepsNewerFormat(candidate: Evaluation, stored: Evaluation, now: Date): boolean {
  if (formatRevisionOf(stored) <= Math.max(FORMAT_REVISION, formatRevisionOf(candidate))) return false;
  if (candidate.verdict === 'Unhealthy') return false;
  return now.getTime() - Date.parse(stored.evaluatedAt) < NEWER_FORMAT_HOLD_MS;
}

/**
 * The evaluation a store holds for `target`, or a 'corrupt' StoreError saying exactly what is
 * wrong with it (not an evaluation, or another target's). `source` names the text in parse
 * errors; `holder` names the place (file, ConfigMap) in the wrong-target error.
 */
export function parseStoredEvaluation(
  text: string,
  target: string,
  place: { source: string; holder: string },
): Evaluation | StoreError {
  let evaluation: Evaluation;
  try {
    evaluation = parseEvaluationJson(text, place.source);
  } catch (error) {
    return new StoreError('corrupt', `${(error as Error).message}; not using it`, { cause: error });
  }
  if (evaluation.target !== target) {
    return new StoreError(
      'corrupt',
      `${place.holder} holds an evaluation of target ${JSON.stringify(evaluation.target)}, not ${JSON.stringify(target)}; not using it`,
    );
  }
  return evaluation;
}
