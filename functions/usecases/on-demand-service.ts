// On-demand evaluations over HTTP: GET returns the cached evaluation, POST runs a fresh one. The
// same `handle` serves the webhook's express routes and the serverless httpApi function, so both
// speak one contract. Not pure: it reads the token file and runs evaluations in slots; the
// evaluate function and the store are injected, so tests give it real ones of their choosing.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { consistencyHashes, type EvaluationPurpose, type GuardConfig, type TargetConfig } from '../domain/config.js';
import { ConfigError } from '../domain/config.js';
import type { Evaluation } from '../domain/evaluation-document.js';
import type { EvaluationContext } from './evaluate-target.js';
import type { EvaluationStore } from '../domain/store.js';
import { staticTarget, type Target } from '../domain/targets.js';
import { StoreError } from '../domain/store.js';
import { DeadlineExceededError, withTimeout } from '../domain/deadline.js';
import { OverloadError, RunSlots, starvedStallMs, watchEventLoopStalls, type RunKind } from './run-slots.js';
import { NotEvaluatedError } from '../shared/errors.js';

/**
 * A name that is not a target. The message does not list the targets: in a fleet that is every
 * tenant's namespace and cluster, and a list sized by the fleet for each wrong name.
 */
export class UnknownTargetError extends Error {
  constructor(readonly target: string) {
    super(`unknown target ${quote(target)} (GET /evaluations lists the targets)`);
    this.name = 'UnknownTargetError';
  }
}

/** Outer bound for one target's evaluation: its own probe timeout plus room for connection setup. */
export function evaluationTimeoutMs(target: TargetConfig): number {
  return target.timeout + 2_000;
}

/** Outer bound for one store read or write (the adapters use shorter ones of their own). */
export const STORE_TIMEOUT_MS = 10_000;

export interface OnDemandOptions {
  config: GuardConfig;
  store: EvaluationStore;
  /** `context.previous` reads the target's stored evaluation (learners keep their age across runs). */
  evaluate: (target: Target, context?: EvaluationContext) => Promise<Evaluation>;
  /**
   * The target's latest evaluation for `context.previous`; the store's by default. The webhook
   * hands its cache's, which is at least as new and costs no read and no parse on the live path.
   */
  previous?: (target: string) => Evaluation | null;
  /** The targets as of now (static and discovered); the config's static targets by default. */
  targets?: () => readonly Target[];
  /** Bearer token required on every request; null allows everyone. */
  token: string | null;
  now?: () => Date;
  /** After a run finishes, callers within this window get that run instead of a new one. */
  minIntervalMs?: number;
  /** Called with each fresh evaluation once it is stored (e.g. to update the webhook's cache). */
  onFresh?: (evaluation: Evaluation) => void;
  /**
   * Called when storing a fresh evaluation fails and no caller waits for the write (admission
   * requests use the evaluation at once and leave the write to finish in the background).
   */
  onBackgroundStoreError?: (target: string, error: unknown) => void;
  /**
   * Work a run does before its clock and its stall watch start (loading the etcd engine on first
   * use: compiling and loading gRPC blocks the event loop, which is no sign of overload).
   */
  prepare?: () => Promise<unknown>;
  /** How many evaluations run at once (shared by HTTP and admission callers); DEFAULT_RUN_SLOT_LIMITS by default. */
  slots?: RunSlots;
}

export interface OnDemandRequest {
  method: string;
  target: string;
  /** The raw Authorization header, if any. */
  authorization?: string;
}

export interface OnDemandResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

interface Run {
  /** The fresh evaluation, as soon as etcd has been probed. */
  evaluation: Promise<Evaluation>;
  /** The same evaluation once it is also in the store (for a run that stores). */
  promise: Promise<Evaluation>;
  /** Clock time (ms) the run settled; null while it is still running. */
  settledAtMs: number | null;
  /** Clock time (ms) the run started evaluating (it held a slot); null while it waits for one. */
  startedAtMs: number | null;
  /** Lets an admission request that joins a run still waiting for a slot move it up. */
  promote: () => void;
  /** It hashes every voting member (the consistency check, as configured for what it is for). */
  hashes: boolean;
}

const MAX_ECHOED_NAME = 64;

/**
 * A run that did evaluate, on an event loop stalled enough that its failures say nothing about
 * etcd. Unlike a run that never got a slot, it may have seen a fault: a decision must not fall
 * back on older evidence because of it.
 */
export class StarvedEvaluationError extends OverloadError {
  constructor(message: string, retryAfterSeconds: number) {
    super(message, retryAfterSeconds);
    this.name = 'StarvedEvaluationError';
  }
}

/** `value`, in the event loop's check phase: after every promise job queued before it has run. */
function afterThisTurn<T>(value: T): Promise<T> {
  return new Promise((resolve) => setImmediate(() => resolve(value)));
}

function quote(name: string): string {
  const shown = name.length > MAX_ECHOED_NAME ? `${name.slice(0, MAX_ECHOED_NAME)}...` : name;
  return JSON.stringify(shown);
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

export class OnDemandEvaluations {
  private readonly targets: () => readonly Target[];
  private readonly runs = new Map<string, Run>();
  /** Runs started by dryRun admission requests: evaluated, never stored. */
  private readonly unstoredRuns = new Map<string, Run>();
  private tokenDigest: Buffer | null;
  private readonly now: () => Date;
  private readonly minIntervalMs: number;
  readonly slots: RunSlots;

  constructor(private readonly options: OnDemandOptions) {
    const staticOnly = options.config.targets.map(staticTarget);
    this.targets = options.targets ?? (() => staticOnly);
    // Only the digest is kept, so the token itself never sits in an object that might be logged.
    this.tokenDigest = options.token === null ? null : digest(options.token);
    this.now = options.now ?? (() => new Date());
    this.minIntervalMs = options.minIntervalMs ?? 1_000;
    this.slots = options.slots ?? new RunSlots();
    if (!(this.minIntervalMs >= 0)) {
      throw new RangeError(`minIntervalMs must be a non-negative number (got ${String(options.minIntervalMs)})`);
    }
  }

  private previousOf(target: string): Promise<Evaluation | null> {
    const { previous } = this.options;
    return previous === undefined ? this.options.store.read(target) : Promise.resolve(previous(target));
  }

  /** Replaces the bearer token (a rotated token file); null opens the endpoints. */
  setToken(token: string | null): void {
    this.tokenDigest = token === null ? null : digest(token);
  }

  /** True when the header carries the configured bearer token, or when no token is configured. */
  authorize(authorizationHeader?: string): boolean {
    if (this.tokenDigest === null) return true;
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorizationHeader ?? '');
    // Comparing fixed-length digests keeps the time independent of where the strings differ and
    // of the presented token's length.
    const presented = digest(match?.[1] ?? '');
    return timingSafeEqual(presented, this.tokenDigest) && match !== null;
  }

  /**
   * A fresh evaluation of the target, stored. Callers arriving while a run is in progress share it;
   * callers arriving within minIntervalMs after it settled get its result (or its error) too.
   */
  refresh(targetName: string): Promise<Evaluation> {
    return this.sharedRun(targetName, true, 'http').promise;
  }

  /**
   * A fresh evaluation for an admission request, shared like refresh(). With `persist`, it is
   * stored too, but the caller gets it as soon as etcd has answered: the write finishes in the
   * background (a failure goes to onBackgroundStoreError), because an apiserver waiting on the
   * webhook should not also wait on — or be denied by — a slow or failing store. Without
   * `persist` (dryRun requests, which must cause no side effect) nothing is written: the request
   * shares a run already under way, or starts one of its own that does not store.
   *
   * With `notBeforeMs` (the request's bound on live evidence), a run is shared only if it started
   * evaluating at or after that clock time, or has not started yet: a request never rides an
   * older run, it starts one of its own, which later requests then share.
   */
  evaluateForAdmission(
    targetName: string,
    options: { persist: boolean; notBeforeMs?: number; addsMember?: boolean },
  ): Promise<Evaluation> {
    const notBeforeMs = options.notBeforeMs ?? Number.NEGATIVE_INFINITY;
    const purpose: EvaluationPurpose = options.addsMember === true ? 'admission-add' : 'admission';
    if (!options.persist) {
      const storing = this.reusableRun(this.runs.get(targetName), notBeforeMs, this.hashesFor(targetName, purpose));
      if (storing !== undefined) {
        storing.promote();
        return storing.evaluation;
      }
    }
    const run = this.sharedRun(targetName, options.persist, 'admission', notBeforeMs, purpose);
    if (options.persist) {
      run.promise.catch((error: unknown) => {
        // An evaluation that failed is reported to its caller through `evaluation`; only a failed
        // write of a good evaluation is news here.
        void run.evaluation.then(
          () => this.options.onBackgroundStoreError?.(targetName, error),
          () => undefined,
        );
      });
    }
    return run.evaluation;
  }

  /** Whether an evaluation of the target for `purpose` hashes (a run that does not cannot stand in for one that must). */
  private hashesFor(targetName: string, purpose: EvaluationPurpose): boolean {
    const target = this.targets().find((candidate) => candidate.name === targetName);
    return target !== undefined && consistencyHashes(target.consistency, purpose);
  }

  /**
   * A run still going, or settled within minIntervalMs, that started no earlier than `notBeforeMs`
   * and hashed if `mustHash`; or undefined.
   */
  private reusableRun(run: Run | undefined, notBeforeMs = Number.NEGATIVE_INFINITY, mustHash = false): Run | undefined {
    if (run === undefined) return undefined;
    if (mustHash && !run.hashes) return undefined;
    if (run.startedAtMs !== null && run.startedAtMs < notBeforeMs) return undefined;
    if (run.settledAtMs === null || this.now().getTime() - run.settledAtMs < this.minIntervalMs) return run;
    return undefined;
  }

  private sharedRun(
    targetName: string,
    store: boolean,
    kind: RunKind,
    notBeforeMs = Number.NEGATIVE_INFINITY,
    purpose: EvaluationPurpose = 'scheduled',
  ): Run {
    const target = this.targets().find((candidate) => candidate.name === targetName);
    if (target === undefined) {
      // Nothing is kept for a name that is not a target: the maps hold targets only.
      const unknown = Promise.reject(new UnknownTargetError(targetName));
      unknown.catch(() => undefined);
      return {
        evaluation: unknown,
        promise: unknown,
        settledAtMs: 0,
        startedAtMs: 0,
        hashes: false,
        promote: () => undefined,
      };
    }
    const runs = store ? this.runs : this.unstoredRuns;
    this.forgetSettled(runs);
    const reusable = this.reusableRun(runs.get(targetName), notBeforeMs, consistencyHashes(target.consistency, purpose));
    if (reusable !== undefined) {
      if (kind === 'admission') reusable.promote();
      return reusable;
    }
    const run = this.startRun(target, store, kind, purpose);
    runs.set(target.name, run);
    // A run is kept only while it can be reused: after its window, or at once when it never got
    // a slot (the next caller should queue afresh, not share a refusal).
    void run.promise.then(
      () => this.forgetLater(runs, target.name, run),
      (error: unknown) => {
        if (error instanceof OverloadError) this.forget(runs, target.name, run);
        else this.forgetLater(runs, target.name, run);
      },
    );
    return run;
  }

  /** Drops every settled run whose window has passed (so a name no longer a target is not kept). */
  private forgetSettled(runs: Map<string, Run>): void {
    for (const [name, run] of runs) {
      if (this.reusableRun(run) === undefined) runs.delete(name);
    }
  }

  private forget(runs: Map<string, Run>, name: string, run: Run): void {
    if (runs.get(name) === run) runs.delete(name);
  }

  /**
   * Forgets the run once its window has passed by the clock that judges reuse. Node's timers run
   * on the event loop's cached monotonic time and can fire a millisecond before that clock agrees,
   * so a run still inside its window waits again for what is left of it rather than lingering
   * until some later call happens to sweep it.
   */
  private forgetLater(runs: Map<string, Run>, name: string, run: Run): void {
    const leftMs = (run.settledAtMs ?? this.now().getTime()) + this.minIntervalMs - this.now().getTime();
    const timer = setTimeout(
      () => {
        if (runs.get(name) !== run) return;
        if (this.reusableRun(run) === undefined) this.forget(runs, name, run);
        else this.forgetLater(runs, name, run);
      },
      Math.max(1, leftMs + 1),
    );
    timer.unref();
  }

  /**
   * Waits for a slot, then evaluates within the target's own bound: the clock starts once the
   * run holds a slot, so time spent queued never turns into a timed-out member. A run that gets
   * no slot rejects with OverloadError and stores nothing.
   */
  private startRun(target: Target, store: boolean, kind: RunKind, purpose: EvaluationPurpose): Run {
    const { slot, promote } = this.slots.acquire(kind);
    // Assigned below, before the slot can resolve (a resolved promise's callback runs later).
    let started: (atMs: number) => void = () => undefined;
    const evaluation = slot.then(async (release) => {
      let fresh: Evaluation;
      let stalls: { stop: () => number } | undefined;
      try {
        // Taken before the engine loads, so it is never later than the evaluation's own start.
        started(this.now().getTime());
        await this.options.prepare?.();
        stalls = watchEventLoopStalls();
        fresh = await withTimeout(
          this.options.evaluate(target, { previous: () => this.previousOf(target.name), purpose }),
          evaluationTimeoutMs(target),
          `evaluation of target ${quote(target.name)}`,
        );
      } finally {
        release();
      }
      return this.unlessStarved(target, fresh, stalls.stop());
    });
    const storeIt = (fresh: Evaluation) => this.store(target, fresh);
    const run: Run = {
      evaluation,
      // An admission request's answer is built from `evaluation` in the same turn of the event
      // loop: its write (checking the document is part of it) starts once that answer is out, so
      // the apiserver never waits on it. An HTTP caller waits for the write anyway.
      promise: !store
        ? evaluation
        : kind === 'admission'
          ? evaluation.then(afterThisTurn).then(storeIt)
          : evaluation.then(storeIt),
      settledAtMs: null,
      startedAtMs: null,
      hashes: consistencyHashes(target.consistency, purpose),
      promote,
    };
    started = (atMs) => {
      run.startedAtMs = atMs;
    };
    run.promise = run.promise.finally(() => {
      run.settledAtMs = this.now().getTime();
    });
    // Every caller gets a promise; these no-ops keep a rejection nobody awaits from crashing Node.
    run.promise.catch(() => undefined);
    evaluation.catch(() => undefined);
    return run;
  }

  /**
   * A verdict short of Healthy from a run during which this process's own event loop stalled
   * long enough to turn an answer into a timeout is the overload's verdict, not etcd's: the run
   * counts as not evaluated (OverloadError, nothing stored). A Healthy one stands: every member
   * answered in time even so.
   */
  private unlessStarved(target: Target, fresh: Evaluation, stalledMs: number): Evaluation {
    if (fresh.verdict === 'Healthy' || stalledMs < starvedStallMs(target.timeout)) return fresh;
    throw new StarvedEvaluationError(
      `the evaluation of target ${quote(target.name)} ran while this process was overloaded (its event loop was held up ` +
        `${stalledMs} ms in all, target timeout ${target.timeout} ms): its ${fresh.verdict} verdict is not ` +
        'evidence about etcd; not evaluated, nothing stored',
      Math.max(1, Math.ceil(evaluationTimeoutMs(target) / 1000)),
    );
  }

  /**
   * Resolves once every run still going has settled, its store write included: an answer goes out
   * before its evaluation is stored, so a closing webhook waits here rather than leave a write
   * behind it. Bounded by the evaluation and store timeouts; never rejects.
   */
  async settle(): Promise<void> {
    const going = [...this.runs.values(), ...this.unstoredRuns.values()].filter((run) => run.settledAtMs === null);
    await Promise.all(going.map((run) => run.promise.catch(() => undefined)));
  }

  /** Runs kept for reuse (stored and dry-run ones): bounded by the targets run within the window. */
  keptRuns(): number {
    return this.runs.size + this.unstoredRuns.size;
  }

  private async store(target: TargetConfig, evaluation: Evaluation): Promise<Evaluation> {
    await withTimeout(
      this.options.store.write(evaluation),
      STORE_TIMEOUT_MS,
      `storing the evaluation of target ${quote(target.name)} in ${this.options.store.describe()}`,
    );
    try {
      this.options.onFresh?.(evaluation);
    } catch {
      // A listener's failure must not turn a good evaluation into an error for every caller.
    }
    return evaluation;
  }

  /** The cached evaluation, or null; throws UnknownTargetError or StoreError. */
  async cached(targetName: string): Promise<Evaluation | null> {
    if (!this.targets().some((target) => target.name === targetName)) throw new UnknownTargetError(targetName);
    return withTimeout(
      this.options.store.read(targetName),
      STORE_TIMEOUT_MS,
      `reading the evaluation of target ${quote(targetName)} from ${this.options.store.describe()}`,
    );
  }

  /**
   * One HTTP exchange, independent of the server framework.
   * Status codes: 200 evaluation; 401 missing/wrong token; 404 unknown target or nothing stored;
   * 405 other methods; 429 too many evaluations at once (Retry-After; nothing evaluated or stored);
   * 500 evaluation failed, or the store says corrupt/invalid/too-large;
   * 503 the store says unavailable/forbidden/conflict; 504 an outer deadline passed.
   */
  async handle(request: OnDemandRequest): Promise<OnDemandResponse> {
    const method = request.method.toUpperCase();
    if (method !== 'GET' && method !== 'POST') {
      return reply(405, { error: `method ${quote(request.method)} not allowed (use GET or POST)` }, { allow: 'GET, POST' });
    }
    if (!this.authorize(request.authorization)) {
      return reply(401, { error: 'missing or wrong bearer token' }, { 'www-authenticate': 'Bearer realm="etcd-guard"' });
    }
    try {
      if (method === 'GET') {
        const evaluation = await this.cached(request.target);
        if (evaluation === null) {
          return reply(404, { error: `no evaluation stored for target ${quote(request.target)}` });
        }
        return reply(200, evaluation);
      }
      return reply(200, await this.refresh(request.target));
    } catch (error) {
      return replyForError(error);
    }
  }
}

function reply(status: number, body: unknown, headers: Record<string, string> = {}): OnDemandResponse {
  return { status, body, headers: { 'cache-control': 'no-store', ...headers } };
}

function replyForError(error: unknown): OnDemandResponse {
  if (error instanceof UnknownTargetError) return reply(404, { error: error.message });
  if (error instanceof OverloadError) {
    return reply(429, { error: error.message, notEvaluated: true }, { 'retry-after': String(error.retryAfterSeconds) });
  }
  if (error instanceof DeadlineExceededError) return reply(504, { error: error.message });
  if (error instanceof NotEvaluatedError) return reply(503, { error: error.message, notEvaluated: true });
  if (error instanceof StoreError) {
    // A corrupt or invalid document or one too large stays so on retry: 500. Outages, RBAC and
    // write conflicts can heal without a code change: 503.
    const permanent = error.kind === 'corrupt' || error.kind === 'invalid' || error.kind === 'too-large';
    return reply(permanent ? 500 : 503, { error: error.message, storeError: error.kind });
  }
  const message = error instanceof Error ? error.message : String(error);
  return reply(500, { error: `evaluation failed: ${message}` });
}

/**
 * The bearer token for /evaluations. ETCD_GUARD_TOKEN wins over config.auth.tokenFile so a
 * deployment (e.g. a serverless function) can supply its own without editing a shared config file.
 * Null when neither is set: the endpoints are open.
 */
export function resolveBearerToken(
  config: GuardConfig,
  env: Readonly<Record<string, string | undefined>>,
  readFile: (file: string) => string = (file) => readFileSync(file, 'utf8'),
): string | null {
  const fromEnv = env.ETCD_GUARD_TOKEN;
  if (fromEnv !== undefined && fromEnv.trim() !== '') return fromEnv.trim();
  const file = config.auth.tokenFile;
  if (file === undefined) return null;
  return readTokenFile(file, readFile);
}

/** The one token in `file`; ConfigError naming the file (never its content) when it cannot be used. */
export function readTokenFile(file: string, readFile: (file: string) => string = (name) => readFileSync(name, 'utf8')): string {
  let text: string;
  try {
    text = readFile(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError('auth.tokenFile', [`cannot read the token file ${JSON.stringify(file)}: ${code}`]);
  }
  const token = text.trim();
  if (token === '' || /\s/.test(token)) {
    // Never echo the file's content: it is (or was meant to be) a secret.
    throw new ConfigError('auth.tokenFile', [`the token file ${JSON.stringify(file)} must hold one token without spaces`]);
  }
  return token;
}
