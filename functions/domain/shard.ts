// Which shard of a sharded scheduled run evaluates a target. Pure.
//
// Rendezvous (highest random weight) hashing: every shard scores the target name and the highest
// score wins. Going from COUNT to COUNT+1 shards moves only the targets the new shard wins (about
// 1/(COUNT+1) of them); every other target stays where it was, so the evaluations a shard keeps
// writing do not hop between pods each time the Job is resized. Deterministic across processes
// and machines: the score depends on the name and the shard index only.

/** One shard of COUNT: this run evaluates the targets whose shard is INDEX (0-based). */
export interface ShardSpec {
  index: number;
  count: number;
}

/** More shards than this is a typo, not a fleet. */
export const MAX_SHARD_COUNT = 1_000;

/** FNV-1a over UTF-16 code units, then murmur3's finalizer so nearby inputs spread over 32 bits. */
function hash32(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index += 1) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/** The shard (0..count-1) that owns `targetName`. */
export function shardOf(targetName: string, count: number): number {
  let best = 0;
  let bestScore = -1;
  for (let shard = 0; shard < count; shard += 1) {
    const score = hash32(`${shard}\u0000${targetName}`);
    if (score > bestScore) {
      best = shard;
      bestScore = score;
    }
  }
  return best;
}

/** The targets (by name) this shard evaluates, in their original order. */
export function selectShard<T extends { name: string }>(targets: readonly T[], shard: ShardSpec): T[] {
  return targets.filter((target) => shardOf(target.name, shard.count) === shard.index);
}

/**
 * Parses "INDEX/COUNT" (0 ≤ INDEX < COUNT ≤ MAX_SHARD_COUNT, whole numbers); the error says what
 * is wrong without the flag name, which the caller adds.
 */
export function parseShardSpec(text: string): { ok: true; shard: ShardSpec } | { ok: false; message: string } {
  const match = /^(\d{1,4})\/(\d{1,4})$/.exec(text.trim());
  const want = `want INDEX/COUNT with 0 <= INDEX < COUNT <= ${MAX_SHARD_COUNT}, e.g. 0/3`;
  if (!match) return { ok: false, message: `${want} (got ${JSON.stringify(text.slice(0, 40))})` };
  const index = Number(match[1]);
  const count = Number(match[2]);
  if (count < 1 || count > MAX_SHARD_COUNT || index >= count) {
    return { ok: false, message: `${want} (got ${JSON.stringify(text.trim())})` };
  }
  return { ok: true, shard: { index, count } };
}
