// Issue 27, "StatefulSet /scale precision regression": `kubectl scale statefulset etcd` sends an
// autoscaling/v1 Scale, which carries no spec.ordinals, so the webhook reads the parent
// StatefulSet (as it reads a KCP's labels) to learn which pods a shrink removes. Removing a dead
// highest-ordinal member is allowed again; a shrink that removes a healthy one is denied; a parent
// that cannot be read is denied naming the read. First the pure decision as a table, then through
// the HTTPS webhook on a real 3-member etcd with a member SIGKILLed and the API server stand-in
// serving the StatefulSet.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { EvaluationStore } from '../../functions/domain/store.js';
import { guardConfigSchema, parseGuardConfig, type TargetConfig } from '../../functions/domain/config.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { classifyRequest } from '../../webhook/domain/classify.js';
import type { ParentObjectRef } from '../../webhook/domain/contract.js';
import { decide } from '../../webhook/domain/decide.js';
import type { ParentRead } from '../../webhook/domain/removal.js';
import { createParentReader, keepPointers } from '../../webhook/server/parent-labels.js';
import { generateTestCerts } from '../harness/certs.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { makeEvaluation, makeMember } from '../harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';
import { fixtureReview, parsedRequest, withReplicas, type TestReview } from '../harness/reviews.js';
import { waitFor } from '../harness/wait.js';
import { startTestWebhook, type TestWebhook } from '../harness/webhook.js';

const NOW = new Date('2026-12-02T06:00:00.000Z');
const CONFIG = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [{ name: 'etcd-sts', endpoints: ['https://127.0.0.1:2379'], match: { namespaces: ['etcd'], names: ['etcd'] } }],
});

/** `kubectl scale statefulset etcd --replicas=<to>` as the apiserver reviews it (a Scale at resourceVersion `revision`). */
function scaleReview(from: number, to: number, revision = '5512'): TestReview {
  const review = withReplicas(fixtureReview('statefulset-scale-3-to-4.json'), from, to);
  for (const object of [review.request.object, review.request.oldObject]) {
    if (object !== null) object.metadata.resourceVersion = revision;
  }
  return review;
}

/** Members named `etcd-<ordinal>` for the given ordinals, those in `dead` unreachable; the first live one leads. */
function evaluationOf(ordinals: number[], dead: number[]): Evaluation {
  const leader = ordinals.find((ordinal) => !dead.includes(ordinal));
  const members = ordinals.map((ordinal) =>
    makeMember(ordinal, {
      leader: ordinal === leader,
      ...(dead.includes(ordinal) ? { healthy: false, error: 'unreachable: connection refused' } : {}),
    }),
  );
  return makeEvaluation({
    members,
    evaluatedAt: new Date(NOW.getTime() - 2_000).toISOString(),
    verdict: dead.length > 0 ? 'Unhealthy' : 'Healthy',
    reasons: dead.map((ordinal) => `member etcd-${ordinal} unreachable: connection refused`),
  });
}

const statefulSet = (spec: Record<string, unknown>): ParentRead => ({
  ok: true,
  object: { metadata: { resourceVersion: '5512' }, spec },
});

interface Row {
  behaviour: string;
  evaluation: Evaluation;
  /** Absent: the server had no way to read the parent. */
  parent?: ParentRead;
  allowed: boolean;
  says: string[];
}

const rows: Row[] = [
  {
    behaviour: '3→2 with etcd-2 dead is allowed: the StatefulSet read says the highest ordinal, etcd-2, goes',
    evaluation: evaluationOf([0, 1, 2], [2]),
    parent: statefulSet({ replicas: 3 }),
    allowed: true,
    says: ['etcd-2'],
  },
  {
    behaviour: '3→2 with etcd-0 dead is denied: the healthy etcd-2 goes and 1 of 2 would be left',
    evaluation: evaluationOf([0, 1, 2], [0]),
    parent: statefulSet({ replicas: 3 }),
    allowed: false,
    says: ['below quorum 2'],
  },
  {
    behaviour: '3→2 with etcd-2 dead is denied when reading the StatefulSet failed, naming the read',
    evaluation: evaluationOf([0, 1, 2], [2]),
    parent: { ok: false, error: 'forbidden: cannot get statefulsets.apps "etcd"' },
    allowed: false,
    says: ['reading the StatefulSet failed (forbidden: cannot get statefulsets.apps "etcd")', 'healthy member is assumed'],
  },
  {
    behaviour: '3→2 with etcd-2 dead is denied when no reader is wired, saying to patch spec.replicas',
    evaluation: evaluationOf([0, 1, 2], [2]),
    allowed: false,
    says: ["does not carry the StatefulSet's spec.ordinals", 'kubectl patch'],
  },
  {
    behaviour:
      '3→2 with etcd-2 dead is denied when the StatefulSet read has other replicas than the Scale (it changed meanwhile)',
    evaluation: evaluationOf([0, 1, 2], [2]),
    parent: statefulSet({ replicas: 4 }),
    allowed: false,
    says: ["has spec.replicas 4, not the Scale's 3", 'retry'],
  },
  {
    behaviour: 'spec.ordinals.start 1 (pods etcd-1..3) with etcd-3 dead: 3→2 removes etcd-3 and is allowed',
    evaluation: evaluationOf([1, 2, 3], [3]),
    parent: statefulSet({ replicas: 3, ordinals: { start: 1 } }),
    allowed: true,
    says: ['etcd-3'],
  },
  {
    behaviour: 'spec.ordinals.start 1 with etcd-1 dead: 3→2 removes the healthy etcd-3 and is denied',
    evaluation: evaluationOf([1, 2, 3], [1]),
    parent: statefulSet({ replicas: 3, ordinals: { start: 1 } }),
    allowed: false,
    says: ['below quorum 2'],
  },
  {
    behaviour: 'spec.ordinals.start that is not an ordinal falls back to the worst case and says so',
    evaluation: evaluationOf([0, 1, 2], [2]),
    parent: statefulSet({ replicas: 3, ordinals: { start: 'one' } }),
    allowed: false,
    says: ['spec.ordinals.start is not a non-negative integer'],
  },
];

describe('StatefulSet /scale precision regression: the decision with the parent StatefulSet read', () => {
  it.each(rows)('$behaviour', ({ evaluation, parent, allowed, says }) => {
    const request = parsedRequest(scaleReview(3, 2));
    const classification = classifyRequest(request, CONFIG);
    if (classification.kind !== 'needs-evaluation') throw new Error(`not guarded: ${JSON.stringify(classification)}`);
    const { response } = decide({
      request,
      config: CONFIG,
      classification,
      evaluation,
      now: NOW,
      ...(parent === undefined ? {} : { parent }),
    });
    const text = response.allowed ? (response.warnings ?? []).join(' | ') : (response.status?.message ?? '');
    expect({ allowed: response.allowed, text }).toMatchObject({ allowed });
    for (const part of says) expect(text).toContain(part);
  });
});

describe('StatefulSet /scale precision regression: the parent reader', () => {
  const ref: ParentObjectRef = { group: 'apps', version: 'v1', resource: 'statefulsets', namespace: 'etcd', name: 'etcd' };
  const object = (revision: string) => ({
    metadata: { name: 'etcd', resourceVersion: revision, labels: { app: 'etcd' } },
    spec: { replicas: 3, ordinals: { start: 2 }, template: { spec: { containers: [{ name: 'etcd' }] } } },
  });

  it('keeps only the kind’s fields and the revision, never the whole spec', () => {
    expect(
      keepPointers(object('7'), ['/metadata/resourceVersion', '/spec/ordinals/start', '/spec/replicas', '/spec/absent']),
    ).toEqual({
      metadata: { resourceVersion: '7' },
      spec: { ordinals: { start: 2 }, replicas: 3 },
    });
  });

  it.each([
    ['the cached revision is the Scale’s: no second GET', '7', 1],
    ['the Scale names another revision: read again', '8', 2],
  ])('%s', async (_label, revision, gets) => {
    let served = 0;
    const reader = createParentReader({
      get: () => {
        served += 1;
        return Promise.resolve(object(served === 1 ? '7' : revision));
      },
    });
    expect(await reader.labels(ref)).toMatchObject({ ok: true, labels: { app: 'etcd' } });
    const read = await reader.object(ref, { resourceVersion: revision });
    expect(read).toEqual({
      ok: true,
      object: { metadata: { resourceVersion: revision }, spec: { ordinals: { start: 2 }, replicas: 3 } },
    });
    expect(served).toBe(gets);
  });

  it('a failed GET is reported, not thrown, and not cached', async () => {
    let calls = 0;
    const reader = createParentReader({
      get: () => {
        calls += 1;
        return calls === 1
          ? Promise.reject(new Error('timed out: get statefulsets.apps within 600ms'))
          : Promise.resolve(object('7'));
      },
    });
    expect(await reader.object(ref, { resourceVersion: '7' })).toEqual({
      ok: false,
      error: 'timed out: get statefulsets.apps within 600ms',
    });
    expect((await reader.object(ref, { resourceVersion: '7' })).ok).toBe(true);
  });
});

describe('StatefulSet /scale precision regression: kubectl scale through the HTTPS webhook on real etcd', () => {
  let workDir: string;
  let cluster: EtcdTestCluster;
  let fake: FakeKubeApiServer;
  let webhook: TestWebhook;
  let store: EvaluationStore;
  let target: TargetConfig;

  beforeAll(async () => {
    workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-sts-scale-'));
    let certs;
    [cluster, fake, certs] = await Promise.all([
      startEtcdCluster({ size: 3, name: 'etcd' }),
      startFakeKubeApiServer(),
      generateTestCerts(workDir),
    ]);
    const config = parseGuardConfig(
      {
        store: { kind: 'file', dir: path.join(workDir, 'store') },
        maxAgeSeconds: 300,
        inlineRefresh: false,
        targets: [
          {
            name: 'etcd-sts',
            endpoints: cluster.endpoints,
            tls: cluster.clientTls,
            timeout: '1s',
            match: { namespaces: ['etcd'], names: ['etcd'] },
          },
        ],
      },
      'sts-scale config',
    );
    const [only] = config.targets;
    if (only === undefined) throw new Error('config lost its target');
    target = only;
    store = createStore(config.store);
    fake.putObject('statefulsets', {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'etcd', namespace: 'etcd', resourceVersion: '5512' },
      spec: { replicas: 3, serviceName: 'etcd' },
    });
    webhook = await startTestWebhook({ config, store, certs, kubeconfigFile: fake.kubeconfigFile, parentReadTimeoutMs: 1_000 });
  });

  afterAll(async () => {
    await webhook?.close();
    await fake?.close();
    await cluster?.destroy();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  /** Evaluates until etcd settles with exactly `dead` unreachable and a leader elected, then hands it to the webhook. */
  async function evaluatedWith(dead: string): Promise<void> {
    let evaluation: Evaluation | undefined;
    await waitFor(`an evaluation with only ${dead} unreachable and a leader`, 15_000, async () => {
      evaluation = await evaluateTarget(target);
      const down = evaluation.members.filter((member) => !member.healthy).map((member) => member.name);
      return evaluation.cluster.leaderId !== null && down.length === 1 && down[0] === dead;
    });
    if (evaluation === undefined) throw new Error('no evaluation');
    await store.write(evaluation);
    await webhook.waitCached(evaluation);
  }

  const statefulSetGets = () =>
    fake.requests.filter(
      (request) => request.verb === 'get' && request.path === '/apis/apps/v1/namespaces/etcd/statefulsets/etcd',
    ).length;

  it('allows 3→2 with etcd-2 SIGKILLed, having read the StatefulSet', async () => {
    await cluster.kill(2);
    await evaluatedWith('etcd-2');
    const before = statefulSetGets();
    const answer = await webhook.postReview(scaleReview(3, 2));
    expect(answer.status?.message ?? 'allowed').toBe('allowed');
    expect(answer.allowed).toBe(true);
    expect((answer.warnings ?? []).join(' | ')).toContain('etcd-2');
    expect(statefulSetGets()).toBe(before + 1);
  });

  it('denies 3→2 with etcd-2 SIGKILLed when the StatefulSet cannot be read, naming the read', async () => {
    fake.forbid('get', 'statefulsets');
    try {
      // Another revision than the one read above, so the reader asks the API server again.
      const answer = await webhook.postReview(scaleReview(3, 2, '5513'));
      expect(answer.allowed).toBe(false);
      expect(answer.status?.message).toContain('reading the StatefulSet failed');
      expect(answer.status?.message).toMatch(/forbidden: cannot get statefulsets/);
    } finally {
      fake.allowAll();
    }
  });

  it('denies 3→2 with etcd-0 SIGKILLed (the healthy etcd-2 would go)', async () => {
    await cluster.restart(2);
    await cluster.waitHealthy();
    await cluster.kill(0);
    await evaluatedWith('etcd-0');
    const answer = await webhook.postReview(scaleReview(3, 2));
    expect(answer.allowed).toBe(false);
    expect(answer.status?.message).toContain('below quorum 2');
  });
});
