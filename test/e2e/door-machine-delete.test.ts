// Issue 28, the Machine door, end to end: a real 3-member etcd fed to the HTTPS webhook by the
// scheduled run, the management cluster's stand-in serving the KubeadmControlPlane the webhook
// reads, and Machine DELETE reviews as the apiserver sends them (operation DELETE, object null,
// DeleteOptions). Deleting a control-plane Machine removes its member: allowed while that keeps
// quorum and when its member is dead; denied for a healthy member's Machine while another member
// is dead, naming it and the safe path; a Machine without a nodeRef is undetermined; a teardown
// (the KubeadmControlPlane being deleted) stays allowed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDoor, doorKcp, startDoor } from '../harness/door.js';
import type { EtcdWebhook } from '../harness/etcd-webhook.js';
import type { FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';
import { fixtureReview, type TestReview } from '../harness/reviews.js';

const TARGET = 'doors-m';
const NAMESPACE = 'default';
const KCP_NAME = `${TARGET}-control-plane`;

let management: FakeKubeApiServer;
let e2e: EtcdWebhook;

const kcp = (metadata: Record<string, unknown> = {}) => doorKcp(TARGET, KCP_NAME, { namespace: NAMESPACE, metadata });

beforeAll(async () => {
  ({ management, e2e } = await startDoor({ name: TARGET, target: TARGET, owners: { kubeadmcontrolplanes: [kcp()] } }));
});

afterAll(() => closeDoor({ management, e2e }));

/** The DELETE of the control-plane Machine on Node `node` (null: no nodeRef yet) of this KCP. */
function deleteMachine(node: string | null, name = node ?? `${KCP_NAME}-pending`): TestReview {
  const review = fixtureReview('machine-delete-control-plane.json', { namespace: NAMESPACE, name });
  const machine = review.request.oldObject;
  if (machine === null) throw new Error('the fixture has no oldObject');
  machine.metadata.labels = {
    'cluster.x-k8s.io/cluster-name': TARGET,
    'cluster.x-k8s.io/control-plane': '',
    'cluster.x-k8s.io/control-plane-name': KCP_NAME,
  };
  (machine.metadata.ownerReferences as { name: string }[])[0]!.name = KCP_NAME;
  const status = machine.status as Record<string, unknown>;
  if (node === null) delete status.nodeRef;
  else status.nodeRef = { name: node };
  return review;
}

describe('issue 28: control-plane Machine DELETE through the HTTPS webhook on real etcd', () => {
  it('allows while quorum holds and for a dead member, denies a healthy member’s Machine while another is dead', async () => {
    await e2e.cluster.waitHealthy();
    const healthy = await e2e.scheduledEvaluation();
    expect(healthy.verdict, healthy.reasons.join('; ')).not.toBe('Unhealthy');
    // The member killed is a follower, so what is judged is one dead member, not a leader election.
    const leader = healthy.members.find((member) => member.leader)?.name;
    const victim = e2e.cluster.members.findIndex((member) => member.name !== leader);
    const second = e2e.cluster.members[victim];
    const first = e2e.cluster.members.find((member, index) => index !== victim);
    if (!first || !second) throw new Error('the cluster has fewer than 2 members');
    const whileHealthy = await e2e.webhook.postReview(deleteMachine(first.name));
    expect(whileHealthy.allowed, whileHealthy.status?.message).toBe(true);
    expect(whileHealthy.warnings?.join(' ')).toMatch(/survives no member failure/);
    // No nodeRef: the worst case, a healthy member, still leaves 2 of 2 healthy.
    const pendingHealthy = await e2e.webhook.postReview(deleteMachine(null));
    expect(pendingHealthy.allowed, pendingHealthy.status?.message).toBe(true);

    await e2e.cluster.kill(victim);
    const sick = await e2e.scheduledEvaluation();
    expect(sick.verdict).toBe('Unhealthy');

    const dead = await e2e.webhook.postReview(deleteMachine(second.name));
    expect(dead.allowed, dead.status?.message).toBe(true);
    expect(dead.warnings?.join(' ')).toContain(`etcd member ${second.name} is unhealthy`);

    const denied = await e2e.webhook.postReview(deleteMachine(first.name));
    expect(denied.allowed).toBe(false);
    expect(denied.status?.code).toBe(403);
    const message = denied.status?.message ?? '';
    console.log(`Machine door denial: ${message}`);
    expect(message).toContain(`of Machine ${NAMESPACE}/${first.name}: target ${TARGET} verdict Unhealthy`);
    expect(message).toContain(`its etcd member ${first.name} is healthy and leaves with it`);
    // Under load a slow survivor may be judged unhealthy too: then etcd has no quorum at all.
    expect(message).toMatch(/below quorum 2|has no quorum/);
    expect(message).toContain(`annotate machine ${first.name} cluster.x-k8s.io/remediate-machine=""`);
    expect(message).toContain(`scale KubeadmControlPlane ${KCP_NAME} down by one`);

    const pending = await e2e.webhook.postReview(deleteMachine(null));
    expect(pending.allowed).toBe(false);
    expect(pending.status?.message).toContain('has no nodeRef yet and may already run a member (cluster-api#11772)');

    // Teardown: the KubeadmControlPlane is being deleted, so its Machines go whatever etcd says.
    management.putObject('kubeadmcontrolplanes', kcp({ deletionTimestamp: new Date().toISOString() }));
    const teardown = await e2e.webhook.postReview(deleteMachine(first.name));
    expect(teardown.allowed, teardown.status?.message).toBe(true);
  });
});
