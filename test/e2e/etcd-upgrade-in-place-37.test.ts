// Issue 29, the next crossing: an in-place upgrade of a real 3-member etcd from 3.6 to 3.7 (both
// built from their Go modules by scripts/ensure-etcd-go.sh), member by member as etcd's guide does
// it: stop, swap the binary, start on the same data dir. Each step is judged by the real scheduled
// evaluation and the HTTPS webhook on a KCP whose etcd imageTag moves from 3.6 to 3.7. The module
// proxy serves no 3.6 below the 3.6.11 the 3.7 guide asks for, so a denial on real versions cannot
// be shown: the real evaluation with one member's version set below it stands in for that.
// ETCD_GUARD_ETCD36_BIN_DIR / ETCD_GUARD_ETCD37_BIN_DIR name the binaries' dirs; without them the
// script runs here (a first build takes minutes).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { guardConfigSchema } from '../../functions/domain/config.js';
import { classifyRequest } from '../../webhook/domain/classify.js';
import { decide } from '../../webhook/domain/decide.js';
import { MIN_ETCD_FOR_3_7 } from '../../webhook/domain/etcd-upgrade.js';
import { parseAdmissionReview } from '../../webhook/domain/review.js';
import { etcdVersion } from '../harness/etcd-cluster.js';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import {
  etcdBinariesFrom,
  evaluationWhen,
  startOnNextVersion,
  waitForStorageVersion,
  type EtcdBinaries,
} from '../harness/etcd-upgrade.js';
import { admissionFixture, type TestReview } from '../harness/reviews.js';

/** The etcd of `minor` built from its Go module (scripts/ensure-etcd-go.sh), or the dir the env names. */
const etcd3x = (minor: '3.6' | '3.7') =>
  etcdBinariesFrom(`ETCD_GUARD_ETCD${minor.replace('.', '')}_BIN_DIR`, ['scripts/ensure-etcd-go.sh', minor]);

type Spec = { kubeadmConfigSpec?: { clusterConfiguration?: { etcd?: { local?: Record<string, unknown> } } } };

/** kcp-v1beta2-edit-version.json with its old and new KCP pinned to these etcd image tags. */
function tagBump(from: string, to: string): TestReview {
  const review = admissionFixture('kcp-v1beta2-edit-version.json');
  const request = review.request as { object: { spec: Spec }; oldObject: { spec: Spec } };
  for (const [object, tag] of [
    [request.oldObject, from],
    [request.object, to],
  ] as const) {
    const kubeadm = (object.spec.kubeadmConfigSpec ??= {});
    const cluster = (kubeadm.clusterConfiguration ??= {});
    cluster.etcd = { local: { ...cluster.etcd?.local, imageTag: tag } };
  }
  return review;
}

let e2e: EtcdWebhook;
let to: EtcdBinaries;
let fromVersion: string;
let toVersion: string;
let names: string[];
/** The KCP's etcd imageTag moves from the 3.6 the members run to the 3.7 they move to. */
let bump: TestReview;

beforeAll(async () => {
  const [from, next] = await Promise.all([etcd3x('3.6'), etcd3x('3.7')]);
  to = next;
  [fromVersion, toVersion] = await Promise.all([etcdVersion(from.etcd), etcdVersion(to.etcd)]);
  expect(fromVersion).toMatch(/^3\.6\./);
  expect(toVersion).toMatch(/^3\.7\./);
  console.log(`in-place upgrade: etcd ${fromVersion} (${from.etcd}) to ${toVersion} (${to.etcd})`);
  bump = tagBump(`${fromVersion}-0`, `${toVersion}-0`);
  e2e = await startEtcdWebhook({
    name: 'inplace37',
    target: 'prod',
    timeout: '2s',
    webhook: { ready: true },
    etcdBinaries: from,
  });
  names = e2e.cluster.members.map((member) => member.name);
}, 20 * 60_000);

afterAll(async () => {
  await e2e?.close();
});

const check = (evaluation: Evaluation, name: string) => evaluation.checks.find((each) => each.name === name);
/** The bump judged on this evaluation as the webhook's decide() would (no HTTP: the evaluation is edited). */
function judgeBumpOn(evaluation: Evaluation) {
  const parsed = parseAdmissionReview(bump as unknown);
  if (!parsed.ok) throw new Error(parsed.message);
  const config = guardConfigSchema.parse({
    maxAgeSeconds: 60,
    targets: [{ name: 'prod', endpoints: e2e.cluster.endpoints, match: { clusterName: 'prod' } }],
  });
  const classification = classifyRequest(parsed.review.request, config);
  if (classification.kind !== 'needs-evaluation') throw new Error('the bump is not judged');
  return decide({ request: parsed.review.request, config, classification, evaluation, now: new Date(evaluation.evaluatedAt) });
}

describe('an in-place upgrade of a real etcd from 3.6 to 3.7, judged at each step (issue 29)', () => {
  it('before: every member on 3.6 is Healthy and past 3.6.11, so the imageTag bump to 3.7 is allowed', async () => {
    const evaluation = await evaluationWhen(e2e, 'a Healthy evaluation', (each) => each.verdict === 'Healthy');
    expect(check(evaluation, 'version')?.message).toBe(`all members run ${fromVersion}`);
    const answer = await e2e.webhook.postReview(bump);
    console.log(`in-place upgrade, before: ${evaluation.verdict}; bump to ${toVersion} ${answer.allowed ? 'allowed' : 'denied'}`);
    expect(answer.allowed, answer.status?.message).toBe(true);
    // The same evaluation with one member below the 3.7 guide's minimum: the gate names it.
    const behind = judgeBumpOn({
      ...evaluation,
      members: evaluation.members.map((member, index) => (index === 1 ? { ...member, version: '3.6.10' } : member)),
    });
    expect(behind.response.allowed).toBe(false);
    expect(behind.reason).toBe('etcd-upgrade');
    expect(behind.response.status?.message).toContain(
      `this change moves etcd to ${toVersion} (etcd imageTag ${toVersion}-0); etcd's upgrade guide requires every member on ${MIN_ETCD_FOR_3_7} or later before any member moves to 3.7, and ${names[1]} (3.6.10) runs below it`,
    );
  });

  for (const index of [0, 1, 2]) {
    it(`member ${index} stopped, then started on 3.7 with its data dir: blocked while down, judged by the versions after`, async () => {
      await e2e.cluster.stop(index);
      const down = await e2e.scheduledEvaluation();
      expect(down.verdict).not.toBe('Healthy');
      const blocked = await e2e.webhook.postReview(bump);
      expect(blocked.allowed).toBe(false);
      expect(blocked.status?.message).toContain(names[index] ?? '');

      const { evaluation, below } = await startOnNextVersion(e2e, { index, names, etcd: to.etcd, fromVersion, toVersion });
      const answer = await e2e.webhook.postReview(bump);
      console.log(
        `in-place upgrade, ${names[index]} on ${toVersion}: ${evaluation.verdict}; ${check(evaluation, 'version')?.message ?? ''}; bump ${answer.allowed ? 'allowed' : `denied: ${answer.status?.message ?? ''}`}`,
      );
      // Every 3.6 member is past 3.6.11, so the gate never stops the bump; the skew warns meanwhile.
      expect(answer.allowed, answer.status?.message).toBe(true);
      if (below.length > 0) {
        expect(evaluation.verdict, evaluation.reasons.join('; ')).toBe('Degraded');
        expect(check(evaluation, 'version')?.message).toMatch(/^version skew: /);
        expect((answer.warnings ?? []).join('\n')).toContain('version skew');
      } else {
        expect(evaluation.verdict, evaluation.reasons.join('; ')).toBe('Healthy');
        expect(check(evaluation, 'version')?.message).toBe(`all members run ${toVersion}`);
        expect(check(evaluation, 'downgrade')?.status).toBe('pass');
      }
    });
  }

  it('after: the members move their storage version to 3.7 and report their quota', async () => {
    await waitForStorageVersion(e2e, toVersion);
    expect(e2e.cluster.binaries()).toEqual(names.map(() => to.etcd));
  });
});
