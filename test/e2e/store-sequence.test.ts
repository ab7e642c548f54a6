// Issue 11 item 4, reproduced through the real stores and the webhook's cache: a Healthy
// evaluation stamped 100 s in the future is stored, then the CronJob's truthful Unhealthy one is
// written. The write is accepted (the write sequence grows) and the cache takes the Unhealthy one,
// so the webhook denies. The second case is what the sequence alone fixes: the webhook's clock runs
// 150 s ahead of the writers', so to it the future stamp looks 50 s old and fresh, and ranking the
// two documents by their stamps kept the Healthy one and allowed.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigMapStore } from '../../functions/adapters/configmap-store.js';
import { FileStore } from '../../functions/adapters/file-store.js';
import { guardConfigSchema } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { EvaluationStore } from '../../functions/domain/store.js';
import { createLogger } from '../../functions/shared/logger.js';
import { EvaluationCache } from '../../webhook/server/cache.js';
import { classifyRequest } from '../../webhook/domain/classify.js';
import { decide } from '../../webhook/domain/decide.js';
import { stampedEvaluation } from '../harness/evaluation-fixture.js';
import { admissionFixture, parsedRequest } from '../harness/reviews.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';

const TARGET = 'prod';
const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });
const config = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [{ name: TARGET, endpoints: ['https://127.0.0.1:12379'], match: {} }],
});

/** What the webhook answers for a KCP scale-up judged by the cache's evaluation at `now`. */
function admissionOf(cache: EvaluationCache, now: Date): 'allowed' | 'denied' | 'overridden' {
  const request = parsedRequest(admissionFixture('kcp-scale-up-3-to-5.json'));
  const classification = classifyRequest(request, config);
  if (classification.kind !== 'needs-evaluation') throw new Error(`expected needs-evaluation, got ${classification.kind}`);
  return decide({ request, config, classification, evaluation: cache.get(TARGET), now }).result;
}

const stampedAt = (offsetMs: number, verdict: 'Healthy' | 'Unhealthy') => stampedEvaluation(TARGET, offsetMs, verdict);

type SequencedStore = EvaluationStore & Required<Pick<EvaluationStore, 'readSequenced'>>;

let dir: string;
let fake: FakeKubeApiServer;
beforeEach(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'store-sequence-'));
  fake = await startFakeKubeApiServer();
});
afterEach(async () => {
  rmSync(dir, { recursive: true, force: true });
  await fake.close();
});

const STORES: Array<[string, () => SequencedStore]> = [
  ['file store', () => new FileStore(dir)],
  [
    'ConfigMap store',
    () => new ConfigMapStore({ namespace: 'etcd-guard', kubeconfigFile: fake.kubeconfigFile, callTimeoutMs: 2_000 }),
  ],
];

describe.each(STORES)('a future-stamped Healthy evaluation in the %s', (_name, makeStore) => {
  it.each([
    ['the webhook shares the writers’ clock', 0],
    ['the webhook’s clock runs 150 s ahead of the writers’', 150_000],
  ])('never shadows the truthful Unhealthy one written after it (%s)', async (_clock, webhookAheadMs) => {
    const store = makeStore();
    const webhookNow = () => new Date(Date.now() + webhookAheadMs);
    const cache = new EvaluationCache({ store, targets: [TARGET], logger: silent, now: webhookNow });

    expect(await store.write(stampedAt(100_000, 'Healthy'))).toEqual({ written: true });
    expect((await store.readSequenced(TARGET))?.sequence).toBe(1);
    await cache.pollOnce();
    expect(cache.get(TARGET)?.verdict).toBe('Healthy');
    // Sharing the clock, the webhook already counts the future stamp as not fresh; 150 s ahead it
    // cannot tell, and allows.
    expect(admissionOf(cache, webhookNow())).toBe(webhookAheadMs === 0 ? 'denied' : 'allowed');

    const truthful = stampedAt(0, 'Unhealthy');
    expect(await store.write(truthful)).toEqual({ written: true });
    expect(await store.readSequenced(TARGET)).toEqual({ evaluation: truthful, sequence: 2 });
    await cache.pollOnce();
    expect(cache.get(TARGET)).toEqual(truthful);
    expect(admissionOf(cache, webhookNow())).toBe('denied');
  });
});

describe.each(STORES)('the write sequence of the %s', (_name, makeStore) => {
  it('grows by one per accepted write and not at all for a refused one', async () => {
    const store = makeStore();
    expect(await store.readSequenced(TARGET)).toBeNull();
    const first = stampedAt(-20_000, 'Healthy');
    await store.write(first);
    expect(await store.readSequenced(TARGET)).toEqual({ evaluation: first, sequence: 1 });
    const older = stampedAt(-30_000, 'Unhealthy');
    expect(await store.write(older)).toEqual({ written: false, keptEvaluatedAt: first.evaluatedAt });
    expect((await store.readSequenced(TARGET))?.sequence).toBe(1);
    const newer = stampedAt(-10_000, 'Unhealthy');
    await store.write(newer);
    expect(await store.readSequenced(TARGET)).toEqual({ evaluation: newer, sequence: 2 });
    expect(await store.read(TARGET)).toEqual(newer);
  });
});

describe('the cache ordering stored documents by sequence', () => {
  /** A store whose one document and sequence the test sets directly. */
  function scriptedStore() {
    const state: { stored: { evaluation: Evaluation; sequence: number } | null } = { stored: null };
    const store = {
      read: () => Promise.resolve(state.stored?.evaluation ?? null),
      readSequenced: () => Promise.resolve(state.stored),
    };
    return { state, store };
  }

  it('keeps a held Unhealthy evaluation against a later-written but older-stamped Healthy one', async () => {
    const { state, store } = scriptedStore();
    const cache = new EvaluationCache({ store, targets: [TARGET], logger: silent });
    const unhealthy = stampedAt(-5_000, 'Unhealthy');
    state.stored = { evaluation: unhealthy, sequence: 7 };
    await cache.pollOnce();
    state.stored = { evaluation: stampedAt(-10_000, 'Healthy'), sequence: 8 };
    await cache.pollOnce();
    expect(cache.get(TARGET)).toEqual(unhealthy);
  });

  it('falls back to the stamps when the sequence did not grow (a recreated ConfigMap starts at 1)', async () => {
    const { state, store } = scriptedStore();
    const cache = new EvaluationCache({ store, targets: [TARGET], logger: silent });
    state.stored = { evaluation: stampedAt(-20_000, 'Healthy'), sequence: 40 };
    await cache.pollOnce();
    const recreated = stampedAt(-1_000, 'Unhealthy');
    state.stored = { evaluation: recreated, sequence: 1 };
    await cache.pollOnce();
    expect(cache.get(TARGET)).toEqual(recreated);
    state.stored = { evaluation: stampedAt(-30_000, 'Healthy'), sequence: 1 };
    await cache.pollOnce();
    expect(cache.get(TARGET)).toEqual(recreated);
  });
});

describe('a write sequence that is not a number', () => {
  it('makes the ConfigMap corrupt for readers (named with its value), and the next write restarts it at 1', async () => {
    const store = new ConfigMapStore({ namespace: 'etcd-guard', kubeconfigFile: fake.kubeconfigFile, callTimeoutMs: 2_000 });
    fake.putRaw(
      'etcd-guard',
      'etcd-guard-prod',
      { 'evaluation.json': JSON.stringify(stampedAt(-5_000, 'Healthy')) },
      { 'app.kubernetes.io/name': 'etcd-guard', 'etcd-guard.io/target': TARGET },
      { 'etcd-guard.io/sequence': '1e99' },
    );
    await expect(store.read(TARGET)).rejects.toThrow(/"etcd-guard-prod".*write sequence "1e99"/);
    expect((await store.readAll()).problems).toEqual([expect.stringContaining('write sequence "1e99"')]);
    const next = stampedAt(-10_000, 'Unhealthy');
    expect(await store.write(next)).toEqual({ written: true });
    expect(await store.readSequenced(TARGET)).toEqual({ evaluation: next, sequence: 1 });
  });

  it('makes the file corrupt for readers, and the next write restarts it at 1', async () => {
    const store = new FileStore(dir);
    const file = store.pathFor(TARGET);
    writeFileSync(file, JSON.stringify({ ...stampedAt(-5_000, 'Healthy'), sequence: -3 }));
    await expect(store.read(TARGET)).rejects.toThrow(/write sequence -3, not a whole number/);
    const next = stampedAt(-10_000, 'Unhealthy');
    expect(await store.write(next)).toEqual({ written: true });
    expect(await store.readSequenced(TARGET)).toEqual({ evaluation: next, sequence: 1 });
  });

  it('is absent from a document written before sequences: it reads as 0', async () => {
    const store = new FileStore(dir);
    const legacy = stampedAt(-5_000, 'Healthy');
    writeFileSync(store.pathFor(TARGET), JSON.stringify(legacy));
    expect(await store.readSequenced(TARGET)).toEqual({ evaluation: legacy, sequence: 0 });
  });
});
