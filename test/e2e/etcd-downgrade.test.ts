// etcd 3.6's downgrade (`etcdctl downgrade enable 3.5`) as etcd-guard sees it: every 3.6 member
// reports it in Status `downgradeInfo` (functions/adapters/etcd-status-extras.ts), the `downgrade`
// check warns naming the target, and the webhook denies the changes that add a member until it
// completes or is cancelled, while a scale down is judged as usual. First on built inputs, then on
// a real 3-member etcd 3.6 (ETCD_GUARD_ETCD36_BIN_DIR, which scripts/test.sh sets; without it
// scripts/ensure-etcd-go.sh 3.6 runs here).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardConfigSchema } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { evaluateCluster } from '../../functions/domain/judgement/evaluate-cluster.js';
import type { EndpointProbe, MemberStatus } from '../../functions/ports/etcd-probe.js';
import { classifyRequest } from '../../webhook/domain/classify.js';
import { decide } from '../../webhook/domain/decide.js';
import { parseAdmissionReview } from '../../webhook/domain/review.js';
import { etcdVersion } from '../harness/etcd-cluster.js';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import { makeEvaluation, makeMember } from '../harness/evaluation-fixture.js';
import { etcdBinariesFrom, evaluationWhen } from '../harness/etcd-upgrade.js';
import { admissionFixture } from '../harness/reviews.js';

const SCALE_UP = 'kcp-scale-up-3-to-5.json';
const SCALE_DOWN = 'kcp-scale-down-3-to-2.json';
/** A KCP rollout v1.30 → v1.31 (etcd stays on 3.5, so the upgrade gate has nothing to say). */
const ROLLOUT = 'kcp-v1beta1-edit-version.json';

type Downgrade = MemberStatus['downgrade'];

/** Three members answering every probe, each reporting `downgrades[i]` (undefined: an etcd before 3.6). */
function evaluateWith(...downgrades: Downgrade[]): Evaluation {
  const endpoints = downgrades.map((_unused, index) => `https://10.0.0.${index + 1}:2379`);
  const probes: EndpointProbe[] = downgrades.map((downgrade, index) => ({
    endpoint: endpoints[index] ?? '',
    status: {
      ok: true,
      value: {
        memberId: String(index + 1),
        leaderId: '1',
        raftIndex: 100,
        raftTerm: 2,
        dbSizeBytes: 20_480,
        dbSizeInUseBytes: 16_384,
        version: downgrade === undefined ? '3.5.21' : '3.6.16',
        isLearner: false,
        ...(downgrade === undefined ? {} : { downgrade }),
      },
    },
    alarms: { ok: true, value: [] },
    linearizableRead: { ok: true, value: null },
    latencyMs: 2,
  }));
  return evaluateCluster({
    target: 'prod',
    endpoints,
    memberList: {
      ok: true,
      value: endpoints.map((endpoint, index) => ({
        id: String(index + 1),
        name: `m-${index}`,
        peerUrls: [],
        clientUrls: [endpoint],
        isLearner: false,
      })),
    },
    probes,
    quotaBackendBytes: 2 * 1024 ** 3,
    evaluatedAt: '2026-12-02T00:00:00.000Z',
    durationMs: 1,
  });
}

const OFF = { enabled: false, targetVersion: '' };
const TO_3_5 = { enabled: true, targetVersion: '3.5.0' };

describe('the downgrade check', () => {
  it.each<[string, Downgrade[], { status: string; message: string | RegExp } | null]>([
    ['does not apply when no member reports a downgrade (etcd before 3.6)', [undefined, undefined, undefined], null],
    [
      'passes when every member reports none',
      [OFF, OFF, OFF],
      { status: 'pass', message: 'no downgrade enabled (3 of 3 members report)' },
    ],
    [
      'warns naming the target and every member that reports it',
      [TO_3_5, TO_3_5, TO_3_5],
      {
        status: 'warn',
        message:
          'etcd downgrade to 3.5.0 enabled, reported by m-0, m-1, m-2: changes that add a member wait until it completes or is cancelled (etcdctl downgrade cancel)',
      },
    ],
    [
      'warns when one member has applied it before the others',
      [OFF, TO_3_5, OFF],
      { status: 'warn', message: /^etcd downgrade to 3\.5\.0 enabled, reported by m-1: / },
    ],
    [
      'counts only the members that report, in a mixed 3.5 / 3.6 cluster',
      [OFF, undefined, undefined],
      { status: 'pass', message: 'no downgrade enabled (1 of 3 members report)' },
    ],
  ])('%s', (_name, downgrades, expected) => {
    const evaluation = evaluateWith(...downgrades);
    const check = evaluation.checks.find((each) => each.name === 'downgrade');
    if (expected === null) {
      expect(check).toBeUndefined();
      expect(evaluation.members.every((member) => member.downgrade === undefined)).toBe(true);
      return;
    }
    expect(check?.status).toBe(expected.status);
    expect(check?.message).toMatch(expected.message);
    downgrades.forEach((downgrade, index) => expect(evaluation.members[index]?.downgrade).toEqual(downgrade));
    if (expected.status === 'warn') {
      // A downgrade in progress is Degraded, not Unhealthy: the cluster serves meanwhile.
      expect(evaluation.verdict, evaluation.reasons.join('; ')).toBe('Degraded');
      expect(evaluation.reasons).toContain(check?.message);
    }
  });
});

const NOW = new Date('2026-12-02T00:00:10.000Z');
const CONFIG = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [{ name: 'prod', endpoints: ['https://127.0.0.1:12379'], match: {} }],
});

function decideFixture(fixture: string, evaluation: Evaluation) {
  const parsed = parseAdmissionReview(admissionFixture(fixture) as unknown);
  if (!parsed.ok) throw new Error(parsed.message);
  const classification = classifyRequest(parsed.review.request, CONFIG);
  if (classification.kind !== 'needs-evaluation') throw new Error(`not judged: ${fixture}`);
  return decide({ request: parsed.review.request, config: CONFIG, classification, evaluation, now: NOW });
}

describe('membership changes while a downgrade is enabled', () => {
  const at = (downgrade: Downgrade) =>
    makeEvaluation({
      evaluatedAt: new Date(NOW.getTime() - 500).toISOString(),
      verdict: downgrade?.enabled === true ? 'Degraded' : 'Healthy',
      members: [0, 1, 2].map((index) =>
        makeMember(index, { version: '3.6.16', ...(downgrade === undefined ? {} : { downgrade }) }),
      ),
    });
  it.each<[string, string, Downgrade, string | null]>([
    ['denies a scale up', SCALE_UP, TO_3_5, 'etcd-downgrade'],
    ['denies a rollout (it adds a member before removing one)', ROLLOUT, TO_3_5, 'etcd-downgrade'],
    ['allows a scale down (it adds no etcd)', SCALE_DOWN, TO_3_5, null],
    ['allows a scale up once the downgrade is off', SCALE_UP, OFF, null],
    ['allows a rollout once the downgrade is off', ROLLOUT, OFF, null],
    ['allows a scale up on members that report nothing (before 3.6)', SCALE_UP, undefined, null],
  ])('%s', (_name, fixture, downgrade, denied) => {
    const decision = decideFixture(fixture, at(downgrade));
    if (denied === null) {
      expect(decision.response.allowed, decision.response.status?.message).toBe(true);
      return;
    }
    expect(decision.response.allowed).toBe(false);
    expect(decision.reason).toBe(denied);
    expect(decision.response.status?.message).toContain(
      'etcd has a downgrade to 3.5.0 enabled (etcdctl downgrade enable): a member added now would hold it up; add members once it completes or is cancelled;',
    );
    expect(decision.response.status?.message).toMatch(/to override, annotate with etcd-guard\.io\/override/);
  });
});

describe('a real etcd 3.6 with a downgrade to 3.5 enabled, then cancelled', () => {
  let e2e: EtcdWebhook;
  const validate = (fixture: string) => e2e.webhook.postReview(admissionFixture(fixture));
  const downgradeCheck = (evaluation: Evaluation) => evaluation.checks.find((check) => check.name === 'downgrade');

  beforeAll(async () => {
    const binaries = await etcdBinariesFrom('ETCD_GUARD_ETCD36_BIN_DIR', ['scripts/ensure-etcd-go.sh', '3.6']);
    const version = await etcdVersion(binaries.etcd);
    expect(version).toMatch(/^3\.6\./);
    console.log(`downgrade: etcd ${version} (${binaries.etcd})`);
    // match {}: the /scale fixtures carry no labels, and a parent read is not what this is about.
    e2e = await startEtcdWebhook({
      name: 'downgrade',
      target: 'prod',
      timeout: '2s',
      match: {},
      webhook: { ready: true },
      etcdBinaries: binaries,
    });
  }, 20 * 60_000);

  afterAll(async () => {
    await e2e?.close();
  });

  it('before: Healthy, the check passes on all three members, and a scale up is allowed', async () => {
    const evaluation = await evaluationWhen(e2e, 'a Healthy evaluation', (each) => each.verdict === 'Healthy');
    expect(downgradeCheck(evaluation)).toEqual({
      name: 'downgrade',
      status: 'pass',
      message: 'no downgrade enabled (3 of 3 members report)',
    });
    for (const member of evaluation.members) expect(member.downgrade).toEqual(OFF);
    const answer = await validate(SCALE_UP);
    expect(answer.allowed, answer.status?.message).toBe(true);
  });

  it('downgrade enable 3.5: every member reports it, Degraded, and only the changes that add a member are denied', async () => {
    const validated = await e2e.cluster.etcdctl(['downgrade', 'validate', '3.5']);
    expect(validated.code, validated.stderr).toBe(0);
    expect(validated.stdout).toContain('Downgrade validate success');
    const enabled = await e2e.cluster.etcdctl(['downgrade', 'enable', '3.5']);
    expect(enabled.code, enabled.stderr).toBe(0);
    const evaluation = await evaluationWhen(e2e, 'every member to report the downgrade', (each) =>
      each.members.every((member) => member.downgrade?.enabled === true),
    );
    const names = evaluation.members.map((member) => member.name);
    for (const member of evaluation.members) expect(member.downgrade).toEqual(TO_3_5);
    expect(evaluation.verdict, evaluation.reasons.join('; ')).not.toBe('Unhealthy');
    const check = downgradeCheck(evaluation);
    expect(check?.status).toBe('warn');
    expect(check?.message).toContain(`etcd downgrade to 3.5.0 enabled, reported by ${names.join(', ')}: `);
    for (const fixture of [SCALE_UP, ROLLOUT]) {
      const answer = await validate(fixture);
      console.log(`downgrade: ${fixture}: ${answer.allowed ? 'allowed' : `denied: ${answer.status?.message ?? ''}`}`);
      expect(answer.allowed, fixture).toBe(false);
      expect(answer.status?.message, fixture).toContain('etcd has a downgrade to 3.5.0 enabled (etcdctl downgrade enable)');
    }
    const shrink = await validate(SCALE_DOWN);
    expect(shrink.allowed, shrink.status?.message).toBe(true);
    expect((shrink.warnings ?? []).join('\n')).toContain('etcd downgrade to 3.5.0 enabled');
  });

  it('downgrade cancel: the members report none again, Healthy, and a scale up is allowed', async () => {
    const cancelled = await e2e.cluster.etcdctl(['downgrade', 'cancel']);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    const evaluation = await evaluationWhen(
      e2e,
      'a Healthy evaluation without a downgrade',
      (each) => each.verdict === 'Healthy',
    );
    expect(downgradeCheck(evaluation)?.status).toBe('pass');
    for (const member of evaluation.members) expect(member.downgrade).toEqual(OFF);
    const answer = await validate(SCALE_UP);
    expect(answer.allowed, answer.status?.message).toBe(true);
  });
});
