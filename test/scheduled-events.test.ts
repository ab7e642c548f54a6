// Verdict transitions from the scheduled run become Events in the loopback API stand-in, with a
// real 3-member etcd: Healthy (first run, no Event), a member killed → EtcdUnhealthy on the
// KubeadmControlPlane the target guards, still Unhealthy → no new Event, restarted → EtcdHealthy.
// A static target on a ConfigMap store gets its Event on its evaluation ConfigMap.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../functions/adapters/store-factory.js';
import { parseGuardConfig, type GuardConfig } from '../functions/entrypoints/config.js';
import { transitionEvent } from '../functions/domain/events.js';
import { staticTarget, type Target } from '../functions/domain/targets.js';
import type { EvaluationStore } from '../functions/domain/store.js';
import { evaluateTarget } from '../functions/usecases/evaluate-target.js';
import { EventRecorder, lazyKubeEventSink } from '../functions/usecases/event-recorder.js';
import { EVALUATOR_EVENT_CONTROLLER, runScheduledEvaluation, type ScheduledEvents } from '../functions/usecases/scheduled-run.js';
import { createLogger } from '../functions/shared/logger.js';
import { startEtcdCluster, type EtcdTestCluster } from './harness/etcd-cluster.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from './harness/fake-kube-apiserver.js';

const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });

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
  // The target as discovery makes it for a KubeadmControlPlane: it guards that object.
  target = {
    ...staticTarget(config.targets[0]!),
    source: 'capi',
    guards: { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', namespace: 'fleet', name: 'transit-cp' },
  };
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
        name: 'transit-cp',
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
