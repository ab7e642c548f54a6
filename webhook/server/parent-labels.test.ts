// A /scale request carries an autoscaling/v1 Scale, which has no labels. For a static target that
// matches by clusterName the webhook reads the parent KubeadmControlPlane from the API server (the
// loopback stand-in) to learn which target it belongs to: allowed when that target's etcd (a real
// 3-member cluster) is Healthy; denied saying why when the read is forbidden, finds nothing or
// hangs, within the read's deadline.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig } from '../../functions/domain/config.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';
import { fixtureReview } from '../../test/harness/reviews.js';
import { startTestWebhook, type TestWebhook } from '../../test/harness/webhook.js';

const PARENT_READ_TIMEOUT_MS = 600;
const KCP_GROUP = 'controlplane.cluster.x-k8s.io';

let workDir: string;
let cluster: EtcdTestCluster;
let fake: FakeKubeApiServer;
let webhook: TestWebhook;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-scale-parent-'));
  [cluster, fake] = await Promise.all([startEtcdCluster({ size: 3, name: 'scale-parent' }), startFakeKubeApiServer()]);
  const config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 300,
      inlineRefresh: false,
      targets: [
        // Listed first and never evaluated: a KCP wrongly judged against it is denied as stale.
        { name: 'staging', endpoints: cluster.endpoints, tls: cluster.clientTls, match: { clusterName: 'staging' } },
        { name: 'prod', endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: '1s', match: { clusterName: 'prod' } },
      ],
    },
    'scale-parent config',
  );
  const store = createStore(config.store);
  const prod = config.targets[1];
  if (prod === undefined) throw new Error('config lost its prod target');
  const evaluation = await evaluateTarget(prod);
  // Healthy, or Degraded when this loaded machine makes a member slow: both pass and allow.
  expect(evaluation.passed, evaluation.reasons.join('; ')).toBe(true);
  await store.write(evaluation);
  webhook = await startTestWebhook({
    config,
    store,
    kubeconfigFile: fake.kubeconfigFile,
    parentReadTimeoutMs: PARENT_READ_TIMEOUT_MS,
    ready: true,
  });
});

afterAll(async () => {
  await webhook?.close();
  await fake?.close();
  await cluster?.destroy();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

function putKcp(name: string, clusterName: string): void {
  fake.putObject('kubeadmcontrolplanes', {
    apiVersion: `${KCP_GROUP}/v1beta2`,
    kind: 'KubeadmControlPlane',
    metadata: { name, namespace: 'default', labels: { 'cluster.x-k8s.io/cluster-name': clusterName } },
    spec: { replicas: 3, version: 'v1.31.2' },
  });
}

/** The apiserver's /scale AdmissionReview (3 → 5) for KubeadmControlPlane default/<name>, over plain HTTP. */
async function validate(name: string) {
  const startedAt = performance.now();
  const response = await webhook.postReview(fixtureReview('kcp-scale-up-3-to-5.json', { name }));
  return { ...response, elapsedMs: performance.now() - startedAt };
}

function parentGets(name: string): number {
  return fake.requests.filter(
    (request) =>
      request.verb === 'get' && request.path === `/apis/${KCP_GROUP}/v1beta2/namespaces/default/kubeadmcontrolplanes/${name}`,
  ).length;
}

describe('/scale of a KubeadmControlPlane matched by clusterName', () => {
  it('reads the parent, finds target prod (Healthy) and allows; a second request within the cache TTL reads nothing', async () => {
    putKcp('prod-control-plane', 'prod');
    const first = await validate('prod-control-plane');
    expect(first.status?.message ?? 'allowed').toBe('allowed');
    expect(first.allowed).toBe(true);
    expect(parentGets('prod-control-plane')).toBe(1);
    expect((await validate('prod-control-plane')).allowed).toBe(true);
    expect(parentGets('prod-control-plane')).toBe(1);
  });

  it('judges by the parent labels: a KCP of cluster staging goes to target staging (no evaluation → denied as such)', async () => {
    putKcp('staging-control-plane', 'staging');
    const answer = await validate('staging-control-plane');
    expect(answer.allowed).toBe(false);
    expect(answer.status?.message).toMatch(/no fresh etcd evaluation for staging/);
  });

  it('denies a KCP whose labels match no target, saying so', async () => {
    putKcp('other-control-plane', 'other');
    const answer = await validate('other-control-plane');
    expect(answer.allowed).toBe(false);
    expect(answer.status?.message).toContain('no etcd-guard target matches KubeadmControlPlane default/other-control-plane');
  });

  it.each([
    ['forbidden (403: RBAC does not let the webhook get KCPs)', 'forbidden-cp', /forbidden: cannot get kubeadmcontrolplanes/],
    ['missing (404)', 'missing-cp', /not found: cannot get kubeadmcontrolplanes\S* "missing-cp" in namespace "default"/],
  ])('denies when the parent read is %s, naming the failure', async (_label, name, message) => {
    if (name === 'forbidden-cp') {
      putKcp(name, 'prod');
      fake.forbid('get', 'kubeadmcontrolplanes');
    }
    try {
      const answer = await validate(name);
      expect(answer.allowed).toBe(false);
      expect(answer.status?.message).toContain(`cannot tell whether KubeadmControlPlane default/${name} belongs to target`);
      expect(answer.status?.message).toContain('reading the KubeadmControlPlane failed');
      expect(answer.status?.message).toMatch(message);
    } finally {
      fake.allowAll();
    }
  });

  it('denies within the read deadline (+250 ms) when the API server never answers the GET', async () => {
    putKcp('hung-cp', 'prod');
    fake.hang(`/apis/${KCP_GROUP}/v1beta2/namespaces/default/kubeadmcontrolplanes/hung-cp`);
    try {
      const answer = await validate('hung-cp');
      expect(answer.allowed).toBe(false);
      expect(answer.status?.message).toMatch(/reading the KubeadmControlPlane failed: timed out: .*within 600ms/);
      // Node's timers count from the event loop's cached clock: allow a few ms against performance.now().
      expect(answer.elapsedMs).toBeGreaterThanOrEqual(PARENT_READ_TIMEOUT_MS - 5);
      expect(answer.elapsedMs).toBeLessThan(PARENT_READ_TIMEOUT_MS + 250);
    } finally {
      fake.unhang();
    }
  });
});
