// How many evaluations run at once in one process. Each evaluation holds gRPC channels, TLS
// sessions and (for Cluster API targets) a Kubernetes client and WebSockets: a few hundred at once
// pushed the webhook past its memory limit, starved /healthz for seconds, and — worst — made the
// evaluations themselves time out on a starved event loop, so the overload was stored as the
// cluster's verdict. A run therefore waits for a slot before its clock starts, and a run that gets
// no slot in time fails with OverloadError: it never evaluated, so nothing is stored.

/** A run that never got a slot: not a verdict on the cluster, only on this process's load. */
export class OverloadError extends Error {
  constructor(
    message: string,
    /** When a retry has a fair chance (the HTTP Retry-After). */
    readonly retryAfterSeconds: number,
  ) {
    super(message);
    this.name = 'OverloadError';
  }
}

/** Who asks for a slot: `http` (POST /evaluations, anyone who can reach the port) or an admission request. */
export type RunKind = 'http' | 'admission';

export interface RunSlotLimits {
  /** Runs at once, of every kind. */
  total: number;
  /** Of those, at most this many for HTTP callers, so a POST storm always leaves admission room. */
  http: number;
  /** HTTP runs waiting for a slot; one more is turned away at once. */
  httpQueue: number;
  /** How long a run waits for a slot before it gives up. */
  queueWaitMs: number;
}

/**
 * Defaults sized for the webhook pod (1 CPU, 384 MiB). Evaluations are short and busy between
 * network waits, so a slot count bounds the CPU they take as well as their memory: HTTP callers get
 * two (a storm of POSTs then costs bounded CPU, not a starved loop for seconds), and the other
 * six are left to the apiserver's inline refreshes, which a POST storm can never take.
 */
export const DEFAULT_RUN_SLOT_LIMITS: RunSlotLimits = { total: 8, http: 2, httpQueue: 8, queueWaitMs: 5_000 };

interface Waiter {
  kind: RunKind;
  grant: (release: () => void) => void;
  timer: NodeJS.Timeout;
}

export class RunSlots {
  private running = 0;
  private runningHttp = 0;
  private readonly waiters: Waiter[] = [];

  constructor(readonly limits: RunSlotLimits = DEFAULT_RUN_SLOT_LIMITS) {
    const { total, http, httpQueue, queueWaitMs } = limits;
    const whole = (value: number) => Number.isInteger(value) && value >= 0;
    if (!whole(total) || total < 1 || !whole(http) || http < 1 || http > total || !whole(httpQueue) || !(queueWaitMs >= 0)) {
      throw new RangeError(`run slot limits must be whole numbers with 1 <= http <= total (got ${JSON.stringify(limits)})`);
    }
  }

  /** Runs holding a slot now, and runs waiting for one (for tests and metrics). */
  load(): { running: number; runningHttp: number; waiting: number } {
    return { running: this.running, runningHttp: this.runningHttp, waiting: this.waiters.length };
  }

  /**
   * A slot: `slot` resolves with its release once one is free and rejects with OverloadError when
   * none comes in time; `promote` turns a waiting HTTP run into an admission run (an apiserver
   * request joined it), which may then take the slots HTTP callers may not.
   */
  acquire(kind: RunKind): { slot: Promise<() => void>; promote: () => void } {
    // Every release grants the waiters that fit, so those still waiting cannot take this slot.
    if (this.fits(kind)) return { slot: Promise.resolve(this.take(kind)), promote: () => undefined };
    const retryAfterSeconds = Math.max(1, Math.ceil(this.limits.queueWaitMs / 1000));
    if (kind === 'http' && this.waiters.filter((waiter) => waiter.kind === 'http').length >= this.limits.httpQueue) {
      const shed = Promise.reject(
        new OverloadError(
          `too many on-demand evaluations: ${this.runningHttp} running and ${this.limits.httpQueue} waiting; not evaluated, retry later`,
          retryAfterSeconds,
        ),
      );
      return { slot: shed, promote: () => undefined };
    }
    let waiter: Waiter | undefined;
    const slot = new Promise<() => void>((resolve, reject) => {
      const queued: Waiter = {
        kind,
        grant: (release) => {
          clearTimeout(queued.timer);
          resolve(release);
        },
        timer: setTimeout(() => {
          this.waiters.splice(this.waiters.indexOf(queued), 1);
          reject(
            new OverloadError(
              `no evaluation slot became free within ${this.limits.queueWaitMs} ms (${this.running} evaluations running); not evaluated`,
              retryAfterSeconds,
            ),
          );
        }, this.limits.queueWaitMs),
      };
      waiter = queued;
      this.waiters.push(queued);
    });
    const promote = () => {
      if (waiter === undefined || waiter.kind === 'admission' || !this.waiters.includes(waiter)) return;
      waiter.kind = 'admission';
      this.grantWaiting();
    };
    return { slot, promote };
  }

  private fits(kind: RunKind): boolean {
    return this.running < this.limits.total && (kind !== 'http' || this.runningHttp < this.limits.http);
  }

  private take(kind: RunKind): () => void {
    this.running += 1;
    if (kind === 'http') this.runningHttp += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running -= 1;
      if (kind === 'http') this.runningHttp -= 1;
      this.grantWaiting();
    };
  }

  /** First come, first served, except that an HTTP waiter over its share lets an admission pass. */
  private grantWaiting(): void {
    for (let index = 0; index < this.waiters.length && this.running < this.limits.total;) {
      const waiter = this.waiters[index];
      if (waiter !== undefined && this.fits(waiter.kind)) {
        this.waiters.splice(index, 1);
        waiter.grant(this.take(waiter.kind));
      } else {
        index += 1;
      }
    }
  }
}

const STALL_SAMPLE_MS = 50;

/** Lateness up to this much per tick is the machine's scheduling noise, not a blocked loop. */
const STALL_FLOOR_MS = 50;

/**
 * Watches this process's event loop while a run is under way: how long, in total, a 50 ms timer
 * fired more than 50 ms late. Many stalls starve a probe as surely as one long one, so they are
 * summed; the few ms a busy machine delays every timer are not, or every long run would count.
 * A run whose probes waited that long on our own loop may report a member as timed out that
 * answered in time, so its failure says nothing about etcd.
 */
export function watchEventLoopStalls(): { stop: () => number } {
  let late = 0;
  let expected = performance.now() + STALL_SAMPLE_MS;
  const timer = setInterval(() => {
    const now = performance.now();
    late += Math.max(0, now - expected - STALL_FLOOR_MS);
    expected = now + STALL_SAMPLE_MS;
  }, STALL_SAMPLE_MS);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      // The wait since the last tick counts too: a stall may be going on right now.
      return Math.round(late + Math.max(0, performance.now() - expected - STALL_FLOOR_MS));
    },
  };
}

/**
 * Stalls adding up to half the target's own timeout can turn an answer that came in the first
 * half of its budget into a timeout; a member that answered later than that was slow on its own.
 */
export function starvedStallMs(targetTimeoutMs: number): number {
  return Math.max(200, Math.round(targetTimeoutMs / 2));
}
