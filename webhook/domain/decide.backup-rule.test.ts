// The webhook's backup.requiredForChanges, pure: a membership change or an etcd upgrade of a druid
// Etcd needs its evaluation's `backup` check to pass; other rollouts, a hibernation, and any change
// with the rule off are judged as before (a failing backup then only warns, through Degraded).
import { describe, expect, it } from 'vitest';
import { guardConfigSchema } from '../../functions/domain/config.js';
import type { Check } from '../../functions/domain/evaluation-document.js';
import { classifyRequest } from './classify.js';
import { decide } from './decide.js';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';
import { druidImageReview, fixtureReview, parsedRequest, withReplicas, type TestReview } from '../../test/harness/reviews.js';

const NOW = new Date('2026-11-30T02:00:00.000Z');
const match = { namespaces: ['shoot--prod--core'], names: ['etcd-main'] };
const configWith = (requiredForChanges: boolean) =>
  guardConfigSchema.parse({
    maxAgeSeconds: 60,
    targets: [{ name: 'druid', endpoints: ['https://127.0.0.1:2379'], match, backup: { requiredForChanges } }],
  });

const FAILING: Check = { name: 'backup', status: 'fail', message: 'backup failing: BackupReady=False (BackupFailed: x)' };
const UNKNOWN: Check = {
  name: 'backup',
  status: 'warn',
  message: 'backup unknown: the Etcd status has no BackupReady condition yet',
};
const PASSING: Check = { name: 'backup', status: 'pass', message: 'BackupReady=True, last snapshot delta at …' };

function decideOn(review: TestReview, backup: Check | null, requiredForChanges = true) {
  const config = configWith(requiredForChanges);
  const request = parsedRequest(review);
  const classification = classifyRequest(request, config);
  if (classification.kind !== 'needs-evaluation') throw new Error(`not judged: ${JSON.stringify(classification)}`);
  const members = [0, 1, 2].map((index) => makeMember(index, { version: '3.5.21', leader: index === 0 }));
  const failing = backup !== null && backup.status !== 'pass';
  const evaluation = makeEvaluation({
    members,
    evaluatedAt: new Date(NOW.getTime() - 1_000).toISOString(),
    ...(backup === null ? {} : { checks: [backup] }),
    ...(failing ? { verdict: 'Degraded' as const, reasons: [backup.message] } : {}),
  });
  return decide({ request, config, classification, evaluation, now: NOW });
}

const scaleUp = () => fixtureReview('etcd-druid-replicas-3-to-5.json');
const scaleDown = () => withReplicas(fixtureReview('etcd-druid-replicas-3-to-5.json'), 5, 3);
const imageBump = () => druidImageReview('quay.io/coreos/etcd:v3.5.17', 'quay.io/coreos/etcd:v3.5.21');
const otherRollout = () => druidImageReview('quay.io/coreos/etcd:v3.5.21', 'quay.io/coreos/etcd:v3.5.21', true);

describe('backup.requiredForChanges holds back membership changes and etcd upgrades', () => {
  it.each([
    [
      'a scale up on a failing backup',
      scaleUp,
      FAILING,
      /backup check fail: backup failing: BackupReady=False \(BackupFailed: x\); backup\.requiredForChanges holds back a membership change/,
    ],
    ['a scale down on a failing backup', scaleDown, FAILING, /holds back a membership change until the backup check passes/],
    ['a scale up on an unknown backup', scaleUp, UNKNOWN, /backup check warn: backup unknown/],
    ['an etcd image change on a failing backup', imageBump, FAILING, /holds back an etcd upgrade until the backup check passes/],
    [
      'a scale up without any backup check',
      scaleUp,
      null,
      /the evaluation has no backup check \(it is judged for druid targets only\)/,
    ],
  ] as const)('denies %s', (_name, review, backup, message) => {
    const decision = decideOn(review(), backup);
    expect(decision.response.allowed).toBe(false);
    expect(decision.reason).toBe('backup');
    expect(decision.response.status?.message).toMatch(message);
  });

  it.each([
    ['a scale up on a passing backup', scaleUp, PASSING, true],
    ['a rollout that changes no etcd image, on a failing backup', otherRollout, FAILING, true],
    ['a scale up on a failing backup with the rule off (it warns)', scaleUp, FAILING, false],
  ] as const)('allows %s', (_name, review, backup, required) => {
    const decision = decideOn(review(), backup, required);
    expect(decision.response.allowed, decision.response.status?.message).toBe(true);
    if (backup.status !== 'pass') expect(decision.response.warnings?.join(' ')).toContain(backup.message);
  });

  it('lets a hibernation through whatever the backup says (its own exception)', () => {
    const decision = decideOn(fixtureReview('etcd-druid-scale-3-to-0-hibernate.json'), FAILING);
    expect(decision.response.allowed, decision.response.status?.message).toBe(true);
  });
});

describe('an etcd upgrade of a fragmented target (issue 32)', () => {
  const FRAGMENTED: Check = {
    name: 'fragmentation',
    status: 'warn',
    message:
      'member etcd-1 (https://10.0.0.2:2379) DB fragmented: 300.0 MiB of 400.0 MiB free (75%, 100.0 MiB in use); defragment one member at a time, it blocks the member while it runs: etcdctl defrag --endpoints=https://10.0.0.2:2379',
  };

  it('is allowed, suggesting a defrag of the named member first', () => {
    const decision = decideOn(imageBump(), FRAGMENTED, false);
    expect(decision.response.allowed, decision.response.status?.message).toBe(true);
    const warnings = decision.response.warnings ?? [];
    expect(warnings).toContain(
      'etcd-guard: before this etcd upgrade, defragment: etcdctl defrag --endpoints=https://10.0.0.2:2379',
    );
  });

  it('takes only URL characters from the stored message', () => {
    const hostile: Check = { ...FRAGMENTED, message: 'etcdctl defrag --endpoints=https://10.0.0.9:2379;rm -rf /\u001b[31m' };
    const warnings = decideOn(imageBump(), hostile, false).response.warnings ?? [];
    expect(warnings).toContain(
      'etcd-guard: before this etcd upgrade, defragment: etcdctl defrag --endpoints=https://10.0.0.9:2379',
    );
    // The evaluation's own reasons are passed on as they were (clipped); the advice adds only the URL.
    expect(warnings.filter((warning) => warning.includes('before this etcd upgrade'))).toEqual([
      'etcd-guard: before this etcd upgrade, defragment: etcdctl defrag --endpoints=https://10.0.0.9:2379',
    ]);
  });

  it.each([
    ['a scale up', scaleUp],
    ['a rollout that changes no etcd image', otherRollout],
  ] as const)('%s of a fragmented target gets no defrag-first advice', (_name, review) => {
    const decision = decideOn(review(), FRAGMENTED, false);
    expect(decision.response.allowed, decision.response.status?.message).toBe(true);
    expect((decision.response.warnings ?? []).join(' ')).not.toContain('before this etcd upgrade');
  });
});
