// The webhook over real HTTPS on loopback: /validate against cached evaluations of every kind,
// inline refresh inside the apiserver's budget, malformed and oversized bodies, readiness,
// metrics and the /evaluations routes. The store is a real file store in a temp dir.
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig, type GuardConfig, type TargetConfig } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { EvaluationStore } from '../../functions/domain/store.js';
import { OnDemandEvaluations, StarvedEvaluationError } from '../../functions/usecases/on-demand-service.js';
import { OverloadError } from '../../functions/usecases/run-slots.js';
import { apiserverTimeoutMs, createWebhookApp } from './app.js';
import { parseGoDurationMs } from '../../functions/shared/duration.js';
import type { AdmissionResponse } from '../domain/contract.js';
import { EvaluationCache } from './cache.js';
import { createLogger } from '../../functions/shared/logger.js';
import { createWebhookMetrics } from './metrics.js';
import { generateTestCerts, type TestCerts } from '../../test/harness/certs.js';
import { waitFor } from '../../test/harness/wait.js';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';
import { httpRequest, type HttpsAnswer } from '../../test/harness/https-client.js';
import { admissionFixture, kcpReplicasReview } from '../../test/harness/reviews.js';
import { startTestWebhook, type TestWebhook } from '../../test/harness/webhook.js';

const TOKEN = 'http-test-token-5f1c';
const silentLogger = createLogger({ env: { LOG_LEVEL: 'silent' } });

let workDir: string;
let certs: TestCerts;
let config: GuardConfig;
let store: EvaluationStore;
let webhook: TestWebhook;
const evaluateCalls: string[] = [];
/** Targets of every store write the server started (recorded when write() is called). */
const serverWrites: string[] = [];

function request(
  method: string,
  urlPath: string,
  body?: string | Buffer,
  headers: Record<string, string> = {},
): Promise<HttpsAnswer> {
  return webhook.request(method, urlPath, { body, headers });
}

const validate = (review: unknown, query = '') => webhook.postReview(review, { query });

/** A KubeadmControlPlane replica change in `namespace`, which routes it to the target of that name. */
function kcpScale(namespace: string, from: number, to: number) {
  const review = kcpReplicasReview(from, to, { namespace, name: 'control-plane', clusterName: namespace });
  review.request.userInfo = { username: 'alice@example.com', groups: ['system:authenticated'] };
  return review;
}

const TARGETS = [
  'healthy',
  'degraded',
  'unhealthy',
  'stale',
  'stale-refresh',
  'stale-dry-run',
  'missing',
  'slow-refresh',
  'burst',
  'turned',
] as const;

function secondsAgo(seconds: number): string {
  return new Date(Date.now() - seconds * 1000).toISOString();
}

/** What etcd says of the degraded and unhealthy targets, every time it is asked. */
const DEGRADED = {
  verdict: 'Degraded',
  reasons: ['member etcd-2 database is 85% of its quota'],
  checks: [{ name: 'db-size', status: 'warn', message: 'member etcd-2 database is 85% of its quota' }],
} as const satisfies Partial<Evaluation>;
const UNHEALTHY = {
  verdict: 'Unhealthy',
  members: [makeMember(0), makeMember(1, { healthy: false, error: 'connection refused' }), makeMember(2)],
  reasons: ['member etcd-1 (https://127.0.0.1:2389) is unreachable: connection refused'],
  checks: [{ name: 'reachable', status: 'fail', message: 'member etcd-1 (https://127.0.0.1:2389) is unreachable' }],
} as const satisfies Partial<Evaluation>;
// `turned` was stored Healthy a few seconds ago; etcd has lost a member since.
const STATE_OF: Record<string, Partial<Evaluation>> = { degraded: DEGRADED, unhealthy: UNHEALTHY, turned: UNHEALTHY };

/**
 * Stand-in for the etcd evaluation engine: a live evaluation saying what etcd says of the target
 * (healthy unless it is the degraded or unhealthy one), or a slow one for `slow-refresh`.
 */
async function evaluateStandIn(target: TargetConfig): Promise<Evaluation> {
  evaluateCalls.push(target.name);
  // The burst target's evaluation takes a while, as a real one does, so concurrent requests overlap it.
  if (target.name === 'burst') await new Promise((resolve) => setTimeout(resolve, 300));
  return makeEvaluation({ target: target.name, evaluatedAt: new Date().toISOString(), ...STATE_OF[target.name] });
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-webhook-http-'));
  certs = await generateTestCerts(workDir);
  config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 60,
      inlineRefresh: true,
      targets: TARGETS.map((name) => ({
        name,
        endpoints: ['https://127.0.0.1:2379'],
        timeout: '2s',
        match: { namespaces: [name] },
      })),
    },
    'webhook-http test config',
  );
  store = createStore(config.store);
  await store.write(makeEvaluation({ target: 'healthy', evaluatedAt: secondsAgo(5) }));
  await store.write(makeEvaluation({ target: 'degraded', evaluatedAt: secondsAgo(5), ...DEGRADED }));
  await store.write(makeEvaluation({ target: 'unhealthy', evaluatedAt: secondsAgo(5), ...UNHEALTHY }));
  await store.write(makeEvaluation({ target: 'stale', evaluatedAt: secondsAgo(300) }));
  await store.write(makeEvaluation({ target: 'stale-refresh', evaluatedAt: secondsAgo(300) }));
  await store.write(makeEvaluation({ target: 'stale-dry-run', evaluatedAt: secondsAgo(300) }));
  await store.write(makeEvaluation({ target: 'slow-refresh', evaluatedAt: secondsAgo(300) }));
  await store.write(makeEvaluation({ target: 'burst', evaluatedAt: secondsAgo(300) }));
  await store.write(makeEvaluation({ target: 'turned', evaluatedAt: secondsAgo(5) }));

  webhook = await startTestWebhook({
    config,
    certs,
    metricsPort: true,
    token: TOKEN,
    logger: silentLogger,
    store: {
      read: (target) => store.read(target),
      write: (evaluation) => {
        serverWrites.push(evaluation.target);
        return store.write(evaluation);
      },
      describe: () => store.describe(),
    },
    evaluate: (target) => (target.name === 'slow-refresh' ? new Promise<Evaluation>(() => undefined) : evaluateStandIn(target)),
    pollIntervalMs: 200,
    agent: { keepAlive: true, maxSockets: 8 },
    ready: true,
  });
});

afterAll(async () => {
  await webhook?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

describe('POST /validate over HTTPS', () => {
  it.each([
    { target: 'healthy', from: 3, to: 5, allowed: true, message: null },
    { target: 'degraded', from: 3, to: 5, allowed: true, message: null },
    { target: 'unhealthy', from: 3, to: 5, allowed: false, message: /target unhealthy verdict Unhealthy, evaluated \d+s ago/ },
    { target: 'missing', from: 3, to: 5, allowed: false, message: /no fresh etcd evaluation for missing/ },
  ])(
    'scale $from→$to of a KCP routed to the $target evaluation: allowed=$allowed',
    async ({ target, from, to, allowed, message }) => {
      const review = kcpScale(target, from, to);
      // ?timeout=1s leaves no room for a live evaluation: the cached one decides, and says so.
      const response = await validate(review, '?timeout=1s');
      expect(response.uid).toBe(review.request.uid);
      expect(response.allowed).toBe(allowed);
      if (allowed) expect((response.warnings ?? []).join(' ')).toMatch(/decided on the cached evaluation of \S+, \d+s old/);
      if (message) {
        expect(response.status?.code).toBe(403);
        expect(response.status?.message).toMatch(message);
      }
    },
  );

  it('allows a Degraded scale-up with warnings naming the problem', async () => {
    const response = await validate(kcpScale('degraded', 3, 5));
    expect(response.allowed).toBe(true);
    expect((response.warnings ?? []).join(' ')).toMatch(/etcd-2/);
  });

  it('issue 27: a cached Healthy 5 s old does not decide; the live evaluation (Unhealthy now) denies, and is stored', async () => {
    const callsBefore = evaluateCalls.filter((name) => name === 'turned').length;
    const response = await validate(kcpScale('turned', 3, 5), '?timeout=10s');
    expect(response.allowed).toBe(false);
    expect(response.status?.message).toMatch(/target turned verdict Unhealthy, evaluated 0s ago: member etcd-1/);
    expect(response.auditAnnotations).toMatchObject({ evidence: 'live', verdict: 'Unhealthy' });
    expect(Number(response.auditAnnotations?.['evidence-age-ms'])).toBeLessThan(1_000);
    expect(evaluateCalls.filter((name) => name === 'turned').length).toBe(callsBefore + 1);
    await waitFor('the live evaluation to be stored', 5_000, async () => (await store.read('turned'))?.verdict === 'Unhealthy');
  });

  it('denies with the evaluation age when stale and ?timeout=1s leaves no room for an inline refresh', async () => {
    const callsBefore = evaluateCalls.length;
    const response = await validate(kcpScale('stale', 3, 5), '?timeout=1s');
    expect(response.allowed).toBe(false);
    expect(response.status?.message).toMatch(/no fresh etcd evaluation for stale \(age (29\d|30\d)s, max 60s\)/);
    expect(evaluateCalls.length).toBe(callsBefore);
  });

  it('refreshes inline when stale and the apiserver budget (?timeout=10s) allows, then uses the fresh result', async () => {
    const callsBefore = evaluateCalls.filter((name) => name === 'stale-refresh').length;
    const response = await validate(kcpScale('stale-refresh', 3, 5), '?timeout=10s');
    expect(response.allowed).toBe(true);
    expect(evaluateCalls.filter((name) => name === 'stale-refresh').length).toBe(callsBefore + 1);
    expect(serverWrites.filter((name) => name === 'stale-refresh')).toHaveLength(1);
    expect(webhook.server.cache.get('stale-refresh')?.evaluatedAt).not.toBe(undefined);
    expect(Date.now() - Date.parse(webhook.server.cache.get('stale-refresh')?.evaluatedAt ?? '')).toBeLessThan(10_000);
  });

  it('gives a dryRun request the same inline-refreshed decision without storing anything', async () => {
    const storedBefore = await store.read('stale-dry-run');
    const callsBefore = evaluateCalls.filter((name) => name === 'stale-dry-run').length;
    const review = kcpScale('stale-dry-run', 3, 5);
    review.request.dryRun = true;
    const response = await validate(review, '?timeout=10s');
    expect(response.allowed).toBe(true);
    expect(evaluateCalls.filter((name) => name === 'stale-dry-run').length).toBe(callsBefore + 1);
    // A storing refresh starts its write before the answer goes out, so none may have started.
    expect(serverWrites.filter((name) => name === 'stale-dry-run')).toEqual([]);
    expect(await store.read('stale-dry-run')).toEqual(storedBefore);
  });

  it('shares one inline refresh among concurrent requests for a stale target', async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, () => validate(kcpScale('burst', 3, 5), '?timeout=10s')));
    expect(answers.map((response) => response.allowed)).toEqual([true, true, true, true, true, true]);
    expect(new Set(answers.map((response) => response.uid)).size).toBe(6);
    expect(evaluateCalls.filter((name) => name === 'burst')).toHaveLength(1);
  });

  it('answers before the apiserver gives up when an inline refresh hangs, denying with the refresh failure', async () => {
    const started = Date.now();
    const response = await validate(kcpScale('slow-refresh', 3, 5), '?timeout=4s');
    const tookMs = Date.now() - started;
    expect(response.allowed).toBe(false);
    expect(response.status?.message).toMatch(/slow-refresh/);
    expect(tookMs).toBeLessThan(4_000);
  });

  it('allows an unguarded change (labels only) without reading the cache', async () => {
    const review = kcpScale('missing', 3, 3);
    const labels = review.request.object?.metadata.labels;
    if (!labels) throw new Error('the KCP fixture lost its labels');
    labels.team = 'platform';
    const response = await validate(review);
    expect(response).toMatchObject({ uid: review.request.uid, allowed: true });
  });

  it.each([
    ['invalid JSON', '{"apiVersion": "admission.k8s.io/v1", "kind": ', /not valid JSON/],
    ['JSON that is not an AdmissionReview', JSON.stringify({ hello: 'world' }), /apiVersion/],
    [
      'an AdmissionReview without a request uid',
      JSON.stringify({ ...kcpScale('healthy', 3, 5), request: { ...kcpScale('healthy', 3, 5).request, uid: 42 } }),
      /request\.uid/,
    ],
    ['a JSON array', '[1,2,3]', /not an AdmissionReview/],
    ['an empty body', '', /apiVersion|AdmissionReview/],
  ])('answers 400 with a message for %s', async (_name, body, message) => {
    const answer = await request('POST', '/validate', body);
    expect(answer.status).toBe(400);
    expect((answer.json as { error?: string }).error).toMatch(message);
    expect(answer.text).not.toMatch(/at .*\.(ts|js):\d+/);
  });

  it('answers 413 for a 3.5 MiB body and keeps serving', async () => {
    const huge = JSON.stringify({ ...kcpScale('healthy', 3, 5), padding: 'x'.repeat(3.5 * 1024 * 1024) });
    const answer = await request('POST', '/validate', huge);
    expect(answer.status).toBe(413);
    expect((answer.json as { error?: string }).error).toMatch(/3 MiB/);
    expect((await request('GET', '/healthz')).status).toBe(200);
  });
});

// The real AdmissionReview fixtures (test/fixtures/admission) against each kind of evaluation the
// webhook can hold. One server per state, each with its own file store, inline refresh off.
const FIXTURE_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../test/fixtures', 'admission');
type FixtureState = 'healthy' | 'degraded' | 'unhealthy' | 'stale' | 'missing';
const STATES: FixtureState[] = ['healthy', 'degraded', 'unhealthy', 'stale', 'missing'];
const ALWAYS = { healthy: true, degraded: true, unhealthy: true, stale: true, missing: true };
const NEEDS_PASSING = { healthy: true, degraded: true, unhealthy: false, stale: false, missing: false };
const NEVER = { healthy: false, degraded: false, unhealthy: false, stale: false, missing: false };
/** Expected `allowed` per fixture and state: the webhook's decision rules (webhook/domain/decide.ts) as a table. */
const FIXTURE_EXPECTATIONS: Record<string, Record<FixtureState, boolean>> = {
  'kcp-create.json': ALWAYS,
  'kcp-delete.json': ALWAYS,
  'kcp-label-only.json': ALWAYS,
  // system:masters with the override annotation: allowed (with a warning) whatever etcd says.
  'kcp-override-scale-down.json': ALWAYS,
  'kcp-scale-up-3-to-5.json': NEEDS_PASSING,
  'kcp-scale-up-dry-run.json': NEEDS_PASSING,
  'kcp-v1beta1-edit-version.json': NEEDS_PASSING,
  'kcp-v1beta2-edit-version.json': NEEDS_PASSING,
  'etcd-druid-replicas-3-to-5.json': NEEDS_PASSING,
  'statefulset-scale-3-to-4.json': NEEDS_PASSING,
  'statefulset-edit-ordinals.json': NEEDS_PASSING,
  // A Scale to 0 arrives as spec: {} (replicas is omitempty): etcd is never scaled to 0.
  'kcp-scale-to-0-omitted-replicas.json': NEVER,
  // 3 → 2 keeps quorum when all three are healthy; with one dead it would leave 1 of 2.
  'kcp-scale-down-3-to-2.json': NEEDS_PASSING,
  'kcp-v1beta2-replicas-3-to-2.json': NEEDS_PASSING,
  // etcd-druid hibernation (Gardener): to 0 whatever the verdict, even with none. Back from 0 only
  // to the size the evaluations last saw (lastMembership, which these do not carry): else judged.
  'etcd-druid-scale-3-to-0-hibernate.json': ALWAYS,
  'etcd-druid-scale-0-to-3-wake-up.json': NEEDS_PASSING,
  // A control-plane Machine's delete is a member leaving: these servers cannot read its KCP
  // (no Kubernetes API), so it is denied naming that read, whatever etcd says (member-exits.test.ts
  // judges it with the KCP read).
  'machine-delete-control-plane.json': NEVER,
  // A worker Machine and a Pod that no target guards carry no member.
  'machine-delete-worker.json': ALWAYS,
  'pod-delete-unrelated.json': ALWAYS,
  // Namespace shoot--prod is not in the fixture target's match: no guarded StatefulSet owns it.
  'pod-delete-etcd-druid.json': ALWAYS,
  // A ClusterClass Cluster's topology version or replicas: judged as its KCP change, which needs
  // the KCP read these servers cannot make (cluster-topology.test.ts judges it with the read).
  'cluster-v1beta2-topology-version.json': NEVER,
  'cluster-v1beta1-topology-replicas-3-to-5.json': NEVER,
};
/** Fixtures denied because a read the decision needs is impossible here, with what the message must name. */
const DENIED_BY_READ: Record<string, RegExp> = {
  'machine-delete-control-plane.json':
    /cannot judge deleting Machine default\/prod-control-plane-7xkqp: reading its KubeadmControlPlane default\/prod-control-plane failed/,
  'cluster-v1beta2-topology-version.json':
    /cannot judge changing the topology of Cluster default\/prod: reading its KubeadmControlPlane default\/prod-7xk2q failed/,
  'cluster-v1beta1-topology-replicas-3-to-5.json':
    /cannot judge changing the topology of Cluster default\/prod: reading its KubeadmControlPlane default\/prod-7xk2q failed/,
};

function evaluationFor(state: FixtureState): Evaluation | null {
  switch (state) {
    case 'healthy':
      return makeEvaluation({ target: 'prod', evaluatedAt: secondsAgo(3) });
    case 'degraded':
      return makeEvaluation({
        target: 'prod',
        evaluatedAt: secondsAgo(3),
        verdict: 'Degraded',
        reasons: ['member etcd-2 database is 85% of its quota'],
        checks: [{ name: 'db-size', status: 'warn', message: 'member etcd-2 database is 85% of its quota' }],
      });
    case 'unhealthy':
      return makeEvaluation({
        target: 'prod',
        evaluatedAt: secondsAgo(3),
        verdict: 'Unhealthy',
        members: [makeMember(0), makeMember(1, { healthy: false, error: 'connection refused' }), makeMember(2)],
        reasons: ['member etcd-1 (https://127.0.0.1:2389) is unreachable: connection refused'],
        checks: [{ name: 'reachable', status: 'fail', message: 'member etcd-1 is unreachable' }],
      });
    case 'stale':
      return makeEvaluation({ target: 'prod', evaluatedAt: secondsAgo(300) });
    case 'missing':
      return null;
  }
}

describe('the AdmissionReview fixtures against each cached evaluation', () => {
  const servers = new Map<FixtureState, TestWebhook>();
  const fixtureFiles = existsSync(FIXTURE_DIR)
    ? readdirSync(FIXTURE_DIR)
        .filter((file) => file.endsWith('.json'))
        .sort()
    : [];

  beforeAll(async () => {
    for (const state of STATES) {
      const fixtureConfig = parseGuardConfig(
        {
          store: { kind: 'file', dir: path.join(workDir, `fixture-store-${state}`) },
          maxAgeSeconds: 60,
          inlineRefresh: false,
          targets: [
            {
              name: 'prod',
              endpoints: ['https://127.0.0.1:2379'],
              match: { namespaces: ['default', 'shoot--prod--core', 'etcd'], names: ['prod-control-plane', 'etcd-main', 'etcd'] },
            },
          ],
        },
        `fixture config (${state})`,
      );
      const stateStore = createStore(fixtureConfig.store);
      const evaluation = evaluationFor(state);
      if (evaluation) await stateStore.write(evaluation);
      const running = await startTestWebhook({
        config: fixtureConfig,
        certs,
        store: stateStore,
        evaluate: () => Promise.reject(new Error('inline refresh is off in the fixture servers')),
        ready: true,
      });
      servers.set(state, running);
    }
  });

  afterAll(async () => {
    await Promise.all([...servers.values()].map((running) => running.close()));
  });

  it('has an expectation for every fixture file', () => {
    expect(fixtureFiles.length).toBeGreaterThan(0);
    expect(fixtureFiles.filter((file) => !(file in FIXTURE_EXPECTATIONS))).toEqual([]);
  });

  const cases = Object.entries(FIXTURE_EXPECTATIONS).flatMap(([file, byState]) =>
    STATES.map((state) => ({ file, state, allowed: byState[state] })),
  );
  it.each(cases)('$file with a $state evaluation → allowed=$allowed', async ({ file, state, allowed }) => {
    const running = servers.get(state);
    if (!running) throw new Error(`no server for ${state}`);
    // As recorded, uid included; postReview checks the answer echoes it.
    const response = await running.postReview(admissionFixture(file));
    expect(response.allowed, response.status?.message).toBe(allowed);
    if (!allowed) {
      expect(response.status?.code).toBe(403);
      const message = response.status?.message ?? '';
      const byRead = DENIED_BY_READ[file];
      if (byRead !== undefined) {
        expect(message).toMatch(byRead);
        return;
      }
      if (state === 'stale') {
        // Written 300 s before the servers started; the age grows with however long the run takes.
        const age = Number(/no fresh etcd evaluation for prod \(age (\d+)s, max 60s\)/.exec(message)?.[1]);
        expect(age, message).toBeGreaterThanOrEqual(299);
      }
      if (state === 'missing') expect(message).toMatch(/no fresh etcd evaluation for prod/);
      if (state === 'unhealthy') expect(message).toMatch(/target prod verdict Unhealthy/);
    }
  });
});

describe('health, readiness, metrics and /evaluations', () => {
  it('/healthz answers 200', async () => {
    const answer = await request('GET', '/healthz');
    expect(answer.status).toBe(200);
  });

  it('/readyz answers 200 once the cache has read every target', async () => {
    expect((await request('GET', '/readyz')).status).toBe(200);
  });

  it('the metrics port shows decision counters, durations and evaluation ages after decisions', async () => {
    await validate(kcpScale('unhealthy', 3, 5));
    const answer = await httpRequest(`${String(webhook.metricsUrl)}/metrics`);
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toMatch(/text\/plain/);
    expect(answer.text).toMatch(
      /etcd_guard_admission_decisions_total\{target="[a-z-]*",decision="allowed",mode="enforce",reason="[a-z-]+"\} [1-9]/,
    );
    expect(answer.text).toMatch(
      /etcd_guard_admission_decisions_total\{target="unhealthy",decision="denied",mode="enforce",reason="[a-z-]+"\} [1-9]/,
    );
    expect(answer.text).toMatch(/etcd_guard_admission_duration_seconds_count [1-9]/);
    expect(answer.text).toMatch(/etcd_guard_evaluation_age_seconds\{target="healthy"\} \d/);
    expect(answer.text).toMatch(/etcd_guard_inline_refresh_total\{target="stale",result="skipped"\} [1-9]/);
    expect(answer.text).toMatch(/etcd_guard_inline_refresh_total\{target="stale-refresh",result="success"\} 1/);
  });

  it('the admission port serves no /metrics: target names stay off the port every API server client can reach', async () => {
    const answer = await request('GET', '/metrics');
    expect(answer.status).toBe(404);
    expect(answer.text).not.toContain('etcd_guard_');
  });

  it.each([
    { method: 'GET', target: 'healthy', auth: undefined, status: 401 },
    { method: 'GET', target: 'healthy', auth: 'Bearer wrong', status: 401 },
    { method: 'GET', target: 'healthy', auth: `Bearer ${TOKEN}`, status: 200 },
    { method: 'GET', target: 'missing', auth: `Bearer ${TOKEN}`, status: 404 },
    { method: 'GET', target: 'nope', auth: `Bearer ${TOKEN}`, status: 404 },
    { method: 'POST', target: 'missing', auth: `Bearer ${TOKEN}`, status: 200 },
    { method: 'DELETE', target: 'healthy', auth: `Bearer ${TOKEN}`, status: 405 },
  ])('$method /evaluations/$target with auth $auth → $status', async ({ method, target, auth, status }) => {
    const answer = await request(method, `/evaluations/${target}`, undefined, auth ? { authorization: auth } : {});
    expect(answer.status, answer.text).toBe(status);
    expect(answer.text).not.toContain(TOKEN);
    if (status === 200) expect((answer.json as Evaluation).target).toBe(target);
  });

  it.each(['/evaluations', '/evaluations/', '/evaluations/healthy/extra'])('GET %s needs the token too', async (route) => {
    expect((await request('GET', route)).status).toBe(401);
    expect((await request('GET', route, undefined, { authorization: `Bearer ${TOKEN}` })).status).not.toBe(401);
  });

  it('a POST /evaluations result feeds the cache the webhook decides from', async () => {
    expect(webhook.server.cache.get('missing')).not.toBeNull();
    const response = await validate(kcpScale('missing', 3, 5), '?timeout=1s');
    expect(response.allowed).toBe(true);
  });

  it('answers unknown routes with a JSON 404', async () => {
    const answer = await request('GET', '/nope');
    expect(answer.status).toBe(404);
    expect((answer.json as { error?: string }).error).toMatch(/no route for GET \/nope/);
  });
});

describe('readiness before the first store read, and failing closed', () => {
  async function listen(app: http.RequestListener): Promise<{ url: string; close: () => Promise<void> }> {
    const plain = http.createServer(app);
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    const port = (plain.address() as AddressInfo).port;
    return {
      url: `http://127.0.0.1:${port}`,
      close: () =>
        new Promise<void>((resolve) => {
          plain.closeAllConnections();
          plain.close(() => resolve());
        }),
    };
  }

  async function plainRequest(url: string, method: string, body?: string): Promise<{ status: number; json: unknown }> {
    const response = await fetch(url, {
      method,
      ...(body === undefined ? {} : { body, headers: { 'content-type': 'application/json' } }),
    });
    return { status: response.status, json: await response.json() };
  }

  it('/readyz is 503 until every target has been read from the store, then 200', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const gatedStore = { read: async (target: string) => (await gate, store.read(target)) };
    const cache = new EvaluationCache({
      store: gatedStore,
      targets: config.targets.map((target) => target.name),
      readTimeoutMs: 5_000,
    });
    const onDemand = new OnDemandEvaluations({ config, store, evaluate: evaluateStandIn, token: null });
    const app = createWebhookApp({ config, cache, onDemand, metrics: createWebhookMetrics(), logger: silentLogger });
    const running = await listen(app);
    try {
      const pollDone = cache.pollOnce();
      const before = await plainRequest(`${running.url}/readyz`, 'GET');
      expect(before.status).toBe(503);
      expect((before.json as { ready: boolean }).ready).toBe(false);
      release();
      await pollDone;
      expect((await plainRequest(`${running.url}/readyz`, 'GET')).status).toBe(200);
    } finally {
      await running.close();
      await cache.stop();
    }
  });

  it('logs one JSON line per decision with uid, object, user, result, reason, target and age, and no token', async () => {
    const lines: string[] = [];
    const logger = createLogger({ env: { LOG_LEVEL: 'info' }, destination: { write: (line: string) => void lines.push(line) } });
    const cache = new EvaluationCache({ store, targets: ['unhealthy'] });
    await cache.pollOnce();
    const onDemand = new OnDemandEvaluations({ config, store, evaluate: evaluateStandIn, token: TOKEN });
    const running = await listen(createWebhookApp({ config, cache, onDemand, metrics: createWebhookMetrics(), logger }));
    try {
      const review = kcpScale('unhealthy', 3, 5);
      const response = await fetch(`${running.url}/validate`, {
        method: 'POST',
        body: JSON.stringify(review),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      });
      expect(response.status).toBe(200);
      const decisions = lines
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((entry) => entry.msg === 'admission decision');
      expect(decisions).toHaveLength(1);
      expect(decisions[0]).toMatchObject({
        uid: review.request.uid,
        object: 'unhealthy/control-plane',
        user: 'alice@example.com',
        result: 'denied',
        reason: 'unhealthy',
        target: 'unhealthy',
      });
      expect(decisions[0]?.ageSeconds).toEqual(expect.any(Number));
      expect(lines.join('\n')).not.toContain(TOKEN);
    } finally {
      await running.close();
    }
  });

  it.each([
    {
      case: 'decide throws for a request whose uid is known → a DENY AdmissionReview',
      core: {
        decide: () => {
          throw new Error('projection exploded');
        },
      },
      status: 200,
      allowed: false,
    },
    {
      case: 'parsing throws before the uid is known → 500 JSON error',
      core: {
        parseAdmissionReview: () => {
          throw new Error('parser exploded');
        },
      },
      body: { not: 'a review' },
      status: 500,
      allowed: null,
    },
  ])('fails closed when $case', async ({ core, status, allowed, body }) => {
    const cache = new EvaluationCache({ store, targets: ['healthy'] });
    await cache.pollOnce();
    const onDemand = new OnDemandEvaluations({ config, store, evaluate: evaluateStandIn, token: null });
    const app = createWebhookApp({ config, cache, onDemand, metrics: createWebhookMetrics(), logger: silentLogger, core });
    const running = await listen(app);
    try {
      const review = kcpScale('healthy', 3, 5);
      const answer = await plainRequest(`${running.url}/validate`, 'POST', JSON.stringify(body ?? review));
      expect(answer.status).toBe(status);
      if (allowed === null) {
        expect((answer.json as { error: string }).error).toMatch(/parser exploded/);
      } else {
        const response = (answer.json as { response: AdmissionResponse }).response;
        expect(response.uid).toBe(review.request.uid);
        expect(response.allowed).toBe(allowed);
        expect(response.status?.message).toMatch(/fail closed.*projection exploded/);
      }
    } finally {
      await running.close();
    }
  });
});

describe('the apiserver budget from ?timeout=', () => {
  it.each([
    ['10s', 10_000],
    ['1m0s', 60_000],
    ['500ms', 500],
    ['1.5s', 1_500],
    ['1h2m3s', 3_723_000],
    ['', null],
    ['10', null],
    ['ten seconds', null],
    ['5x', null],
  ])('parses %j as %s ms', (text, expected) => {
    expect(parseGoDurationMs(text)).toBe(expected);
  });

  it.each([
    [undefined, 10_000],
    ['abc', 10_000],
    ['0s', 10_000],
    ['3s', 3_000],
    [['2s', '9s'], 2_000],
    // clamped to the apiserver's 30 s maximum instead of overflowing setTimeout
    ['720h', 30_000],
    ['31s', 30_000],
  ])('uses %j as a budget of %s ms (the Kubernetes default when absent or unreadable)', (query, expected) => {
    expect(apiserverTimeoutMs(query)).toBe(expected);
  });
});

describe('issue 27: when no live evaluation can run, and when one fails', () => {
  const cachedHealthy = () => makeEvaluation({ target: 'healthy', evaluatedAt: secondsAgo(5) });

  async function decideWith(
    evaluateForAdmission: () => Promise<Evaluation>,
    guardConfig: GuardConfig = config,
  ): Promise<{ response: AdmissionResponse; asked: number }> {
    const cache = new EvaluationCache({ store, targets: ['healthy'] });
    cache.put(cachedHealthy());
    let asked = 0;
    const onDemand = {
      authorize: () => true,
      refresh: () => Promise.reject(new Error('not used')),
      evaluateForAdmission: () => {
        asked += 1;
        return evaluateForAdmission();
      },
      handle: () => Promise.resolve({ status: 500, body: {} }),
    };
    const plain = http.createServer(
      createWebhookApp({ config: guardConfig, cache, onDemand, metrics: createWebhookMetrics(), logger: silentLogger }),
    );
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    try {
      const answer = await fetch(`http://127.0.0.1:${(plain.address() as AddressInfo).port}/validate?timeout=10s`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(kcpScale('healthy', 3, 5)),
      });
      const body = (await answer.json()) as { response: AdmissionResponse };
      return { response: body.response, asked };
    } finally {
      plain.closeAllConnections();
      await new Promise<void>((resolve) => plain.close(() => resolve()));
    }
  }

  it.each([
    {
      case: 'no evaluation slot (overload): the cached Healthy decides, and the allow says so with its age',
      error: new OverloadError('no evaluation slot became free within 5000 ms (8 evaluations running); not evaluated', 5),
      allowed: true,
      evidence: 'cached',
      says: /decided on the cached evaluation of healthy, [56]s old .*no live evaluation: no evaluation slot/,
    },
    {
      case: 'a run on a starved event loop: denied, nothing older stands in for what it may have seen',
      error: new StarvedEvaluationError('the evaluation of target "healthy" ran while this process was overloaded', 3),
      allowed: false,
      evidence: 'failed',
      says: /^no fresh etcd evaluation for healthy \(live evaluation failed: the evaluation of target "healthy" ran while/,
    },
    {
      case: 'a live evaluation that failed: denied',
      error: new Error('etcd exploded'),
      allowed: false,
      evidence: 'failed',
      says: /^no fresh etcd evaluation for healthy \(live evaluation failed: etcd exploded\)/,
    },
  ])('$case', async ({ error, allowed, evidence, says }) => {
    const { response, asked } = await decideWith(() => Promise.reject(error));
    expect(asked).toBe(1);
    expect(response.allowed).toBe(allowed);
    expect(response.auditAnnotations?.evidence).toBe(evidence);
    const text = allowed ? (response.warnings ?? []).join(' ') : (response.status?.message ?? '');
    expect(text).toMatch(says);
  });

  it('decision: cached never evaluates inline; the cached Healthy decides within maxAgeSeconds, saying so', async () => {
    const cachedConfig: GuardConfig = { ...config, decision: 'cached' };
    const { response, asked } = await decideWith(() => Promise.reject(new Error('must not be asked')), cachedConfig);
    expect(asked).toBe(0);
    expect(response.allowed).toBe(true);
    expect(response.auditAnnotations).toMatchObject({ evidence: 'cached', verdict: 'Healthy' });
    expect(Number(response.auditAnnotations?.['evidence-age-ms'])).toBeGreaterThanOrEqual(5_000);
    expect((response.warnings ?? []).join(' ')).toMatch(
      /cached evaluation of healthy, [56]s old .*configured with decision: cached/,
    );
  });
});
