// The consistency check, pure: members' HashKV at one revision compared. Equal hashes pass; a
// minority hash fails naming the diverging member; no majority fails naming every member; a member
// not hashed (down, hung, compacted elsewhere) leaves it not judged (a warning), never a pass.
import { describe, expect, it } from 'vitest';
import { compareMemberHashes, type MemberHash } from './consistency.js';
import { consistencyOf, evaluateCluster } from '../evaluate-cluster.js';
import type { CarriedConsistency, EvaluationInput } from '../input.js';
import { consistencyHashes, parseGuardConfig } from '../../config.js';
import type { Check } from '../../evaluation-document.js';
import { addsMember } from '../../kinds/kind.js';
import { probedThree } from '../../../../test/harness/probe-input.js';

const hashed = (who: string, hash: string, compactRevision = 5, revision = 40): MemberHash => ({
  who,
  hash: { revision, hash, compactRevision },
});
const unknown = (who: string, why: string): MemberHash => ({ who, unknown: why });

describe('compareMemberHashes: who agrees at one revision', () => {
  it.each<[string, MemberHash[], 'pass' | 'warn' | 'fail', string]>([
    [
      'passes when every voting member has the same hash',
      [hashed('a', '111'), hashed('b', '111'), hashed('c', '111')],
      'pass',
      '3 voting members agree at revision 40 (compact revision 5): hash 111',
    ],
    [
      'fails naming the one member whose hash differs from the majority',
      [hashed('a', '111'), hashed('b', '222'), hashed('c', '111')],
      'fail',
      'data diverges at revision 40 (compact revision 5): member b hash 222 differs from hash 111 of a, c',
    ],
    [
      'fails naming every member when no hash has a majority',
      [hashed('a', '111'), hashed('b', '222')],
      'fail',
      'data diverges at revision 40 (compact revision 5), no majority: a hash 111; b hash 222',
    ],
    [
      'fails on a mismatch even when another member is unknown, and names that one as not compared',
      [hashed('a', '111'), hashed('b', '222'), hashed('c', '111'), unknown('d', 'connection refused')],
      'fail',
      'data diverges at revision 40 (compact revision 5): member b hash 222 differs from hash 111 of a, c; not compared: member d: connection refused',
    ],
    [
      'is not judged (warns) when a member is down, naming it, and says who agrees',
      [hashed('a', '111'), unknown('b', 'connection refused'), hashed('c', '111')],
      'warn',
      'consistency not judged: member b: connection refused; a, c agree at revision 40 (compact revision 5)',
    ],
    [
      'is not judged when only one member answered',
      [hashed('a', '111'), unknown('b', 'timed out'), unknown('c', 'timed out')],
      'warn',
      'consistency not judged: member b: timed out; member c: timed out',
    ],
    [
      'does not compare a member that had compacted to another revision when it hashed',
      [hashed('a', '111', 5), hashed('b', '999', 9), hashed('c', '111', 5)],
      'warn',
      'consistency not judged: member b: hashed at revision 40 (compact revision 9), the others at revision 40 (compact revision 5): not comparable; a, c agree',
    ],
    [
      'does not compare a member that hashed another revision (its latest, after a compaction)',
      [hashed('a', '111', 5, 40), hashed('b', '999', 5, 41), hashed('c', '111', 5, 40)],
      'warn',
      'member b: hashed at revision 41 (compact revision 5), the others at revision 40 (compact revision 5): not comparable',
    ],
    [
      'says a never-compacted store is (etcd reports compact revision -1)',
      [hashed('a', '111', -1), hashed('b', '111', -1)],
      'pass',
      '2 voting members agree at revision 40 (never compacted): hash 111',
    ],
    [
      'passes a single-member cluster: nothing to compare',
      [hashed('a', '111')],
      'pass',
      'the only voting member hashed at revision 40 (compact revision 5): nothing to compare',
    ],
    [
      'is not judged when no member answered',
      [unknown('a', 'timed out'), unknown('b', 'timed out')],
      'warn',
      'consistency not judged: member a: timed out; member b: timed out',
    ],
  ])('%s', (_name, entries, status, message) => {
    const result = compareMemberHashes(entries);
    const found = result.findings.find((finding) => finding.status === 'fail') ?? result.findings[0];
    expect(found?.status ?? 'pass').toBe(status);
    expect(found?.message ?? result.passMessage).toContain(message);
  });
});

describe('consistency check in an evaluation', () => {
  const withHashes = (hashes: (string | null)[], revision: number | null = 40): EvaluationInput => {
    const input = probedThree();
    input.probes.forEach((probe, index) => {
      const hash = hashes[index];
      if (hash === null || hash === undefined) return;
      probe.hashKV = { ok: true, value: { revision: 40, hash, compactRevision: 1 } };
    });
    return { ...input, consistency: { revision } };
  };
  const checkOf = (input: EvaluationInput) => {
    const evaluation = evaluateCluster(input);
    return { evaluation, check: evaluation.checks.find((check) => check.name === 'consistency') };
  };

  it('is absent when the target does not turn it on', () => {
    expect(checkOf(probedThree()).check).toBeUndefined();
  });

  it('passes equal hashes and keeps the verdict Healthy', () => {
    const { evaluation, check } = checkOf(withHashes(['7', '7', '7']));
    expect(check).toEqual({
      name: 'consistency',
      status: 'pass',
      message: '3 voting members agree at revision 40 (compact revision 1): hash 7',
    });
    expect(evaluation.verdict).toBe('Healthy');
  });

  it('fails a diverging member by name and makes the verdict Unhealthy (corruption holds changes back)', () => {
    const { evaluation, check } = checkOf(withHashes(['7', '8', '7']));
    expect(check?.status).toBe('fail');
    expect(check?.message).toBe(
      'data diverges at revision 40 (compact revision 1): member etcd-2 (https://10.0.0.2:2379) hash 8 differs from hash 7 of etcd-1 (https://10.0.0.1:2379), etcd-3 (https://10.0.0.3:2379)',
    );
    expect(evaluation.verdict).toBe('Unhealthy');
    expect(evaluation.reasons).toContain(check?.message);
  });

  it('a member whose HashKV failed is unknown, naming the error; a member never hashed names why', () => {
    const input = withHashes(['7', null, '7']);
    const second = input.probes[1];
    if (second === undefined) throw new Error('no probe');
    second.hashKV = { ok: false, kind: 'timeout', error: 'https://10.0.0.2:2379: timed out after 2000 ms' };
    const { evaluation, check } = checkOf(input);
    expect(check?.status).toBe('warn');
    expect(check?.message).toContain('member etcd-2 (https://10.0.0.2:2379): https://10.0.0.2:2379: timed out after 2000 ms');
    expect(evaluation.verdict).toBe('Degraded');
    expect(checkOf(withHashes(['7', null, '7'])).check?.message).toContain('member etcd-2 (https://10.0.0.2:2379): not hashed');
  });

  it('is not judged without a common revision', () => {
    expect(checkOf(withHashes([null, null, null], null)).check).toEqual({
      name: 'consistency',
      status: 'warn',
      message: 'consistency not judged: no voting member reported its revision',
    });
  });
});

describe('where consistency hashes (consistency: scheduled, scaleUps)', () => {
  const target = (consistency: unknown) =>
    parseGuardConfig({ targets: [{ name: 'prod', endpoints: ['https://10.0.0.1:2379'], consistency }] }, 'test').targets[0];

  it.each<[string, unknown, { scheduled: boolean; admission: boolean; add: boolean }]>([
    [
      'true is shorthand for the scheduled run only: no inline evaluation hashes',
      true,
      { scheduled: true, admission: false, add: false },
    ],
    ['false is off', false, { scheduled: false, admission: false, add: false }],
    ['scheduled alone leaves admission without HashKV', { scheduled: true }, { scheduled: true, admission: false, add: false }],
    [
      'scaleUps hashes only the inline evaluation of a change that adds a member',
      { scaleUps: true },
      { scheduled: false, admission: false, add: true },
    ],
    ['both', { scheduled: true, scaleUps: true }, { scheduled: true, admission: false, add: true }],
    ['hashing nowhere is off', { scheduled: false, scaleUps: false }, { scheduled: false, admission: false, add: false }],
  ])('%s', (_name, consistency, expected) => {
    const setting = target(consistency)?.consistency;
    expect({
      scheduled: consistencyHashes(setting, 'scheduled'),
      admission: consistencyHashes(setting, 'admission'),
      add: consistencyHashes(setting, 'admission-add'),
    }).toEqual(expected);
    if (expected.scheduled || expected.add) expect(setting?.maxAge).toBe(3_600_000);
    else expect(setting).toBeUndefined();
  });

  it.each<[string, unknown, string]>([
    [
      'an age outside 1m..168h',
      { scheduled: true, maxAge: '10s' },
      'targets.0.consistency.maxAge: invalid consistency age "10s"',
    ],
    ['an unknown place', { inline: true }, 'targets.0.consistency'],
    ['a string', 'yes', 'targets.0.consistency'],
  ])('refuses %s, naming the key', (_name, consistency, message) => {
    expect(() => target(consistency)).toThrow(message);
  });

  it.each<[string, { kind: string }, boolean]>([
    ['a scale-up', { kind: 'scale-up' }, true],
    ['a rollout (its new member joins first)', { kind: 'rollout' }, true],
    ['a scale-down', { kind: 'scale-down' }, false],
    ['a member exit', { kind: 'machine-delete' }, false],
    ['a move to another target', { kind: 'retarget' }, false],
  ])('%s: adds a member is %s', (_name, change, adds) => {
    expect(addsMember(change)).toBe(adds);
  });
});

describe('an evaluation that does not hash carries the stored consistency result', () => {
  const EVALUATED_AT = '2026-01-02T03:04:05.000Z';
  const before = (ms: number) => new Date(Date.parse(EVALUATED_AT) - ms).toISOString();
  const MINUTE = 60_000;
  const carriedInto = (carried: CarriedConsistency | null, maxAgeMs = 60 * MINUTE) => {
    const evaluation = evaluateCluster({ ...probedThree(), consistency: { carried, maxAgeMs } });
    return { evaluation, check: evaluation.checks.find((check) => check.name === 'consistency') };
  };
  const DIVERGED = 'data diverges at revision 40 (compact revision 1): member etcd-2 (https://10.0.0.2:2379) hash 8 differs';

  it.each<[string, CarriedConsistency | null, 'Healthy' | 'Degraded' | 'Unhealthy', Check | undefined]>([
    ['nothing stored: the check is absent', null, 'Healthy', undefined],
    [
      'a recent pass stays a pass, dated',
      { status: 'pass', message: '3 voting members agree', measuredAt: before(10 * MINUTE) },
      'Healthy',
      {
        name: 'consistency',
        status: 'pass',
        message: `carried (hashed 10m earlier, at ${before(10 * MINUTE)}): 3 voting members agree`,
        measuredAt: before(10 * MINUTE),
      },
    ],
    [
      'a recent divergence still fails: the next inline evaluation does not erase it',
      { status: 'fail', message: DIVERGED, measuredAt: before(10 * MINUTE) },
      'Unhealthy',
      {
        name: 'consistency',
        status: 'fail',
        message: `carried (hashed 10m earlier, at ${before(10 * MINUTE)}): ${DIVERGED}`,
        measuredAt: before(10 * MINUTE),
      },
    ],
    [
      'a divergence older than maxAge still fails: diverged data do not mend by themselves',
      { status: 'fail', message: DIVERGED, measuredAt: before(180 * MINUTE) },
      'Unhealthy',
      {
        name: 'consistency',
        status: 'fail',
        message: `carried (hashed 180m earlier, at ${before(180 * MINUTE)}; older than 60m, kept until a hash agrees): ${DIVERGED}`,
        measuredAt: before(180 * MINUTE),
      },
    ],
    [
      'a pass older than maxAge says nothing about now: absent',
      { status: 'pass', message: 'agree', measuredAt: before(61 * MINUTE) },
      'Healthy',
      undefined,
    ],
    [
      'a recent not-judged warning stays a warning',
      { status: 'warn', message: 'consistency not judged: member b: timed out', measuredAt: before(MINUTE) },
      'Degraded',
      {
        name: 'consistency',
        status: 'warn',
        message: `carried (hashed 60s earlier, at ${before(MINUTE)}): consistency not judged: member b: timed out`,
        measuredAt: before(MINUTE),
      },
    ],
    [
      'a stale not-judged warning is absent',
      { status: 'warn', message: 'not judged', measuredAt: before(120 * MINUTE) },
      'Healthy',
      undefined,
    ],
  ])('%s', (_name, carried, verdict, expected) => {
    const { evaluation, check } = carriedInto(carried);
    expect(check).toEqual(expected);
    expect(evaluation.verdict).toBe(verdict);
  });

  it('carried again, it keeps the time of its hash and one "carried" prefix', () => {
    const hashedAt = before(30 * MINUTE);
    const input = probedThree({}, hashedAt);
    input.probes.forEach((probe, index) => {
      probe.hashKV = { ok: true, value: { revision: 40, hash: index === 1 ? '8' : '7', compactRevision: 1 } };
    });
    const scheduled = evaluateCluster({ ...input, consistency: { revision: 40 } });
    const inline = evaluateCluster({
      ...probedThree({}, before(20 * MINUTE)),
      consistency: { carried: consistencyOf(scheduled), maxAgeMs: 60 * MINUTE },
    });
    const next = evaluateCluster({
      ...probedThree({}, EVALUATED_AT),
      consistency: { carried: consistencyOf(inline), maxAgeMs: 60 * MINUTE },
    });
    const check = next.checks.find((candidate) => candidate.name === 'consistency');
    expect(check?.measuredAt).toBe(hashedAt);
    expect(check?.message).toBe(
      `carried (hashed 30m earlier, at ${hashedAt}): ${DIVERGED} from hash 7 of etcd-1 (https://10.0.0.1:2379), etcd-3 (https://10.0.0.3:2379)`,
    );
    expect(next.verdict).toBe('Unhealthy');
    expect(scheduled.checks.find((candidate) => candidate.name === 'consistency')?.measuredAt).toBeUndefined();
  });
});
