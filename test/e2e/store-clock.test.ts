// Issue 16 items 12 and 15, through the real stores (the ConfigMap store against the stand-in API
// server, the file store on disk) and the webhook's cache and decision:
// - a forged write sequence at the readers' ceiling (999999999999999) made the writer store
//   10^15, which its own readers refused as corrupt, so the truthful write was lost;
// - a writer whose clock is 10 minutes off (either way) stamped its evaluation 10 minutes wrong,
//   and the write displaced a fresh, present evaluation with one every reader saw as stale or
//   from the future, so the webhook denied a healthy cluster's changes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigMapStore } from '../../functions/adapters/configmap-store.js';
import { FileStore } from '../../functions/adapters/file-store.js';
import { guardConfigSchema } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { MAX_SEQUENCE, nextSequence, parseSequence, StoreError, type EvaluationStore } from '../../functions/domain/store.js';
import { createLogger } from '../../functions/shared/logger.js';
import { EvaluationCache } from '../../webhook/server/cache.js';
import { classifyRequest } from '../../webhook/domain/classify.js';
import { decide } from '../../webhook/domain/decide.js';
import { stampedEvaluation } from '../harness/evaluation-fixture.js';
import { admissionFixture, parsedRequest } from '../harness/reviews.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';

const TARGET = 'prod';
const TEN_MINUTES_MS = 10 * 60_000;
/** The API server's Date header has whole seconds; the store's clock is known to about that. */
const STORE_CLOCK_SLACK_MS = 1_500;
const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });
const config = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [{ name: TARGET, endpoints: ['https://127.0.0.1:12379'], match: {} }],
});

function admissionOf(cache: EvaluationCache): 'allowed' | 'denied' | 'overridden' {
  const request = parsedRequest(admissionFixture('kcp-scale-up-3-to-5.json'));
  const classification = classifyRequest(request, config);
  if (classification.kind !== 'needs-evaluation') throw new Error(`expected needs-evaluation, got ${classification.kind}`);
  return decide({ request, config, classification, evaluation: cache.get(TARGET), now: new Date() }).result;
}

const stampedAt = (offsetMs: number, verdict: 'Healthy' | 'Unhealthy') => stampedEvaluation(TARGET, offsetMs, verdict);

type SequencedStore = EvaluationStore & Required<Pick<EvaluationStore, 'readSequenced'>>;
let dir: string;
let fake: FakeKubeApiServer;
beforeEach(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'store-clock-'));
  fake = await startFakeKubeApiServer();
});
afterEach(async () => {
  rmSync(dir, { recursive: true, force: true });
  await fake.close();
});

/** Each store, with the writer's clock `offsetMs` off, and a way to plant a document with a given sequence. */
const STORES: Array<[string, (offsetMs: number) => SequencedStore, (evaluation: Evaluation, sequence: string) => void]> = [
  [
    'file store',
    (offsetMs) => new FileStore(dir, { now: () => new Date(Date.now() + offsetMs) }),
    (evaluation, sequence) =>
      writeFileSync(path.join(dir, `${TARGET}.json`), `{"sequence":${sequence},${JSON.stringify(evaluation).slice(1)}`),
  ],
  [
    'ConfigMap store',
    (offsetMs) =>
      new ConfigMapStore({
        namespace: 'etcd-guard',
        kubeconfigFile: fake.kubeconfigFile,
        callTimeoutMs: 2_000,
        now: () => new Date(Date.now() + offsetMs),
      }),
    (evaluation, sequence) =>
      fake.putRaw(
        'etcd-guard',
        `etcd-guard-${TARGET}`,
        { 'evaluation.json': JSON.stringify(evaluation) },
        { 'app.kubernetes.io/name': 'etcd-guard', 'etcd-guard.io/target': TARGET },
        { 'etcd-guard.io/sequence': sequence },
      ),
  ],
];

describe('the write sequence rule shared by writers and readers', () => {
  it('gives every sequence a reader accepts a successor the reader accepts too (boundaries and 10,000 random values)', () => {
    const values = [0, 1, 2, 9, 10, 99, MAX_SEQUENCE - 2, MAX_SEQUENCE - 1, MAX_SEQUENCE];
    for (let i = 0; i < 10_000; i += 1) values.push(Math.floor(Math.random() * MAX_SEQUENCE));
    const broken = values.filter((value) => {
      const next = nextSequence(value);
      return (
        parseSequence(String(value), 'test') !== value ||
        parseSequence(String(next), 'test') !== next ||
        next !== (value === MAX_SEQUENCE ? 1 : value + 1)
      );
    });
    expect(broken).toEqual([]);
    expect(parseSequence(String(MAX_SEQUENCE + 1), 'test')).toBeInstanceOf(StoreError);
  });
});

describe.each(STORES)('a forged write sequence at the readers’ ceiling in the %s', (_name, makeStore, plant) => {
  it('never makes the writer store a sequence its readers refuse: it wraps to 1 and the truthful write is read', async () => {
    const store = makeStore(0);
    plant(stampedAt(-30_000, 'Healthy'), String(MAX_SEQUENCE));
    const cache = new EvaluationCache({ store, targets: [TARGET], logger: silent });
    await cache.pollOnce();
    expect(cache.get(TARGET)?.verdict).toBe('Healthy');

    const truthful = stampedAt(-1_000, 'Unhealthy');
    expect(await store.write(truthful)).toEqual({ written: true });
    expect(await store.readSequenced(TARGET)).toEqual({ evaluation: truthful, sequence: 1 });
    await cache.pollOnce();
    expect(cache.get(TARGET)).toEqual(truthful);
    expect(admissionOf(cache)).toBe('denied');
    // The next write counts on from the wrapped value.
    const later = stampedAt(0, 'Unhealthy');
    await store.write(later);
    expect((await store.readSequenced(TARGET))?.sequence).toBe(2);
  });
});

describe.each(STORES)('a writer whose clock is 10 minutes off, against the %s', (_name, makeStore) => {
  it.each([
    ['ahead', TEN_MINUTES_MS],
    ['behind', -TEN_MINUTES_MS],
  ])('(%s) never displaces a fresh, present evaluation and still stores its truthful one', async (_way, offsetMs) => {
    const present = makeStore(0);
    const skewed = makeStore(offsetMs);
    const cache = new EvaluationCache({ store: present, targets: [TARGET], logger: silent });
    expect(await present.write(stampedAt(-2_000, 'Healthy'))).toEqual({ written: true });
    await cache.pollOnce();
    expect(admissionOf(cache)).toBe('allowed');

    // The skewed writer's newer Healthy evaluation: stored on the store's clock, so still fresh.
    const healthy = await skewed.write(stampedAt(offsetMs, 'Healthy'));
    expect(healthy.written).toBe(true);
    expect(healthy.written && Math.abs((healthy.stampCorrectedByMs ?? 0) - offsetMs)).toBeLessThan(STORE_CLOCK_SLACK_MS);
    const stored = await present.readSequenced(TARGET);
    expect(stored?.sequence).toBe(2);
    expect(Math.abs(Date.parse(stored?.evaluation.evaluatedAt ?? '') - Date.now())).toBeLessThan(STORE_CLOCK_SLACK_MS + 1_000);
    await cache.pollOnce();
    expect(cache.get(TARGET)).toEqual(stored?.evaluation);
    expect(admissionOf(cache)).toBe('allowed');

    // Its truthful Unhealthy evaluation is not lost: it is stored and denies.
    expect((await skewed.write(stampedAt(offsetMs + 1_000, 'Unhealthy'))).written).toBe(true);
    await cache.pollOnce();
    expect(cache.get(TARGET)?.verdict).toBe('Unhealthy');
    expect(admissionOf(cache)).toBe('denied');

    // What it evaluated before the stored document, by the store's clock, is still refused.
    const older = await skewed.write(stampedAt(offsetMs - 20_000, 'Healthy'));
    expect(older.written).toBe(false);
    expect((await present.readSequenced(TARGET))?.evaluation.verdict).toBe('Unhealthy');
  });
});
