// Issue 30 item 1, "hibernation as a bypass", through the real processes: a real 3-member etcd
// judged by the real scheduled run into a file store, and the HTTPS webhook guarding the druid
// `Etcd` shoot--prod--core/etcd-main by a static target. With a member down, 3→5 is denied and
// 3→0 (hibernation) allowed; with every member down (hibernated: nothing answers) a wake-up is
// allowed only to the 3 members the evaluations last listed and with replicas the only change:
// 0→1, 0→5 with the image and storage changed, and 0→3 with the image changed are denied.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import { fixtureReview, withReplicas, type TestReview } from '../harness/reviews.js';

let e2e: EtcdWebhook;

beforeAll(async () => {
  e2e = await startEtcdWebhook({
    name: 'hibernate',
    target: 'shoot-core',
    timeout: '1s',
    match: { namespaces: ['shoot--prod--core'], names: ['etcd-main'] },
    webhook: { ready: true },
  });
}, 60_000);

afterAll(async () => {
  await e2e?.close();
});

/** A spec edit of the Etcd, replicas `from` → `to`, `edit` applied to the new spec. */
function etcdEdit(from: number, to: number, edit: (spec: Record<string, unknown>) => void = () => {}): TestReview {
  const review = withReplicas(fixtureReview('etcd-druid-replicas-3-to-5.json'), from, to);
  const object = review.request.object as { spec: Record<string, unknown> };
  edit(object.spec);
  return review;
}
const newImage = (spec: Record<string, unknown>) => {
  spec.etcd = { ...(spec.etcd as object), image: 'europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.9.0' };
};
const newStorage = (spec: Record<string, unknown>) => {
  spec.storageCapacity = '50Gi';
};

async function answer(review: TestReview) {
  const response = await e2e.webhook.postReview(review);
  const text = response.allowed ? (response.warnings ?? []).join(' | ') : (response.status?.message ?? '');
  return { allowed: response.allowed, text, audit: response.auditAnnotations ?? {} };
}

describe('hibernation as a bypass (issue 30 item 1), on real etcd through the HTTPS webhook', () => {
  it('one member down: 3→5 denied, 3→0 with the image changed denied, 3→0 allowed as hibernation', async () => {
    const healthy = await e2e.scheduledEvaluation();
    expect(healthy.lastMembership?.votingMembers).toBe(3);
    await e2e.cluster.kill(2);
    const degraded = await e2e.scheduledEvaluation();
    expect(degraded.verdict).toBe('Unhealthy');
    expect((await answer(etcdEdit(3, 5))).allowed).toBe(false);
    expect((await answer(etcdEdit(3, 0, newImage))).allowed).toBe(false);
    const hibernation = await answer(etcdEdit(3, 0));
    expect(hibernation.allowed, hibernation.text).toBe(true);
    expect(hibernation.text).toContain('hibernation 3 to 0 replicas allowed whatever the etcd verdict');
    expect(hibernation.audit).toMatchObject({ hibernation: 'hibernation: 3 to 0 replicas', decision: 'allowed' });
  }, 60_000);

  it('hibernated (nothing answers): the evaluation carries the last listed size, 3', async () => {
    await Promise.all([e2e.cluster.kill(0), e2e.cluster.kill(1)]);
    const hibernated = await e2e.scheduledEvaluation();
    expect(hibernated.verdict).toBe('Unhealthy');
    expect(hibernated.checks.find((check) => check.name === 'member-list')?.status).toBe('fail');
    expect(hibernated.lastMembership?.votingMembers).toBe(3);
  }, 60_000);

  it.each<[string, () => TestReview, RegExp]>([
    ['3→0→1: a wake-up to another size', () => etcdEdit(0, 1), /scale up from 0 to 1 replicas.*verdict Unhealthy/],
    [
      '0→5 with spec.etcd.image and storage changed',
      () =>
        etcdEdit(0, 5, (spec) => {
          newImage(spec);
          newStorage(spec);
        }),
      /rollout \(.*verdict Unhealthy/,
    ],
    ['0→3 with spec.etcd.image changed', () => etcdEdit(0, 3, newImage), /rollout \(.*verdict Unhealthy/],
    ['an image change while hibernated (0→0)', () => etcdEdit(0, 0, newImage), /rollout \(.*verdict Unhealthy/],
  ])('denies %s while Unhealthy', async (_name, review, denial) => {
    const { allowed, text } = await answer(review());
    expect(allowed).toBe(false);
    expect(text).toMatch(denial);
  });

  it('allows 0→3, back to the last known size, whatever the verdict, with a warning and an audit annotation', async () => {
    const wakeUp = await answer(etcdEdit(0, 3));
    expect(wakeUp.allowed, wakeUp.text).toBe(true);
    expect(wakeUp.text).toContain('wake-up 0 to 3 replicas allowed whatever the etcd verdict');
    expect(wakeUp.text).toContain('3 is the voting size the evaluation of');
    expect(wakeUp.audit).toMatchObject({ hibernation: 'wake-up: 0 to 3 replicas' });
  });
});
