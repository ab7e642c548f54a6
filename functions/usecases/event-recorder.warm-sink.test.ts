// The webhook loads its Event writer's Kubernetes client at start (warm) instead of at the first
// denial. A warm-up that fails (no kubeconfig yet, a broken one) must cost nothing: no unhandled
// rejection, no lost Event; the first write loads it again.
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventIntent } from '../domain/events.js';
import { EventRecorder, lazyKubeEventSink } from './event-recorder.js';
import { kubernetesApiInEnv } from '../../webhook/server/main.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';

let kube: FakeKubeApiServer;
let dir: string;

beforeAll(async () => {
  kube = await startFakeKubeApiServer();
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-event-warm-'));
});

afterAll(async () => {
  await kube?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function denial(name: string): EventIntent {
  return {
    regarding: { apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1', kind: 'KubeadmControlPlane', namespace: 'tenant-a', name },
    type: 'Warning',
    reason: 'Denied',
    action: 'Admission',
    note: 'scale 3 → 5 denied: etcd is Unhealthy',
  };
}

describe('the Event writer, loaded at start', () => {
  it.each([
    ['a kubeconfig that is there', true],
    ['a kubeconfig written only after the warm-up failed', false],
  ])('writes the first Event with %s', async (_name, presentAtStart) => {
    const kubeconfig = path.join(dir, `kubeconfig-${presentAtStart ? 'present' : 'late'}`);
    if (presentAtStart) await copyFile(kube.kubeconfigFile, kubeconfig);
    const sink = lazyKubeEventSink(kubeconfig);
    const errors: string[] = [];
    const recorder = new EventRecorder({
      sink,
      reportingController: 'etcd-guard.io/webhook',
      reportingInstance: 'warm-test',
      onError: (message) => errors.push(message),
    });
    await sink.warm();
    if (!presentAtStart) await copyFile(kube.kubeconfigFile, kubeconfig);
    const before = kube.requests.length;
    recorder.record(denial(`cp-${presentAtStart ? 'present' : 'late'}`));
    await recorder.flush();
    const created = kube.requests.slice(before).filter((entry) => entry.resource === 'events' && entry.verb === 'create');
    expect(errors).toEqual([]);
    expect(created.map((entry) => [entry.namespace, entry.status])).toEqual([['tenant-a', 201]]);
  });
});

describe('when the webhook loads it at start', () => {
  it.each([
    ['KUBECONFIG set', { KUBECONFIG: '/etc/kube/config' }, true],
    ["a pod's service environment", { KUBERNETES_SERVICE_HOST: '10.96.0.1' }, true],
    ['neither (a local run on the file store)', { HOME: '/root' }, false],
    ['both empty', { KUBECONFIG: ' ', KUBERNETES_SERVICE_HOST: '' }, false],
  ])('%s', (_name, env, expected) => {
    expect(kubernetesApiInEnv(env)).toBe(expected);
  });
});
