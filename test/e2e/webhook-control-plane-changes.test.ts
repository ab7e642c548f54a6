// The webhook over real HTTPS while control planes change (issue 17): a KCP whose Machines the
// listing misses is never scaled down on a guess, etcd-druid hibernation and wake-up go through
// whatever the verdict, KCP never goes to 0, and "may override" is granted by RBAC through a
// SubjectAccessReview. Machines and reviews come from the loopback API stand-in; evaluations from
// a real file store; requests are the AdmissionReview fixtures as the apiserver sends them.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig } from '../../functions/domain/config.js';
import type { MemberReport } from '../../functions/domain/evaluation-document.js';
import { generateTestCerts, type TestCerts } from '../harness/certs.js';
import { makeEvaluation, makeMember } from '../harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../harness/fake-kube-apiserver.js';
import { admissionFixture as fixture } from '../harness/reviews.js';
import { startTestWebhook, type TestWebhook } from '../harness/webhook.js';

const SCALE_3_TO_2 = fixture('kcp-scale-down-3-to-2.json');
const SPEC_3_TO_2 = fixture('kcp-v1beta2-replicas-3-to-2.json');

let workDir: string;
let certs: TestCerts;
let fake: FakeKubeApiServer;
let webhook: TestWebhook;

const validate = (review: unknown) => webhook.postReview(review);

/** A control-plane Machine of KCP prod-control-plane as Cluster API v1beta2 serves it. */
function machine(
  index: number,
  options: { labels?: Record<string, string>; owner?: string; annotated?: boolean } = {},
): FakeObject {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Machine',
    metadata: {
      name: `prod-control-plane-${index}x7k`,
      namespace: 'default',
      uid: `0b7c3e55-8a2d-4e0f-b1a4-6f2d9c8e7a1${index}`,
      creationTimestamp: `2026-11-02T09:2${index}:00Z`,
      labels: options.labels ?? {
        'cluster.x-k8s.io/cluster-name': 'prod',
        'cluster.x-k8s.io/control-plane': '',
        'cluster.x-k8s.io/control-plane-name': 'prod-control-plane',
      },
      ownerReferences: [
        {
          apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
          kind: 'KubeadmControlPlane',
          name: options.owner ?? 'prod-control-plane',
          uid: '5f0d6a1e-3b1c-4f5e-9a55-0c3e1f8d2b71',
          controller: true,
        },
      ],
      ...(options.annotated ? { annotations: { 'cluster.x-k8s.io/delete-machine': '' } } : {}),
    },
    spec: { clusterName: 'prod', version: 'v1.33.2' },
    status: { phase: 'Running', nodeRef: { apiVersion: 'v1', kind: 'Node', name: `etcd-${index}` } },
  };
}

function putMachines(machines: FakeObject[]): void {
  for (let index = 0; index < 5; index += 1) {
    fake.removeObject('machines', 'cluster.x-k8s.io/v1beta2', 'default', `prod-control-plane-${index}x7k`);
  }
  for (const item of machines) fake.putObject('machines', item);
}

function evaluatedNow(target: string, members: MemberReport[], verdict: 'Healthy' | 'Unhealthy', reasons: string[]) {
  return makeEvaluation({ target, members, verdict, reasons, evaluatedAt: new Date().toISOString() });
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-cp-changes-'));
  certs = await generateTestCerts(workDir);
  fake = await startFakeKubeApiServer({ user: 'system:serviceaccount:etcd-guard:etcd-guard-webhook' });
  const config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 600,
      inlineRefresh: false,
      targets: [
        {
          name: 'prod',
          endpoints: ['https://127.0.0.1:2379'],
          match: { namespaces: ['default'], names: ['prod-control-plane'] },
        },
        {
          name: 'shoot-core',
          endpoints: ['https://127.0.0.1:2379'],
          match: { namespaces: ['shoot--prod--core'], names: ['etcd-main'] },
        },
      ],
    },
    'test',
  );
  const store = createStore(config.store);
  // prod: 3 members, etcd-2 dead. shoot-core: hibernated, no member answers.
  await store.write(
    evaluatedNow('prod', [makeMember(0), makeMember(1), makeMember(2, { healthy: false, error: 'unreachable' })], 'Unhealthy', [
      'member etcd-2 unreachable',
    ]),
  );
  await store.write({
    ...evaluatedNow(
      'shoot-core',
      [0, 1, 2].map((index) =>
        makeMember(index, { name: `etcd-main-${index}`, healthy: false, leader: false, error: 'refused' }),
      ),
      'Unhealthy',
      ['no voting member answered'],
    ),
    // What the evaluations carried from the last one that listed its 3 members.
    lastMembership: { votingMembers: 3, evaluatedAt: new Date(Date.now() - 3_600_000).toISOString() },
  });
  webhook = await startTestWebhook({
    config,
    certs,
    store,
    kubeconfigFile: fake.kubeconfigFile,
    evaluate: () => Promise.reject(new Error('inline refresh is off')),
    agent: { keepAlive: true, maxSockets: 4 },
    ready: true,
  });
  // The Kubernetes client loads on the first Machines read, inside that read's 2 s deadline; under
  // a loaded test machine the load alone can use it up. Load it once before the cases.
  putMachines([]);
  await validate(SCALE_3_TO_2);
});

afterAll(async () => {
  await webhook?.close();
  await fake.close();
  await rm(workDir, { recursive: true, force: true });
});

describe('a KCP scale down with one of three members dead, when the Machines listing is incomplete', () => {
  beforeEach(() => fake.setAccessGrants([]));

  const listings: [string, () => FakeObject[]][] = [
    [
      'labels not as selected',
      () =>
        [0, 1, 2].map((index) => machine(index, { labels: { 'cluster.x-k8s.io/cluster-name': 'prod' }, annotated: index === 2 })),
    ],
    ['owner not as expected', () => [0, 1, 2].map((index) => machine(index, { owner: 'other-control-plane' }))],
    ['an empty list', () => []],
    ['only the dead member’s Machine listed', () => [machine(2, { annotated: true })]],
  ];
  for (const [what, machines] of listings) {
    for (const [how, review] of [
      ['kubectl scale (/scale)', SCALE_3_TO_2],
      ['a spec.replicas edit', SPEC_3_TO_2],
    ] as const) {
      it(`${what}: ${how} 3→2 is denied as undetermined`, async () => {
        putMachines(machines());
        const response = await validate(review);
        expect(response.allowed, JSON.stringify(response)).toBe(false);
        expect(response.status?.code).toBe(403);
        expect(response.status?.message).toContain('do not account for the control plane');
        expect(response.status?.message).toContain('below quorum 2');
      });
    }
  }

  it.each([
    ['kubectl scale (/scale)', SCALE_3_TO_2],
    ['a spec.replicas edit', SPEC_3_TO_2],
  ])('control: a complete listing with the dead Machine annotated lets %s 3→2 through', async (_how, review) => {
    putMachines([machine(0), machine(1), machine(2, { annotated: true })]);
    const response = await validate(review);
    expect(response.allowed, response.status?.message).toBe(true);
    expect(response.warnings?.join(' | ')).toContain('unhealthy etcd members: etcd-2');
  });
});

describe('hibernation', () => {
  it('an etcd-druid Etcd 3→0 via /scale (no spec.replicas) is allowed while every member is down, audited with the user', async () => {
    const response = await validate(fixture('etcd-druid-scale-3-to-0-hibernate.json'));
    expect(response.allowed, response.status?.message).toBe(true);
    expect(response.warnings?.join(' | ')).toContain('hibernation 3 to 0 replicas');
    expect(response.auditAnnotations).toMatchObject({ 'hibernation-user': 'system:serviceaccount:garden:gardenlet' });
  });

  it('its wake-up 0→3 with every member down is allowed', async () => {
    const response = await validate(fixture('etcd-druid-scale-0-to-3-wake-up.json'));
    expect(response.allowed, response.status?.message).toBe(true);
    expect(response.warnings?.join(' | ')).toContain('wake-up 0 to 3 replicas');
    expect(response.auditAnnotations?.hibernation).toBe('wake-up: 0 to 3 replicas');
  });

  it('a KCP 3→0 via /scale is still denied', async () => {
    const response = await validate(fixture('kcp-scale-to-0-omitted-replicas.json'));
    expect(response.allowed).toBe(false);
    expect(response.status?.message).toContain('cannot scale etcd below 1 replica (requested 0)');
  });
});

describe('who may override', () => {
  /** The override fixture (3→2 with the annotation) sent by `user` in `groups`. */
  const overrideBy = (user: string, groups: string[]) => {
    const review = fixture('kcp-override-scale-down.json');
    review.request.userInfo = { username: user, groups };
    return review;
  };

  beforeEach(() => {
    fake.setAccessGrants([]);
    putMachines([machine(0), machine(1), machine(2)]);
  });

  it('kubeadm’s admin kubeconfig (group kubeadm:cluster-admins) may override out of the box, without a review', async () => {
    const before = fake.accessReviews.length;
    const response = await validate(overrideBy('kubernetes-admin', ['kubeadm:cluster-admins', 'system:authenticated']));
    expect(response.allowed, response.status?.message).toBe(true);
    expect(response.auditAnnotations).toMatchObject({ 'override-user': 'kubernetes-admin' });
    expect(fake.accessReviews.length).toBe(before);
  });

  it('a user RBAC grants `override` on targets.etcd-guard.io/prod may override', async () => {
    fake.setAccessGrants([{ group: 'oncall', verb: 'override', apiGroup: 'etcd-guard.io', resource: 'targets', name: 'prod' }]);
    const response = await validate(overrideBy('dana@example.com', ['oncall', 'system:authenticated']));
    expect(response.allowed, response.status?.message).toBe(true);
    expect(response.auditAnnotations).toMatchObject({ 'override-user': 'dana@example.com' });
    expect(fake.accessReviews.at(-1)).toMatchObject({
      user: 'dana@example.com',
      groups: ['oncall', 'system:authenticated'],
      resourceAttributes: { verb: 'override', group: 'etcd-guard.io', resource: 'targets', name: 'prod' },
    });
    // Cluster-scoped by default (issue 30 item 9): a Role in the object's namespace grants nothing.
    expect(fake.accessReviews.at(-1)?.resourceAttributes).not.toHaveProperty('namespace');
  });

  it('a user RBAC does not grant it (another target only) is denied, told what is needed', async () => {
    fake.setAccessGrants([
      { group: 'oncall', verb: 'override', apiGroup: 'etcd-guard.io', resource: 'targets', name: 'staging' },
    ]);
    const response = await validate(overrideBy('dana@example.com', ['oncall', 'system:authenticated']));
    expect(response.allowed).toBe(false);
    expect(response.status?.message).toContain('is not allowed to override');
    expect(response.status?.message).toContain('RBAC verb override on targets.etcd-guard.io prod');
  });

  it('when the review cannot be made (forbidden to the webhook), the groups list decides', async () => {
    fake.setAccessGrants([{ group: 'oncall', verb: 'override', apiGroup: 'etcd-guard.io', resource: 'targets' }]);
    fake.forbid('create', 'subjectaccessreviews');
    try {
      const denied = await validate(overrideBy('dana@example.com', ['oncall']));
      expect(denied.allowed).toBe(false);
      const allowed = await validate(overrideBy('root', ['system:masters']));
      expect(allowed.allowed).toBe(true);
    } finally {
      fake.allowAll();
    }
  });
});
