// The webhook's in-memory view of the latest evaluation per target. It is fed by polling the
// store, but the feed is never trusted to be live: freshness is judged from each evaluation's own
// evaluatedAt by the decision core, so when the feed goes quiet the data just ages and the gate
// fails closed. No I/O here beyond the injected store.
//
// A store that can list (the ConfigMap store: one LIST of app.kubernetes.io/name=etcd-guard in the
// guard's namespace) is read in one call per poll, which also brings in targets nobody configured
// (discovered ones, whose names are decided at run time). Where RBAC refuses the list (the base
// manifests grant get by name only) the cache falls back to reading each configured target.
//
// Which stored document is newer is decided by the store's write sequence, never by the stamp
// the writer's clock put on it (storedSupersedes): a document written later replaces the held one.
import { Deadline, withDeadline } from '../../functions/domain/deadline.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { MAX_CLOCK_SKEW_MS, StoreError, storedSupersedes, type EvaluationStore } from '../../functions/domain/store.js';
import type { Logger } from '../../functions/shared/logger.js';

export interface EvaluationCacheOptions {
  store: Pick<EvaluationStore, 'read' | 'readSequenced' | 'readAll'>;
  targets: readonly string[];
  /** Time between polls of the store; default 3 s. */
  pollIntervalMs?: number;
  /** Deadline for each store read; default 2 s. A read that misses it counts as a feed error. */
  readTimeoutMs?: number;
  logger?: Logger;
  now?: () => Date;
  onFeedError?: (target: string, error: Error) => void;
  /** Called with every evaluation the cache takes (the metrics remember the newest passing one). */
  onTaken?: (evaluation: Evaluation) => void;
}

export class CacheReadTimeoutError extends Error {
  constructor(target: string, timeoutMs: number) {
    super(`reading the stored evaluation of ${target} took longer than ${timeoutMs} ms`);
    this.name = 'CacheReadTimeoutError';
  }
}

/** The in-flight key of the one-call read of every target. */
const LIST_KEY = '\u0000every target';

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** What the cache holds per target; no sequence when it came from memory (inline refresh, on demand). */
interface HeldEvaluation {
  evaluation: Evaluation;
  sequence?: number;
}

export class EvaluationCache {
  private readonly latest = new Map<string, HeldEvaluation>();
  private readonly readOnce = new Set<string>();
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Store reads that outlived their deadline and have not settled yet, per target. */
  private readonly abandonedReads = new Set<string>();
  private targetNames: readonly string[];
  /** Targets the list read brought in that are not configured (discovered ones). */
  private readonly listedTargets = new Set<string>();
  /** Set once the store refused the list read (RBAC): from then on, read target by target. */
  private listRefused = false;
  /** Once every first target was read, target-set changes (discovery) no longer unready the webhook. */
  private wasReady = false;
  private readonly pollIntervalMs: number;
  private readonly readTimeoutMs: number;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readyWaiters: Array<() => void> = [];

  constructor(private readonly options: EvaluationCacheOptions) {
    this.targetNames = [...new Set(options.targets)];
    this.pollIntervalMs = options.pollIntervalMs ?? 3000;
    this.readTimeoutMs = options.readTimeoutMs ?? 2000;
  }

  /** True once every target was read once, whether an evaluation was stored or not. */
  get ready(): boolean {
    this.wasReady ||= this.targetNames.every((target) => this.readOnce.has(target));
    return this.wasReady;
  }

  /**
   * Follows the current target set (discovery adds and drops targets). New targets are read on the
   * next poll; a dropped target's evaluation is forgotten, so nothing keeps judging by it.
   */
  setTargets(targets: readonly string[]): void {
    const next = [...new Set(targets)];
    for (const name of this.targetNames) {
      if (!next.includes(name)) {
        this.latest.delete(name);
        this.readOnce.delete(name);
      }
    }
    this.targetNames = next;
    if (!this.stopped && this.timer !== null) void this.pollOnce();
  }

  /** Resolves when ready (at once if already so). */
  whenReady(): Promise<void> {
    if (this.ready) return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  targets(): readonly string[] {
    return [...this.targetNames, ...[...this.listedTargets].filter((target) => !this.targetNames.includes(target))];
  }

  get(target: string): Evaluation | null {
    return this.latest.get(target)?.evaluation ?? null;
  }

  evaluatedAt(target: string): string | null {
    return this.latest.get(target)?.evaluation.evaluatedAt ?? null;
  }

  /**
   * Offers an evaluation (from the feed with its store `sequence`, or from an inline refresh or
   * the on-demand endpoint without one). It is kept only if it supersedes the one held: a stored
   * document with a higher sequence than the held one was written later and wins; otherwise newest
   * stamp wins and future stamps never win over present ones (storedSupersedes), so a slow feed
   * can never roll the cache back. Returns whether it was taken.
   */
  put(evaluation: Evaluation, sequence?: number): boolean {
    const now = this.options.now?.() ?? new Date();
    const held = this.latest.get(evaluation.target);
    const candidate: HeldEvaluation = sequence === undefined ? { evaluation } : { evaluation, sequence };
    if (held && !storedSupersedes(candidate, held, now)) return false;
    // Held, not refused: refusing a future-stamped Unhealthy evaluation would leave an older
    // Healthy one in charge. The decision does not count it as fresh, so the gate fails closed.
    if (Date.parse(evaluation.evaluatedAt) - now.getTime() > MAX_CLOCK_SKEW_MS) {
      this.options.logger?.error(
        { target: evaluation.target, evaluatedAt: evaluation.evaluatedAt },
        'holding an evaluation dated in the future as not fresh; check the clocks of the evaluator and the webhook',
      );
    }
    this.latest.set(evaluation.target, candidate);
    this.options.onTaken?.(evaluation);
    return true;
  }

  /** Polls at once, then every pollIntervalMs until stop(). */
  start(): void {
    if (this.timer || this.stopped) return;
    const tick = () => {
      void this.pollOnce().finally(() => {
        if (!this.stopped) this.timer = setTimeout(tick, this.pollIntervalMs);
      });
    };
    this.timer = setTimeout(tick, 0);
  }

  /** Stops polling and waits (bounded by the read deadline) for reads in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await Promise.allSettled([...this.inFlight.values()]);
  }

  /** Reads every target once; a target whose previous read is still running is skipped. */
  async pollOnce(): Promise<void> {
    if (this.options.store.readAll !== undefined && !this.listRefused && (await this.pollAll())) return;
    await Promise.all(this.targetNames.map((target) => this.pollTarget(target)));
  }

  /** One read of every stored evaluation; false when the store refused it (then read by name). */
  private pollAll(): Promise<boolean> {
    const running = this.inFlight.get(LIST_KEY);
    if (running) return running.then(() => true);
    let refused = false;
    const read = this.readWithDeadline(LIST_KEY, () => this.listAll())
      .then(({ evaluations, problems }) => {
        for (const { evaluation, sequence } of evaluations) {
          if (!this.targetNames.includes(evaluation.target)) this.listedTargets.add(evaluation.target);
          this.put(evaluation, sequence);
        }
        for (const problem of problems) this.options.logger?.warn({ err: problem }, 'cannot use a stored evaluation');
        for (const target of this.targetNames) this.markRead(target);
      })
      .catch((error: unknown) => {
        const failure = toError(error);
        refused = failure instanceof StoreError && failure.kind === 'forbidden';
        if (refused) this.listRefused = true;
        this.options.logger?.warn(
          { err: failure.message },
          refused ? 'cannot list stored evaluations; reading each configured target by name' : 'cannot list stored evaluations',
        );
        if (!refused) for (const target of this.targetNames) this.options.onFeedError?.(target, failure);
      })
      .finally(() => this.inFlight.delete(LIST_KEY));
    this.inFlight.set(LIST_KEY, read);
    return read.then(() => !refused);
  }

  private listAll(): ReturnType<NonNullable<EvaluationStore['readAll']>> {
    const readAll = this.options.store.readAll;
    if (readAll === undefined) return Promise.reject(new Error('the store cannot list evaluations'));
    return readAll.call(this.options.store);
  }

  private pollTarget(target: string): Promise<void> {
    const running = this.inFlight.get(target);
    if (running) return running;
    const read = this.readWithDeadline(target, () => this.readOne(target))
      .then((stored) => {
        const evaluation = stored?.evaluation;
        if (evaluation && evaluation.target !== target) {
          throw new Error(`store returned an evaluation of ${JSON.stringify(evaluation.target)} when asked for ${target}`);
        }
        if (evaluation) this.put(evaluation, stored?.sequence);
        this.markRead(target);
      })
      .catch((error: unknown) => {
        const failure = toError(error);
        this.options.logger?.warn({ target, err: failure.message }, 'cannot read the stored evaluation');
        this.options.onFeedError?.(target, failure);
      })
      .finally(() => this.inFlight.delete(target));
    this.inFlight.set(target, read);
    return read;
  }

  /** One target's stored evaluation, with its sequence when the store keeps one. */
  private async readOne(target: string): Promise<HeldEvaluation | null> {
    const { store } = this.options;
    if (store.readSequenced !== undefined) return store.readSequenced(target);
    const evaluation = await store.read(target);
    return evaluation === null ? null : { evaluation };
  }

  private readWithDeadline<T>(key: string, read: () => Promise<T>): Promise<T> {
    // The store API has no abort signal, so a read that hangs is abandoned, not cancelled. While
    // it hangs no new read of that key starts, so a stuck store cannot pile up reads.
    const what = key === LIST_KEY ? 'every target' : key;
    if (this.abandonedReads.has(key)) {
      return Promise.reject(new Error(`the previous read of ${what} is still hanging`));
    }
    let pending: Promise<T>;
    try {
      pending = read();
    } catch (error) {
      return Promise.reject(toError(error));
    }
    // Once the abandoned read settles, the key may be read again.
    pending.then(
      () => this.abandonedReads.delete(key),
      () => this.abandonedReads.delete(key),
    );
    return withDeadline(pending, Deadline.after(this.readTimeoutMs), () => {
      this.abandonedReads.add(key);
      return new CacheReadTimeoutError(what, this.readTimeoutMs);
    });
  }

  private markRead(target: string): void {
    this.readOnce.add(target);
    if (this.ready && this.readyWaiters.length > 0) {
      const waiters = this.readyWaiters;
      this.readyWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }
}
