// Attacks on the guard's file descriptors through members that never answer, on a real 3-member
// etcd: a SIGSTOPped member keeps every TCP connection open and never finishes a TLS handshake.
// grpc-js's channel close() never destroyed the socket of a connect still in its handshake, so
// each evaluation of a hung member left 3-4 sockets behind (a long-running process reached
// EMFILE). Also: the watch probe's key is deleted even when the watch times out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { targetSchema, type TargetConfig } from '../../functions/domain/config.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { mapWithConcurrency } from '../../functions/usecases/scheduled-run.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { openSockets } from '../harness/sockets.js';
import { waitFor } from '../harness/wait.js';

const WATCH_PREFIX = '/etcd-guard/watch-probe/';
/** Sockets closed by a peer's FIN settle within a few event loop turns; this bounds the wait. */
const SETTLE_MS = 5_000;

let cluster: EtcdTestCluster;

function targetFor(options: { timeout: string; watchProbe?: boolean }): TargetConfig {
  return targetSchema.parse({ name: 'hung', endpoints: cluster.endpoints, tls: cluster.clientTls, ...options });
}

/** A follower's index: with the leader stopped no write gets through until an election. */
async function followerIndex(): Promise<number> {
  const leader = await cluster.leaderIndex();
  return leader === 2 ? 1 : 2;
}

beforeAll(async () => {
  cluster = await startEtcdCluster({ name: 'hung' });
  // Warm up: the first evaluation loads grpc-js and opens process-wide handles that stay.
  await evaluateTarget(targetFor({ timeout: '2s', watchProbe: true }));
}, 60_000);

afterAll(async () => {
  await cluster?.destroy();
});

describe('a hung member cannot exhaust file descriptors', () => {
  it('200 evaluations with one member SIGSTOPped (watch probe on) leave open sockets at the baseline', async () => {
    const before = openSockets();
    const victim = await followerIndex();
    const target = targetFor({ timeout: '400ms', watchProbe: true });
    cluster.pause(victim);
    let peak = before;
    let unhealthy = 0;
    try {
      await mapWithConcurrency(
        Array.from({ length: 200 }, (_, run) => run),
        8,
        async () => {
          const evaluation = await evaluateTarget(target);
          if (evaluation.verdict === 'Unhealthy') unhealthy += 1;
          peak = Math.max(peak, openSockets());
        },
      );
      const settled = await waitFor(`open sockets back to ${before}`, SETTLE_MS, () => openSockets() <= before).then(
        () => true,
        () => false,
      );
      console.log(
        `hung member, 200 evaluations (watch probe on, 8 at a time): sockets ${before} before, peak ${peak}, ` +
          `${openSockets()} after (member still stopped)`,
      );
      expect(unhealthy).toBe(200);
      expect(settled).toBe(true);
    } finally {
      cluster.resume(victim);
    }
    await cluster.waitHealthy();
  }, 120_000);

  it('5 storms of 80 concurrent timed-out evaluations (every member SIGSTOPped) leave open sockets at the baseline', async () => {
    const before = openSockets();
    const target = targetFor({ timeout: '300ms' });
    const counts: number[] = [];
    cluster.members.forEach((_, index) => cluster.pause(index));
    try {
      for (let storm = 0; storm < 5; storm += 1) {
        const evaluations = await Promise.all(Array.from({ length: 80 }, () => evaluateTarget(target)));
        expect(evaluations.every((evaluation) => evaluation.verdict === 'Unhealthy')).toBe(true);
        await waitFor(`open sockets back to ${before} after storm ${storm + 1}`, SETTLE_MS, () => openSockets() <= before).catch(
          () => undefined,
        );
        counts.push(openSockets());
      }
      console.log(`5 storms of 80 timed-out evaluations: sockets ${before} before, after each storm ${counts.join(', ')}`);
      expect(Math.max(...counts)).toBeLessThanOrEqual(before);
    } finally {
      cluster.members.forEach((_, index) => cluster.resume(index));
    }
    await cluster.waitHealthy();
  }, 120_000);
});

describe('the watch probe key', () => {
  // An isolated member keeps serving its clients: the watch on it is created, the write through
  // another member commits, and the watch never delivers it, so the round trip times out after
  // the key was written (a SIGSTOPped member never even creates the watch).
  let partitioned: EtcdTestCluster;
  beforeAll(async () => {
    partitioned = await startEtcdCluster({ name: 'cut', peerProxies: true });
  }, 60_000);
  afterAll(async () => {
    await partitioned?.destroy();
  });

  it('is deleted when the watch on a cut-off member times out after the write', async () => {
    const leader = await partitioned.leaderIndex();
    const victim = leader === 2 ? 1 : 2;
    const others = partitioned.members.filter((_, index) => index !== victim).map((member) => member.clientUrl);
    const keys = async () => {
      const result = await partitioned.etcdctl(['get', '--prefix', WATCH_PREFIX, '--keys-only', '-w', 'json'], {
        endpoints: others,
      });
      if (result.code !== 0) throw new Error(`etcdctl get failed: ${result.stderr}`);
      return ((JSON.parse(result.stdout) as { kvs?: unknown[] }).kvs ?? []).length;
    };
    const revision = async () => {
      const result = await partitioned.etcdctl(['get', 'x', '-w', 'json'], { endpoints: others });
      return Number((JSON.parse(result.stdout) as { header: { revision: number } }).header.revision);
    };
    await partitioned.isolate(victim);
    const before = await revision();
    const target = targetSchema.parse({
      name: 'cut',
      endpoints: partitioned.endpoints,
      tls: partitioned.clientTls,
      timeout: '1s',
      watchProbe: true,
    });
    const started = performance.now();
    const evaluation = await evaluateTarget(target);
    const evaluationMs = performance.now() - started;
    expect(evaluation.checks.find((check) => check.name === 'watch')).toMatchObject({
      status: 'fail',
      message: expect.stringContaining(`watch on member ${partitioned.members[victim]?.name}`) as string,
    });
    await waitFor('the watch probe keys to be deleted', 3_000, async () => (await keys()) === 0);
    const deletedMs = performance.now() - started;
    // Three puts and three deletes: the key of the cut-off member was written, then deleted.
    expect((await revision()) - before).toBe(6);
    console.log(
      `watch key of a cut-off member deleted ${deletedMs.toFixed(0)} ms after the start (evaluation returned at ${evaluationMs.toFixed(0)} ms)`,
    );
  });
});
