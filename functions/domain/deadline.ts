// One deadline primitive for every network call and outer bound (Go's context.WithDeadline is the
// model). A Deadline is an absolute instant on ONE monotonic clock (performance.now), so a wall
// clock step (NTP, a VM resume) can neither fire it early nor hold it open. A length of time is a
// `timeoutMs`; a `Deadline` is the instant it ends.

/** Milliseconds on the monotonic clock every Deadline uses. */
export function monotonicNowMs(): number {
  return performance.now();
}

export class Deadline {
  private constructor(
    /** The instant, on monotonicNowMs()'s clock. */
    readonly atMs: number,
    /** The length it was made from, for messages ("timed out after 2000 ms"). */
    readonly timeoutMs: number,
  ) {}

  /** The deadline `timeoutMs` after `startMs` (now by default). */
  static after(timeoutMs: number, startMs: number = monotonicNowMs()): Deadline {
    return new Deadline(startMs + timeoutMs, timeoutMs);
  }

  /** Milliseconds left, never negative. */
  remainingMs(): number {
    return Math.max(0, this.atMs - monotonicNowMs());
  }

  expired(): boolean {
    return this.remainingMs() <= 0;
  }

  /** The earlier of this deadline and `timeoutMs` from now: a step's own limit inside the whole. */
  within(timeoutMs: number): Deadline {
    const own = Deadline.after(timeoutMs);
    return own.atMs < this.atMs ? own : new Deadline(this.atMs, Math.round(this.remainingMs()));
  }

  /** The same end moved `graceMs` later, e.g. for a guard that must fire after the real deadline. */
  extendedBy(graceMs: number): Deadline {
    return new Deadline(this.atMs + graceMs, this.timeoutMs + graceMs);
  }

  /** The instant on the wall clock, for APIs that only take a Date (gRPC's `deadline` option). */
  toDate(): Date {
    return new Date(Date.now() + this.remainingMs());
  }
}

/** A piece of work that did not settle before its deadline. */
export class DeadlineExceededError extends Error {
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
  ) {
    super(`${what} did not finish within ${timeoutMs} ms`);
    this.name = 'DeadlineExceededError';
  }
}

/**
 * Settles like `work`, or rejects with `onTimeout()` once `deadline` passes (onTimeout is also the
 * place to cancel the work, e.g. abort a request). The work itself is not stopped by the race:
 * callers whose work can hang keep their own cancellation; this is the guarantee that they cannot
 * make their caller hang.
 */
export function withDeadline<T>(work: Promise<T>, deadline: Deadline, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), deadline.remainingMs());
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/** withDeadline for a length of time: rejects with DeadlineExceededError(what) after `timeoutMs`. */
export function withTimeout<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  return withDeadline(work, Deadline.after(timeoutMs), () => new DeadlineExceededError(what, timeoutMs));
}
