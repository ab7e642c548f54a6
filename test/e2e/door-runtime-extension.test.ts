// Issue 28, the Runtime Extension door, end to end: a real 3-member etcd fed to the HTTPS webhook
// by the scheduled run, the management cluster's stand-in serving the KubeadmControlPlane whose
// labels the hook reads, and the hook requests Cluster API sends (test/fixtures/runtime-hooks,
// built from the JSON names of sigs.k8s.io/cluster-api/api runtime/hooks/v1alpha1). While the
// target is Unhealthy the upgrade hooks answer Success with retryAfterSeconds > 0, so the topology
// controller waits; once it is Healthy again they answer retryAfterSeconds 0.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDoor, startDoor } from '../harness/door.js';
import type { EtcdWebhook } from '../harness/etcd-webhook.js';
import type { FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';
import { httpRequest } from '../harness/https-client.js';
import { waitFor } from '../harness/wait.js';

const TARGET = 'doors-h';
const NAMESPACE = 'default';
const KCP_NAME = `${TARGET}-control-plane`;
const RETRY_SECONDS = 17;
const API = 'hooks.runtime.cluster.x-k8s.io/v1alpha1';
const HOOKS = [
  { hook: 'BeforeClusterUpgrade', fixture: 'before-cluster-upgrade-request.json' },
  { hook: 'BeforeControlPlaneUpgrade', fixture: 'before-control-plane-upgrade-request.json' },
] as const;

let management: FakeKubeApiServer;
let e2e: EtcdWebhook;

function fixture(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(import.meta.dirname, '../fixtures/runtime-hooks', name), 'utf8')) as Record<
    string,
    unknown
  >;
}

interface HookResponse {
  apiVersion?: string;
  kind?: string;
  status?: string;
  message?: string;
  retryAfterSeconds?: number;
}

async function callHook(hook: string, body: unknown): Promise<HookResponse> {
  const answer = await e2e.webhook.request('POST', `/${API}/${hook.toLowerCase()}/etcd-guard`, {
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  expect(answer.status, answer.text).toBe(200);
  return answer.json as HookResponse;
}

async function hookCounts(family = 'etcd_guard_runtime_hook_answers_total'): Promise<string> {
  const answer = await httpRequest(`${String(e2e.webhook.metricsUrl)}/metrics`);
  return answer.text
    .split('\n')
    .filter((line) => line.startsWith(`${family}{`))
    .join('\n');
}

beforeAll(async () => {
  const kcp = {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlane',
    metadata: { name: KCP_NAME, namespace: NAMESPACE, labels: { 'cluster.x-k8s.io/cluster-name': TARGET } },
    spec: { replicas: 3, version: 'v1.33.2' },
  };
  ({ management, e2e } = await startDoor({
    name: TARGET,
    target: TARGET,
    config: { runtimeExtension: { retryAfterSeconds: RETRY_SECONDS } },
    webhook: { metricsPort: true },
    owners: { kubeadmcontrolplanes: [kcp] },
  }));
});

afterAll(() => closeDoor({ management, e2e }));

describe('issue 28: Cluster API upgrade hooks through the HTTPS webhook on real etcd', () => {
  it('discovery names both upgrade hooks, failurePolicy Fail, within Cluster API’s timeout', async () => {
    const answer = await e2e.webhook.request('POST', `/${API}/discovery`, {
      body: JSON.stringify({ apiVersion: API, kind: 'DiscoveryRequest' }),
      headers: { 'content-type': 'application/json' },
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({
      apiVersion: API,
      kind: 'DiscoveryResponse',
      status: 'Success',
      handlers: HOOKS.map(({ hook }) => ({
        name: 'etcd-guard',
        requestHook: { apiVersion: API, hook },
        timeoutSeconds: 10,
        failurePolicy: 'Fail',
      })),
    });
    // Every series is there before the first call, at 0.
    const counts = await hookCounts();
    for (const { hook } of HOOKS) {
      for (const outcome of ['proceed', 'retry', 'failure']) {
        expect(counts).toContain(`etcd_guard_runtime_hook_answers_total{hook="${hook}",outcome="${outcome}"} 0`);
      }
    }
  });

  it('retries while a member is SIGKILLed (Unhealthy), proceeds once etcd is Healthy again', async () => {
    await e2e.cluster.waitHealthy();
    const healthy = await e2e.scheduledEvaluation();
    expect(healthy.verdict, healthy.reasons.join('; ')).toBe('Healthy');
    for (const { hook, fixture: file } of HOOKS) {
      const answer = await callHook(hook, fixture(file));
      expect(answer, JSON.stringify(answer)).toMatchObject({
        apiVersion: API,
        kind: `${hook}Response`,
        status: 'Success',
        retryAfterSeconds: 0,
      });
      expect(answer.message).toContain(`target ${TARGET}: healthy`);
    }

    const leader = healthy.members.find((member) => member.leader)?.name;
    const victim = e2e.cluster.members.findIndex((member) => member.name !== leader);
    await e2e.cluster.kill(victim);
    const sick = await e2e.scheduledEvaluation();
    expect(sick.verdict).toBe('Unhealthy');
    for (const { hook, fixture: file } of HOOKS) {
      const answer = await callHook(hook, fixture(file));
      console.log(`${hook} while Unhealthy: ${JSON.stringify(answer)}`);
      expect(answer).toMatchObject({ kind: `${hook}Response`, status: 'Success', retryAfterSeconds: RETRY_SECONDS });
      expect(answer.message).toContain(`KubeadmControlPlane ${NAMESPACE}/${KCP_NAME}`);
      expect(answer.message).toContain(`target ${TARGET} verdict Unhealthy`);
      expect(answer.message).toContain('an override annotation does not apply to hooks');
      expect(answer.message).not.toContain('to override, annotate');
    }
    // As an admission denial records one: an Event, on the Cluster whose upgrade waits; the
    // second hook's is the same Event's series (one per object and reason, as for admission).
    const cluster = fixture(HOOKS[0].fixture).cluster as { metadata: { uid: string } };
    const waits = () => management.events().filter((event) => event.reason === 'UpgradeWaits');
    await waitFor('the UpgradeWaits Event, counted twice', 15_000, () => waits()[0]?.series?.count === HOOKS.length);
    expect(waits()).toHaveLength(1);
    expect(waits()[0]).toMatchObject({
      type: 'Warning',
      action: 'Admission',
      regarding: {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'Cluster',
        namespace: NAMESPACE,
        name: TARGET,
        uid: cluster.metadata.uid,
      },
    });
    console.log(`UpgradeWaits note: ${waits()[0]?.note ?? ''}`);
    expect(waits()[0]?.note).toMatch(
      new RegExp(
        `^${HOOKS[0].hook}: the upgrade from v1\\.34\\.1 to v1\\.34\\.2 waits \\(asked again in ${RETRY_SECONDS}s\\): etcd-guard denied rollout`,
      ),
    );

    await e2e.cluster.restart(victim);
    await e2e.cluster.waitHealthy();
    const again = await e2e.scheduledEvaluation();
    expect(again.verdict, again.reasons.join('; ')).toBe('Healthy');
    const after = await callHook('BeforeClusterUpgrade', fixture(HOOKS[0].fixture));
    expect(after).toMatchObject({ status: 'Success', retryAfterSeconds: 0 });

    const counts = await hookCounts();
    expect(counts).toContain('etcd_guard_runtime_hook_answers_total{hook="BeforeClusterUpgrade",outcome="retry"} 1');
    expect(counts).toContain('etcd_guard_runtime_hook_answers_total{hook="BeforeClusterUpgrade",outcome="proceed"} 2');
    expect(counts).toContain('etcd_guard_runtime_hook_answers_total{hook="BeforeControlPlaneUpgrade",outcome="retry"} 1');
    // And the decisions they rested on, labelled as admission decisions are.
    const decisions = await hookCounts('etcd_guard_runtime_hook_decisions_total');
    console.log(`hook decisions: ${decisions.replace(/\n/g, ' | ')}`);
    for (const { hook } of HOOKS) {
      expect(decisions).toMatch(
        new RegExp(
          `etcd_guard_runtime_hook_decisions_total\\{hook="${hook}",target="${TARGET}",decision="denied",mode="enforce",reason="[a-z-]+"\\} 1`,
        ),
      );
    }
    expect(decisions).toContain(
      `etcd_guard_runtime_hook_decisions_total{hook="BeforeClusterUpgrade",target="${TARGET}",decision="allowed",mode="enforce",reason="healthy"} 2`,
    );
  });

  it('a Cluster whose control plane no target matches waits, as admission denies its KCP change (enforce)', async () => {
    const body = fixture(HOOKS[0].fixture);
    const cluster = body.cluster as { metadata: { name: string }; spec: { controlPlaneRef: { name: string } } };
    cluster.metadata.name = 'unguarded';
    cluster.spec.controlPlaneRef.name = 'unguarded-control-plane';
    const answer = await callHook('BeforeClusterUpgrade', body);
    console.log(`unmatched: ${JSON.stringify(answer)}`);
    expect(answer).toMatchObject({ status: 'Success', retryAfterSeconds: RETRY_SECONDS });
    expect(answer.message).toContain(`KubeadmControlPlane ${NAMESPACE}/unguarded-control-plane`);
  });

  it.each([
    {
      what: 'no cluster',
      mutate: (body: Record<string, unknown>) => delete body.cluster,
      names: 'cluster',
    },
    {
      what: 'no controlPlaneRef',
      mutate: (body: Record<string, unknown>) => delete (body.cluster as { spec: Record<string, unknown> }).spec.controlPlaneRef,
      names: 'cluster.spec.controlPlaneRef',
    },
    {
      what: 'a numeric toKubernetesVersion',
      mutate: (body: Record<string, unknown>) => (body.toKubernetesVersion = 134),
      names: 'toKubernetesVersion',
    },
    {
      what: 'another hook’s kind',
      mutate: (body: Record<string, unknown>) => (body.kind = 'BeforeClusterDeleteRequest'),
      names: 'kind',
    },
  ])('a request with $what gets a Failure naming $names', async ({ mutate, names }) => {
    const body = fixture(HOOKS[0].fixture);
    mutate(body);
    const answer = await callHook('BeforeClusterUpgrade', body);
    expect(answer).toMatchObject({ kind: 'BeforeClusterUpgradeResponse', status: 'Failure' });
    expect(answer.message).toContain('invalid BeforeClusterUpgradeRequest');
    expect(answer.message).toContain(`${names}:`);
  });

  it('a body that is not JSON gets a Failure, not an error page', async () => {
    const answer = await callHook('BeforeControlPlaneUpgrade', '{"cluster": ');
    expect(answer).toMatchObject({ kind: 'BeforeControlPlaneUpgradeResponse', status: 'Failure' });
    expect(answer.message).toContain('body is not JSON');
  });
});
