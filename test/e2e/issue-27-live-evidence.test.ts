// Issue 27, "decide every membership change on what etcd says now": the race the issue reported.
// Three real 3-member etcd clusters behind the HTTPS webhook: a KubeadmControlPlane discovered
// through the management stand-in and reached through its workload's pod port-forward, an
// etcd-druid Etcd discovered the same way (dialled at the harness members: there is no pod DNS
// here), and a StatefulSet a static target names. Each has a Healthy evaluation cached, younger
// than maxAgeSeconds but older than decisionMaxAgeMs. Then one member of each is SIGKILLed or
// SIGSTOPped, and a quorum-breaking shrink 3→2 (a spec edit and a /scale each) is sent at 0.1,
// 0.5, 1, 5 and 30 s after that cluster's fault: a schedule of the test, the requests go out at
// those offsets whatever the answers. Every one must be denied. Two rounds swap the signals, so
// every kind meets both. After the member is back and healthy, the same shrink (now safe) is
// allowed within 1 s.
import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { EvaluationStore } from '../../functions/domain/store.js';
import { parseGuardConfig, type GuardConfig } from '../../functions/domain/config.js';
import type { Target } from '../../functions/domain/targets.js';
import { TargetRegistry } from '../../functions/usecases/live-target-set.js';
import { evaluateResolvedTarget } from '../../functions/usecases/reach-target.js';
import { resolveTargets } from '../../functions/usecases/resolve-targets.js';
import type { AdmissionResponse } from '../../webhook/domain/contract.js';
import { putControlPlaneObjects, secretObject, startCapiWorkload, type CapiWorkload } from '../harness/capi-workload.js';
import { generateTestCerts } from '../harness/certs.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';
import { fixtureReview, kcpReplicasReview, kcpScaleReview, withReplicas, type TestReview } from '../harness/reviews.js';
import { TEST_SLACK_MS } from '../harness/timing.js';
import { waitFor } from '../harness/wait.js';
import { startTestWebhook, type TestWebhook } from '../harness/webhook.js';

/** When the shrinks go out, after the fault of their cluster (the issue's offsets). */
const OFFSETS_MS = [100, 500, 1_000, 5_000, 30_000];
/** The default bound on live evidence; the cached Healthy is made older than this before the fault. */
const DECISION_MAX_AGE_MS = 1_000;
const KCP = { namespace: 'fleet', clusterName: 'kc' };
const DRUID = { namespace: 'garden', name: 'etcd-main' };
const STS = { namespace: 'etcd', name: 'etcd' };

type Kind = 'kcp' | 'druid' | 'statefulset';
type Signal = 'SIGKILL' | 'SIGSTOP';
const KINDS: Kind[] = ['kcp', 'druid', 'statefulset'];

let workDir: string;
let management: FakeKubeApiServer;
let kcpWorkload: CapiWorkload;
let druidEtcd: EtcdTestCluster;
let stsEtcd: EtcdTestCluster;
let config: GuardConfig;
let store: EvaluationStore;
let registry: TargetRegistry;
let webhook: TestWebhook;
/** Evaluations the webhook ran, per target (the real engine, counted). */
const evaluations = new Map<string, number>();

interface Answer {
  round: number;
  kind: Kind;
  signal: Signal;
  form: 'spec' | 'scale';
  offsetMs: number;
  /** When it was sent, after the fault (ms). */
  sentMs: number;
  latencyMs: number;
  response: AdmissionResponse;
}
const answers: Answer[] = [];
const recoveries: Array<{ round: number; kind: Kind; attempts: number; afterHealthyMs: number }> = [];

function clusterOf(kind: Kind): EtcdTestCluster {
  return kind === 'kcp' ? kcpWorkload.etcd : kind === 'druid' ? druidEtcd : stsEtcd;
}

/** The discovered or static target that guards `kind`'s object. */
function targetOf(kind: Kind): Target {
  const found = registry
    .all()
    .find((target) =>
      kind === 'statefulset' ? target.name === 'sts' : target.guards?.kind === (kind === 'kcp' ? 'KubeadmControlPlane' : 'Etcd'),
    );
  if (found === undefined) throw new Error(`no target guards the ${kind}`);
  return found;
}

/** A quorum-breaking shrink 3→2 of `kind`'s object while a member is down: a spec edit or a /scale. */
function shrink(kind: Kind, form: 'spec' | 'scale'): TestReview {
  switch (kind) {
    case 'kcp': {
      const aim = { namespace: KCP.namespace, name: `${KCP.clusterName}-control-plane`, clusterName: KCP.clusterName };
      return form === 'spec' ? kcpReplicasReview(3, 2, aim) : kcpScaleReview(3, 2, aim);
    }
    case 'druid':
      return withReplicas(
        fixtureReview(form === 'spec' ? 'etcd-druid-replicas-3-to-5.json' : 'etcd-druid-scale-3-to-0-hibernate.json', DRUID),
        3,
        2,
      );
    case 'statefulset': {
      if (form === 'scale') return withReplicas(fixtureReview('statefulset-scale-3-to-4.json', STS), 3, 2);
      // The ordinals edit with its ordinals put back: a replicas-only spec edit.
      const review = fixtureReview('statefulset-edit-ordinals.json', STS);
      if (review.request.object && review.request.oldObject) {
        review.request.object.spec = structuredClone(review.request.oldObject.spec);
      }
      return withReplicas(review, 3, 2);
    }
  }
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-issue-27-'));
  management = await startFakeKubeApiServer();
  let certs;
  [kcpWorkload, druidEtcd, stsEtcd, certs] = await Promise.all([
    startCapiWorkload(management, KCP),
    startEtcdCluster({ size: 3, name: DRUID.name }),
    startEtcdCluster({ size: 3, name: STS.name }),
    generateTestCerts(workDir),
  ]);
  putControlPlaneObjects(management, KCP, kcpWorkload.nodeNames);
  const etcdObject = JSON.parse(readFileSync(new URL('../fixtures/discovery/etcd-druid.json', import.meta.url), 'utf8')) as {
    metadata: Record<string, unknown>;
  };
  Object.assign(etcdObject.metadata, { namespace: DRUID.namespace, name: DRUID.name });
  management.putObject('etcds', etcdObject as never);
  management.putObject(
    'secrets',
    secretObject(DRUID.namespace, 'ca-etcd-bundle', { 'bundle.crt': readFileSync(druidEtcd.clientTls.caFile) }),
  );
  management.putObject(
    'secrets',
    secretObject(DRUID.namespace, 'etcd-client-tls', {
      'tls.crt': readFileSync(druidEtcd.clientTls.certFile),
      'tls.key': readFileSync(druidEtcd.clientTls.keyFile),
    }),
  );
  // `kubectl scale statefulset` sends a Scale: the webhook reads the parent for its ordinals.
  management.putObject('statefulsets', {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: STS.name, namespace: STS.namespace, resourceVersion: '5512' },
    spec: { replicas: 3, serviceName: 'etcd' },
  });
  config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      // The documented defaults: maxAgeSeconds 120, inline evaluation on, decisionMaxAgeMs 1000.
      maxAgeSeconds: 120,
      targets: [
        {
          name: 'sts',
          endpoints: stsEtcd.endpoints,
          tls: stsEtcd.clientTls,
          timeout: '2s',
          match: { namespaces: [STS.namespace], names: [STS.name] },
        },
      ],
      discovery: {
        capi: { namespaces: [KCP.namespace] },
        druid: { namespaces: [DRUID.namespace] },
        kubeconfigFile: management.kubeconfigFile,
        timeout: '3s',
      },
    },
    'issue 27 config',
  );
  store = createStore(config.store);
  let follow: (names: string[]) => void = () => undefined;
  registry = new TargetRegistry(config, {
    // A druid target's members are pod DNS names; here they are the harness members.
    resolve: async (resolving) => {
      const resolved = await resolveTargets(resolving);
      return {
        ...resolved,
        targets: resolved.targets.map((target) =>
          target.source === 'druid' ? { ...target, endpoints: druidEtcd.endpoints } : target,
        ),
      };
    },
    onChange: (targets) => follow(targets.map((target) => target.name)),
  });
  webhook = await startTestWebhook({
    config,
    certs,
    store,
    registry,
    pollIntervalMs: 100,
    kubeconfigFile: management.kubeconfigFile,
    parentReadTimeoutMs: 1_000,
    evaluate: (target, context) => {
      evaluations.set(target.name, (evaluations.get(target.name) ?? 0) + 1);
      return evaluateResolvedTarget(target, { ...context });
    },
  });
  follow = (names) => webhook.server.cache.setTargets(names);
  webhook.server.cache.setTargets(registry.names());
  expect(KINDS.map((kind) => targetOf(kind).source)).toEqual(['capi', 'druid', 'static']);
}, 120_000);

afterAll(async () => {
  await webhook?.close();
  await Promise.all([kcpWorkload?.destroy(), druidEtcd?.destroy(), stsEtcd?.destroy(), management?.close()]);
  if (workDir) await rm(workDir, { recursive: true, force: true });
  const allowed = answers.filter((answer) => answer.response.allowed).length;
  const live = answers.filter((answer) => answer.response.auditAnnotations?.evidence === 'live').length;
  const latencies = answers.map((answer) => answer.latencyMs).sort((x, y) => x - y);
  process.stdout.write(
    `issue 27 race: ${allowed} allowed of ${answers.length} quorum-breaking shrinks (${live} on live evidence), ` +
      `latency p50 ${Math.round(latencies[Math.floor(latencies.length / 2)] ?? 0)} ms max ${Math.round(latencies.at(-1) ?? 0)} ms; ` +
      `evaluations ${JSON.stringify(Object.fromEntries(evaluations))}; ` +
      `recoveries ${recoveries.map((entry) => `${entry.kind}:${entry.attempts}x/${Math.round(entry.afterHealthyMs)}ms`).join(' ')}\n`,
  );
});

/** Caches a Healthy evaluation of each target and waits until it is older than decisionMaxAgeMs. */
async function cacheHealthy(): Promise<Map<Kind, Evaluation>> {
  const held = new Map<Kind, Evaluation>();
  await Promise.all(
    KINDS.map(async (kind) => {
      const name = targetOf(kind).name;
      await waitFor(`a Healthy evaluation of the ${kind}`, 20_000, async () => {
        const evaluation = await webhook.server.onDemand.refresh(name);
        if (evaluation.verdict !== 'Healthy') return false;
        held.set(kind, evaluation);
        return true;
      });
      const evaluation = held.get(kind);
      if (evaluation === undefined) throw new Error('no evaluation');
      await webhook.waitCached(evaluation);
    }),
  );
  // Younger than maxAgeSeconds, older than the live bound: what the scheduled run leaves behind.
  await waitFor('the cached evaluations to be older than decisionMaxAgeMs', 5_000, () =>
    [...held.values()].every((evaluation) => Date.now() - Date.parse(evaluation.evaluatedAt) > DECISION_MAX_AGE_MS + 100),
  );
  return held;
}

/** Faults member 0 of `kind`'s cluster (never the one a shrink removes) and sends the shrinks on schedule. */
async function raceOne(round: number, kind: Kind, signal: Signal): Promise<void> {
  const cluster = clusterOf(kind);
  const faultAt = performance.now();
  if (signal === 'SIGKILL') await cluster.kill(0);
  else cluster.pause(0);
  const sends = OFFSETS_MS.flatMap((offsetMs) =>
    (['spec', 'scale'] as const).map(
      (form) =>
        new Promise<void>((resolve, reject) => {
          const timer = setTimeout(
            () => {
              const sentMs = performance.now() - faultAt;
              const sent = performance.now();
              webhook.postReview(shrink(kind, form), { query: '?timeout=10s' }).then((response) => {
                answers.push({ round, kind, signal, form, offsetMs, sentMs, latencyMs: performance.now() - sent, response });
                resolve();
              }, reject);
            },
            Math.max(0, faultAt + offsetMs - performance.now()),
          );
          timer.unref?.();
        }),
    ),
  );
  await Promise.all(sends);
  if (signal === 'SIGKILL') await cluster.restart(0);
  else cluster.resume(0);
  await cluster.waitHealthy(30_000);
  await safeAgain(round, kind);
}

/**
 * Back and healthy: the same shrink is safe now. Every answer resting on an evaluation that
 * started after the member was healthy allows it, and the first allow comes within 1 s of the
 * first such evaluation. An evaluation that started just before (the 30 s request's) may still be
 * live for decisionMaxAgeMs, so the wait is bounded by that plus the 1 s.
 */
async function safeAgain(round: number, kind: Kind): Promise<void> {
  const healthyAtMs = Date.now();
  const deadlineMs = healthyAtMs + DECISION_MAX_AGE_MS + 1_000 + TEST_SLACK_MS;
  let attempts = 0;
  let allowed = false;
  let firstPostRecoveryMs: number | null = null;
  const deniedOnPostRecovery: string[] = [];
  while (!allowed && Date.now() <= deadlineMs) {
    attempts += 1;
    const sentMs = Date.now();
    const response = await webhook.postReview(shrink(kind, 'spec'), { query: '?timeout=10s' });
    allowed = response.allowed;
    // The evaluation started at least this late (the decision came after the request was sent).
    const startedNoEarlierThan = sentMs - Number(response.auditAnnotations?.['evidence-age-ms']);
    if (startedNoEarlierThan > healthyAtMs) {
      firstPostRecoveryMs ??= startedNoEarlierThan;
      if (!allowed) deniedOnPostRecovery.push(response.status?.message ?? 'denied');
    }
  }
  const afterHealthyMs = Date.now() - healthyAtMs;
  recoveries.push({ round, kind, attempts, afterHealthyMs });
  expect(allowed, `the safe shrink of the ${kind} was not allowed ${afterHealthyMs} ms after its member was healthy`).toBe(true);
  expect(deniedOnPostRecovery).toEqual([]);
  if (firstPostRecoveryMs !== null) expect(Date.now() - firstPostRecoveryMs).toBeLessThanOrEqual(1_000 + TEST_SLACK_MS);
}

describe('issue 27: every allow rests on live evidence, through the HTTPS webhook on real etcd', () => {
  it.each([
    { round: 1, signals: { kcp: 'SIGKILL', druid: 'SIGSTOP', statefulset: 'SIGKILL' } as Record<Kind, Signal> },
    { round: 2, signals: { kcp: 'SIGSTOP', druid: 'SIGKILL', statefulset: 'SIGSTOP' } as Record<Kind, Signal> },
  ])(
    'round $round: a cached Healthy, a member faulted, shrinks at 0.1, 0.5, 1, 5 and 30 s: all denied; safe again within 1 s',
    async ({ round, signals }) => {
      const cached = await cacheHealthy();
      await Promise.all(KINDS.map((kind) => raceOne(round, kind, signals[kind])));
      const mine = answers.filter((answer) => answer.round === round);
      expect(mine).toHaveLength(KINDS.length * OFFSETS_MS.length * 2);
      const allowed = mine.filter((answer) => answer.response.allowed);
      expect(allowed.map((answer) => `${answer.kind} ${answer.form} at ${answer.offsetMs} ms after ${answer.signal}`)).toEqual(
        [],
      );
      for (const answer of mine) {
        // Denied on what etcd said after the fault, not on the cached Healthy.
        const evidenceAgeMs = Number(answer.response.auditAnnotations?.['evidence-age-ms']);
        expect(answer.response.auditAnnotations?.evidence, JSON.stringify(answer.response)).toBe('live');
        expect(evidenceAgeMs).toBeLessThan(answer.sentMs + answer.latencyMs);
        expect(answer.response.status?.message).not.toMatch(/verdict Healthy/);
        const before = cached.get(answer.kind);
        expect(answer.response.auditAnnotations?.verdict).not.toBe(before?.verdict);
      }
    },
    150_000,
  );
});
