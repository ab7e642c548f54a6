// End to end with a real 3-member etcd: the scheduled evaluation feeds the store, the webhook's
// cache picks it up, and /validate over HTTPS allows a scale-up while etcd is healthy, denies the
// same change naming the dead member after one is killed, and allows it again once it is back.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../functions/adapters/store-factory.js';
import { parseGuardConfig, type GuardConfig } from '../functions/entrypoints/config.js';
import type { Evaluation } from '../functions/domain/evaluation-document.js';
import type { EvaluationStore } from '../functions/domain/store.js';
import { evaluateTarget } from '../functions/usecases/evaluate-target.js';
import { runScheduledEvaluation } from '../functions/usecases/scheduled-run.js';
import { createLogger } from '../functions/shared/logger.js';
import { generateTestCerts } from './harness/certs.js';
import { startEtcdCluster, type EtcdTestCluster } from './harness/etcd-cluster.js';
import { kcpReplicasReview } from './harness/reviews.js';
import { startTestWebhook, type TestWebhook } from './harness/webhook.js';

const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });

let workDir: string;
let cluster: EtcdTestCluster;
let config: GuardConfig;
let store: EvaluationStore;
let webhook: TestWebhook;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-e2e-webhook-'));
  const [etcd, certs] = await Promise.all([startEtcdCluster({ size: 3, name: 'e2e' }), generateTestCerts(workDir)]);
  cluster = etcd;
  config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 60,
      // The scheduled run is what feeds the gate here; an inline refresh would hide it.
      inlineRefresh: false,
      targets: [
        {
          name: 'e2e',
          endpoints: cluster.endpoints,
          tls: cluster.clientTls,
          timeout: '1s',
          match: { clusterName: 'e2e' },
        },
      ],
    },
    'e2e config',
  );
  store = createStore(config.store);
  webhook = await startTestWebhook({ config, certs, logger: silent, store, pollIntervalMs: 100, ready: true });
});

afterAll(async () => {
  await webhook?.close();
  await cluster?.destroy();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** One scheduled run, then wait (with a deadline) until the webhook's cache has polled it in. */
async function scheduledEvaluation(): Promise<Evaluation> {
  const [result] = await runScheduledEvaluation({ config, store, evaluate: (target) => evaluateTarget(target), logger: silent });
  expect(result?.ok, JSON.stringify(result)).toBe(true);
  const stored = await store.read('e2e');
  if (stored === null) throw new Error('the scheduled run stored nothing');
  await expect
    .poll(() => webhook.server.cache.get('e2e')?.evaluatedAt, { timeout: 5_000, interval: 50 })
    .toBe(stored.evaluatedAt);
  return stored;
}

/** A spec edit of KCP default/e2e-control-plane (cluster e2e) changing its replicas. */
const kcpScale = (from: number, to: number) =>
  kcpReplicasReview(from, to, { namespace: 'default', name: 'e2e-control-plane', clusterName: 'e2e' });

describe('webhook + scheduled evaluation + real etcd', () => {
  it('allows, denies naming the killed member, and allows again after it is restarted', async () => {
    const healthy = await scheduledEvaluation();
    expect(healthy.verdict).toBe('Healthy');
    expect((await webhook.postReview(kcpScale(3, 5))).allowed).toBe(true);

    const victim = cluster.members[1];
    if (!victim) throw new Error('cluster has no member 1');
    await cluster.kill(1);
    const sick = await scheduledEvaluation();
    expect(sick.verdict).toBe('Unhealthy');
    const denied = await webhook.postReview(kcpScale(3, 5));
    expect(denied.allowed).toBe(false);
    expect(denied.status?.code).toBe(403);
    expect(denied.status?.message).toMatch(/target e2e verdict Unhealthy/);
    const namesVictim = denied.status?.message.includes(victim.name) || denied.status?.message.includes(victim.clientUrl);
    expect(namesVictim, `denial should name ${victim.name}: ${denied.status?.message}`).toBe(true);

    await cluster.restart(1);
    await cluster.waitHealthy();
    const recovered = await scheduledEvaluation();
    expect(recovered.verdict, recovered.reasons.join('; ')).not.toBe('Unhealthy');
    expect((await webhook.postReview(kcpScale(3, 5))).allowed).toBe(true);
  });
});
