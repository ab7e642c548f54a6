// Issue 28, the pod door, end to end: a real 3-member etcd whose members are named like the pods
// of StatefulSet etcd-main (etcd-main-0..2), fed to the HTTPS webhook by the scheduled run, the
// stand-in API server serving that StatefulSet, and pod DELETE reviews as the apiserver sends
// them. Deleting an etcd pod takes its member down until it returns: allowed at fault tolerance 1,
// denied at fault tolerance 0, allowed for the dead member's own pod.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDoor, startDoor } from '../harness/door.js';
import type { EtcdWebhook } from '../harness/etcd-webhook.js';
import type { FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';
import { fixtureReview, type TestReview } from '../harness/reviews.js';

const NAMESPACE = 'shoot--prod';
const STATEFUL_SET = 'etcd-main';

let management: FakeKubeApiServer;
let e2e: EtcdWebhook;

beforeAll(async () => {
  const statefulSet = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: STATEFUL_SET, namespace: NAMESPACE, labels: { 'app.kubernetes.io/managed-by': 'etcd-druid' } },
    spec: { replicas: 3 },
  };
  ({ management, e2e } = await startDoor({
    name: STATEFUL_SET,
    target: 'doors-pods',
    match: { namespaces: [NAMESPACE], names: [STATEFUL_SET] },
    owners: { statefulsets: [statefulSet] },
  }));
});

afterAll(() => closeDoor({ management, e2e }));

const deletePod = (name: string): TestReview => fixtureReview('pod-delete-etcd-druid.json', { namespace: NAMESPACE, name });

describe('issue 28: etcd pod DELETE through the HTTPS webhook on real etcd', () => {
  it('allows at fault tolerance 1, denies at fault tolerance 0, allows the dead member’s pod', async () => {
    const names = e2e.cluster.members.map((member) => member.name);
    expect(names).toEqual(['etcd-main-0', 'etcd-main-1', 'etcd-main-2']);
    await e2e.cluster.waitHealthy();
    const healthy = await e2e.scheduledEvaluation();
    expect(healthy.verdict, healthy.reasons.join('; ')).not.toBe('Unhealthy');
    expect(healthy.cluster.faultTolerance).toBe(1);
    const allowed = await e2e.webhook.postReview(deletePod('etcd-main-0'));
    expect(allowed.allowed, allowed.status?.message).toBe(true);
    expect(allowed.warnings?.join(' ')).toMatch(/while pod etcd-main-0 is down, etcd tolerates no further member failure/);

    await e2e.cluster.kill(2);
    const sick = await e2e.scheduledEvaluation();
    expect(sick.cluster.faultTolerance).toBe(0);
    const denied = await e2e.webhook.postReview(deletePod('etcd-main-0'));
    expect(denied.allowed).toBe(false);
    expect(denied.status?.code).toBe(403);
    const message = denied.status?.message ?? '';
    console.log(`pod door denial: ${message}`);
    expect(message).toContain(`of Pod ${NAMESPACE}/etcd-main-0: target doors-pods verdict Unhealthy`);
    expect(message).toContain('etcd member etcd-main-0 is healthy');
    expect(message).toContain('1 of 3 voting members would be healthy, below quorum 2 (fault tolerance now 0)');

    const deadOwn = await e2e.webhook.postReview(deletePod('etcd-main-2'));
    expect(deadOwn.allowed, deadOwn.status?.message).toBe(true);
  });
});
