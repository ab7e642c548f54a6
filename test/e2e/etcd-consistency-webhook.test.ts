// Issue 32 through the webhook, on a real 3-member etcd: `consistency: { scheduled: true }`
// hashes in the scheduled run only. A divergence that run found (a member's bbolt file edited
// while it was stopped) still denies a scale-up whose inline evaluation did not hash: the inline
// evaluation carries the stored result, dated. That inline evaluation asked no member for HashKV,
// as etcd's own gRPC counters show. With `{ scaleUps: true }` a scale-down's inline evaluation
// asks no member, a scale-up's asks each voting member once.
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EtcdTestCluster } from '../harness/etcd-cluster.js';
import { divergeMember } from '../harness/diverge-member.js';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import { kcpReplicasReview } from '../harness/reviews.js';
import { waitFor } from '../harness/wait.js';

let e2e: EtcdWebhook;

beforeAll(async () => {
  e2e = await startEtcdWebhook({
    name: 'hashhook',
    target: 'hashhook',
    timeout: '2s',
    // decisionMaxAgeMs 0: no stored evaluation is live evidence, so every review evaluates inline.
    targetConfig: { consistency: { scheduled: true }, decisionMaxAgeMs: 0 },
    config: { inlineRefresh: true },
  });
  for (let key = 0; key < 20; key += 1) {
    const put = await e2e.cluster.etcdctl(['put', `hash/${key}`, `value-${key}`]);
    if (put.code !== 0) throw new Error(`put: ${put.stderr}`);
  }
}, 60_000);

afterAll(async () => {
  await e2e?.close();
});

/** etcd's own count of HashKV calls each member served (grpc_server_started_total), by member name. */
async function hashKVCalls(cluster: EtcdTestCluster): Promise<Record<string, number>> {
  const tls = {
    ca: readFileSync(cluster.clientTls.caFile),
    cert: readFileSync(cluster.clientTls.certFile),
    key: readFileSync(cluster.clientTls.keyFile),
  };
  const counts: Record<string, number> = {};
  for (const member of cluster.members) {
    const text = await new Promise<string>((resolve, reject) => {
      https
        .get(`${member.clientUrl}/metrics`, tls, (response) => {
          let body = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (body += chunk));
          response.on('end', () => resolve(body));
        })
        .on('error', reject);
    });
    const line = text
      .split('\n')
      .find((candidate) => candidate.startsWith('grpc_server_started_total{') && candidate.includes('grpc_method="HashKV"'));
    counts[member.name] = line === undefined ? 0 : Number(line.split(' ').at(-1));
  }
  return counts;
}

const kcpScale = (from: number, to: number) =>
  kcpReplicasReview(from, to, { namespace: 'default', name: 'hashhook-control-plane', clusterName: 'hashhook' });

describe('consistency through the webhook (issue 32)', () => {
  it(
    'a divergence the scheduled run found denies a scale-up whose inline evaluation did not hash',
    { timeout: 180_000 },
    async () => {
      const changed = await divergeMember(e2e.cluster, 1);
      const beforeScheduled = await hashKVCalls(e2e.cluster);
      const scheduled = await e2e.scheduledEvaluation();
      const afterScheduled = await hashKVCalls(e2e.cluster);
      const found = scheduled.checks.find((check) => check.name === 'consistency');
      console.log(
        `scheduled: ${found?.status}: ${found?.message}; HashKV calls ${JSON.stringify(beforeScheduled)} -> ${JSON.stringify(afterScheduled)}`,
      );
      expect(found?.status).toBe('fail');
      expect(found?.message).toMatch(new RegExp(`^data diverges at revision \\d+ \\([^)]*\\): member ${changed.name} \\(`));
      // The counter counts: the scheduled run asked every member.
      for (const member of e2e.cluster.members) {
        expect(afterScheduled[member.name], member.name).toBeGreaterThan(beforeScheduled[member.name] ?? 0);
      }

      const denied = await e2e.webhook.postReview(kcpScale(3, 5));
      const afterReview = await hashKVCalls(e2e.cluster);
      console.log(`scale-up: allowed ${denied.allowed}: ${denied.status?.message}; HashKV calls ${JSON.stringify(afterReview)}`);
      expect(denied.allowed).toBe(false);
      expect(denied.status?.message).toMatch(/target hashhook verdict Unhealthy/);
      // The inline evaluation ran (it carried the result: only an evaluation that does not hash says "carried").
      expect(denied.status?.message).toContain(`carried (hashed `);
      expect(denied.status?.message).toContain(`): data diverges at revision`);
      expect(denied.status?.message).toContain(changed.name);
      expect(afterReview).toEqual(afterScheduled);

      // What the inline evaluation stored (in the background, after the answer): the carried
      // failure, dated by the scheduled run.
      let stored = await e2e.store.read('hashhook');
      await waitFor('the inline evaluation in the store', 5_000, async () => {
        stored = await e2e.store.read('hashhook');
        return stored !== null && stored.evaluatedAt !== scheduled.evaluatedAt;
      });
      expect(stored?.checks.find((check) => check.name === 'consistency')).toMatchObject({
        status: 'fail',
        measuredAt: scheduled.evaluatedAt,
      });
      expect(stored?.verdict).toBe('Unhealthy');
    },
  );
});

describe('consistency.scaleUps: the inline evaluation of a scale-up hashes, no other does', () => {
  let up: EtcdWebhook;

  beforeAll(async () => {
    up = await startEtcdWebhook({
      name: 'hashup',
      target: 'hashup',
      timeout: '2s',
      targetConfig: { consistency: { scaleUps: true }, decisionMaxAgeMs: 0 },
      config: { inlineRefresh: true },
    });
  }, 60_000);

  afterAll(async () => {
    await up?.close();
  });

  const review = (from: number, to: number) =>
    kcpReplicasReview(from, to, { namespace: 'default', name: 'hashup-control-plane', clusterName: 'hashup' });

  it('a scale-down asks no member for HashKV; a scale-up asks every voting member', async () => {
    const before = await hashKVCalls(up.cluster);
    await up.webhook.postReview(review(5, 4));
    const afterDown = await hashKVCalls(up.cluster);
    expect(afterDown).toEqual(before);
    // It did evaluate (nothing else writes this store), and with no result to carry has no check.
    await waitFor("the scale-down's inline evaluation in the store", 5_000, async () => (await up.store.read('hashup')) !== null);
    const stored = await up.store.read('hashup');
    expect(stored?.checks.map((check) => check.name)).not.toContain('consistency');
    const allowed = await up.webhook.postReview(review(3, 5));
    const afterUp = await hashKVCalls(up.cluster);
    console.log(`scaleUps: HashKV calls ${JSON.stringify(before)} -> ${JSON.stringify(afterDown)} -> ${JSON.stringify(afterUp)}`);
    expect(allowed.allowed, allowed.status?.message).toBe(true);
    for (const member of up.cluster.members) {
      expect(afterUp[member.name], member.name).toBe((afterDown[member.name] ?? 0) + 1);
    }
  });
});
