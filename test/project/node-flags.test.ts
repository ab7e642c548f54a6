// V8's heap cap follows the container's memory limit: the image's ENTRYPOINT flags (read from the
// Dockerfile) make node size the old generation as half the cgroup limit it reads at start, with
// nothing of ours in between. Real node processes in real memory-limited cgroups
// (test/harness/memory-cgroup.ts), and the explicit cap the benches pass on a host without such
// a cgroup (test/harness/image-node-flags.ts) checked against what node does inside one.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { imageNodeFlags, memoryQuantityBytes, nodeFlagsUnderLimit } from '../harness/image-node-flags.js';
import { createMemoryCgroup } from '../harness/memory-cgroup.js';
import { runProcess } from '../harness/process.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const IMAGE_FLAGS = imageNodeFlags(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
const MIB = 1024 * 1024;
const PRINT_HEAP_LIMIT = "console.log(Math.round(require('node:v8').getHeapStatistics().heap_size_limit / 1048576))";
/** V8's heap limit is the old generation plus the young one (3 semi-spaces of the image's 2 MiB). */
const YOUNG_GENERATION_MIB = 16;

/** V8's heap limit (MiB) of a node started with `flags`, inside a cgroup of `limitBytes` when given. */
async function heapLimitMiB(flags: readonly string[], limitBytes: number | null): Promise<number> {
  const cgroup = limitBytes === null ? null : await createMemoryCgroup('etcd-guard-heap', limitBytes);
  try {
    const args = [...flags, '-e', PRINT_HEAP_LIMIT];
    const [command, commandArgs] = cgroup === null ? [process.execPath, args] : cgroup.wrap(process.execPath, args);
    const run = await runProcess(command, commandArgs, { env: { ...process.env, NODE_OPTIONS: '' }, timeoutMs: 30_000 });
    expect(run.code, run.stderr).toBe(0);
    return Number(run.stdout.trim());
  } finally {
    await cgroup?.remove();
  }
}

describe("the image's node flags", () => {
  it('name a heap percentage and the small young generation, and no fixed heap size', () => {
    expect(IMAGE_FLAGS).toContain('--max-old-space-size-percentage=50');
    expect(IMAGE_FLAGS).toContain('--max-semi-space-size=2');
    expect(IMAGE_FLAGS.filter((flag) => /^--max-old-space-size=/.test(flag))).toEqual([]);
  });
});

describe("V8's heap limit under a container memory limit, with the image's flags", () => {
  it.each([
    ['256Mi: half (below the 256 MiB node allows by itself)', '256Mi'],
    ["the manifests' 384Mi: half", '384Mi'],
    ['1Gi: half', '1Gi'],
    ['2Gi: half', '2Gi'],
  ])(
    '%s',
    async (_case, quantity) => {
      const limitBytes = memoryQuantityBytes(quantity);
      const half = limitBytes / MIB / 2;
      const limit = await heapLimitMiB(IMAGE_FLAGS, limitBytes);
      expect(limit).toBeGreaterThanOrEqual(half);
      expect(limit).toBeLessThan(half + YOUNG_GENERATION_MIB);
      // The benches' stand-in on a host without the cgroup gives V8 the same limit.
      expect(await heapLimitMiB(nodeFlagsUnderLimit(IMAGE_FLAGS, limitBytes), null)).toBe(limit);
    },
    60_000,
  );

  it('without the percentage flag, node keeps at least 256 MiB under 384Mi: the flag is what caps it', async () => {
    const withoutPercentage = IMAGE_FLAGS.filter((flag) => !flag.startsWith('--max-old-space-size-percentage'));
    expect(await heapLimitMiB(withoutPercentage, memoryQuantityBytes('384Mi'))).toBeGreaterThanOrEqual(256);
  }, 60_000);
});

describe('the explicit cap the benches pass for a pod (nodeFlagsUnderLimit)', () => {
  it.each([
    [
      '384Mi: the percentage becomes the cap, other flags stay',
      ['--max-semi-space-size=2', '--max-old-space-size-percentage=50'],
      384 * MIB,
      ['--max-semi-space-size=2', '--max-old-space-size=192'],
    ],
    ['an odd byte count rounds down', ['--max-old-space-size-percentage=50'], 300 * MIB + 1, ['--max-old-space-size=150']],
    ['another percentage', ['--max-old-space-size-percentage=75'], 1024 * MIB, ['--max-old-space-size=768']],
    ['underscores are the same flag to node', ['--max_old_space_size_percentage=50'], 384 * MIB, ['--max-old-space-size=192']],
    [
      'no limit: the percentage is dropped (V8 sizes the heap)',
      ['--max-semi-space-size=2', '--max-old-space-size-percentage=50'],
      null,
      ['--max-semi-space-size=2'],
    ],
    ['no percentage: unchanged', ['--max-semi-space-size=2'], 384 * MIB, ['--max-semi-space-size=2']],
  ] as const)('%s', (_case, flags, limitBytes, expected) => {
    expect(nodeFlagsUnderLimit(flags, limitBytes)).toEqual(expected);
  });

  it.each([['384M'], ['0.5Gi'], [''], ['384']])(
    'a memory quantity the manifests do not use (%j) is refused by name',
    (quantity) => {
      expect(() => memoryQuantityBytes(quantity)).toThrow(/expected a memory quantity like 384Mi/);
    },
  );
});
