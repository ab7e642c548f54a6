// The scheduled evaluation: every configured target, a bounded number at a time, each result
// written to the store and logged as one structured line. One sick target (or a store outage)
// never stops the others and never throws: an evaluate error (even a target's unreadable TLS file),
// a hang past the outer deadline or a store error becomes that target's result and an error line.
// Loading the config is the entrypoints' business; that is where a bad config fails the run.
// A run may be one shard of several (functions/domain/shard.ts) and has an overall time budget:
// when it runs out, the run returns, and every target not finished by then is a result of its
// own ("not finished within the budget") and an error line, never silently dropped.
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '../shared/logger.js';
import { createStore } from '../adapters/store-factory.js';
import type { GuardConfig, TargetConfig } from '../domain/config.js';
import type { Evaluation, Verdict } from '../domain/evaluation-document.js';
import { selectShard, type ShardSpec } from '../domain/shard.js';
import type { EvaluationStore } from '../domain/store.js';
import { evaluateResolvedTarget } from './reach-target.js';
import type { EvaluationContext } from './evaluate-target.js';
import type { WarmConnections } from './warm-connections.js';
import { DISCOVERY_TIMEOUT_MS, resolveTargets, type ResolvedTargets } from './resolve-targets.js';
import { staticTarget, type Target } from '../domain/targets.js';
import { Deadline, DeadlineExceededError, withDeadline, withTimeout } from '../domain/deadline.js';
import { STORE_TIMEOUT_MS, evaluationTimeoutMs } from './on-demand-service.js';
import { transitionEvent, type EventIntent } from '../domain/events.js';
import { EventRecorder, lazyKubeEventSink, reportingInstance } from './event-recorder.js';
import { hostname } from 'node:os';

/** Events from the scheduled run are reported as coming from this controller. */
export const EVALUATOR_EVENT_CONTROLLER = 'etcd-guard.io/evaluator';
/** How long the end of a run waits for its Event writes (each has its own deadline too). */
export const EVENT_FLUSH_TIMEOUT_MS = 5_000;

/** Where the scheduled run records verdict transitions. */
export interface ScheduledEvents {
  record(event: EventIntent): void;
  flush(): Promise<void>;
}

/** The two pino methods the scheduled run uses; a pino logger satisfies it. */
export interface ScheduledLogger {
  info(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface ScheduledDeps {
  config: GuardConfig;
  store: EvaluationStore;
  /** `context.previous` reads the target's stored evaluation (learners keep their age across runs). */
  evaluate: (target: Target, context?: EvaluationContext) => Promise<Evaluation>;
  /** Static plus discovered targets, listed within `timeoutMs`; the config's static targets when absent. */
  resolveTargets?: (timeoutMs: number) => Promise<Pick<ResolvedTargets, 'targets' | 'failures'>>;
  logger: ScheduledLogger;
  /** Targets evaluated at once; defaults to config.concurrency. */
  concurrency?: number;
  /**
   * The run's targets, static and discovered (resolved by the caller); config.targets when absent.
   * Sharding and the budget apply to these.
   */
  targets?: readonly Target[];
  /** Evaluate only this shard's targets; all of them when absent. */
  shard?: ShardSpec;
  /** Overall time budget of one run; defaults to config.runBudget. */
  budgetMs?: number;
  /** Records an Event when a target's verdict enters or leaves Unhealthy; none when absent. */
  events?: ScheduledEvents;
}

export type ScheduledResult =
  | {
      target: string;
      ok: true;
      verdict: Verdict;
      passed: boolean;
      /** Wall time for this target: evaluation plus store write. */
      durationMs: number;
      /** False when the store already held a newer evaluation and kept it. */
      written: boolean;
      reasons: number;
    }
  | {
      target: string;
      ok: false;
      /**
       * Where it went wrong: no evaluation at all, an evaluation that could not be stored, or the
       * run's time budget ran out before the target was finished (or started); `discover`: a
       * discovery provider could not list (target `discovery:<provider>`), its targets unknown.
       */
      stage: 'evaluate' | 'store' | 'budget' | 'discover';
      error: string;
      verdict: Verdict | null;
      passed: boolean | null;
      durationMs: number;
      written: false;
      reasons: number | null;
    };

/**
 * Runs `work` over `items` with at most `limit` in flight, keeping results in input order.
 * `work` must not throw (each call turns its failure into a result).
 */
export async function mapWithConcurrency<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  if (!Number.isInteger(limit) || limit < 1) {
    throw new RangeError(`concurrency must be a positive integer (got ${String(limit)})`);
  }
  const results = new Array<R>(items.length);
  let nextIndex = 0;
  const worker = async (): Promise<void> => {
    // Each worker claims the next unclaimed index; JS runs this synchronously, so no two claim one.
    while (nextIndex < items.length) {
      const index = nextIndex++;
      results[index] = await work(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The verdict stored before this run, to tell a transition; null when there was none. A failed
 * read says nothing about the past, so then no transition is recorded (undefined).
 */
async function previousVerdict(
  deps: ScheduledDeps,
  target: Target,
  readStored: () => Promise<Evaluation | null>,
): Promise<Verdict | null | undefined> {
  if (deps.events === undefined) return undefined;
  try {
    const stored = await withTimeout(readStored(), STORE_TIMEOUT_MS, `reading ${target.name}'s last evaluation`);
    return stored?.verdict ?? null;
  } catch {
    return undefined;
  }
}

function recordTransition(
  deps: ScheduledDeps,
  target: Target,
  previous: Verdict | null | undefined,
  evaluation: Evaluation,
): void {
  if (deps.events === undefined || previous === undefined) return;
  const event = transitionEvent({ target, store: deps.config.store, previous, evaluation });
  if (event !== null) deps.events.record(event);
}

async function evaluateOne(deps: ScheduledDeps, target: Target): Promise<ScheduledResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  // One store read serves both the learners' first sightings and the transition Event.
  let storedRead: Promise<Evaluation | null> | undefined;
  const readStored = () => (storedRead ??= deps.store.read(target.name));
  let evaluation: Evaluation;
  try {
    evaluation = await withTimeout(
      deps.evaluate(target, { previous: readStored }),
      evaluationTimeoutMs(target),
      `evaluation of target ${JSON.stringify(target.name)}`,
    );
  } catch (error) {
    return failedResult(deps, target, { stage: 'evaluate', error: messageOf(error), durationMs: elapsed() });
  }
  const previous = await previousVerdict(deps, target, readStored);
  try {
    const outcome = await withTimeout(
      deps.store.write(evaluation),
      STORE_TIMEOUT_MS,
      `storing the evaluation of target ${JSON.stringify(target.name)} in ${deps.store.describe()}`,
    );
    const result: ScheduledResult = {
      target: target.name,
      ok: true,
      verdict: evaluation.verdict,
      passed: evaluation.passed,
      durationMs: elapsed(),
      written: outcome.written,
      reasons: evaluation.reasons.length,
    };
    deps.logger.info(result, 'scheduled evaluation');
    if (outcome.written) recordTransition(deps, target, previous, evaluation);
    return result;
  } catch (error) {
    return failedResult(deps, target, { stage: 'store', error: messageOf(error), durationMs: elapsed(), evaluation });
  }
}

type FailedStage = Extract<ScheduledResult, { ok: false }>['stage'];

const FAILURE_LOG_MESSAGES: Record<FailedStage, string> = {
  evaluate: 'scheduled evaluation failed',
  store: 'scheduled evaluation not stored',
  budget: 'scheduled evaluation not finished within the run budget',
  discover: 'target discovery failed',
};

/** The result, and its error log line, of a target that was not both evaluated and stored. */
function failedResult(
  deps: ScheduledDeps,
  target: Pick<TargetConfig, 'name'>,
  failure: { stage: FailedStage; error: string; durationMs: number; evaluation?: Evaluation },
): ScheduledResult {
  const { evaluation } = failure;
  const result: ScheduledResult = {
    target: target.name,
    ok: false,
    stage: failure.stage,
    error: failure.error,
    verdict: evaluation?.verdict ?? null,
    passed: evaluation?.passed ?? null,
    durationMs: failure.durationMs,
    written: false,
    reasons: evaluation?.reasons.length ?? null,
  };
  deps.logger.error(result, FAILURE_LOG_MESSAGES[failure.stage]);
  return result;
}

function budgetResult(deps: ScheduledDeps, target: TargetConfig, started: boolean, budgetMs: number): ScheduledResult {
  return failedResult(deps, target, {
    stage: 'budget',
    error:
      `not ${started ? 'finished' : 'started'} within the run's time budget of ${budgetMs} ms ` +
      `(${started ? 'its evaluation was still running' : 'other targets used the time'}); ` +
      'raise runBudget or concurrency, or split the run with --shard',
    durationMs: started ? budgetMs : 0,
  });
}

/**
 * Evaluates and stores every target of this shard within the run's budget; one result (and one
 * log line) per target, in config order. Returns when all are done or when the budget runs out;
 * a target still running then goes on in the background, bounded by its own deadline.
 */
export async function runScheduledEvaluation(deps: ScheduledDeps): Promise<ScheduledResult[]> {
  const concurrency = deps.concurrency ?? deps.config.concurrency;
  const budgetMs = deps.budgetMs ?? deps.config.runBudget;
  const deadline = Deadline.after(budgetMs);
  const resolved = deps.targets
    ? { targets: deps.targets, failures: [] }
    : deps.resolveTargets
      ? await deps.resolveTargets(Math.min(DISCOVERY_TIMEOUT_MS, deadline.remainingMs()))
      : { targets: deps.config.targets.map(staticTarget), failures: [] };
  const discovery = resolved.failures.map((failure) =>
    failedResult(deps, { name: `discovery:${failure.source}` }, { stage: 'discover', error: failure.message, durationMs: 0 }),
  );
  const targets = deps.shard === undefined ? resolved.targets : selectShard(resolved.targets, deps.shard);
  const results = new Map<string, ScheduledResult>();
  const started = new Set<string>();
  const all = mapWithConcurrency(targets, concurrency, async (target) => {
    if (deadline.expired()) return;
    started.add(target.name);
    results.set(target.name, await evaluateOne(deps, target));
  });
  // evaluateOne never throws, so the only rejection is the budget running out.
  await withDeadline(all, deadline, () => new DeadlineExceededError('the scheduled run', budgetMs)).catch((error: unknown) => {
    if (!(error instanceof DeadlineExceededError)) throw error;
  });
  // A short-lived run (CronJob, Lambda) must not exit with its Events unwritten; they never hold it long.
  if (deps.events) await withTimeout(deps.events.flush(), EVENT_FLUSH_TIMEOUT_MS, 'writing Events').catch(() => undefined);
  return [
    ...discovery,
    ...targets.map((target) => results.get(target.name) ?? budgetResult(deps, target, started.has(target.name), budgetMs)),
  ];
}

export interface ScheduledLoopOptions extends ScheduledDeps {
  intervalMs: number;
  signal: AbortSignal;
  /** Called after each round, e.g. by a demo printing a summary or a test waiting for rounds. */
  onRound?: (results: ScheduledResult[]) => void;
}

/**
 * The local stand-in for `rate(1 minute)`: runs a round, waits `intervalMs` (cut short by the
 * signal), repeats until the signal aborts. Resolves with the number of rounds run.
 */
export async function runScheduledLoop(options: ScheduledLoopOptions): Promise<number> {
  if (!(options.intervalMs > 0)) {
    throw new RangeError(`intervalMs must be a positive number (got ${String(options.intervalMs)})`);
  }
  let rounds = 0;
  while (!options.signal.aborted) {
    const results = await runScheduledEvaluation(options);
    rounds += 1;
    options.onRound?.(results);
    try {
      await sleep(options.intervalMs, undefined, { signal: options.signal });
    } catch (error) {
      if (options.signal.aborted) break;
      throw error;
    }
  }
  return rounds;
}

/**
 * The real wiring for the entrypoints: evaluateTarget (which lists control-plane Nodes itself when
 * a target has an `inventory`), the store the config names, and the redacting JSON logger
 * (LOG_LEVEL from `env`; `logger` replaces it everywhere, the Event recorder's errors included,
 * so the CLI can keep stdout for its output). Builds objects only; nothing touches the network
 * until a run.
 */
export function buildScheduledDeps(
  config: GuardConfig,
  env: Readonly<Record<string, string | undefined>>,
  options: { logger?: ScheduledLogger; warm?: () => WarmConnections | null } = {},
): ScheduledDeps {
  const logger = options.logger ?? createLogger({ env, name: 'etcd-guard-scheduled' });
  const { warm } = options;
  return {
    config,
    store: createStore(config.store),
    evaluate: (target, context) =>
      evaluateResolvedTarget(target, { ...context, ...(warm === undefined ? {} : { warm: warm() }) }),
    ...(config.discovery === undefined ? {} : { resolveTargets: (timeoutMs) => resolveTargets(config, { timeoutMs }) }),
    logger,
    ...(config.events ? { events: scheduledEvents(env, logger) } : {}),
  };
}

/** The run's Event recorder, through the in-cluster (or KUBECONFIG) credentials. */
function scheduledEvents(env: Readonly<Record<string, string | undefined>>, logger: ScheduledLogger): ScheduledEvents {
  const recorder = new EventRecorder({
    sink: lazyKubeEventSink(undefined),
    reportingController: EVALUATOR_EVENT_CONTROLLER,
    reportingInstance: reportingInstance(env, hostname()),
    onError: (message, event) =>
      logger.error(
        { reason: event.reason, object: `${event.regarding.namespace}/${event.regarding.name}`, err: message },
        'writing an Event failed',
      ),
  });
  return { record: (event) => recorder.record(event), flush: () => recorder.flush() };
}
