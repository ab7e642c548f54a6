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
import { evaluationSchema, type Evaluation } from '../functions/domain/evaluation-document.js';
import { startEtcdCluster, type EtcdTestCluster } from './harness/etcd-cluster.js';
import { freePort } from './harness/free-port.js';
import { runProcess } from './harness/process.js';
import { BOUND_SLACK_MS } from './harness/timing.js';

const BIN = path.resolve(import.meta.dirname, '../bin/etcd-guard.mjs');
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

async function runConfig(name: string, endpoints: string[]): Promise<{ wallMs: number; evaluations: Evaluation[] }> {
  const file = path.join(dir, `${name}.json`);
  await writeFile(
    file,
    JSON.stringify({
      store: { kind: 'file', dir: path.join(dir, 'store') },
      targets: [{ name, endpoints, tls: cluster.clientTls, timeout: `${TIMEOUT_MS}ms`, watchProbe: true }],
    }),
  );
  const run = await runProcess(process.execPath, [BIN, 'evaluate', '--config', file, '--store', 'none', '--output', 'json'], {
    env: { ...process.env, LOG_LEVEL: 'silent' },
  });
  expect(run.uncaught).toBeNull();
  expect(run.code, run.stderr).toBe(0);
  return { wallMs: run.wallMs, evaluations: (JSON.parse(run.stdout) as unknown[]).map((item) => evaluationSchema.parse(item)) };
}

/** The run's start-up: median of three runs against a port nobody listens on, each less its time talking to etcd. */
async function startupMs(): Promise<number> {
  const runs: number[] = [];
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const { wallMs, evaluations } = await runConfig('refused', [`https://127.0.0.1:${await freePort()}`]);
    runs.push(wallMs - (evaluations[0]?.durationMs ?? 0));
  }
  return runs.sort((left, right) => left - right)[1] ?? Number.NaN;
}

describe('the watch probe key after a CLI run (issue 30 item 12)', () => {
  it('is gone once `evaluate --config` has exited after the watch on a cut-off member timed out', async () => {
    const startup = await startupMs();
    expect(await probeKeys()).toEqual([]);
    // Two runs (two targets, so two keys): the abandoned delete sometimes raced the exit and won.
    for (const name of ['cut-a', 'cut-b']) {
      const { wallMs, evaluations } = await runConfig(name, cluster.endpoints);
      const watch = evaluations[0]?.checks.find((check) => check.name === 'watch');
      console.log(
        `CLI run with a cut-off member: ${wallMs.toFixed(0)} ms for timeout ${TIMEOUT_MS} ms (start-up ${startup.toFixed(0)} ms, evaluation durationMs ${evaluations[0]?.durationMs}); watch check: ${watch?.message}`,
      );
      // The watch on the cut-off member timed out after its key was written...
      expect(watch, JSON.stringify(evaluations[0]?.reasons)).toMatchObject({
        status: 'fail',
        message: expect.stringContaining(`watch on member ${cluster.members[victim]?.name}`) as string,
      });
      // ...and no key is left, read right after the exit, without waiting for anything.
      expect(await probeKeys()).toEqual([]);
      expect(wallMs).toBeLessThanOrEqual(startup + TIMEOUT_MS + BOUND_SLACK_MS);
    }
  });
});
