// The etcd 3.6 upgrade gate end to end: a real 3-member etcd of whichever version the run is on,
// the scheduled evaluation feeding the store, and /validate over HTTPS with real AdmissionReview
// fixtures. On 3.4.23 and 3.5.16 (both below the 3.5.32 etcd's upgrade guide requires before 3.6)
// a KCP bump to a Kubernetes whose kubeadm etcd is 3.6 is denied naming the members and the
// minimum; a version step that stays on 3.5 is allowed; the same bump is allowed once the members
// run the minimum (the real evaluation with its member versions raised, as the cluster would
// report them). On 3.6 and 3.7 the members' own reported versions are past the minimum, so the
// gate allows every bump. test/e2e/etcd-upgrade-in-place.test.ts judges a real mixed 3.5/3.6 cluster.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { MIN_ETCD_FOR_3_6, parseEtcdVersion } from '../../webhook/domain/etcd-upgrade.js';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import { cacheMembersOn } from '../harness/etcd-upgrade.js';
import { admissionFixture, fixtureReview } from '../harness/reviews.js';

let e2e: EtcdWebhook;

beforeAll(async () => {
  // The fixtures' KCPs belong to cluster "prod".
  e2e = await startEtcdWebhook({ name: 'gate', target: 'prod', timeout: '2s', webhook: { ready: true } });
});

afterAll(async () => {
  await e2e?.close();
});

/** Whether every member reports a version at or past the minimum (a run on 3.6 or 3.7). */
function pastMinimum(evaluation: Evaluation): boolean {
  const minimum = parseEtcdVersion(MIN_ETCD_FOR_3_6);
  if (minimum === null) throw new Error(`cannot read ${MIN_ETCD_FOR_3_6}`);
  return evaluation.members.every((member) => {
    const version = parseEtcdVersion(member.version);
    if (version === null) throw new Error(`member ${member.name} reports no version: ${String(member.version)}`);
    return (version.major - minimum.major || version.minor - minimum.minor || version.patch - minimum.patch) >= 0;
  });
}

/** The fixture as the apiserver sent it, posted to /validate. */
const validate = (fixture: string) => e2e.webhook.postReview(admissionFixture(fixture));

describe('the etcd 3.6 upgrade gate through the HTTPS webhook on real etcd', () => {
  it('denies a KCP bump to Kubernetes v1.34 (etcd 3.6) while members run below the minimum, allows otherwise', async () => {
    const real = await e2e.scheduledEvaluation();
    expect(real.verdict, real.reasons.join('; ')).not.toBe('Unhealthy');
    const versions = real.members.map((member) => member.version);
    console.log(`upgrade gate: members run ${versions.join(', ')}; minimum before 3.6 is ${MIN_ETCD_FOR_3_6}`);
    if (pastMinimum(real)) {
      // Real 3.6/3.7 members: the versions they report clear the gate; the bump is judged on health.
      const bump = await validate('kcp-v1beta2-edit-version.json');
      expect(bump.allowed, bump.status?.message).toBe(true);
      return;
    }

    const denied = await validate('kcp-v1beta2-edit-version.json');
    expect(denied.allowed).toBe(false);
    expect(denied.status?.code).toBe(403);
    const message = denied.status?.message ?? '';
    console.log(`upgrade gate denial: ${message}`);
    expect(message).toContain("moves etcd to 3.6.9 (kubeadm's default etcd 3.6.9-0 for Kubernetes v1.34.0)");
    expect(message).toContain(`every member on ${MIN_ETCD_FOR_3_6} or later before any member moves to 3.6`);
    for (const member of real.members) expect(message).toContain(`${member.name} (${member.version})`);

    // v1.30.4 → v1.31.1: kubeadm's etcd stays on 3.5; the gate has nothing to say.
    const stays = await validate('kcp-v1beta1-edit-version.json');
    expect(stays.allowed, stays.status?.message).toBe(true);

    // The same cluster once its members run the minimum: the bump is judged on health alone.
    await cacheMembersOn(e2e, real, MIN_ETCD_FOR_3_6);
    const allowed = await validate('kcp-v1beta2-edit-version.json');
    expect(allowed.allowed, allowed.status?.message).toBe(true);
  });
});

/**
 * Issue 30 item 3, "the 3.5 → 3.6 gate fails open on tags it cannot parse": a KCP edit that only
 * sets `etcd.local.imageTag` (on Kubernetes v1.31, kubeadm's etcd 3.5), old tag `previous`.
 */
function imageTagReview(tag: string, previous?: string) {
  const review = fixtureReview('kcp-v1beta1-edit-version.json');
  const { object, oldObject } = review.request as unknown as Record<'object' | 'oldObject', { spec: Record<string, unknown> }>;
  oldObject.spec = structuredClone(object.spec);
  const local = (spec: Record<string, unknown>) =>
    (spec as { kubeadmConfigSpec: { clusterConfiguration: { etcd: { local: Record<string, unknown> } } } }).kubeadmConfigSpec
      .clusterConfiguration.etcd.local;
  local(object.spec).imageTag = tag;
  if (previous !== undefined) local(oldObject.spec).imageTag = previous;
  return review;
}

describe('the 3.5 → 3.6 gate on tags it cannot parse (issue 30 item 3), members below the minimum (past it on 3.6+)', () => {
  // [tag, old tag, allowed]: every tag form kubeadm (registry.k8s.io/etcd) and druid
  // (etcd-custom-image; etcd-wrapper, whose tag is its own version) publish, and the attack's.
  const TAGS: [string, string | undefined, boolean][] = [
    ['3.5.21-0', undefined, true],
    ['3.5.24-0', undefined, true],
    ['v3.5.21', undefined, true],
    ['v3.4.26-2', undefined, true],
    ['v3.4.13-bootstrap-12', undefined, true],
    ['3.6.4-0', undefined, false],
    ['3.6.9-0', undefined, false],
    ['v3.6.5', undefined, false],
    ['v3.6.0-rc.2', undefined, false],
    ['v0.8.2', undefined, false],
    ['3.6', undefined, false],
    ['v3.6', undefined, false],
    ['latest', undefined, false],
    ['V3.6.5', undefined, false],
    ['3.6.5_amd64', undefined, false],
    ['3.6.5.0', undefined, false],
    ['3.5.21-0@sha256:' + 'a'.repeat(64), undefined, false],
    ['3.6.5-0', '3.6.0-rc.1', false],
    ['3.6.5-0', 'v3.6.0-alpha.0', false],
    ['3.6.9-0', '3.6.5-0', true],
  ];
  it('judges every tag through the HTTPS webhook on the real evaluation', async () => {
    const real = await e2e.scheduledEvaluation();
    expect(real.verdict, real.reasons.join('; ')).not.toBe('Unhealthy');
    // On members past the minimum (a run on 3.6/3.7) no tag is a crossing to guard.
    const everyTagAllowed = pastMinimum(real);
    const wrong: string[] = [];
    for (const [tag, previous, allowedBelow] of TAGS) {
      const allowed = everyTagAllowed || allowedBelow;
      const answer = await e2e.webhook.postReview(imageTagReview(tag, previous));
      const message = answer.status?.message ?? '';
      if (answer.allowed !== allowed) wrong.push(`${tag} (old ${previous ?? 'none'}): allowed ${answer.allowed}: ${message}`);
      if (!allowed && !message.includes(`every member on ${MIN_ETCD_FOR_3_6} or later`)) wrong.push(`${tag}: ${message}`);
    }
    expect(wrong).toEqual([]);
  });
});
