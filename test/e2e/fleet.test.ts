// The fleet end to end: the webhook over HTTPS with capi discovery against the management
// stand-in, two workload clusters A and B (each a real 3-member etcd with its own CA, reached only
// through their workload stand-in's pod port-forward), evaluations made by the real scheduled run
// (discovery, credentials minted like KCP, port-forward) into a file store the webhook's cache
// polls. Faults hit B and must leave A alone; nothing of the run may show a private key.
import { readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCoreV1Api } from '../../functions/adapters/kube.js';
import { openCapiEtcdAccess } from '../../functions/adapters/capi-etcd-access.js';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig, type GuardConfig } from '../../functions/domain/config.js';
import { Deadline } from '../../functions/domain/deadline.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { EvaluationStore } from '../../functions/domain/store.js';
import { resolveTargets } from '../../functions/usecases/resolve-targets.js';
import { evaluateResolvedTarget } from '../../functions/usecases/reach-target.js';
import { runScheduledEvaluation, type ScheduledResult } from '../../functions/usecases/scheduled-run.js';
import { createLogger } from '../../functions/shared/logger.js';
import {
  controlPlaneMachine,
  putCapiSecrets,
  secretObject,
  startCapiWorkload,
  type CapiWorkload,
} from '../harness/capi-workload.js';
import { generateTestCerts } from '../harness/certs.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';
import { httpRequest } from '../harness/https-client.js';
import { fixtureReview } from '../harness/reviews.js';
import { startTestWebhook, type TestWebhook } from '../harness/webhook.js';

const TOKEN = 'fleet-e2e-token-0123456789abcdef';
/** Every log line (webhook and scheduled run) of the run. */
const logLines: string[] = [];
const logDestination = { write: (line: string) => void logLines.push(line) };
const webhookLogger = createLogger({ env: { LOG_LEVEL: 'debug' }, destination: logDestination });
const scheduledLogger = createLogger({ env: { LOG_LEVEL: 'debug' }, destination: logDestination, name: 'etcd-guard-scheduled' });

let workDir: string;
let management: FakeKubeApiServer;
let a: CapiWorkload;
let b: CapiWorkload;
let config: GuardConfig;
let store: EvaluationStore;
let webhook: TestWebhook;
const runTimes: number[] = [];
const denials: string[] = [];

/** Target names by the KCP each guards, as discovery names them. */
const targetNames = new Map<string, string>();
function targetOf(workload: CapiWorkload): string {
  const name = targetNames.get(controlPlaneOf(workload));
  if (name === undefined) throw new Error(`discovery found no target for ${controlPlaneOf(workload)}`);
  return name;
}
const controlPlaneOf = (workload: CapiWorkload) => `${workload.cluster.clusterName}-control-plane`;

function putKubeadmControlPlane(workload: CapiWorkload, apiVersion: string): void {
  const kcp = JSON.parse(readFileSync(new URL('../fixtures/discovery/kcp-v1beta1.json', import.meta.url), 'utf8')) as {
    apiVersion: string;
    kind: string;
    metadata: { name: string } & Record<string, unknown>;
  };
  kcp.apiVersion = apiVersion;
  const clusterUid = `${workload.cluster.namespace}-${workload.cluster.clusterName}-uid`;
  Object.assign(kcp.metadata, {
    name: controlPlaneOf(workload),
    namespace: workload.cluster.namespace,
    labels: { 'cluster.x-k8s.io/cluster-name': workload.cluster.clusterName },
    ownerReferences: [
      { apiVersion: 'cluster.x-k8s.io/v1beta1', kind: 'Cluster', name: workload.cluster.clusterName, uid: clusterUid },
    ],
  });
  management.putObject('kubeadmcontrolplanes', kcp);
  management.putObject('clusters', {
    apiVersion: 'cluster.x-k8s.io/v1beta1',
    kind: 'Cluster',
    metadata: { name: workload.cluster.clusterName, namespace: workload.cluster.namespace, uid: clusterUid },
    spec: { controlPlaneRef: { apiVersion, kind: 'KubeadmControlPlane', name: controlPlaneOf(workload) } },
  });
  for (const node of workload.nodeNames) management.putObject('machines', controlPlaneMachine(workload.cluster, node));
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-fleet-e2e-'));
  management = await startFakeKubeApiServer();
  const [certs, workloadA, workloadB] = await Promise.all([
    generateTestCerts(workDir),
    startCapiWorkload(management, { namespace: 'team-a', clusterName: 'wa', caKeyType: 'rsa' }),
    startCapiWorkload(management, { namespace: 'team-b', clusterName: 'wb' }),
  ]);
  [a, b] = [workloadA, workloadB];
  putKubeadmControlPlane(a, 'controlplane.cluster.x-k8s.io/v1beta1');
  putKubeadmControlPlane(b, 'controlplane.cluster.x-k8s.io/v1beta2');
  config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 60,
      // The scheduled run is what feeds the gate here; an inline refresh would hide it.
      inlineRefresh: false,
      targets: [],
      discovery: { capi: { namespaces: ['team-a', 'team-b'] }, kubeconfigFile: management.kubeconfigFile },
    },
    'fleet e2e config',
  );
  store = createStore(config.store);
  for (const target of (await resolveTargets(config)).targets) {
    if (target.guards) targetNames.set(target.guards.name, target.name);
  }
  expect(targetNames.size).toBe(2);
  webhook = await startTestWebhook({
    config,
    certs,
    metricsPort: true,
    token: TOKEN,
    logger: webhookLogger,
    store,
    pollIntervalMs: 100,
    kubeconfigFile: management.kubeconfigFile,
  });
}, 60_000);

afterAll(async () => {
  await webhook?.close();
  await Promise.all([a?.destroy(), b?.destroy(), management?.close()]);
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** One scheduled run over the discovered targets, then wait (with a deadline) for the webhook's cache to poll it in. */
async function scheduledRun(): Promise<Map<string, Evaluation>> {
  const started = performance.now();
  const results: ScheduledResult[] = await runScheduledEvaluation({
    config,
    store,
    evaluate: (target) => evaluateResolvedTarget(target),
    resolveTargets: (timeoutMs) => resolveTargets(config, { timeoutMs }),
    logger: scheduledLogger,
  });
  runTimes.push(performance.now() - started);
  expect(results.map((result) => [result.target, result.ok])).toEqual([
    [targetOf(a), true],
    [targetOf(b), true],
  ]);
  const stored = new Map<string, Evaluation>();
  for (const workload of [a, b]) {
    const evaluation = await store.read(targetOf(workload));
    if (evaluation === null) throw new Error(`the scheduled run stored nothing for ${targetOf(workload)}`);
    stored.set(workload.cluster.clusterName, evaluation);
    await webhook.waitCached(evaluation);
  }
  return stored;
}

/** An AdmissionReview fixture (as the apiserver sends it) aimed at the workload's KCP. */
function reviewOf(fixture: 'kcp-scale-up-3-to-5.json' | 'kcp-v1beta1-edit-version.json', workload: CapiWorkload) {
  const { namespace, clusterName } = workload.cluster;
  return fixtureReview(fixture, { namespace, name: controlPlaneOf(workload), clusterName });
}

const validate = (review: ReturnType<typeof reviewOf>) => webhook.postReview(review);

const CHANGES = [
  { change: '/scale 3 → 5', fixture: 'kcp-scale-up-3-to-5.json' },
  { change: 'spec edit (version bump)', fixture: 'kcp-v1beta1-edit-version.json' },
] as const;

async function expectAllowed(workload: CapiWorkload): Promise<void> {
  for (const { change, fixture } of CHANGES) {
    const answer = await validate(reviewOf(fixture, workload));
    expect(answer.allowed, `${change} of ${workload.cluster.clusterName}: ${answer.status?.message}`).toBe(true);
  }
}

async function expectDenied(workload: CapiWorkload, message: RegExp): Promise<void> {
  for (const { change, fixture } of CHANGES) {
    const answer = await validate(reviewOf(fixture, workload));
    expect(answer.allowed, `${change} of ${workload.cluster.clusterName}`).toBe(false);
    expect(answer.status?.code).toBe(403);
    expect(answer.status?.message).toMatch(message);
    denials.push(`${change}: ${answer.status?.message}`);
  }
}

describe('a CAPI fleet guarded by the webhook, evaluated by the scheduled run through port-forward', () => {
  it('allows /scale and a spec edit of both KCPs while both clusters are Healthy', async () => {
    const stored = await scheduledRun();
    for (const [cluster, evaluation] of stored) {
      expect(evaluation.verdict, `${cluster}: ${evaluation.reasons.join('; ')}`).toBe('Healthy');
      expect(evaluation.checks.find((check) => check.name === 'inventory')?.status).toBe('pass');
    }
    await expectAllowed(a);
    await expectAllowed(b);
  });

  it('denies only B, naming the SIGKILLed member, through /scale and through a spec edit', async () => {
    const victimIndex = ((await b.etcd.leaderIndex()) + 1) % b.etcd.members.length;
    const victim = b.etcd.members[victimIndex];
    if (!victim) throw new Error(`B has no member ${victimIndex}`);
    await b.etcd.kill(victimIndex);
    try {
      const stored = await scheduledRun();
      expect(stored.get('wb')?.verdict).toBe('Unhealthy');
      expect(stored.get('wa')?.verdict).toBe('Healthy');
      await expectDenied(b, new RegExp(`target ${targetOf(b)} verdict Unhealthy.*${victim.name}`, 's'));
      await expectAllowed(a);
    } finally {
      await b.etcd.restart(victimIndex);
      await b.etcd.waitHealthy();
    }
    const recovered = await scheduledRun();
    expect(recovered.get('wb')?.verdict).toBe('Healthy');
  });

  it.each([
    { secret: 'missing', data: null, reason: /secrets "wb-etcd" in namespace "team-b".*not found/ },
    {
      secret: 'garbled (truncated key)',
      data: () => ({
        'tls.crt': readFileSync(b.etcd.tls.caFile),
        'tls.key': readFileSync(b.etcd.tls.caKeyFile).subarray(0, 80),
      }),
      reason: /Secret team-b\/wb-etcd: "tls.key" is not an unencrypted PEM private key/,
    },
  ])("B's <cluster>-etcd Secret $secret → B Unhealthy with a clear reason and denied; A unaffected", async ({ data, reason }) => {
    if (data === null) management.removeObject('secrets', 'v1', 'team-b', 'wb-etcd');
    else management.putObject('secrets', secretObject('team-b', 'wb-etcd', data()));
    try {
      const stored = await scheduledRun();
      expect(stored.get('wb')?.verdict).toBe('Unhealthy');
      expect(stored.get('wb')?.reasons.join('\n')).toMatch(reason);
      expect(stored.get('wa')?.verdict).toBe('Healthy');
      await expectDenied(b, new RegExp(`target ${targetOf(b)} verdict Unhealthy`));
      await expectAllowed(a);
    } finally {
      await putCapiSecrets(management, b.cluster, b);
    }
  });

  it('shows no private key in any log line, stored evaluation, metric or response of the run', async () => {
    const metrics = await httpRequest(`${String(webhook.metricsUrl)}/metrics`);
    expect(metrics.text).toMatch(/etcd_guard/);
    const overview = await webhook.request('GET', '/evaluations', {
      headers: { authorization: `Bearer ${TOKEN}` },
      timeoutMs: 10_000,
    });
    expect(overview.status).toBe(200);
    const storeDir = path.join(workDir, 'store');
    const storedFiles = await Promise.all((await readdir(storeDir)).map((file) => readFile(path.join(storeDir, file), 'utf8')));
    expect(storedFiles.length).toBeGreaterThanOrEqual(2);
    // The minted client keys: the process minter reuses them, so this read returns the run's keys.
    const minted = await Promise.all(
      [a, b].map(async (workload) => {
        const access = await openCapiEtcdAccess(
          createCoreV1Api(management.kubeconfigFile),
          workload.cluster,
          workload.nodeNames,
          Deadline.after(5_000),
        );
        await access.close();
        return access.credentials.key?.toString('utf8') ?? '';
      }),
    );
    const keys = [readFileSync(a.etcd.tls.caKeyFile, 'utf8'), readFileSync(b.etcd.tls.caKeyFile, 'utf8'), ...minted];
    const fragments = keys.flatMap((pem) =>
      pem
        .split('\n')
        .filter((line) => line.length >= 40 && !line.startsWith('-----'))
        .map((line) => line.slice(0, 40)),
    );
    expect(fragments.length).toBeGreaterThan(10);
    // Every answer of the webhook's HTTPS port (reviews and the overview), and the metrics.
    const responses = [...webhook.received, metrics.text];
    const everything = [...logLines, ...storedFiles, ...responses].join('\n');
    expect(logLines.length).toBeGreaterThan(5);
    expect(responses.length).toBeGreaterThan(10);
    expect(everything).not.toMatch(/PRIVATE KEY/);
    for (const fragment of fragments) expect(everything).not.toContain(fragment);
    console.info(
      `fleet e2e: ${runTimes.length} scheduled runs, ${runTimes.map((ms) => Math.round(ms)).join('/')} ms; ` +
        `${logLines.length} log lines, ${responses.length} responses, ${storedFiles.length} stored files grepped`,
      `\n${denials.join('\n')}`,
    );
  });
});
