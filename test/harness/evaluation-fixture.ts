// A schema-valid Evaluation for tests. Every test that needs "some evaluation" starts here and
// overrides only what it is about, so a schema change breaks one builder, not fifty tests.
import {
  SCHEMA_VERSION,
  evaluationSchema,
  quorumOf,
  type Check,
  type Evaluation,
  type MemberReport,
} from '../../functions/domain/evaluation-document.js';

/**
 * A healthy voting member; `index` makes ids, names and ports distinct. It runs the etcd 3.5 patch
 * the 3.6 upgrade gate requires (webhook/domain/etcd-upgrade.ts), so a rollout to a Kubernetes
 * whose etcd is 3.6 is judged on health alone unless a test says otherwise.
 */
export function makeMember(index: number, overrides: Partial<MemberReport> = {}): MemberReport {
  return {
    id: String(1000 + index),
    name: `etcd-${index}`,
    endpoint: `https://127.0.0.1:${2379 + index * 10}`,
    healthy: true,
    leader: index === 0,
    learner: false,
    version: '3.5.32',
    dbSizeBytes: 20_480,
    dbSizeInUseBytes: 16_384,
    raftIndex: 100,
    raftTerm: 2,
    latencyMs: 3,
    alarms: [],
    ...overrides,
  };
}

/** `count` healthy voting members, member 0 the leader. */
export function makeMembers(count: number): MemberReport[] {
  return Array.from({ length: count }, (_unused, index) => makeMember(index));
}

const HEALTHY_CHECKS: Check[] = [
  { name: 'reachable', status: 'pass', message: 'all voting members answered' },
  { name: 'leader', status: 'pass', message: 'all members agree on one leader' },
  { name: 'alarms', status: 'pass', message: 'no alarms' },
];

/**
 * A valid 3-member Healthy evaluation, with overrides applied on top. When `verdict` is
 * overridden and `passed` is not, `passed` follows the verdict so the result stays valid.
 * The result is checked against the schema: a fixture that lies would make tests lie.
 */
export function makeEvaluation(overrides: Partial<Evaluation> = {}): Evaluation {
  const members = overrides.members ?? makeMembers(3);
  const voting = members.filter((member) => !member.learner);
  const healthyVoting = voting.filter((member) => member.healthy).length;
  const quorum = quorumOf(voting.length);
  const leader = voting.find((member) => member.leader);
  const verdict = overrides.verdict ?? 'Healthy';
  const evaluation: Evaluation = {
    schemaVersion: SCHEMA_VERSION,
    target: 'prod',
    evaluatedAt: '2026-01-01T00:00:00.000Z',
    durationMs: 12,
    reasons: [],
    checks: HEALTHY_CHECKS,
    cluster: {
      leaderId: leader?.id ?? null,
      votingMembers: voting.length,
      learners: members.length - voting.length,
      healthyVoting,
      quorum,
      faultTolerance: Math.max(0, healthyVoting - quorum),
    },
    ...overrides,
    members,
    verdict,
    passed: overrides.passed ?? verdict !== 'Unhealthy',
  };
  return evaluationSchema.parse(evaluation);
}

/** An evaluation stamped `secondsAfterEpoch` seconds after a fixed instant: ordering made easy. */
export function makeEvaluationAt(secondsAfterEpoch: number, overrides: Partial<Evaluation> = {}): Evaluation {
  const instant = new Date(Date.parse('2026-01-01T00:00:00.000Z') + secondsAfterEpoch * 1000);
  return makeEvaluation({ ...overrides, evaluatedAt: instant.toISOString() });
}

/**
 * An evaluation of `target` made `offsetMs` from the real now, as a writer with that clock stamps
 * it: Healthy, or Unhealthy with one of three members past its deadline.
 */
export function stampedEvaluation(target: string, offsetMs: number, verdict: 'Healthy' | 'Unhealthy'): Evaluation {
  const evaluatedAt = new Date(Date.now() + offsetMs).toISOString();
  if (verdict === 'Healthy') return makeEvaluation({ target, evaluatedAt });
  return makeEvaluation({
    target,
    evaluatedAt,
    verdict: 'Unhealthy',
    passed: false,
    members: [makeMember(0), makeMember(1), makeMember(2, { healthy: false, error: 'deadline exceeded after 2000ms' })],
    reasons: ['member etcd-2 (https://127.0.0.1:2399) unreachable: deadline exceeded after 2000ms'],
    checks: [{ name: 'reachable', status: 'fail', message: 'member etcd-2 unreachable' }],
  });
}
