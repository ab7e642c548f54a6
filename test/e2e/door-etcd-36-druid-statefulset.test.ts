// Issue 28, the 3.5 → 3.6 upgrade gate for etcd-druid Etcds and guarded StatefulSets, end to end:
// a real 3-member etcd (on this machine's etcd: below the 3.5.32 etcd's upgrade guide requires
// before 3.6, or past it on 3.6/3.7), the scheduled evaluation feeding the store, and /validate over
// HTTPS with Etcd and StatefulSet reviews as the apiserver sends them. An image bump onto 3.6 is
// denied naming the members and the minimum, as for a KCP; a 3.5 step is allowed; the same bump is
// allowed once the members run the minimum.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEtcdVersion, MIN_ETCD_FOR_3_6 } from '../../webhook/domain/etcd-upgrade.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import { cacheMembersOn } from '../harness/etcd-upgrade.js';
import { druidImageReview, statefulSetImageReview } from '../harness/reviews.js';

let e2e: EtcdWebhook;

beforeAll(async () => {
  // One target judges both: the druid Etcd shoot--prod--core/etcd-main and the StatefulSet etcd/etcd.
  e2e = await startEtcdWebhook({
    name: 'gate36',
    target: 'gate36',
    timeout: '5s',
    match: { namespaces: ['shoot--prod--core', 'etcd'], names: ['etcd-main', 'etcd'] },
    webhook: { ready: true },
  });
});

afterAll(async () => {
  await e2e?.close();
});

function pastMinimum(evaluation: Evaluation): boolean {
  const minimum = parseEtcdVersion(MIN_ETCD_FOR_3_6);
  return evaluation.members.every((member) => {
    const version = parseEtcdVersion(member.version);
    if (version === null || minimum === null) throw new Error(`member ${member.name} reports no version`);
    return (version.major - minimum.major || version.minor - minimum.minor || version.patch - minimum.patch) >= 0;
  });
}

const CUSTOM_34 = 'europe-docker.pkg.dev/gardener-project/releases/gardener/etcd-custom-image:v3.4.26-2';
const druidBump = () => druidImageReview(CUSTOM_34, 'quay.io/coreos/etcd:v3.6.5');
const statefulSetBump = () => statefulSetImageReview('registry.k8s.io/etcd:3.5.15-0', 'registry.k8s.io/etcd:3.6.4-0');

describe('issue 28: the 3.6 gate for druid Etcds and StatefulSets through the HTTPS webhook on real etcd', () => {
  it('denies an image bump onto 3.6 while members run below the minimum, allows a 3.5 step and the bump once ready', async () => {
    await e2e.cluster.waitHealthy();
    const real = await e2e.scheduledEvaluation();
    expect(real.verdict, real.reasons.join('; ')).not.toBe('Unhealthy');
    if (pastMinimum(real)) {
      // Real 3.6/3.7 members clear the gate: the bumps are judged on health alone.
      for (const review of [druidBump(), statefulSetBump()]) expect((await e2e.webhook.postReview(review)).allowed).toBe(true);
      return;
    }
    const expected = [
      [druidBump(), 'moves etcd to 3.6.5 (spec.etcd.image quay.io/coreos/etcd:v3.6.5)', 'Etcd shoot--prod--core/etcd-main'],
      [statefulSetBump(), 'moves etcd to 3.6.4 (container etcd image registry.k8s.io/etcd:3.6.4-0)', 'StatefulSet etcd/etcd'],
    ] as const;
    for (const [review, moves, object] of expected) {
      const denied = await e2e.webhook.postReview(review);
      expect(denied.allowed).toBe(false);
      expect(denied.status?.code).toBe(403);
      const message = denied.status?.message ?? '';
      console.log(`3.6 gate denial: ${message}`);
      expect(message).toContain(`of ${object}: target gate36`);
      expect(message).toContain(moves);
      expect(message).toContain(`every member on ${MIN_ETCD_FOR_3_6} or later before any member moves to 3.6`);
      for (const member of real.members) expect(message).toContain(`${member.name} (${member.version})`);
    }

    const step = await e2e.webhook.postReview(
      statefulSetImageReview('registry.k8s.io/etcd:3.5.15-0', 'registry.k8s.io/etcd:3.5.21-0'),
    );
    expect(step.allowed, step.status?.message).toBe(true);

    await cacheMembersOn(e2e, real, MIN_ETCD_FOR_3_6);
    for (const review of [druidBump(), statefulSetBump()]) {
      const allowed = await e2e.webhook.postReview(review);
      expect(allowed.allowed, allowed.status?.message).toBe(true);
    }
  });
});
