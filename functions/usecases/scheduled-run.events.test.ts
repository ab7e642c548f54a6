// Verdict transitions from the scheduled run become Events in the loopback API stand-in, with a
// real 3-member etcd: Healthy (first run, no Event), a member killed → EtcdUnhealthy on the
// KubeadmControlPlane the target guards (discovered from the stand-in, so the Event carries the
// KCP's uid and kubectl describe shows it), still Unhealthy → no new Event, restarted →
// EtcdHealthy. A discovered object's uid reaches its Events only when it is one; a recreated
// object (same name, new uid) starts a new Event series. A static target on a ConfigMap store
// gets its Event on its evaluation ConfigMap.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../adapters/store-factory.js';
import { parseGuardConfig, type GuardConfig } from '../domain/config.js';
import { transitionEvent } from '../domain/events.js';
import { staticTarget, type Target } from '../domain/targets.js';
import type { EvaluationStore } from '../domain/store.js';
import { evaluateTarget } from './evaluate-target.js';
import { EVENT_FINISH_MS, EventRecorder, lazyKubeEventSink } from './event-recorder.js';
import { resolveTargets } from './resolve-targets.js';
import { EVALUATOR_EVENT_CONTROLLER, runScheduledEvaluation, type ScheduledEvents } from './scheduled-run.js';
import { createLogger } from '../shared/logger.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { makeEvaluation } from '../../test/harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../../test/harness/fake-kube-apiserver.js';

const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });
const fixture = (name: string): FakeObject =>
  JSON.parse(readFileSync(new URL(`../../test/fixtures/discovery/${name}.json`, import.meta.url), 'utf8')) as FakeObject;
const KCP = fixture('kcp-v1beta1');
const KCP_UID = String(KCP.metadata.uid);

/** What discovery finds in the stand-in now (capi and druid, every namespace). */
async function discovered(): Promise<Target[]> {
  const resolved = await resolveTargets(
    parseGuardConfig({ targets: [], discovery: { kubeconfigFile: kube.kubeconfigFile, capi: {}, druid: {} } }, 'discovery'),
  );
  expect(resolved.failures).toEqual([]);
  return resolved.targets;
}

let workDir: string;
let cluster: EtcdTestCluster;
let kube: FakeKubeApiServer;
let config: GuardConfig;
let store: EvaluationStore;
let target: Target;
let events: ScheduledEvents;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-scheduled-events-'));
  [cluster, kube] = await Promise.all([startEtcdCluster({ size: 3, name: 'transit' }), startFakeKubeApiServer()]);
  config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      targets: [{ name: 'transit', endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: '1s' }],
    },
    'scheduled events config',
  );
  store = createStore(config.store);
  // A KubeadmControlPlane with its Cluster, as the management cluster serves them: discovery
  // finds it, and the target keeps what it guards (and its uid) but reaches the test's etcd.
  kube.putObject('kubeadmcontrolplanes', KCP);
  kube.putObject('clusters', fixture('cluster-prod'));
  const kcpTarget = (await discovered()).find((found) => found.guards?.name === KCP.metadata.name);
  if (kcpTarget === undefined) throw new Error('discovery did not find the KubeadmControlPlane fixture');
  const { source, guards, guardsUid } = kcpTarget;
  target = { ...staticTarget(config.targets[0]!), source, guards, ...(guardsUid === undefined ? {} : { guardsUid }) };
  const recorder = new EventRecorder({
    sink: lazyKubeEventSink(kube.kubeconfigFile),
    reportingController: EVALUATOR_EVENT_CONTROLLER,
    reportingInstance: 'etcd-guard-evaluator-test',
  });
  events = { record: (event) => recorder.record(event), flush: () => recorder.flush() };
});

afterAll(async () => {
  await cluster?.destroy();
  await kube?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

async function run(): Promise<string> {
  const [result] = await runScheduledEvaluation({
    config,
    store,
    targets: [target],
    evaluate: (t) => evaluateTarget(t),
    logger: silent,
    events,
  });
  if (!result?.ok) throw new Error(`scheduled run failed: ${JSON.stringify(result)}`);
  return result.verdict;
}

const transitions = () => kube.events().map((event) => `${event.reason}:${event.type}`);

describe('verdict transitions from the scheduled run', () => {
  it('records EtcdUnhealthy when a member dies and EtcdHealthy when it is back, once each', async () => {
    expect(await run()).toBe('Healthy');
    expect(kube.events()).toEqual([]);

    await cluster.kill(1);
    expect(await run()).toBe('Unhealthy');
    expect(transitions()).toEqual(['EtcdUnhealthy:Warning']);
    const [unhealthy] = kube.events();
    expect(unhealthy).toMatchObject({
      action: 'Evaluation',
      reportingController: 'etcd-guard.io/evaluator',
      regarding: {
        apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
        kind: 'KubeadmControlPlane',
        namespace: 'fleet',
        name: 'prod-control-plane',
        uid: KCP_UID,
      },
      metadata: { namespace: 'fleet' },
    });
    expect(unhealthy?.note).toMatch(/^etcd of target transit is Unhealthy \(was Healthy\): .*transit-1/);

    expect(await run()).toBe('Unhealthy');
    expect(transitions()).toEqual(['EtcdUnhealthy:Warning']);

    await cluster.restart(1);
    await cluster.waitHealthy();
    expect(await run()).toBe('Healthy');
    expect(transitions()).toEqual(['EtcdUnhealthy:Warning', 'EtcdHealthy:Normal']);
    expect(kube.events()[1]?.regarding.uid).toBe(KCP_UID);
  });
});

describe('the uid on the transition Events of discovered objects', () => {
  const etcd = (name: string, uid: unknown): FakeObject => {
    const object = fixture('etcd-druid');
    object.metadata = { ...object.metadata, namespace: 'uids', name };
    if (uid === undefined) delete object.metadata.uid;
    else object.metadata.uid = uid;
    return object;
  };
  const DRUID_UID = String(fixture('etcd-druid').metadata.uid);
  const cases = [
    { case: 'a UUID', name: 'etcd-uuid', uid: DRUID_UID, expected: DRUID_UID },
    { case: 'another API server’s short form', name: 'etcd-short', uid: 'A1b2-C3', expected: 'A1b2-C3' },
    { case: 'no uid', name: 'etcd-absent', uid: undefined, expected: undefined },
    { case: 'an empty uid', name: 'etcd-empty', uid: '', expected: undefined },
    { case: 'a number', name: 'etcd-number', uid: 42, expected: undefined },
    { case: 'an object', name: 'etcd-object', uid: { forged: true }, expected: undefined },
    { case: 'a uid with a newline', name: 'etcd-newline', uid: `${DRUID_UID}\nforged`, expected: undefined },
    { case: 'a path', name: 'etcd-path', uid: '../../kube-system', expected: undefined },
    { case: 'a uid of 65 characters', name: 'etcd-long', uid: 'a'.repeat(65), expected: undefined },
    { case: 'non-ASCII digits', name: 'etcd-digits', uid: '١٢٣', expected: undefined },
  ];

  beforeAll(async () => {
    for (const row of cases) kube.putObject('etcds', etcd(row.name, row.uid));
    const targets = (await discovered()).filter((found) => found.guards?.namespace === 'uids');
    expect(targets).toHaveLength(cases.length);
    // First evaluation Unhealthy: one EtcdUnhealthy Event per target, through the scheduled run.
    const results = await runScheduledEvaluation({
      config,
      store,
      targets,
      evaluate: async (found) =>
        makeEvaluation({
          target: found.name,
          evaluatedAt: new Date().toISOString(),
          verdict: 'Unhealthy',
          reasons: ['no leader'],
        }),
      logger: silent,
      events,
    });
    expect(results.every((result) => result.ok)).toBe(true);
  });

  it.each(cases)('$case: regarding.uid is $expected', ({ name, expected }) => {
    const written = kube.events().filter((event) => event.regarding.name === name);
    expect(written.map((event) => event.reason)).toEqual(['EtcdUnhealthy']);
    expect(written[0]?.regarding).toEqual({
      apiVersion: 'druid.gardener.cloud/v1alpha1',
      kind: 'Etcd',
      namespace: 'uids',
      name,
      ...(expected === undefined ? {} : { uid: expected }),
    });
  });
});

describe('a recreated object (same name, new uid)', () => {
  it('starts a new Event series regarding the new uid, and shares the name’s write budget', async () => {
    let clockMs = 0;
    const recorder = new EventRecorder({
      sink: lazyKubeEventSink(kube.kubeconfigFile),
      reportingController: EVALUATOR_EVENT_CONTROLLER,
      reportingInstance: 'etcd-guard-recreate-test',
      clockMs: () => clockMs,
      spamBurst: 3,
    });
    const unhealthy = (uid: string) =>
      recorder.record({
        regarding: { apiVersion: 'druid.gardener.cloud/v1alpha1', kind: 'Etcd', namespace: 'recreated', name: 'etcd-main', uid },
        type: 'Warning',
        reason: 'EtcdUnhealthy',
        action: 'Evaluation',
        note: 'etcd of target t is Unhealthy',
      });
    const about = () => kube.events().filter((event) => event.metadata.namespace === 'recreated');
    unhealthy('11111111-1111-4111-8111-111111111111');
    unhealthy('11111111-1111-4111-8111-111111111111');
    await recorder.flush();
    unhealthy('22222222-2222-4222-8222-222222222222');
    await recorder.flush();
    expect(about().map((event) => [event.regarding.uid, event.series?.count ?? 1])).toEqual([
      ['11111111-1111-4111-8111-111111111111', 2],
      ['22222222-2222-4222-8222-222222222222', 1],
    ]);
    // Three writes used the name's burst of 3: the new incarnation's second occurrence waits.
    unhealthy('22222222-2222-4222-8222-222222222222');
    await recorder.flush();
    expect(about()[1]?.series).toBeUndefined();
    clockMs += EVENT_FINISH_MS;
    recorder.tick();
    await recorder.flush();
    expect(about()[1]?.series?.count).toBe(2);
  });
});

describe('transitionEvent', () => {
  const evaluation = { verdict: 'Unhealthy' as const, reasons: ['member a unreachable', 'no leader'] };
  it.each([
    {
      case: 'static target, ConfigMap store → its ConfigMap',
      store: { kind: 'configmap', namespace: 'etcd-guard' },
      kind: 'ConfigMap',
    },
    { case: 'static target, file store → none', store: { kind: 'file', dir: '/tmp/x' }, kind: null },
  ] as const)('$case', ({ store: where, kind }) => {
    const event = transitionEvent({ target: { name: 'prod', guards: null }, store: where, previous: 'Healthy', evaluation });
    if (kind === null) {
      expect(event).toBeNull();
      return;
    }
    expect(event).toMatchObject({ regarding: { apiVersion: 'v1', kind, namespace: 'etcd-guard', name: 'etcd-guard-prod' } });
  });

  it.each([
    { case: 'a uid', uid: 'c3a1e0f2-1d4b-4b8e-a0c9-8e2d5b7f9a33', expected: 'c3a1e0f2-1d4b-4b8e-a0c9-8e2d5b7f9a33' },
    { case: 'no uid', uid: undefined, expected: undefined },
    { case: 'a malformed uid (a target built without discovery)', uid: 'bad uid\n', expected: undefined },
  ])('a discovered target with $case: regarding.uid is $expected', ({ uid, expected }) => {
    const guards = { group: 'druid.gardener.cloud', kind: 'Etcd', namespace: 'garden', name: 'etcd-main' };
    const event = transitionEvent({
      target: { name: 'prod', guards, ...(uid === undefined ? {} : { guardsUid: uid }) },
      store: { kind: 'file', dir: '/tmp/x' },
      previous: 'Healthy',
      evaluation,
    });
    expect(event?.regarding).toEqual({
      apiVersion: 'druid.gardener.cloud/v1alpha1',
      kind: 'Etcd',
      namespace: 'garden',
      name: 'etcd-main',
      ...(expected === undefined ? {} : { uid: expected }),
    });
  });

  it.each([
    { previous: null, verdict: 'Healthy', reason: null },
    { previous: null, verdict: 'Unhealthy', reason: 'EtcdUnhealthy' },
    { previous: 'Healthy', verdict: 'Degraded', reason: null },
    { previous: 'Degraded', verdict: 'Unhealthy', reason: 'EtcdUnhealthy' },
    { previous: 'Unhealthy', verdict: 'Unhealthy', reason: null },
    { previous: 'Unhealthy', verdict: 'Degraded', reason: 'EtcdHealthy' },
  ] as const)('$previous → $verdict: $reason', ({ previous, verdict, reason }) => {
    const event = transitionEvent({
      target: { name: 'prod', guards: null },
      store: { kind: 'configmap', namespace: 'etcd-guard' },
      previous,
      evaluation: { verdict, reasons: [] },
    });
    expect(event?.reason ?? null).toBe(reason);
  });
});
