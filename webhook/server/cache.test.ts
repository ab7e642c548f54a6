// The webhook's evaluation cache and metrics: the feed is polled with deadlines, never rolls the
// cache back, and the age gauge keeps growing when the feed goes quiet.
import { afterEach, describe, expect, it } from 'vitest';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { StoreError } from '../../functions/domain/store.js';
import { EvaluationCache } from './cache.js';
import { createWebhookMetrics } from './metrics.js';
import { makeEvaluationAt } from '../../test/harness/evaluation-fixture.js';

/** An in-memory store whose reads can be made to fail or hang, per target. */
class ScriptedStore {
  readonly documents = new Map<string, Evaluation>();
  readonly failing = new Map<string, Error>();
  readonly hanging = new Set<string>();
  reads = 0;
  private readonly releaseHung: Array<() => void> = [];

  read(target: string): Promise<Evaluation | null> {
    this.reads += 1;
    if (this.hanging.has(target)) return new Promise((resolve) => this.releaseHung.push(() => resolve(null)));
    const failure = this.failing.get(target);
    if (failure) return Promise.reject(failure);
    return Promise.resolve(this.documents.get(target) ?? null);
  }

  release(): void {
    for (const release of this.releaseHung.splice(0)) release();
  }
}

const caches: EvaluationCache[] = [];
afterEach(async () => {
  await Promise.all(caches.splice(0).map((cache) => cache.stop()));
});

function cacheFor(
  store: ScriptedStore,
  targets: string[],
  extra: Partial<ConstructorParameters<typeof EvaluationCache>[0]> = {},
) {
  const cache = new EvaluationCache({ store, targets, pollIntervalMs: 20, readTimeoutMs: 100, ...extra });
  caches.push(cache);
  return cache;
}

describe('EvaluationCache', () => {
  it('becomes ready once every target was read, whether or not an evaluation is stored', async () => {
    const store = new ScriptedStore();
    store.documents.set('prod', makeEvaluationAt(10, { target: 'prod' }));
    const cache = cacheFor(store, ['prod', 'staging']);
    expect(cache.ready).toBe(false);
    cache.start();
    await cache.whenReady();
    expect(cache.ready).toBe(true);
    expect(cache.get('prod')?.evaluatedAt).toBe('2026-01-01T00:00:10.000Z');
    expect(cache.get('staging')).toBeNull();
  });

  it('is not ready while a target cannot be read, and counts each failure', async () => {
    const store = new ScriptedStore();
    store.failing.set('prod', new StoreError('unavailable', 'configmap etcd-guard-prod: connection refused'));
    const failures: string[] = [];
    const cache = cacheFor(store, ['prod'], { onFeedError: (target, error) => failures.push(`${target}: ${error.message}`) });
    await cache.pollOnce();
    await cache.pollOnce();
    expect(cache.ready).toBe(false);
    expect(failures).toEqual([
      'prod: configmap etcd-guard-prod: connection refused',
      'prod: configmap etcd-guard-prod: connection refused',
    ]);
  });

  it('gives up on a hung read at its deadline and starts no second read while it hangs', async () => {
    const store = new ScriptedStore();
    store.hanging.add('prod');
    const failures: string[] = [];
    const cache = cacheFor(store, ['prod'], { readTimeoutMs: 50, onFeedError: (_target, error) => failures.push(error.message) });
    const started = Date.now();
    await cache.pollOnce();
    expect(Date.now() - started).toBeLessThan(1_000);
    await cache.pollOnce();
    expect(store.reads).toBe(1);
    expect(failures[0]).toMatch(/took longer than 50 ms/);
    expect(failures[1]).toMatch(/still hanging/);
    store.hanging.delete('prod');
    store.release();
    await new Promise((resolve) => setImmediate(resolve));
    await cache.pollOnce();
    expect(store.reads).toBe(2);
    expect(cache.ready).toBe(true);
  });

  it.each([
    { held: 20, offered: 10, kept: 20, taken: false, case: 'an older evaluation is refused' },
    { held: 20, offered: 20, kept: 20, taken: false, case: 'an equally old evaluation is refused' },
    { held: 20, offered: 30, kept: 30, taken: true, case: 'a newer evaluation replaces the held one' },
  ])('put: $case', ({ held, offered, kept, taken }) => {
    const cache = cacheFor(new ScriptedStore(), ['prod']);
    cache.put(makeEvaluationAt(held, { target: 'prod' }));
    expect(cache.put(makeEvaluationAt(offered, { target: 'prod' }))).toBe(taken);
    expect(cache.get('prod')?.evaluatedAt).toBe(makeEvaluationAt(kept).evaluatedAt);
  });

  it('never lets a future-stamped evaluation win over a present one, and lets a present one replace it', () => {
    const nowMs = Date.parse('2026-01-01T00:00:00.000Z');
    const cache = cacheFor(new ScriptedStore(), ['prod'], { now: () => new Date(nowMs) });
    expect(cache.put(makeEvaluationAt(-30, { target: 'prod' }))).toBe(true);
    expect(cache.put(makeEvaluationAt(100, { target: 'prod' }))).toBe(false);
    expect(cache.get('prod')?.evaluatedAt).toBe(makeEvaluationAt(-30).evaluatedAt);

    const skewed = cacheFor(new ScriptedStore(), ['prod'], { now: () => new Date(nowMs) });
    expect(skewed.put(makeEvaluationAt(100, { target: 'prod' }))).toBe(true);
    expect(skewed.put(makeEvaluationAt(-1, { target: 'prod' }))).toBe(true);
    expect(skewed.get('prod')?.evaluatedAt).toBe(makeEvaluationAt(-1).evaluatedAt);
  });

  it('keeps a future-stamped Unhealthy evaluation rather than an older-stamped Healthy one', () => {
    const nowMs = Date.parse('2026-01-01T00:00:00.000Z');
    const cache = cacheFor(new ScriptedStore(), ['prod'], { now: () => new Date(nowMs) });
    expect(cache.put(makeEvaluationAt(100, { target: 'prod', verdict: 'Unhealthy' }))).toBe(true);
    expect(cache.put(makeEvaluationAt(-1, { target: 'prod' }))).toBe(false);
    expect(cache.get('prod')?.verdict).toBe('Unhealthy');
  });

  it('never rolls back to an older stored evaluation after a newer one was put', async () => {
    const store = new ScriptedStore();
    store.documents.set('prod', makeEvaluationAt(10, { target: 'prod' }));
    const cache = cacheFor(store, ['prod']);
    cache.put(makeEvaluationAt(50, { target: 'prod' }));
    await cache.pollOnce();
    expect(cache.get('prod')?.evaluatedAt).toBe(makeEvaluationAt(50).evaluatedAt);
    store.documents.set('prod', makeEvaluationAt(90, { target: 'prod' }));
    await cache.pollOnce();
    expect(cache.get('prod')?.evaluatedAt).toBe(makeEvaluationAt(90).evaluatedAt);
  });

  it('refuses an evaluation stored under the wrong target name', async () => {
    const store = new ScriptedStore();
    store.documents.set('prod', makeEvaluationAt(10, { target: 'staging' }));
    const failures: string[] = [];
    const cache = cacheFor(store, ['prod'], { onFeedError: (_target, error) => failures.push(error.message) });
    await cache.pollOnce();
    expect(cache.get('prod')).toBeNull();
    expect(failures[0]).toMatch(/"staging" when asked for prod/);
  });
});

describe('webhook metrics', () => {
  it('reports the evaluation age at scrape time, so it grows while the feed is silent', async () => {
    let nowMs = Date.parse('2026-01-01T00:01:00.000Z');
    const metrics = createWebhookMetrics({ now: () => new Date(nowMs) });
    const cache = cacheFor(new ScriptedStore(), ['prod', 'staging']);
    metrics.observeCache(cache);
    cache.put(makeEvaluationAt(0, { target: 'prod' }));
    expect(await metrics.render()).toMatch(/etcd_guard_evaluation_age_seconds\{target="prod"\} 60\n/);
    nowMs += 45_000;
    const text = await metrics.render();
    expect(text).toMatch(/etcd_guard_evaluation_age_seconds\{target="prod"\} 105\n/);
    expect(text).not.toMatch(/etcd_guard_evaluation_age_seconds\{target="staging"\}/);
  });

  it('counts decisions, inline refreshes and feed errors on its own registry', async () => {
    const first = createWebhookMetrics();
    const second = createWebhookMetrics();
    first.recordDecision({ target: 'prod', decision: 'denied', mode: 'warn', reason: 'stale' }, 0.002);
    first.recordInlineRefresh('prod', 'success');
    first.recordCacheFeedError('prod');
    const text = await first.render();
    expect(text).toMatch(/etcd_guard_admission_decisions_total\{target="prod",decision="denied",mode="warn",reason="stale"\} 1/);
    expect(text).toMatch(/etcd_guard_admission_duration_seconds_bucket\{le="0.0025"\} 1/);
    expect(text).toMatch(/etcd_guard_inline_refresh_total\{target="prod",result="success"\} 1/);
    expect(text).toMatch(/etcd_guard_cache_feed_errors_total\{target="prod"\} 1/);
    expect(await second.render()).not.toMatch(/reason="stale"/);
  });
});

describe('issue 27: the evidence age histogram', () => {
  it('exists at 0 for live and cached evidence from the start, then counts each decision under its evidence', async () => {
    const metrics = createWebhookMetrics();
    const before = await metrics.render();
    for (const evidence of ['live', 'cached']) {
      expect(before).toMatch(new RegExp(`etcd_guard_decision_evidence_age_seconds_count\\{evidence="${evidence}"\\} 0\n`));
    }
    metrics.recordEvidenceAge('live', 0.012);
    metrics.recordEvidenceAge('cached', 42);
    const after = await metrics.render();
    expect(after).toMatch(/etcd_guard_decision_evidence_age_seconds_bucket\{le="0.025",evidence="live"\} 1\n/);
    expect(after).toMatch(/etcd_guard_decision_evidence_age_seconds_bucket\{le="30",evidence="cached"\} 0\n/);
    expect(after).toMatch(/etcd_guard_decision_evidence_age_seconds_bucket\{le="60",evidence="cached"\} 1\n/);
  });
});

describe('webhook logger', () => {
  it('writes JSON lines with secrets redacted and honours LOG_LEVEL', async () => {
    const { createLogger } = await import('../../functions/shared/logger.js');
    const lines: string[] = [];
    const destination = { write: (line: string) => void lines.push(line) };
    const logger = createLogger({ env: { LOG_LEVEL: 'warn' }, destination });
    logger.info({ note: 'dropped below warn' }, 'info line');
    logger.warn(
      {
        headers: { authorization: 'Bearer s3cret-token' },
        auth: { token: 's3cret-token' },
        tls: { keyFile: '/etc/key.pem' },
        target: 'prod',
      },
      'warn line',
    );
    expect(lines).toHaveLength(1);
    const entry = JSON.parse(lines[0] ?? '{}') as Record<string, unknown>;
    expect(entry).toMatchObject({ level: 'warn', msg: 'warn line', target: 'prod' });
    expect(lines[0]).not.toMatch(/s3cret-token|\/etc\/key\.pem/);
  });
});
