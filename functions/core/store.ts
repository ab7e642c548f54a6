// What every evaluation store (file, ConfigMap) offers. Adapters implement it and turn their
// library's errors into StoreError, so callers never see a Kubernetes or fs error shape.
import { evaluationSchema, parseEvaluationJson, type Evaluation } from './evaluation.js';
import { formatZodIssues } from '../shared/zod-issues.js';

export type WriteOutcome =
  | { written: true }
  /** The store already held an evaluation at least as new; it was kept. */
  | { written: false; keptEvaluatedAt: string };

export interface EvaluationStore {
  /** The stored evaluation for a target, or null when there is none. Throws StoreError. */
  read(target: string): Promise<Evaluation | null>;
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
  evaluations: Evaluation[];
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
