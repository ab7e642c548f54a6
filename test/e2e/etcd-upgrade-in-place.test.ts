// Issue 29: an in-place upgrade of a real 3-member etcd from 3.5 (Debian trixie's, from
// scripts/ensure-etcd-3.5.sh) to 3.6 (built from its Go module by scripts/ensure-etcd-go.sh),
// member by member as etcd's upgrade guide does it: stop the member, swap its binary, start it on
// the same data dir. Each step is judged by the real scheduled evaluation and the HTTPS webhook:
// a member down blocks a rollout; a mixed cluster is Degraded with a version-skew warning and the
// 3.6 upgrade gate names the members still below the minimum; once every member runs 3.6 the
// cluster is Healthy, the gate clears and the members report their 3.6 Status fields.
// ETCD_GUARD_ETCD35_BIN_DIR / ETCD_GUARD_ETCD36_BIN_DIR name the binaries' dirs (scripts/test.sh
// sets them); without them the scripts run here (a first build takes minutes).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { MIN_ETCD_FOR_3_6 } from '../../webhook/domain/etcd-upgrade.js';
import { etcdVersion } from '../harness/etcd-cluster.js';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import {
  etcdBinariesFrom,
  evaluationWhen,
  startOnNextVersion,
  waitForStorageVersion,
  type EtcdBinaries,
} from '../harness/etcd-upgrade.js';
import { admissionFixture } from '../harness/reviews.js';

let e2e: EtcdWebhook;
let to: EtcdBinaries;
let fromVersion: string;
let toVersion: string;
/** Member names in index order. */
let names: string[];

beforeAll(async () => {
  const [from, next] = await Promise.all([
    etcdBinariesFrom('ETCD_GUARD_ETCD35_BIN_DIR', ['scripts/ensure-etcd-3.5.sh']),
    etcdBinariesFrom('ETCD_GUARD_ETCD36_BIN_DIR', ['scripts/ensure-etcd-go.sh', '3.6']),
  ]);
  to = next;
  [fromVersion, toVersion] = await Promise.all([etcdVersion(from.etcd), etcdVersion(to.etcd)]);
  expect(fromVersion).toMatch(/^3\.5\./);
  expect(toVersion).toMatch(/^3\.6\./);
  console.log(`in-place upgrade: etcd ${fromVersion} (${from.etcd}) to ${toVersion} (${to.etcd})`);
  // The fixtures' KCPs belong to cluster "prod". etcdctl stays the 3.5 one: it speaks to both.
  e2e = await startEtcdWebhook({ name: 'inplace', target: 'prod', timeout: '2s', webhook: { ready: true }, etcdBinaries: from });
  names = e2e.cluster.members.map((member) => member.name);
}, 20 * 60_000);

afterAll(async () => {
  await e2e?.close();
});

/** The fixture as the apiserver sent it, posted to /validate. */
const validate = (fixture: string) => e2e.webhook.postReview(admissionFixture(fixture));
/** A KCP bump v1.33 → v1.34: kubeadm's etcd moves from 3.5 to 3.6.9. */
const BUMP_TO_3_6 = 'kcp-v1beta2-edit-version.json';
/** A KCP step v1.30 → v1.31 whose kubeadm etcd stays on 3.5. */
const STAYS_ON_3_5 = 'kcp-v1beta1-edit-version.json';

const check = (evaluation: Evaluation, name: string) => evaluation.checks.find((each) => each.name === name);
/** One line per step for the CI log: the verdict, the version check, and the gate's answer to the bump. */
function logStep(step: string, evaluation: Evaluation, bump: { allowed: boolean; status?: { message?: string } }): void {
  const gate = bump.allowed ? 'allowed' : `denied: ${bump.status?.message ?? ''}`;
  console.log(
    `in-place upgrade, ${step}: ${evaluation.verdict}; ${check(evaluation, 'version')?.message ?? ''}; bump to 3.6 ${gate}`,
  );
}
describe('an in-place upgrade of a real etcd from 3.5 to 3.6, judged at each step (issue 29)', () => {
  it('before: every member on 3.5 is Healthy, and the bump to etcd 3.6 is denied naming all of them', async () => {
    const evaluation = await evaluationWhen(e2e, 'a Healthy evaluation', (each) => each.verdict === 'Healthy');
    expect(check(evaluation, 'version')?.message).toBe(`all members run ${fromVersion}`);
    const bump = await validate(BUMP_TO_3_6);
    logStep('before', evaluation, bump);
    expect(bump.allowed).toBe(false);
    const message = bump.status?.message ?? '';
    expect(message).toContain(`every member on ${MIN_ETCD_FOR_3_6} or later before any member moves to 3.6`);
    for (const name of names) expect(message).toContain(`${name} (${fromVersion})`);
    expect((await validate(STAYS_ON_3_5)).allowed).toBe(true);
  });

  for (const index of [0, 1, 2]) {
    it(`member ${index} stopped: its absence blocks a rollout, whatever the etcd it rolls to`, async () => {
      await e2e.cluster.stop(index);
      const name = names[index] ?? '';
      const evaluation = await e2e.scheduledEvaluation();
      expect(evaluation.verdict).not.toBe('Healthy');
      expect(evaluation.reasons.join('; ')).toContain(name);
      logStep(`${name} stopped`, evaluation, await validate(BUMP_TO_3_6));
      for (const fixture of [BUMP_TO_3_6, STAYS_ON_3_5]) {
        const answer = await validate(fixture);
        expect(answer.allowed, fixture).toBe(false);
        expect(answer.status?.message, fixture).toContain(name);
      }
    });

    it(`member ${index} started on 3.6 with its data dir: judged by the versions the members now report`, async () => {
      const { evaluation, upgraded, below } = await startOnNextVersion(e2e, {
        index,
        names,
        etcd: to.etcd,
        fromVersion,
        toVersion,
      });
      const bump = await validate(BUMP_TO_3_6);
      logStep(`${names[index]} on ${toVersion}`, evaluation, bump);
      if (below.length > 0) {
        // A mixed cluster: Degraded by the skew, and the gate names only those still on 3.5.
        expect(evaluation.verdict, evaluation.reasons.join('; ')).toBe('Degraded');
        const skew = check(evaluation, 'version');
        expect(skew?.status).toBe('warn');
        expect(skew?.message).toMatch(/^version skew: /);
        for (const name of names) {
          const runs = new RegExp(`(^|[:;,] )${name}(, [^;]+)? run ${upgraded.includes(name) ? toVersion : fromVersion}`);
          expect(skew?.message, name).toMatch(runs);
        }
        expect(bump.allowed).toBe(false);
        const message = bump.status?.message ?? '';
        for (const name of below) expect(message).toContain(`${name} (${fromVersion})`);
        for (const name of upgraded) expect(message).not.toContain(`${name} (`);
        // A rollout that stays on 3.5 is allowed, with the skew among its warnings.
        const stays = await validate(STAYS_ON_3_5);
        expect(stays.allowed, stays.status?.message).toBe(true);
        expect((stays.warnings ?? []).join('\n')).toContain('version skew');
      } else {
        // Every member on 3.6: Healthy, and the bump is judged on health alone.
        expect(evaluation.verdict, evaluation.reasons.join('; ')).toBe('Healthy');
        expect(check(evaluation, 'version')?.message).toBe(`all members run ${toVersion}`);
        expect(bump.allowed, bump.status?.message).toBe(true);
        expect(check(evaluation, 'db-size')?.message).toContain('(reported by the member)');
      }
    });
  }

  it('after: the upgraded members move their storage version to 3.6 and report their quota', async () => {
    await waitForStorageVersion(e2e, toVersion);
    expect(e2e.cluster.binaries()).toEqual(names.map(() => to.etcd));
  });
});
