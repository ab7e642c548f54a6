// Issue 28, the ClusterClass door, end to end: a real 3-member etcd fed to the HTTPS webhook by
// the scheduled run, the management cluster's stand-in serving the KubeadmControlPlane that the
// Cluster's spec.controlPlaneRef names, and Cluster UPDATE reviews as the apiserver sends them.
// A change of spec.topology.version or of the control plane replicas is judged as the KCP change
// the topology controller will make: allowed while etcd is Healthy, denied once a member is
// SIGKILLed, naming the Cluster and its KCP; an edit of anything else is not judged (allowed with
// a dead member too); allowed again once the member is back; a failed read of the KCP denies
// naming the read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDoor, doorKcp, startDoor } from '../harness/door.js';
import type { EtcdWebhook } from '../harness/etcd-webhook.js';
import type { FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';
import { fixtureReview, type TestReview } from '../harness/reviews.js';

const TARGET = 'doors-c';
const NAMESPACE = 'default';
const KCP_NAME = `${TARGET}-7xk2q`;

let management: FakeKubeApiServer;
let e2e: EtcdWebhook;

beforeAll(async () => {
  // etcd pinned to 3.5 by tag: the members here run whatever etcd the tests built, so the 3.6
  // upgrade gate (its own suite) stays out of what this file judges.
  const kcp = doorKcp(TARGET, KCP_NAME, { namespace: NAMESPACE, etcdLocal: { imageTag: '3.5.24-0' } });
  ({ management, e2e } = await startDoor({ name: TARGET, target: TARGET, owners: { kubeadmcontrolplanes: [kcp] } }));
});

afterAll(() => closeDoor({ management, e2e }));

type Json = Record<string, unknown>;

/** An UPDATE of this Cluster (v1beta2) whose topology goes to `version` and `replicas` from v1.33.2 and 3. */
function editCluster(change: { version?: string; replicas?: number; topology?: boolean; labels?: Json } = {}): TestReview {
  const review = fixtureReview('cluster-v1beta2-topology-version.json', { namespace: NAMESPACE, name: TARGET });
  const { object, oldObject } = review.request;
  if (object === null || oldObject === null) throw new Error('the fixture lacks an object');
  for (const cluster of [object, oldObject]) {
    (cluster.spec as Json).controlPlaneRef = {
      apiGroup: 'controlplane.cluster.x-k8s.io',
      kind: 'KubeadmControlPlane',
      name: KCP_NAME,
    };
  }
  const topology = (object.spec as Json).topology as Json;
  topology.version = change.version ?? 'v1.33.2';
  (topology.controlPlane as Json).replicas = change.replicas ?? 3;
  if (change.labels !== undefined) object.metadata.labels = change.labels as Record<string, string>;
  if (change.topology === false) {
    delete (object.spec as Json).topology;
    delete (oldObject.spec as Json).topology;
  }
  return review;
}

const VERSION = { version: 'v1.33.5' };
const SCALE_UP = { replicas: 5 };

describe('issue 28: ClusterClass Cluster topology UPDATE through the HTTPS webhook on real etcd', () => {
  it('allows topology version and replicas changes while Healthy, denies them with a member SIGKILLed', async () => {
    await e2e.cluster.waitHealthy();
    const healthy = await e2e.scheduledEvaluation();
    expect(healthy.verdict, healthy.reasons.join('; ')).not.toBe('Unhealthy');
    for (const change of [VERSION, SCALE_UP]) {
      const allowed = await e2e.webhook.postReview(editCluster(change));
      expect(allowed.allowed, allowed.status?.message).toBe(true);
      expect(allowed.auditAnnotations?.target).toBe(TARGET);
      expect(allowed.auditAnnotations?.evidence).toBe('live');
    }

    const leader = healthy.members.find((member) => member.leader)?.name;
    const victim = e2e.cluster.members.findIndex((member) => member.name !== leader);
    const killed = e2e.cluster.members[victim]?.name ?? '';
    await e2e.cluster.kill(victim);
    const sick = await e2e.scheduledEvaluation();
    expect(sick.verdict).toBe('Unhealthy');

    for (const [change, what] of [
      [VERSION, 'rollout (spec.topology.version changed)'],
      [SCALE_UP, 'scale up from 3 to 5 replicas'],
    ] as const) {
      const denied = await e2e.webhook.postReview(editCluster(change));
      expect(denied.allowed).toBe(false);
      expect(denied.status?.code).toBe(403);
      const message = denied.status?.message ?? '';
      console.log(`Cluster topology door denial: ${message}`);
      expect(message).toContain(
        `etcd-guard denied ${what} of Cluster ${NAMESPACE}/${TARGET} (carried out by its KubeadmControlPlane ${NAMESPACE}/${KCP_NAME}): target ${TARGET} verdict Unhealthy`,
      );
      expect(message).toContain(killed);
    }

    // Not judged: an edit that changes neither field, and a Cluster without topology.
    for (const change of [{ labels: { env: 'staging' } }, { topology: false, version: 'v1.33.5' }]) {
      const untouched = await e2e.webhook.postReview(editCluster(change));
      expect(untouched.allowed, untouched.status?.message).toBe(true);
      expect(untouched.auditAnnotations?.reason).toMatch(/^no-(guarded-change|topology)$/);
      expect(untouched.auditAnnotations?.target).toBeUndefined();
    }

    // The member back: the same edits go through again.
    await e2e.cluster.restart(victim);
    await e2e.cluster.waitHealthy();
    const recovered = await e2e.scheduledEvaluation();
    expect(recovered.verdict, recovered.reasons.join('; ')).not.toBe('Unhealthy');
    for (const change of [VERSION, SCALE_UP]) {
      const allowed = await e2e.webhook.postReview(editCluster(change));
      expect(allowed.allowed, allowed.status?.message).toBe(true);
    }
  });

  it('denies when the KubeadmControlPlane cannot be read, naming the read', async () => {
    management.forbid('get', 'kubeadmcontrolplanes', NAMESPACE);
    try {
      const denied = await e2e.webhook.postReview(editCluster(VERSION));
      expect(denied.allowed).toBe(false);
      expect(denied.status?.message).toContain(
        `etcd-guard cannot judge changing the topology of Cluster ${NAMESPACE}/${TARGET}: reading its KubeadmControlPlane ${NAMESPACE}/${KCP_NAME} failed`,
      );
    } finally {
      management.allowAll();
    }
  });
});
