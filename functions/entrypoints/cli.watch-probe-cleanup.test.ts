// Issue 30 item 12: the watch probe's key survived a timed-out round trip in the CLI (3 of 3
// `evaluate --config` runs left /etcd-guard/watch-probe/… behind, 0 of 2 in process): the bin
// exits right after main returns and abandoned the background delete. Through the real bin on a
// real 3-member etcd with one member cut off from its peers: it keeps serving its clients, so the
// watch on it is created, the write through another member commits and is never delivered to it,
// and the round trip times out after the key was written. With `--store none` nothing follows the
// evaluation, so main returns while the delete still runs. The key must be gone once the process
// has exited, and the run must still end within start-up + timeout + 250 ms.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluationSchema, type Evaluation } from '../domain/evaluation-document.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { runProcess } from '../../test/harness/process.js';
import { BOUND_SLACK_MS } from '../../test/harness/timing.js';

const BIN = path.resolve(import.meta.dirname, '../../bin/etcd-guard.mjs');
const WATCH_PREFIX = '/etcd-guard/watch-probe/';
const TIMEOUT_MS = 1000;

let cluster: EtcdTestCluster;
let dir: string;
let victim: number;

beforeAll(async () => {
  [cluster, dir] = await Promise.all([
    startEtcdCluster({ name: 'cliwatch', peerProxies: true }),
    mkdtemp(path.join(os.tmpdir(), 'etcd-guard-cli-watch-')),
  ]);
  const leader = await cluster.leaderIndex();
  victim = leader === 2 ? 1 : 2;
  await cluster.isolate(victim);
}, 60_000);

afterAll(async () => {
  await cluster?.destroy();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The keys under the probe's prefix, read (linearizably) through the members that still have quorum. */
async function probeKeys(): Promise<string[]> {
  const others = cluster.members.filter((_, index) => index !== victim).map((member) => member.clientUrl);
  const result = await cluster.etcdctl(['get', '--prefix', WATCH_PREFIX, '--keys-only', '-w', 'json'], { endpoints: others });
  if (result.code !== 0) throw new Error(`etcdctl get failed: ${result.stderr}`);
  const kvs = (JSON.parse(result.stdout) as { kvs?: Array<{ key: string }> }).kvs ?? [];
  return kvs.map((kv) => Buffer.from(kv.key, 'base64').toString());
}

/**
 * Runs `evaluate --config` on one watched target. `sinceStartMs`: from the evaluation's start
 * (its evaluatedAt, where its deadline starts: SPEC's "start-up" ends there) to the process's
 * exit, on the same wall clock; the hard bound allows it the timeout + 250 ms.
 */
async function runConfig(name: string): Promise<{ sinceStartMs: number; evaluation: Evaluation | undefined }> {
  const file = path.join(dir, `${name}.json`);
  await writeFile(
    file,
    JSON.stringify({
      store: { kind: 'file', dir: path.join(dir, 'store') },
      targets: [{ name, endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: `${TIMEOUT_MS}ms`, watchProbe: true }],
    }),
  );
  const spawnedAt = Date.now();
  const run = await runProcess(process.execPath, [BIN, 'evaluate', '--config', file, '--store', 'none', '--output', 'json'], {
    env: { ...process.env, LOG_LEVEL: 'silent' },
  });
  expect(run.uncaught).toBeNull();
  expect(run.code, run.stderr).toBe(0);
  const [evaluation] = (JSON.parse(run.stdout) as unknown[]).map((item) => evaluationSchema.parse(item));
  return { sinceStartMs: spawnedAt + run.wallMs - Date.parse(evaluation?.evaluatedAt ?? ''), evaluation };
}

describe('the watch probe key after a CLI run (issue 30 item 12)', () => {
  it('is gone once `evaluate --config` has exited after the watch on a cut-off member timed out', async () => {
    expect(await probeKeys()).toEqual([]);
    // Two runs (two targets, so two keys): the abandoned delete sometimes raced the exit and won.
    for (const name of ['cut-a', 'cut-b']) {
      const { sinceStartMs, evaluation } = await runConfig(name);
      const watch = evaluation?.checks.find((check) => check.name === 'watch');
      console.log(
        `CLI run with a cut-off member: exited ${Math.round(sinceStartMs)} ms after the evaluation started (timeout ${TIMEOUT_MS} ms, durationMs ${evaluation?.durationMs}); watch check: ${watch?.message}`,
      );
      // The watch on the cut-off member timed out after its key was written...
      expect(watch, JSON.stringify(evaluation?.reasons)).toMatchObject({
        status: 'fail',
        message: expect.stringContaining(`watch on member ${cluster.members[victim]?.name}`) as string,
      });
      // ...and no key is left, read right after the exit, without waiting for anything.
      expect(await probeKeys()).toEqual([]);
      expect(sinceStartMs).toBeLessThanOrEqual(TIMEOUT_MS + BOUND_SLACK_MS);
    }
  });
});
