// End to end with a real 3-member etcd: the scheduled evaluation feeds the store, the webhook's
// cache picks it up, and /validate over HTTPS allows a scale-up while etcd is healthy, denies the
// same change naming the dead member after one is killed, and allows it again once it is back.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
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
import { startWebhookServer, type RunningWebhookServer } from '../webhook/server/main.js';
import { generateTestCerts } from './harness/certs.js';
import { startEtcdCluster, type EtcdTestCluster } from './harness/etcd-cluster.js';
import { httpsRequest } from './harness/https-client.js';

const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });

let workDir: string;
let cluster: EtcdTestCluster;
let config: GuardConfig;
let store: EvaluationStore;
let server: RunningWebhookServer;
let ca: Buffer;
let agent: https.Agent;
let uidCounter = 0;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-e2e-webhook-'));
  const [etcd, certs] = await Promise.all([startEtcdCluster({ size: 3, name: 'e2e' }), generateTestCerts(workDir)]);
  cluster = etcd;
  ca = readFileSync(certs.caFile);
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
  server = await startWebhookServer({
    config,
    host: '127.0.0.1',
    port: 0,
    tls: { certFile: certs.serverCertFile, keyFile: certs.serverKeyFile },
    token: null,
    logger: silent,
    store,
    pollIntervalMs: 100,
  });
  agent = new https.Agent({ keepAlive: true });
  await server.cache.whenReady();
});

afterAll(async () => {
  agent?.destroy();
  await server?.close();
  await cluster?.destroy();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** One scheduled run, then wait (with a deadline) until the webhook's cache has polled it in. */
async function scheduledEvaluation(): Promise<Evaluation> {
  const [result] = await runScheduledEvaluation({ config, store, evaluate: (target) => evaluateTarget(target), logger: silent });
  expect(result?.ok, JSON.stringify(result)).toBe(true);
  const stored = await store.read('e2e');
  if (stored === null) throw new Error('the scheduled run stored nothing');
  await expect.poll(() => server.cache.get('e2e')?.evaluatedAt, { timeout: 5_000, interval: 50 }).toBe(stored.evaluatedAt);
  return stored;
}

function kcpScale(from: number, to: number) {
  uidCounter += 1;
  const kcp = (replicas: number) => ({
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
    kind: 'KubeadmControlPlane',
    metadata: { name: 'e2e-control-plane', namespace: 'default', labels: { 'cluster.x-k8s.io/cluster-name': 'e2e' } },
    spec: { replicas, version: 'v1.30.2' },
  });
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `e2e-${uidCounter}`,
      kind: { group: 'controlplane.cluster.x-k8s.io', version: 'v1beta1', kind: 'KubeadmControlPlane' },
      resource: { group: 'controlplane.cluster.x-k8s.io', version: 'v1beta1', resource: 'kubeadmcontrolplanes' },
      name: 'e2e-control-plane',
      namespace: 'default',
      operation: 'UPDATE',
      userInfo: { username: 'capi-operator', groups: ['system:authenticated'] },
      object: kcp(to),
      oldObject: kcp(from),
    },
  };
}

async function validate(review: ReturnType<typeof kcpScale>) {
  const { status, text } = await httpsRequest(`${server.url}/validate?timeout=10s`, {
    method: 'POST',
    agent,
    ca,
    body: JSON.stringify(review),
    timeoutMs: 15_000,
  });
  if (status !== 200) throw new Error(`HTTP ${status}: ${text}`);
  const answer = JSON.parse(text) as { response: { uid: string; allowed: boolean; status?: { code: number; message: string } } };
  expect(answer.response.uid).toBe(review.request.uid);
  return answer.response;
}

describe('webhook + scheduled evaluation + real etcd', () => {
  it('allows, denies naming the killed member, and allows again after it is restarted', async () => {
    const healthy = await scheduledEvaluation();
    expect(healthy.verdict).toBe('Healthy');
    expect((await validate(kcpScale(3, 5))).allowed).toBe(true);

    const victim = cluster.members[1];
    if (!victim) throw new Error('cluster has no member 1');
    await cluster.kill(1);
    const sick = await scheduledEvaluation();
    expect(sick.verdict).toBe('Unhealthy');
    const denied = await validate(kcpScale(3, 5));
    expect(denied.allowed).toBe(false);
    expect(denied.status?.code).toBe(403);
    expect(denied.status?.message).toMatch(/target e2e verdict Unhealthy/);
    const namesVictim = denied.status?.message.includes(victim.name) || denied.status?.message.includes(victim.clientUrl);
    expect(namesVictim, `denial should name ${victim.name}: ${denied.status?.message}`).toBe(true);

    await cluster.restart(1);
    await cluster.waitHealthy();
    const recovered = await scheduledEvaluation();
    expect(recovered.verdict, recovered.reasons.join('; ')).not.toBe('Unhealthy');
    expect((await validate(kcpScale(3, 5))).allowed).toBe(true);
  });
});
