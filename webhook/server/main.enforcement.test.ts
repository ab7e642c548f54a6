// Enforcement modes, audit annotations and Events through the real HTTPS webhook: a change that
// an Unhealthy evaluation denies is denied under `enforce`, allowed with the denial as warnings
// under `warn`, allowed silently under `audit`; every one is counted per target and mode, carries
// audit annotations and leaves an Event (events.k8s.io/v1) in the loopback API stand-in. A dryRun
// request leaves none, a burst of denials becomes one Event series, and an Event write that hangs
// changes nothing about the answers.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig, type GuardConfig } from '../../functions/domain/config.js';
import { EVENT_FINISH_MS, EventRecorder, lazyKubeEventSink } from '../../functions/usecases/event-recorder.js';
import { createLogger } from '../../functions/shared/logger.js';
import { WEBHOOK_EVENT_CONTROLLER } from './main.js';
import { generateTestCerts } from '../../test/harness/certs.js';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type StoredEvent } from '../../test/harness/fake-kube-apiserver.js';
import { httpRequest } from '../../test/harness/https-client.js';
import { admissionFixture, fixtureReview } from '../../test/harness/reviews.js';
import { waitFor } from '../../test/harness/wait.js';
import { startTestWebhook, type TestWebhook } from '../../test/harness/webhook.js';

const FIXTURE = 'kcp-scale-up-3-to-5.json';
const SCALED_UID = String(admissionFixture(FIXTURE).request.object?.metadata.uid);
const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });
/** Test-side slack for "answered at once" while an Event write hangs (the write's own deadline is 2 s). */
const ANSWER_SLACK_MS = 1_500;

let workDir: string;
let kube: FakeKubeApiServer;
let webhook: TestWebhook;
let recorder: EventRecorder;
let clockMs = 0;
let config: GuardConfig;

/** The fixture (a /scale of a v1beta2 KCP from 3 to 5), aimed at KCP `name` in namespace default. */
function scaleUp(name: string, options: { dryRun?: boolean } = {}) {
  const review = fixtureReview(FIXTURE, { name });
  if (options.dryRun) review.request.dryRun = true;
  return review;
}

/** Posted without ?timeout: the webhook's default budget. */
const validate = (review: unknown) => webhook.postReview(review, { query: '' });

async function metricsText(): Promise<string> {
  return (await httpRequest(`${String(webhook.metricsUrl)}/metrics`, { timeoutMs: 15_000 })).text;
}

function eventsAbout(name: string): StoredEvent[] {
  return kube.events().filter((event) => event.regarding.name === name);
}

/** Event creates and patches the stand-in has received (a create names no object in its path). */
function eventWrites(): number {
  return kube.requests.filter((entry) => entry.resource === 'events' && (entry.verb === 'create' || entry.verb === 'patch'))
    .length;
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-enforcement-'));
  const [certs, fake] = await Promise.all([generateTestCerts(workDir), startFakeKubeApiServer()]);
  kube = fake;
  const target = (name: string, enforcement?: string) => ({
    name,
    endpoints: ['https://127.0.0.1:2379'],
    match: { namespaces: ['default'], names: [`${name}-cp`, `${name}-burst`, `${name}-dry`, `${name}-hang`, `${name}-baduid`] },
    ...(enforcement === undefined ? {} : { enforcement }),
  });
  config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 600,
      inlineRefresh: false,
      enforcement: 'enforce',
      targets: [target('enf'), target('wrn', 'warn'), target('aud', 'audit'), target('ok', 'warn')],
    },
    'enforcement test config',
  );
  const store = createStore(config.store);
  const sick = [makeMember(0), makeMember(1), makeMember(2, { healthy: false, error: 'connection refused' })];
  for (const name of ['enf', 'wrn', 'aud']) {
    await store.write(
      makeEvaluation({
        target: name,
        evaluatedAt: new Date().toISOString(),
        verdict: 'Unhealthy',
        members: sick,
        reasons: ['member etcd-2 unreachable: connection refused'],
      }),
    );
  }
  await store.write(makeEvaluation({ target: 'ok', evaluatedAt: new Date().toISOString() }));
  recorder = new EventRecorder({
    sink: lazyKubeEventSink(kube.kubeconfigFile),
    reportingController: WEBHOOK_EVENT_CONTROLLER,
    reportingInstance: 'etcd-guard-webhook-test',
    // The series clock is the test's, so a series can be finished without waiting six minutes.
    clockMs: () => clockMs,
  });
  webhook = await startTestWebhook({
    config,
    certs,
    metricsPort: true,
    logger: silent,
    store,
    kubeconfigFile: kube.kubeconfigFile,
    eventRecorder: recorder,
    ready: true,
  });
});

afterAll(async () => {
  await webhook?.close();
  await kube?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

describe('enforcement modes through the HTTPS webhook', () => {
  it.each([
    { mode: 'enforce', target: 'enf', allowed: false, warned: false, reason: 'Denied' },
    { mode: 'warn', target: 'wrn', allowed: true, warned: true, reason: 'WouldDeny' },
    { mode: 'audit', target: 'aud', allowed: true, warned: false, reason: 'WouldDeny' },
  ])('$mode: allowed=$allowed, warning=$warned, counted, audited and recorded as $reason', async (row) => {
    const name = `${row.target}-cp`;
    const answer = await validate(scaleUp(name));
    expect(answer.allowed).toBe(row.allowed);
    const denial = /target \S+ verdict Unhealthy, evaluated \d+s ago: member etcd-2 unreachable/;
    if (row.allowed) expect(answer.status).toBeUndefined();
    else expect(answer.status?.message).toMatch(denial);
    if (row.warned) {
      expect(answer.warnings?.[0]).toMatch(/^etcd-guard would deny \(enforcement warn\): etcd-guard denied scale up/);
      expect(answer.warnings?.join(' ')).toMatch(/member etcd-2 unreachable/);
      for (const warning of answer.warnings ?? []) expect(warning.length).toBeLessThanOrEqual(119);
    } else {
      expect(answer.warnings).toBeUndefined();
    }
    expect(answer.auditAnnotations).toMatchObject({
      target: row.target,
      verdict: 'Unhealthy',
      decision: 'denied',
      reason: 'unhealthy',
      enforcement: row.mode,
      'evaluation-age-seconds': expect.stringMatching(/^\d+$/),
    });
    if (row.mode === 'enforce') expect(answer.auditAnnotations?.['would-deny']).toBeUndefined();
    else expect(answer.auditAnnotations?.['would-deny']).toMatch(denial);
    expect(await metricsText()).toMatch(
      new RegExp(
        `etcd_guard_admission_decisions_total\\{target="${row.target}",decision="denied",mode="${row.mode}",reason="unhealthy"\\} 1\\n`,
      ),
    );
    await waitFor(`the ${row.reason} Event about ${name}`, 10_000, () => eventsAbout(name).length > 0);
    const [event] = eventsAbout(name);
    expect(event).toMatchObject({
      type: 'Warning',
      reason: row.reason,
      action: 'Admission',
      reportingController: 'etcd-guard.io/webhook',
      regarding: {
        apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
        kind: 'KubeadmControlPlane',
        namespace: 'default',
        name,
        uid: SCALED_UID,
      },
      metadata: { namespace: 'default' },
    });
    expect(event?.note).toMatch(/^change by kubernetes-admin (denied|allowed \(enforcement (warn|audit)\), would be denied): /);
  });

  it('a uid that is not one (the review is untrusted input) is left out of the Event', async () => {
    const review = scaleUp('enf-baduid');
    for (const scaled of [review.request.object, review.request.oldObject]) {
      if (scaled) scaled.metadata = { ...scaled.metadata, uid: `${SCALED_UID}\n"forged"` };
    }
    expect((await validate(review)).allowed).toBe(false);
    await waitFor('the Denied Event about enf-baduid', 10_000, () => eventsAbout('enf-baduid').length > 0);
    expect(eventsAbout('enf-baduid')[0]?.regarding).toEqual({
      apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
      kind: 'KubeadmControlPlane',
      namespace: 'default',
      name: 'enf-baduid',
    });
  });

  it('an allowed change carries audit annotations and records no Event', async () => {
    const answer = await validate(scaleUp('ok-cp'));
    expect(answer).toMatchObject({
      allowed: true,
      auditAnnotations: { target: 'ok', verdict: 'Healthy', decision: 'allowed', reason: 'healthy', enforcement: 'warn' },
    });
    expect(answer.auditAnnotations?.['would-deny']).toBeUndefined();
    // Writes are one at a time in order: once a later denial's Event is there, none came for ok-cp.
    await validate(scaleUp('enf-dry'));
    await waitFor('the Event about enf-dry', 10_000, () => eventsAbout('enf-dry').length > 0);
    expect(eventsAbout('ok-cp')).toEqual([]);
  });

  it('a dryRun request gets the same answer and records no Event', async () => {
    const dry = await validate(scaleUp('wrn-dry', { dryRun: true }));
    expect(dry.allowed).toBe(true);
    expect(dry.warnings?.[0]).toMatch(/^etcd-guard would deny \(enforcement warn\)/);
    await validate(scaleUp('aud-dry'));
    await waitFor('the Event about aud-dry', 10_000, () => eventsAbout('aud-dry').length > 0);
    expect(eventsAbout('wrn-dry')).toEqual([]);
  });
});

describe('Events are a series, not a flood', () => {
  it('1,000 denials of one object: 2 writes during the burst, 1 more when the series ends, count 1000', async () => {
    const name = 'enf-burst';
    await recorder.flush();
    const before = eventWrites();
    const reviews = Array.from({ length: 1_000 }, () => scaleUp(name));
    let lastBatchAt = 0;
    for (let start = 0; start < reviews.length; start += 50) {
      lastBatchAt = Date.now();
      const answers = await Promise.all(reviews.slice(start, start + 50).map((review) => validate(review)));
      expect(answers.every((answer) => answer.allowed === false)).toBe(true);
    }
    await recorder.flush();
    expect(eventWrites() - before).toBe(2);
    expect(eventsAbout(name)).toHaveLength(1);
    expect(eventsAbout(name)[0]?.series?.count).toBe(2);
    // Nothing new for client-go's six minutes: the series is written a last time and forgotten.
    clockMs += EVENT_FINISH_MS;
    recorder.tick();
    await recorder.flush();
    expect(eventWrites() - before).toBe(3);
    expect(eventsAbout(name)).toHaveLength(1);
    expect(eventsAbout(name)[0]?.series?.count).toBe(1_000);
    // The last write carries the time of the last denial, not of the second.
    const lastObserved = eventsAbout(name)[0]?.series?.lastObservedTime ?? '';
    expect(lastObserved).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}000Z$/);
    expect(Date.parse(lastObserved)).toBeGreaterThanOrEqual(lastBatchAt);
    expect(await metricsText()).toMatch(
      /etcd_guard_admission_decisions_total\{target="enf",decision="denied",mode="enforce",reason="unhealthy"\} 100[0-9]\n/,
    );
  });
});

describe('a hanging Event write', () => {
  it('changes neither the answers nor their speed; the write fails at its own deadline', async () => {
    kube.hang('/apis/events.k8s.io/');
    try {
      for (const [name, allowed] of [
        ['enf-hang', false],
        ['wrn-hang', true],
      ] as const) {
        const started = performance.now();
        const answer = await validate(scaleUp(name));
        expect(answer.allowed).toBe(allowed);
        expect(performance.now() - started).toBeLessThan(ANSWER_SLACK_MS);
      }
      await recorder.flush();
      expect(eventsAbout('enf-hang')).toEqual([]);
    } finally {
      kube.unhang();
    }
  });
});
