// What a long-running process (the webhook with kept connections) may take from a recent read
// instead of reading again: inputs that change rarely and only say how to reach a cluster (TLS
// files, a Cluster API target's Secrets and management clients), never what the evaluation judges.

/**
 * Values kept for `forMs` after the load that produced them, by key; a load in flight is shared.
 * A failed load is not kept: the next caller loads again. At most `maxEntries` are kept, the one
 * loaded longest ago let go first.
 */
export class BriefReuse<V> {
  private readonly entries = new Map<string, { value: Promise<V>; loadedAtMs: number }>();

  constructor(
    private readonly forMs: number,
    private readonly nowMs: () => number = () => performance.now(),
    private readonly maxEntries = 1024,
  ) {}

  get(key: string, load: () => Promise<V>): Promise<V> {
    const kept = this.entries.get(key);
    const now = this.nowMs();
    if (kept !== undefined && now - kept.loadedAtMs < this.forMs) return kept.value;
    // Deleted first so that the Map's order stays the order of the loads.
    this.entries.delete(key);
    const entry = { value: load(), loadedAtMs: now };
    this.entries.set(key, entry);
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value ?? key);
    entry.value.catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
    return entry.value;
  }

  /** Forgets every value (on shutdown, with the kept connections). */
  clear(): void {
    this.entries.clear();
  }
}
