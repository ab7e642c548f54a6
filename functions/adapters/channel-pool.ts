// Connections kept open between evaluations in a long-running process (the webhook), so that an
// evaluation costs round trips, not handshakes. Generic over what is kept: an etcd member's gRPC
// channel (etcd-member-probe.ts), a Cluster API target's port-forward access (capi-etcd-access.ts).
// Bounded three ways: an idle timeout (whatever nobody used for that long is closed, so sockets
// return to baseline), a cap per target and a cap for the process (at a cap the least recently
// used idle entry goes; when every entry is in use the caller gets none and opens its own for
// this evaluation alone, as the CLI does). An entry that failed is retired at once: nobody new gets
// it, and it closes when its last user lets go. Never blocks, never throws from a timer.

export interface Poolable {
  /** False once it cannot serve another evaluation (shut down, a relay gone): the pool then opens a new one. */
  usable(): boolean;
  close(): void;
}

export interface PoolLimits {
  /** An entry nobody has used for this long is closed. */
  idleTimeoutMs: number;
  /** Entries kept for one target at most. */
  maxPerTarget: number;
  /** Entries kept for the whole process at most. */
  maxTotal: number;
}

/**
 * A kept entry is not handed out after this long, however busy: a connection verified the server
 * once, and a serving certificate replaced on a running member must be verified again, within the
 * same bound as a kept TLS session ticket (tls-sessions.ts).
 */
export const MAX_KEPT_LIFETIME_MS = 10 * 60_000;

/** What a user holds: the entry, and how to hand it back. */
export interface Lease<T extends Poolable> {
  readonly value: T;
  /** This entry failed or timed out: nobody new gets it; it closes once every user released it. */
  fail(): void;
  /** Done with it (once); a healthy entry stays open for the next user until its idle timeout. */
  release(): void;
}

interface Entry<T extends Poolable> {
  readonly key: string;
  readonly target: string;
  readonly value: T;
  users: number;
  retired: boolean;
  lastUsedMs: number;
  idleTimer: NodeJS.Timeout | undefined;
  shut: boolean;
  readonly openedMs: number;
}

export interface PoolCounts {
  /** Entries open (idle and in use). */
  open: number;
  idle: number;
  /** Entries open per target. */
  byTarget: Record<string, number>;
}

export class KeptPool<T extends Poolable> {
  private readonly entries = new Map<string, Entry<T>>();
  private readonly perTarget = new Map<string, Set<Entry<T>>>();
  private closed = false;

  constructor(readonly limits: PoolLimits) {
    for (const [name, value] of Object.entries(limits)) {
      if (!(typeof value === 'number' && Number.isFinite(value) && value > 0)) {
        throw new RangeError(`pool limit ${name} must be a positive number (got ${String(value)})`);
      }
    }
  }

  /**
   * The kept entry for `key` (of `target`) when it is still usable, else a new one from `open`,
   * kept when the caps leave room; null when they leave none (every kept entry is in use): the
   * caller then opens its own for this use alone. `open` may throw; nothing is kept then.
   */
  acquire(target: string, key: string, open: () => T): Lease<T> | null {
    const kept = this.lookup(target, key);
    if (kept !== null || this.closed || !this.makeRoom(target)) return kept;
    return this.insert(target, key, open());
  }

  /** The kept entry for `key` (of `target`) when it is still usable (and young enough), else null. */
  lookup(target: string, key: string): Lease<T> | null {
    if (this.closed) return null;
    const existing = this.entries.get(entryKey(target, key));
    if (existing === undefined) return null;
    const young = performance.now() - existing.openedMs < MAX_KEPT_LIFETIME_MS;
    if (young && existing.value.usable()) return this.lease(existing);
    this.retire(existing);
    return null;
  }

  /**
   * Keeps `value`, opened by the caller (asynchronously, so acquire could not), and leases it;
   * null when the caps leave no room: the caller still owns it and closes it when done.
   */
  adopt(target: string, key: string, value: T): Lease<T> | null {
    if (this.closed) return null;
    const existing = this.entries.get(entryKey(target, key));
    if (existing !== undefined) this.retire(existing);
    return this.makeRoom(target) ? this.insert(target, key, value) : null;
  }

  private insert(target: string, key: string, value: T): Lease<T> {
    const entry: Entry<T> = {
      // Entries are a target's own: its caps count them, and its failures retire only them.
      key: entryKey(target, key),
      target,
      value,
      users: 0,
      retired: false,
      lastUsedMs: 0,
      idleTimer: undefined,
      shut: false,
      openedMs: performance.now(),
    };
    this.entries.set(entry.key, entry);
    let set = this.perTarget.get(target);
    if (set === undefined) this.perTarget.set(target, (set = new Set()));
    set.add(entry);
    return this.lease(entry);
  }

  /** Retires every entry of `target` whose key `matches` (what they relayed through is gone). */
  retireWhere(target: string, matches: (key: string) => boolean): void {
    for (const entry of [...(this.perTarget.get(target) ?? [])]) {
      if (matches(entry.key.slice(target.length + 1))) this.retire(entry);
    }
  }

  counts(): PoolCounts {
    const byTarget: Record<string, number> = {};
    let idle = 0;
    for (const entry of this.entries.values()) {
      byTarget[entry.target] = (byTarget[entry.target] ?? 0) + 1;
      if (entry.users === 0) idle += 1;
    }
    return { open: this.entries.size, idle, byTarget };
  }

  /** Closes every entry, in use or not; later acquires get null. */
  close(): void {
    this.closed = true;
    for (const entry of [...this.entries.values()]) {
      this.retire(entry);
      shut(entry);
    }
  }

  private lease(entry: Entry<T>): Lease<T> {
    entry.users += 1;
    if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer);
    entry.idleTimer = undefined;
    let released = false;
    return {
      value: entry.value,
      fail: () => this.retire(entry),
      release: () => {
        if (released) return;
        released = true;
        entry.users -= 1;
        entry.lastUsedMs = performance.now();
        if (entry.users > 0) return;
        if (entry.retired) shut(entry);
        else this.idleLater(entry);
      },
    };
  }

  private idleLater(entry: Entry<T>): void {
    entry.idleTimer = setTimeout(() => {
      entry.idleTimer = undefined;
      if (entry.users === 0) this.retire(entry);
    }, this.limits.idleTimeoutMs);
    // An idle connection must not keep the process alive.
    entry.idleTimer.unref();
  }

  /** Out of the pool; closed now when nobody uses it, else by its last release. */
  private retire(entry: Entry<T>): void {
    if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer);
    entry.idleTimer = undefined;
    if (!entry.retired) {
      entry.retired = true;
      if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
      const set = this.perTarget.get(entry.target);
      set?.delete(entry);
      if (set?.size === 0) this.perTarget.delete(entry.target);
    }
    if (entry.users === 0) shut(entry);
  }

  /** Room for one more entry of `target` under both caps, evicting idle entries, oldest first. */
  private makeRoom(target: string): boolean {
    while ((this.perTarget.get(target)?.size ?? 0) >= this.limits.maxPerTarget) {
      if (!this.evictIdle(this.perTarget.get(target) ?? new Set())) return false;
    }
    while (this.entries.size >= this.limits.maxTotal) {
      if (!this.evictIdle(this.entries.values())) return false;
    }
    return true;
  }

  private evictIdle(candidates: Iterable<Entry<T>>): boolean {
    let oldest: Entry<T> | undefined;
    for (const entry of candidates) {
      if (entry.users === 0 && (oldest === undefined || entry.lastUsedMs < oldest.lastUsedMs)) oldest = entry;
    }
    if (oldest === undefined) return false;
    this.retire(oldest);
    return true;
  }
}

function entryKey(target: string, key: string): string {
  return `${target}\0${key}`;
}

/** Closes the entry's value once. */
function shut(entry: Entry<Poolable>): void {
  if (entry.shut) return;
  entry.shut = true;
  try {
    entry.value.close();
  } catch {
    // Closing is best effort: whatever cannot close has nothing left to release.
  }
}
