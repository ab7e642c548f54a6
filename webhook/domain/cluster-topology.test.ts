// Issue 28, the ClusterClass door in the pure core: which Cluster UPDATEs are judged (a topology
// whose version or control plane replicas change the KCP its controlPlaneRef names), against
// which target, as which KCP change (a rollout with the 3.5 → 3.6 gate, a scale), and the
// decision on an evaluation: the same projection as a KCP edit, the message naming the Cluster.
import { describe, expect, it } from 'vitest';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { guardConfigSchema, type GuardConfig } from '../../functions/domain/config.js';
import { classifyRequest } from './classify.js';
import type { Classification, ParentLabels } from './contract.js';
import { decide } from './decide.js';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';
import { fixtureReview, parsedRequest, type TestReview } from '../../test/harness/reviews.js';

const NOW = new Date('2026-11-30T02:00:00.000Z');
const CONFIG: GuardConfig = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [{ name: 'prod', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'prod' } }],
});
const KCP = 'prod-7xk2q';
const V1BETA2 = 'cluster-v1beta2-topology-version.json';
const V1BETA1 = 'cluster-v1beta1-topology-replicas-3-to-5.json';

type Json = Record<string, unknown>;

function kcp(spec: Json = {}, metadata: Json = {}, labels: Record<string, string> = { 'cluster.x-k8s.io/cluster-name': 'prod' }) {
  return {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlane',
    metadata: { name: KCP, namespace: 'default', labels, ...metadata },
    spec: { replicas: 3, version: 'v1.33.2', kubeadmConfigSpec: { clusterConfiguration: { etcd: { local: {} } } }, ...spec },
  };
}

const read = (object: { metadata: { labels: Record<string, string> } }): ParentLabels => ({
  ok: true,
  labels: object.metadata.labels,
  object,
});

const topology = (object: unknown) => (object as { spec: { topology: Json } }).spec.topology;
const spec = (object: unknown) => (object as { spec: Json }).spec;

function review(file = V1BETA2, edit: (old: Json, now: Json) => void = () => undefined): TestReview {
  const made = fixtureReview(file);
  edit(made.request.oldObject as unknown as Json, made.request.object as unknown as Json);
  return made;
}

const classify = (made: TestReview, parent?: ParentLabels): Classification =>
  classifyRequest(parsedRequest(made), CONFIG, parent);

describe('issue 28: which Cluster UPDATEs are judged, as which KCP change', () => {
  it.each([
    ['a topology version change reads its KubeadmControlPlane first', () => classify(review()), 'deny', 'labels-unknown'],
    [
      'a Cluster without a topology is not judged',
      () =>
        classify(
          review(V1BETA2, (old, now) => {
            delete spec(old).topology;
            delete spec(now).topology;
          }),
        ),
      'allow',
      'no-topology',
    ],
    [
      'a topology edit of anything else (workers, variables) is not judged',
      () =>
        classify(
          review(V1BETA2, (_old, now) => {
            topology(now).version = 'v1.33.2';
            topology(now).workers = { machineDeployments: [] };
          }),
        ),
      'allow',
      'no-guarded-change',
    ],
    [
      'unsetting the control plane replicas (the KCP keeps its own) is not judged',
      () => classify(review(V1BETA1, (_old, now) => delete (topology(now).controlPlane as Json).replicas)),
      'allow',
      'no-guarded-change',
    ],
    [
      'no controlPlaneRef yet: the topology controller creates the control plane, no etcd to judge',
      () =>
        classify(
          review(V1BETA2, (old, now) => {
            delete spec(old).controlPlaneRef;
            delete spec(now).controlPlaneRef;
          }),
        ),
      'allow',
      'no-control-plane-yet',
    ],
    [
      'another provider’s control plane is not guarded',
      () =>
        classify(
          review(V1BETA2, (old, now) => {
            for (const object of [old, now]) {
              spec(object).controlPlaneRef = { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'TalosControlPlane', name: 't' };
            }
          }),
        ),
      'allow',
      'not-guarded',
    ],
    [
      'a controlPlaneRef changed together with the version is denied (which etcd?)',
      () => classify(review(V1BETA2, (_old, now) => ((spec(now).controlPlaneRef as Json).name = 'other'))),
      'deny',
      'moves-target',
    ],
    [
      'the KubeadmControlPlane unreadable: denied naming the read',
      () => classify(review(), { ok: false, message: 'kubeadmcontrolplanes is forbidden' }),
      'deny',
      'parent-unreadable',
    ],
    [
      'the KubeadmControlPlane being deleted: teardown',
      () => classify(review(), read(kcp({}, { deletionTimestamp: '2026-11-30T01:59:00Z' }))),
      'allow',
      'teardown',
    ],
    [
      'a KubeadmControlPlane no target matches: denied',
      () => classify(review(), read(kcp({}, {}, { 'cluster.x-k8s.io/cluster-name': 'staging' }))),
      'deny',
      'no-target',
    ],
    [
      'the KubeadmControlPlane already runs the new version at that size: nothing to roll out',
      () => classify(review(), read(kcp({ version: 'v1.34.1' }))),
      'allow',
      'no-membership-change',
    ],
    [
      'replicas that are not a count are denied as invalid',
      () =>
        classify(
          review(V1BETA1, (_old, now) => ((topology(now).controlPlane as Json).replicas = -1)),
          read(kcp()),
        ),
      'deny',
      'invalid',
    ],
  ])('%s', (_name, run, kind, reason) => {
    const classification = run();
    expect(classification.kind).toBe(kind);
    if (classification.kind !== 'needs-evaluation') expect(classification.reason).toBe(reason);
  });

  it('asks for the KubeadmControlPlane its controlPlaneRef names, at the version the reference or the Cluster says', () => {
    for (const [file, version] of [
      [V1BETA2, 'v1beta2'],
      [V1BETA1, 'v1beta1'],
    ] as const) {
      const first = classify(review(file));
      expect(first.kind === 'deny' ? first.parent : null).toEqual({
        group: 'controlplane.cluster.x-k8s.io',
        version,
        resource: 'kubeadmcontrolplanes',
        namespace: 'default',
        name: KCP,
      });
    }
  });

  it.each([
    [
      'a topology version change is a KCP rollout',
      V1BETA2,
      () => undefined,
      { kind: 'rollout', replicas: 3, changedPaths: ['/spec/topology/version'] },
    ],
    ['a v1beta1 Cluster’s replicas 3 → 5 is a KCP scale up', V1BETA1, () => undefined, { kind: 'scale-up', from: 3, to: 5 }],
    [
      'replicas 3 → 2 is a KCP scale down',
      V1BETA1,
      (_old: Json, now: Json) => ((topology(now).controlPlane as Json).replicas = 2),
      { kind: 'scale-down', from: 3, to: 2 },
    ],
    [
      'version and replicas together: a rollout that also scales',
      V1BETA2,
      (_old: Json, now: Json) => ((topology(now).controlPlane as Json).replicas = 5),
      {
        kind: 'rollout',
        replicas: 5,
        changedPaths: ['/spec/topology/version', '/spec/topology/controlPlane/replicas'],
        previousReplicas: 3,
      },
    ],
  ])('%s, against the KCP’s target', (_name, file, edit, change) => {
    const classification = classify(review(file, edit), read(kcp()));
    if (classification.kind !== 'needs-evaluation') throw new Error(JSON.stringify(classification));
    expect(classification.target.name).toBe('prod');
    expect(classification.object).toMatchObject({ kind: 'Cluster', namespace: 'default', name: 'prod' });
    expect(classification.controller?.object).toMatchObject({ kind: 'KubeadmControlPlane', name: KCP });
    expect(classification.change).toEqual(change);
  });
});

function decideOn(made: TestReview, evaluation: Evaluation, kcpObject = kcp()) {
  const request = parsedRequest(made);
  const classification = classifyRequest(request, CONFIG, read(kcpObject));
  if (classification.kind !== 'needs-evaluation') throw new Error(JSON.stringify(classification));
  return decide({ request, config: CONFIG, classification, evaluation: { ...evaluation, target: 'prod' }, now: NOW });
}

const EVALUATED = { evaluatedAt: '2026-11-30T01:59:59.500Z' };
const HEALTHY = makeEvaluation(EVALUATED);
const UNHEALTHY = makeEvaluation({
  ...EVALUATED,
  verdict: 'Unhealthy',
  members: [makeMember(0), makeMember(1), makeMember(2, { healthy: false, error: 'connection refused' })],
  reasons: ['member etcd-2 is unreachable: connection refused'],
});

describe('issue 28: the decision on a Cluster topology change is the KCP’s', () => {
  it.each([
    ['version, Healthy', V1BETA2, HEALTHY, true],
    ['version, Unhealthy', V1BETA2, UNHEALTHY, false],
    ['replicas 3 → 5, Healthy', V1BETA1, HEALTHY, true],
    ['replicas 3 → 5, Unhealthy', V1BETA1, UNHEALTHY, false],
  ])('%s → allowed %s', (_name, file, evaluation, allowed) => {
    const decision = decideOn(review(file), evaluation);
    expect(decision.response.allowed, decision.response.status?.message).toBe(allowed);
    if (!allowed) {
      const message = decision.response.status?.message ?? '';
      expect(message).toContain(
        `of Cluster default/prod (carried out by its KubeadmControlPlane default/${KCP}): target prod verdict Unhealthy`,
      );
      expect(message).toContain('member etcd-2 is unreachable');
      expect(message).toContain('to override, annotate with etcd-guard.io/override=<reason>');
    }
  });

  it('a scale down that removes the dead member is judged by the KCP’s Machines, as a KCP shrink is', () => {
    const made = review(V1BETA1, (_old, now) => ((topology(now).controlPlane as Json).replicas = 2));
    const request = parsedRequest(made);
    const classification = classifyRequest(request, CONFIG, read(kcp()));
    if (classification.kind !== 'needs-evaluation') throw new Error(JSON.stringify(classification));
    const machine = (index: number, deleteRequested = false) => ({
      name: `m-${index}`,
      nodeName: `etcd-${index}`,
      deleting: false,
      deleteRequested,
      upToDate: true,
      kcpOutdated: false,
      version: null,
      componentsHealthy: true,
      failureDomain: null,
      createdAt: `2026-11-0${index + 1}T00:00:00Z`,
    });
    const machines = { ok: true as const, machines: [machine(0), machine(1), machine(2, true)] };
    const evaluation = { ...UNHEALTHY, target: 'prod' };
    const annotated = decide({ request, config: CONFIG, classification, evaluation, now: NOW, machines });
    expect(annotated.response.allowed, annotated.response.status?.message).toBe(true);
    const worstCase = decide({ request, config: CONFIG, classification, evaluation, now: NOW });
    expect(worstCase.response.allowed).toBe(false);
  });

  it('a version change crossing into etcd 3.6 is held by the upgrade gate while a member runs an older 3.5', () => {
    const old35 = makeEvaluation({ ...EVALUATED, members: [makeMember(0), makeMember(1), makeMember(2, { version: '3.5.21' })] });
    const decision = decideOn(review(), old35);
    expect(decision.response.allowed).toBe(false);
    expect(decision.reason).toBe('etcd-upgrade');
    expect(decision.response.status?.message).toContain("kubeadm's default etcd 3.6.9-0 for Kubernetes v1.34.1");
    // The KCP's own etcd image tag decides when it has one, as for a KCP edit.
    const pinned = kcp({ kubeadmConfigSpec: { clusterConfiguration: { etcd: { local: { imageTag: '3.5.24-0' } } } } });
    expect(decideOn(review(), old35, pinned).response.allowed).toBe(true);
  });
});
