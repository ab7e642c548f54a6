// Writes Events (events.k8s.io/v1) the way client-go's events recorder does, so a burst of
// denials becomes one Event with a growing series count instead of a flood:
// - Events with the same regarding object, reason, action, type and reporting controller are
//   one series. The first is created; the second turns it into a series (count 2, written at
//   once); later ones only count. A series is written again every `refreshMs` while it goes on,
//   and a last time once nothing was added for `finishMs` (then it is forgotten). A single Event
//   is forgotten after `finishMs`.
// - Per regarding object a token bucket (client-go's spam filter: burst 25, one more every 5
//   minutes) caps the writes, and the queue of pending writes is bounded; what does not fit is
//   dropped and counted, never waited for.
// - record() only queues: it returns at once and never throws. One write at a time, each with
//   its own deadline; a failed or timed-out write is counted and logged, and changes nothing else.
// - The series table and the queue are bounded for the whole process but shared fairly between
//   namespaces (tenants): when one is full, a namespace holding fewer entries takes the place of
//   the oldest series (or the newest queued write) of the namespace holding the most, so one
//   namespace's flood of denials on distinct objects never silences another's Events.
import { monotonicNowMs } from '../domain/deadline.js';
import type { EventIntent } from '../domain/events.js';
import type { EventObject, EventSeries, EventSink } from '../ports/events.js';

export type EventWriteResult = 'created' | 'patched' | 'failed' | 'dropped';

export interface EventRecorderOptions {
  sink: EventSink;
  /** e.g. etcd-guard.io/webhook */
  reportingController: string;
  /** The pod (or host) name; cut to 128 characters. */
  reportingInstance: string;
  now?: () => Date;
  /** Monotonic milliseconds for the series and bucket timing; tests drive it. */
  clockMs?: () => number;
  /** Deadline of one write. */
  writeTimeoutMs?: number;
  finishMs?: number;
  refreshMs?: number;
  /** Pending writes beyond this are dropped. */
  maxQueued?: number;
  /** Series tracked at once; a new one beyond this is dropped. */
  maxSeries?: number;
  spamBurst?: number;
  spamRefillMs?: number;
  onWrite?: (result: EventWriteResult, event: Pick<EventIntent, 'reason'>) => void;
  onError?: (message: string, event: Pick<EventIntent, 'reason' | 'regarding'>) => void;
}

/** client-go tools/events: a series is finished after 6 minutes without a new occurrence, refreshed every 30. */
export const EVENT_FINISH_MS = 6 * 60_000;
export const EVENT_REFRESH_MS = 30 * 60_000;
/** client-go tools/record's spam filter: 25 at once per object, then one per 5 minutes. */
export const EVENT_SPAM_BURST = 25;
export const EVENT_SPAM_REFILL_MS = 5 * 60_000;
export const EVENT_WRITE_TIMEOUT_MS = 2_000;
export const EVENT_MAX_QUEUED = 1_000;
export const EVENT_MAX_SERIES = 4_096;
const MAX_REPORTING_INSTANCE = 128;

interface Entry {
  key: string;
  event: EventObject;
  /** Monotonic ms of the last occurrence and of the last write. */
  lastSeenMs: number;
  lastWrittenMs: number;
  /** Occurrences not yet written. */
  dirty: boolean;
  /** When the last occurrence was seen, formatted only when a write carries it. */
  lastObserved?: Date;
}

type Write = { kind: 'create'; entry: Entry; body: EventObject } | { kind: 'patch'; entry: Entry; series: EventSeries };

/** MicroTime: RFC 3339 with microseconds, as the API server wants eventTime and lastObservedTime. */
export function microTime(date: Date): string {
  // toISOString always ends in ".sssZ": the microseconds are its milliseconds and three zeros.
  const iso = date.toISOString();
  return `${iso.slice(0, -1)}000Z`;
}

/**
 * One series per object incarnation: the uid is part of it, so an object deleted and created again
 * under its name starts a new Event (regarding the new uid, which kubectl describe of the new object
 * selects) instead of counting on in the old one's.
 */
function seriesKey(controller: string, event: EventIntent): string {
  const r = event.regarding;
  return JSON.stringify([
    controller,
    r.apiVersion,
    r.kind,
    r.namespace,
    r.name,
    r.uid ?? '',
    event.reason,
    event.action,
    event.type,
  ]);
}

/**
 * The spam bucket's key leaves the uid out (client-go's keeps it): the budget belongs to the name,
 * so recreating an object, or a uid that is there on one request and malformed on the next, never
 * buys a fresh burst of writes.
 */
function objectKey(event: EventIntent): string {
  const r = event.regarding;
  return JSON.stringify([r.apiVersion, r.kind, r.namespace, r.name]);
}

/** The namespace an intent's Event is written to: its object's. */
function namespaceOf(event: Pick<EventIntent, 'regarding'>): string {
  return event.regarding.namespace ?? '';
}

/** Members grouped by namespace, each group in insertion order (its first is its oldest). */
class NamespaceShares<T> {
  private readonly groups = new Map<string, Set<T>>();

  add(namespace: string, member: T): void {
    let group = this.groups.get(namespace);
    if (group === undefined) this.groups.set(namespace, (group = new Set()));
    group.add(member);
  }

  delete(namespace: string, member: T): void {
    const group = this.groups.get(namespace);
    if (group?.delete(member) === true && group.size === 0) this.groups.delete(namespace);
  }

  count(namespace: string): number {
    return this.groups.get(namespace)?.size ?? 0;
  }

  /**
   * The group to take a place from for `namespace`: the largest, when it holds at least two more
   * than `namespace` does (taking from a group one larger would only swap who is short).
   */
  donorFor(namespace: string): Set<T> | undefined {
    let largest: Set<T> | undefined;
    for (const group of this.groups.values()) if (largest === undefined || group.size > largest.size) largest = group;
    return largest !== undefined && largest.size >= this.count(namespace) + 2 ? largest : undefined;
  }
}

export class EventRecorder {
  private readonly series = new Map<string, Entry>();
  private readonly seriesShares = new NamespaceShares<Entry>();
  private readonly queueShares = new NamespaceShares<Write>();
  private readonly buckets = new Map<string, { tokens: number; refilledMs: number }>();
  private readonly queue: Write[] = [];
  private draining: Promise<void> | null = null;
  private nameCounter = 0;
  private readonly o: Required<Omit<EventRecorderOptions, 'onWrite' | 'onError'>> &
    Pick<EventRecorderOptions, 'onWrite' | 'onError'>;

  constructor(options: EventRecorderOptions) {
    this.o = {
      now: () => new Date(),
      clockMs: monotonicNowMs,
      writeTimeoutMs: EVENT_WRITE_TIMEOUT_MS,
      finishMs: EVENT_FINISH_MS,
      refreshMs: EVENT_REFRESH_MS,
      maxQueued: EVENT_MAX_QUEUED,
      maxSeries: EVENT_MAX_SERIES,
      spamBurst: EVENT_SPAM_BURST,
      spamRefillMs: EVENT_SPAM_REFILL_MS,
      ...options,
      reportingInstance: options.reportingInstance.slice(0, MAX_REPORTING_INSTANCE),
    };
  }

  /** Queues what `event` calls for and returns at once; never throws. */
  record(event: EventIntent): void {
    try {
      this.recordNow(event);
    } catch (error) {
      this.o.onError?.(`recording failed: ${error instanceof Error ? error.message : String(error)}`, event);
    }
  }

  private recordNow(event: EventIntent): void {
    const nowMs = this.o.clockMs();
    const key = seriesKey(this.o.reportingController, event);
    const entry = this.series.get(key);
    if (entry !== undefined) {
      entry.lastSeenMs = nowMs;
      // A flood of denials of one object ends here, once per request: count, keep the time, and
      // leave its formatting to the write that carries it (tick).
      entry.lastObserved = this.o.now();
      if (entry.event.series !== undefined) {
        entry.event.series.count += 1;
        entry.dirty = true;
        return;
      }
      entry.event.series = { count: 2, lastObservedTime: microTime(entry.lastObserved) };
      this.enqueue({ kind: 'patch', entry, series: { ...entry.event.series } }, event);
      return;
    }
    if (this.series.size >= this.o.maxSeries && !this.evictSeriesFor(namespaceOf(event))) {
      this.dropped(event);
      return;
    }
    const created: Entry = { key, event: this.eventObject(event), lastSeenMs: nowMs, lastWrittenMs: nowMs, dirty: false };
    this.series.set(key, created);
    this.seriesShares.add(namespaceOf(created.event), created);
    this.enqueue({ kind: 'create', entry: created, body: structuredClone(created.event) }, event);
  }

  /** Forgets the oldest series of the namespace holding the most, if it holds enough more than `namespace`. */
  private evictSeriesFor(namespace: string): boolean {
    const oldest = this.seriesShares.donorFor(namespace)?.values().next().value;
    if (oldest === undefined) return false;
    this.forgetSeries(oldest);
    return true;
  }

  private forgetSeries(entry: Entry): void {
    if (this.series.get(entry.key) !== entry) return;
    this.series.delete(entry.key);
    this.seriesShares.delete(namespaceOf(entry.event), entry);
  }

  /**
   * Writes series that ended (nothing new for finishMs) or are due a refresh, and forgets ended
   * ones. Runs on a timer (start()); tests call it with their own clock.
   */
  tick(): void {
    const nowMs = this.o.clockMs();
    for (const entry of this.series.values()) {
      const finished = nowMs - entry.lastSeenMs >= this.o.finishMs;
      const refreshDue = nowMs - entry.lastWrittenMs >= this.o.refreshMs;
      if (entry.event.series !== undefined && entry.dirty && (finished || refreshDue)) {
        entry.dirty = false;
        if (entry.lastObserved !== undefined) entry.event.series.lastObservedTime = microTime(entry.lastObserved);
        this.enqueue({ kind: 'patch', entry, series: { ...entry.event.series } }, entry.event);
      }
      if (finished) this.forgetSeries(entry);
    }
    // A full bucket is the same as none: forget it, so the map holds only recently busy objects.
    for (const [key, bucket] of this.buckets) {
      this.refill(bucket, nowMs);
      if (bucket.tokens >= this.o.spamBurst) this.buckets.delete(key);
    }
  }

  /** Runs tick() every `intervalMs` (unref'd) until the returned stop is called. */
  start(intervalMs = Math.min(this.o.finishMs, 60_000)): () => void {
    const timer = setInterval(() => this.tick(), intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Resolves when every queued write has been attempted (tests, and a short-lived run before exit). */
  async flush(): Promise<void> {
    while (this.draining !== null) await this.draining;
  }

  /** Series being tracked (for tests and the bench). */
  get tracked(): number {
    return this.series.size;
  }

  private eventObject(event: EventIntent): EventObject {
    const now = this.o.now();
    // Like client-go: the object's name and the time, unique per recorder.
    const suffix = `${now.getTime().toString(16)}${(this.nameCounter++ % 4096).toString(16).padStart(3, '0')}`;
    const base = event.regarding.name.slice(0, 253 - suffix.length - 1);
    return {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: `${base}.${suffix}`, namespace: event.regarding.namespace },
      eventTime: microTime(now),
      reportingController: this.o.reportingController,
      reportingInstance: this.o.reportingInstance,
      regarding: { ...event.regarding },
      type: event.type,
      reason: event.reason,
      action: event.action,
      note: event.note,
    };
  }

  private refill(bucket: { tokens: number; refilledMs: number }, nowMs: number): void {
    const refills = Math.floor((nowMs - bucket.refilledMs) / this.o.spamRefillMs);
    if (refills <= 0) return;
    bucket.tokens = Math.min(this.o.spamBurst, bucket.tokens + refills);
    bucket.refilledMs += refills * this.o.spamRefillMs;
  }

  private takeToken(event: EventIntent): boolean {
    const key = objectKey(event);
    const nowMs = this.o.clockMs();
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      bucket = { tokens: this.o.spamBurst, refilledMs: nowMs };
      this.buckets.set(key, bucket);
    }
    this.refill(bucket, nowMs);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  private enqueue(write: Write, event: Pick<EventIntent, 'reason' | 'regarding'> & Partial<EventIntent>): void {
    const intent = write.entry.event;
    const namespace = namespaceOf(intent);
    if ((this.queue.length >= this.o.maxQueued && !this.evictQueuedFor(namespace)) || !this.takeToken(intent)) {
      this.unqueued(write, event);
      return;
    }
    this.queue.push(write);
    this.queueShares.add(namespace, write);
    this.draining ??= this.drain().finally(() => {
      this.draining = null;
    });
  }

  /** A write that will not be made: the occurrence stays counted in its series (a later tick writes it), a create is forgotten. */
  private unqueued(write: Write, event: Pick<EventIntent, 'reason'>): void {
    if (write.kind === 'patch') write.entry.dirty = true;
    else this.forgetSeries(write.entry);
    this.dropped(event);
  }

  /** Drops the newest queued write of the namespace holding the most, if it holds enough more than `namespace`. */
  private evictQueuedFor(namespace: string): boolean {
    const donor = this.queueShares.donorFor(namespace);
    if (donor === undefined) return false;
    let newest: Write | undefined;
    for (const write of donor) newest = write;
    if (newest === undefined) return false;
    const index = this.queue.lastIndexOf(newest);
    if (index !== -1) this.queue.splice(index, 1);
    this.queueShares.delete(namespaceOf(newest.entry.event), newest);
    this.unqueued(newest, newest.entry.event);
    return true;
  }

  private dropped(event: Pick<EventIntent, 'reason'>): void {
    this.o.onWrite?.('dropped', event);
  }

  private async drain(): Promise<void> {
    // Let the caller (an admission answer) go first: writes start on a later turn of the loop.
    await new Promise<void>((resolve) => setImmediate(resolve));
    for (let write = this.queue.shift(); write !== undefined; write = this.queue.shift()) {
      this.queueShares.delete(namespaceOf(write.entry.event), write);
      await this.write(write);
    }
  }

  private async write(write: Write): Promise<void> {
    const { event } = write.entry;
    try {
      if (write.kind === 'create') {
        await this.o.sink.create(write.body, this.o.writeTimeoutMs);
      } else {
        try {
          await this.o.sink.patchSeries(event.metadata.namespace, event.metadata.name, write.series, this.o.writeTimeoutMs);
        } catch (error) {
          // Like client-go: a series whose Event is gone (expired, deleted) is created again.
          if ((error as { notFound?: unknown }).notFound !== true) throw error;
          await this.o.sink.create({ ...structuredClone(event), series: write.series }, this.o.writeTimeoutMs);
        }
      }
      write.entry.lastWrittenMs = this.o.clockMs();
      this.o.onWrite?.(write.kind === 'create' ? 'created' : 'patched', event);
    } catch (error) {
      this.o.onWrite?.('failed', event);
      this.o.onError?.(error instanceof Error ? error.message : String(error), event);
    }
  }
}

/**
 * Writes through the kubeconfig (else KUBECONFIG, in-cluster, ~/.kube/config), loaded on first
 * write or by warm(); a failed load is retried by the next write.
 */
export function lazyKubeEventSink(kubeconfigFile: string | undefined): EventSink & { warm: () => Promise<void> } {
  let sink: Promise<EventSink> | undefined;
  const load = () => {
    const loading = (sink ??= Promise.all([import('../adapters/kube-events.js'), import('../adapters/kube.js')]).then(
      ([events, kube]) => events.createEventSink(kube.loadKubeConfig(kubeconfigFile)),
    ));
    loading.catch(() => {
      if (sink === loading) sink = undefined;
    });
    return loading;
  };
  return {
    create: async (event, timeoutMs) => (await load()).create(event, timeoutMs),
    patchSeries: async (namespace, name, series, timeoutMs) => (await load()).patchSeries(namespace, name, series, timeoutMs),
    /** Settles when the load has succeeded or failed; never rejects. */
    warm: () =>
      load().then(
        () => undefined,
        () => undefined,
      ),
  };
}

/** The name Events give as reportingInstance: the pod's (POD_NAME from the downward API), else the host's. */
export function reportingInstance(env: Readonly<Record<string, string | undefined>>, hostname: string): string {
  return env.POD_NAME?.trim() || hostname;
}
