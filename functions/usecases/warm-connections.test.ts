// Issue 27, "Warm connections, bounded": the webhook keeps each member's gRPC channel open between
// evaluations (EtcdChannelPool), so a live evaluation costs round trips, not TLS handshakes. On a
// real 3-member etcd: the second evaluation makes no handshake and opens no socket; each
// evaluation still reads through raft (a write in between is seen); a SIGKILLed member that comes
// back gets a fresh channel and is judged healthy again; a SIGSTOPped one costs at most the
// target's timeout each time; idle channels close after the idle timeout (sockets back to the
// baseline); the per-target and global caps hold.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdChannelPool, tlsHandshakeCounts } from '../adapters/etcd-member-probe.js';
import type { Evaluation } from '../domain/evaluation-document.js';
import { parseGuardConfig, targetSchema, type TargetConfig } from '../domain/config.js';
import { createStore } from '../adapters/store-factory.js';
import { evaluateTarget } from './evaluate-target.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { openSockets } from '../../test/harness/sockets.js';
import { waitFor } from '../../test/harness/wait.js';
import { startTestWebhook } from '../../test/harness/webhook.js';

/** Sockets closed by us or by a peer settle within a few event loop turns; this bounds the wait. */
const SETTLE_MS = 5_000;
const LONG_IDLE_MS = 60_000;

let cluster: EtcdTestCluster;
/** Open sockets with no evaluation running and nothing kept. */
let baseline: number;

function targetFor(name = 'warm', timeout = '2s'): TargetConfig {
  return targetSchema.parse({ name, endpoints: cluster.endpoints, tls: cluster.clientTls, timeout });
}

function handshakes(): number {
  const { resumed, verified } = tlsHandshakeCounts();
  return resumed + verified;
}

function unhealthyNames(evaluation: Evaluation): string[] {
  return evaluation.members.filter((member) => !member.healthy).map((member) => member.name);
}

function pool(limits: Partial<{ idleTimeoutMs: number; maxPerTarget: number; maxTotal: number }> = {}): EtcdChannelPool {
  return new EtcdChannelPool({ idleTimeoutMs: LONG_IDLE_MS, maxPerTarget: 16, maxTotal: 256, ...limits });
}

/** Evaluates until the verdict is Healthy (after a member came back), within `timeoutMs`. */
async function healthyThrough(channels: EtcdChannelPool, target: TargetConfig, timeoutMs = 15_000): Promise<Evaluation> {
  let last: Evaluation | undefined;
  await waitFor(`target ${target.name} Healthy`, timeoutMs, async () => {
    last = await evaluateTarget(target, { channels });
    return last.verdict === 'Healthy';
  });
  if (last === undefined) throw new Error('no evaluation');
  return last;
}

/** The baseline once the previous test's closed channels are gone. */
async function settledBaseline(): Promise<number> {
  await waitFor(`open sockets back to ${baseline}`, SETTLE_MS, () => openSockets() <= baseline);
  return openSockets();
}

beforeAll(async () => {
  cluster = await startEtcdCluster({ name: 'warm' });
  const before = openSockets();
  // The first evaluation loads grpc-js and opens process-wide handles that stay.
  await evaluateTarget(targetFor());
  await waitFor('the warm-up evaluation’s sockets closed', SETTLE_MS, () => openSockets() <= before);
  baseline = openSockets();
}, 60_000);

afterAll(async () => {
  await cluster?.destroy();
});

describe('warm connections, bounded: member channels kept between evaluations', () => {
  it('the second evaluation reuses every channel: no TLS handshake, no new socket', async () => {
    const channels = pool();
    const target = targetFor();
    try {
      const baseline = await settledBaseline();
      const first = await evaluateTarget(target, { channels });
      expect(first.verdict, first.reasons.join('; ')).toBe('Healthy');
      expect(channels.counts()).toMatchObject({ open: 3, idle: 3, byTarget: { warm: 3 } });
      await waitFor('the first evaluation’s sockets settled', SETTLE_MS, () => openSockets() === baseline + 3);
      const before = handshakes();
      const second = await evaluateTarget(target, { channels });
      expect(second.verdict, second.reasons.join('; ')).toBe('Healthy');
      expect(handshakes() - before).toBe(0);
      expect(openSockets()).toBe(baseline + 3);
    } finally {
      channels.close();
    }
  });

  it('a kept channel is set up once: its calls go through as many layers on the 30th evaluation as on the 2nd', async () => {
    // etcd3's Host, whose per-service client getter the probe session wraps (one channel for all
    // services). Every call asks it for a service; the stack under that getter shows the wrappers.
    const probe = new Etcd3({ hosts: '127.0.0.1:1' });
    const host = Object.getPrototypeOf((probe as unknown as { pool: { hosts: object[] } }).pool.hosts[0]) as {
      getServiceClient: (this: unknown, name: string) => unknown;
    };
    probe.close();
    const original = host.getServiceClient;
    let deepest = 0;
    host.getServiceClient = function (this: unknown, name: string) {
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = Infinity;
      deepest = Math.max(deepest, (new Error().stack ?? '').split('\n').length);
      Error.stackTraceLimit = limit;
      return original.call(this, name);
    };
    const channels = pool();
    const target = targetFor();
    try {
      const depthOf = async () => {
        deepest = 0;
        const evaluation = await evaluateTarget(target, { channels });
        expect(evaluation.verdict, evaluation.reasons.join('; ')).toBe('Healthy');
        return deepest;
      };
      await depthOf();
      const second = await depthOf();
      for (let run = 3; run < 30; run += 1) await depthOf();
      expect(await depthOf()).toBe(second);
      expect(second).toBeGreaterThan(0);
    } finally {
      host.getServiceClient = original;
      channels.close();
    }
  });

  it('a warm channel reads through raft every time: a write between two evaluations raises the raft index', async () => {
    const channels = pool();
    const target = targetFor();
    try {
      const first = await evaluateTarget(target, { channels });
      const put = await cluster.etcdctl(['put', 'warm-connections/probe', String(Date.now())]);
      expect(put.code, put.stderr).toBe(0);
      const second = await evaluateTarget(target, { channels });
      const index = (evaluation: Evaluation) => Math.max(...evaluation.members.map((member) => member.raftIndex ?? 0));
      expect(index(second)).toBeGreaterThan(index(first));
    } finally {
      channels.close();
    }
  });

  it('a SIGKILLed member is judged dead on its warm channel, and after its restart gets a fresh channel and is healthy', async () => {
    const channels = pool();
    const target = targetFor('warm', '1s');
    // A follower: killing the leader starts an election, and while it runs no member is healthy.
    const leader = await cluster.leaderIndex();
    const victim = leader === 2 ? 1 : 2;
    let killed = false;
    try {
      expect((await evaluateTarget(target, { channels })).verdict).toBe('Healthy');
      await cluster.kill(victim);
      killed = true;
      const down = await evaluateTarget(target, { channels });
      expect(down.verdict).toBe('Unhealthy');
      expect(unhealthyNames(down), down.reasons.join('; ')).toEqual([`warm-${victim}`]);
      // The dead member's channel failed and was retired; the other two stay kept.
      expect(channels.counts().open).toBe(2);
      await cluster.restart(victim);
      killed = false;
      await cluster.waitHealthy();
      const before = handshakes();
      const back = await healthyThrough(channels, target);
      expect(unhealthyNames(back)).toEqual([]);
      expect(channels.counts().open).toBe(3);
      // Only the restarted member was dialled afresh (once per attempt until it answered).
      expect(handshakes() - before).toBeGreaterThanOrEqual(1);
      const steady = handshakes();
      await evaluateTarget(target, { channels });
      expect(handshakes() - steady).toBe(0);
    } finally {
      channels.close();
      // The suite's later tests share the cluster: a member left dead here would fail them all.
      if (killed) {
        await cluster.restart(victim);
        await cluster.waitHealthy();
      }
    }
  });

  it('a SIGSTOPped member costs at most the target timeout per evaluation, also on a warm channel, and leaves no socket behind', async () => {
    const channels = pool();
    const target = targetFor('warm', '500ms');
    const leader = await cluster.leaderIndex();
    const victim = leader === 1 ? 2 : 1;
    try {
      expect((await healthyThrough(channels, target)).verdict).toBe('Healthy');
      await waitFor('3 channels kept, nothing else open', SETTLE_MS, () => openSockets() <= baseline + 3);
      cluster.pause(victim);
      try {
        for (let round = 0; round < 3; round += 1) {
          const started = performance.now();
          const evaluation = await evaluateTarget(target, { channels });
          const elapsedMs = performance.now() - started;
          expect(unhealthyNames(evaluation)).toEqual([`warm-${victim}`]);
          expect(elapsedMs).toBeLessThan(500 + 250);
        }
        // The hung member's channel is retired each time: its sockets go, the two others stay.
        await waitFor('only the live members’ sockets kept', SETTLE_MS, () => openSockets() <= baseline + 2);
        expect(channels.counts().open).toBe(2);
      } finally {
        cluster.resume(victim);
      }
      expect((await healthyThrough(channels, target)).verdict).toBe('Healthy');
    } finally {
      channels.close();
    }
  });

  it('idle channels close after the idle timeout: open sockets return to the baseline', async () => {
    const baseline = await settledBaseline();
    const channels = pool({ idleTimeoutMs: 1_000 });
    const target = targetFor();
    try {
      await evaluateTarget(target, { channels });
      await evaluateTarget(target, { channels });
      expect(openSockets()).toBeGreaterThan(baseline);
      await waitFor('idle channels closed', 1_000 + SETTLE_MS, () => channels.counts().open === 0);
      await waitFor(`open sockets back to ${baseline}`, SETTLE_MS, () => openSockets() <= baseline);
    } finally {
      channels.close();
    }
  });

  it('the per-target cap: with room for 2 channels a 3-member target keeps 2 and closes the third after each evaluation', async () => {
    const channels = pool({ maxPerTarget: 2 });
    const target = targetFor();
    try {
      const baseline = await settledBaseline();
      for (let round = 0; round < 3; round += 1) {
        const evaluation = await evaluateTarget(target, { channels });
        expect(evaluation.verdict, evaluation.reasons.join('; ')).toBe('Healthy');
        expect(channels.counts().byTarget).toEqual({ warm: 2 });
      }
      await waitFor('the unkept channel closed', SETTLE_MS, () => openSockets() === baseline + 2);
    } finally {
      channels.close();
    }
  });

  it('the global cap: two targets share room for 4; the least recently used idle channels make way', async () => {
    const channels = pool({ maxPerTarget: 3, maxTotal: 4 });
    try {
      await evaluateTarget(targetFor('first'), { channels });
      expect(channels.counts()).toMatchObject({ open: 3, byTarget: { first: 3 } });
      const second = await evaluateTarget(targetFor('second'), { channels });
      expect(second.verdict, second.reasons.join('; ')).toBe('Healthy');
      const { open, byTarget } = channels.counts();
      expect(open).toBe(4);
      expect(byTarget).toEqual({ first: 1, second: 3 });
    } finally {
      channels.close();
    }
  });
});

describe('warm connections, bounded: the webhook keeps them, the config bounds them', () => {
  it('POST /evaluations twice: the second makes no handshake; idle ones close after connections.idleTimeout; the gauge follows', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-warm-'));
    const config = parseGuardConfig(
      {
        store: { kind: 'file', dir },
        connections: { idleTimeout: '1s' },
        targets: [{ name: 'warm', endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: '2s' }],
      },
      'warm config',
    );
    const before = await settledBaseline();
    const webhook = await startTestWebhook({ config, store: createStore(config.store), onDemandMinIntervalMs: 0 });
    const kept = async () => {
      const text = await webhook.server.metrics.render();
      const value = (kind: string) =>
        Number(new RegExp(`^etcd_guard_kept_connections\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
      return {
        channels: value('member-channel'),
        idleChannels: value('idle-member-channel'),
        capiAccesses: value('capi-access'),
      };
    };
    try {
      expect(await kept()).toEqual({ channels: 0, idleChannels: 0, capiAccesses: 0 });
      const evaluate = async () => {
        const answer = await webhook.request('POST', '/evaluations/warm');
        expect(answer.status, answer.text).toBe(200);
        expect((JSON.parse(answer.text) as Evaluation).verdict).toBe('Healthy');
      };
      await evaluate();
      expect(webhook.server.connections()).toEqual({ channels: 3, idleChannels: 3, capiAccesses: 0 });
      expect(await kept()).toEqual({ channels: 3, idleChannels: 3, capiAccesses: 0 });
      const handshakesBefore = handshakes();
      await evaluate();
      expect(handshakes() - handshakesBefore).toBe(0);
      await waitFor('the kept channels closed when idle', 1_000 + SETTLE_MS, () => webhook.server.connections()?.channels === 0);
      expect(await kept()).toEqual({ channels: 0, idleChannels: 0, capiAccesses: 0 });
    } finally {
      await webhook.close();
      await rm(dir, { recursive: true, force: true });
    }
    await waitFor(`open sockets back to ${before}`, SETTLE_MS, () => openSockets() <= before);
  });
});
