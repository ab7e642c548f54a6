// The webhook's in-memory view of the latest evaluation per target. It is fed by polling the
// store, but the feed is never trusted to be live: freshness is judged from each evaluation's own
// evaluatedAt by the decision core, so when the feed goes quiet the data just ages and the gate
// fails closed. No I/O here beyond the injected store.
import { Deadline, withDeadline } from '../functions/core/deadline.js';
import type { Evaluation } from '../functions/core/evaluation.js';
import { MAX_CLOCK_SKEW_MS, supersedes, type EvaluationStore } from '../functions/core/store.js';
import type { Logger } from '../functions/shared/logger.js';

export interface EvaluationCacheOptions {
  store: Pick<EvaluationStore, 'read'>;
  targets: readonly string[];
  /** Time between polls of the store; default 3 s. */
  pollIntervalMs?: number;
  /** Deadline for each store read; default 2 s. A read that misses it counts as a feed error. */
  readTimeoutMs?: number;
  logger?: Logger;
  now?: () => Date;
  onFeedError?: (target: string, error: Error) => void;
}

export class CacheReadTimeoutError extends Error {
  constructor(target: string, timeoutMs: number) {
    super(`reading the stored evaluation of ${target} took longer than ${timeoutMs} ms`);
    this.name = 'CacheReadTimeoutError';
  }
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

export class EvaluationCache {
  private readonly latest = new Map<string, Evaluation>();
  private readonly readOnce = new Set<string>();
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Store reads that outlived their deadline and have not settled yet, per target. */
  private readonly abandonedReads = new Set<string>();
  private readonly targetNames: readonly string[];
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
    return this.targetNames.every((target) => this.readOnce.has(target));
  }

  /** Resolves when ready (at once if already so). */
  whenReady(): Promise<void> {
    if (this.ready) return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  targets(): readonly string[] {
    return this.targetNames;
  }

  get(target: string): Evaluation | null {
    return this.latest.get(target) ?? null;
  }

  evaluatedAt(target: string): string | null {
    return this.latest.get(target)?.evaluatedAt ?? null;
  }

  /**
   * Offers an evaluation (from the feed, an inline refresh or the on-demand endpoint). It is kept
   * only if it supersedes the one held (newest wins, future stamps never win over present ones),
   * so a slow feed can never roll the cache back. Returns whether it was taken.
   */
  put(evaluation: Evaluation): boolean {
    const now = this.options.now?.() ?? new Date();
    const held = this.latest.get(evaluation.target);
    if (held && !supersedes(evaluation, held, now)) return false;
    // Held, not refused: refusing a future-stamped Unhealthy evaluation would leave an older
    // Healthy one in charge. The decision does not count it as fresh, so the gate fails closed.
    if (Date.parse(evaluation.evaluatedAt) - now.getTime() > MAX_CLOCK_SKEW_MS) {
      this.options.logger?.error(
        { target: evaluation.target, evaluatedAt: evaluation.evaluatedAt },
        'holding an evaluation dated in the future as not fresh; check the clocks of the evaluator and the webhook',
      );
    }
    this.latest.set(evaluation.target, evaluation);
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
    await Promise.all(this.targetNames.map((target) => this.pollTarget(target)));
  }

  private pollTarget(target: string): Promise<void> {
    const running = this.inFlight.get(target);
    if (running) return running;
    const read = this.readWithDeadline(target)
      .then((evaluation) => {
        if (evaluation && evaluation.target !== target) {
          throw new Error(`store returned an evaluation of ${JSON.stringify(evaluation.target)} when asked for ${target}`);
        }
        if (evaluation) this.put(evaluation);
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

  private readWithDeadline(target: string): Promise<Evaluation | null> {
    // The store API has no abort signal, so a read that hangs is abandoned, not cancelled. While
    // it hangs no new read of that target starts, so a stuck store cannot pile up reads.
    if (this.abandonedReads.has(target)) {
      return Promise.reject(new Error(`the previous read of ${target} is still hanging`));
    }
    let pending: Promise<Evaluation | null>;
    try {
      pending = this.options.store.read(target);
    } catch (error) {
      return Promise.reject(toError(error));
    }
    // Once the abandoned read settles, the target may be read again.
    pending.then(
      () => this.abandonedReads.delete(target),
      () => this.abandonedReads.delete(target),
    );
    return withDeadline(pending, Deadline.after(this.readTimeoutMs), () => {
      this.abandonedReads.add(target);
      return new CacheReadTimeoutError(target, this.readTimeoutMs);
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
