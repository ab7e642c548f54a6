// Sharding the scheduled run (functions/domain/shard.ts): every target lands in exactly one shard,
// shards are roughly even, and growing the shard count moves only the targets the new shard takes.
import { describe, expect, it } from 'vitest';
import { MAX_SHARD_COUNT, parseShardSpec, selectShard, shardOf } from './shard.js';

// Names shaped like the fleet's targets: static names and discovered capi/druid names.
const TARGETS = Array.from({ length: 600 }, (_, index) => {
  const kind = ['capi', 'druid', 'static'][index % 3] ?? 'static';
  return { name: `${kind}-ns${index % 17}-cluster-${index.toString(36)}` };
});

function assignment(count: number): Map<string, number> {
  return new Map(TARGETS.map((target) => [target.name, shardOf(target.name, count)]));
}

describe('shardOf / selectShard', () => {
  it.each([1, 2, 3, 4, 7])('%i shards cover every target exactly once', (count) => {
    const seen = new Map<string, number>();
    for (let index = 0; index < count; index += 1) {
      for (const target of selectShard(TARGETS, { index, count })) seen.set(target.name, (seen.get(target.name) ?? 0) + 1);
    }
    expect(seen.size).toBe(TARGETS.length);
    expect([...seen.values()].every((times) => times === 1)).toBe(true);
  });

  it('3 shards are roughly even (each within 25 %..42 % of 600 targets)', () => {
    const sizes = [0, 1, 2].map((index) => selectShard(TARGETS, { index, count: 3 }).length);
    for (const size of sizes) {
      expect(size).toBeGreaterThanOrEqual(0.25 * TARGETS.length);
      expect(size).toBeLessThanOrEqual(0.42 * TARGETS.length);
    }
  });

  // The ideal is 1/to of the targets (what the new shard takes); the bounds leave room for hashing.
  it.each([
    [3, 4, 40],
    [4, 5, 30],
    [1, 2, 60],
  ])('%i → %i shards moves at most %i %% of targets, each to the new shard', (from, to, maxPercent) => {
    const before = assignment(from);
    const after = assignment(to);
    const moved = TARGETS.filter((target) => before.get(target.name) !== after.get(target.name));
    const percent = (100 * moved.length) / TARGETS.length;
    console.log(`shards ${from} -> ${to}: ${moved.length}/${TARGETS.length} targets moved (${percent.toFixed(1)} %)`);
    expect(percent).toBeLessThanOrEqual(maxPercent);
    expect(percent).toBeGreaterThan(0);
    // Rendezvous hashing: a target only moves when the added shard outscores its old one.
    for (const target of moved) expect(after.get(target.name)).toBe(to - 1);
  });

  it('is a function of the name and the count only (order and the other targets do not matter)', () => {
    const reversed = [...TARGETS].reverse();
    for (let index = 0; index < 3; index += 1) {
      const forward = selectShard(TARGETS, { index, count: 3 }).map((target) => target.name);
      const backward = selectShard(reversed, { index, count: 3 }).map((target) => target.name);
      expect(new Set(backward)).toEqual(new Set(forward));
      expect(selectShard(TARGETS.slice(0, 10), { index, count: 3 }).every((target) => forward.includes(target.name))).toBe(true);
    }
  });
});

describe('parseShardSpec', () => {
  it.each([
    ['0/1', { index: 0, count: 1 }],
    ['2/3', { index: 2, count: 3 }],
    [' 0/3 ', { index: 0, count: 3 }],
    [`999/${MAX_SHARD_COUNT}`, { index: 999, count: MAX_SHARD_COUNT }],
  ])('accepts %j', (text, shard) => {
    expect(parseShardSpec(text)).toEqual({ ok: true, shard });
  });

  it.each(['0/0', '3/3', '4/3', '-1/2', 'abc', '1', '1/', '/2', '1/2/3', '1.5/3', `0/${MAX_SHARD_COUNT + 1}`, ''])(
    'refuses %j, saying what it wants and what it got',
    (text) => {
      const parsed = parseShardSpec(text);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) {
        expect(parsed.message).toContain('want INDEX/COUNT');
        expect(parsed.message).toContain(JSON.stringify(text.trim()));
      }
    },
  );
});
