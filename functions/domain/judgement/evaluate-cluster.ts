// The judgement: turns what the probes saw (member list, per-member status, alarms, a
// linearizable read, and optionally the control-plane Node inventory) into an Evaluation.
// Pure: no I/O, no clock; the adapters hand in plain data, so every rule is table-testable.
import {
  CHECK_NAMES,
  type Check,
  type CheckName,
  type CheckStatus,
  type Evaluation,
  FORMAT_REVISION,
  type MemberReport,
  SCHEMA_VERSION,
  verdictFromChecks,
} from '../evaluation-document.js';
import type { CheckResult } from './check.js';
import { CHECKS } from './checks/registry.js';
import { type ClusterView, type JudgedMember, clusterView, firstError, isHealthy, statusOf } from './cluster-view.js';
import type { CarriedConsistency, EvaluationInput } from './input.js';

/** When a stored evaluation saw each learner first (member id → RFC 3339), to carry into the next. */
export function learnerSightings(previous: Pick<Evaluation, 'members'> | null): Record<string, string> {
  const sightings: Record<string, string> = {};
  for (const member of previous?.members ?? []) {
    if (member.learner && member.learnerSince !== undefined) sightings[member.id] = member.learnerSince;
  }
  return sightings;
}

/** The stored evaluation's leader's raft term and its time, for the leader-changes check; null without a leader. */
export function leaderTermOf(
  previous: Pick<Evaluation, 'members' | 'evaluatedAt'> | null,
): { term: number; evaluatedAt: string } | null {
  const term = previous?.members.find((member) => member.leader)?.raftTerm;
  return previous === null || term === undefined || term === null ? null : { term, evaluatedAt: previous.evaluatedAt };
}

/**
 * The stored evaluation's consistency result, to carry into an evaluation that does not hash:
 * dated by its own measuredAt when it was itself carried, else by that evaluation's time.
 */
export function consistencyOf(previous: Pick<Evaluation, 'checks' | 'evaluatedAt'> | null): CarriedConsistency | null {
  const check = previous?.checks.find((candidate) => candidate.name === 'consistency');
  if (previous === null || check === undefined) return null;
  return { status: check.status, message: check.message, measuredAt: check.measuredAt ?? previous.evaluatedAt };
}

export function checkFrom(name: CheckName, result: CheckResult): Check {
  const dated = result.measuredAt === undefined ? {} : { measuredAt: result.measuredAt };
  if (result.findings.length > 0) {
    const status: CheckStatus = result.findings.some((finding) => finding.status === 'fail') ? 'fail' : 'warn';
    return { name, status, message: result.findings.map((finding) => finding.message).join('; '), ...dated };
  }
  return { name, status: 'pass', message: result.passMessage, ...dated };
}

export function memberReport(member: JudgedMember, view: ClusterView): MemberReport {
  const status = statusOf(member);
  const error = firstError(member);
  const report: MemberReport = {
    id: member.id,
    name: member.name,
    endpoint: member.endpoint,
    healthy: isHealthy(member),
    leader: view.leader.id !== null && member.id === view.leader.id,
    learner: member.learner,
    version: status?.version ?? null,
    dbSizeBytes: status?.dbSizeBytes ?? null,
    dbSizeInUseBytes: status?.dbSizeInUseBytes ?? null,
    raftIndex: status?.raftIndex ?? null,
    raftTerm: status?.raftTerm ?? null,
    latencyMs: member.probe?.latencyMs ?? null,
    alarms: [...(view.alarmsByMember.get(member.id) ?? [])],
  };
  const join = view.joins.get(member.id);
  if (join !== undefined) report.learnerSince = join.since;
  if (status?.downgrade !== undefined) report.downgrade = { ...status.downgrade };
  if (error !== undefined) report.error = error;
  return report;
}

export function evaluateCluster(input: EvaluationInput): Evaluation {
  const view = clusterView(input);
  const results = CHECK_NAMES.flatMap((name) => {
    const result = CHECKS[name](view);
    return result === null ? [] : [{ name, result }];
  });
  const checks = results.map(({ name, result }) => checkFrom(name, result));
  const verdict = verdictFromChecks(checks);
  const findings = results.flatMap(({ result }) => result.findings);
  const reasons = [
    ...findings.filter((finding) => finding.status === 'fail'),
    ...findings.filter((finding) => finding.status === 'warn'),
  ].map((finding) => finding.message);
  return {
    schemaVersion: SCHEMA_VERSION,
    formatRevision: FORMAT_REVISION,
    target: input.target,
    evaluatedAt: input.evaluatedAt,
    durationMs: input.durationMs,
    verdict,
    passed: verdict !== 'Unhealthy',
    reasons,
    cluster: {
      leaderId: view.leader.id,
      votingMembers: view.voting.length,
      learners: view.learners.length,
      healthyVoting: view.healthyVoting.length,
      quorum: view.quorum,
      // Never negative: 0 once quorum is lost, which the quorum check reports as such.
      faultTolerance: Math.max(0, view.healthyVoting.length - view.quorum),
    },
    members: view.members.map((member) => memberReport(member, view)),
    checks,
    ...lastMembershipOf(view, input),
    ...clusterIdPinOf(view, input),
  };
}

/**
 * A pinning target's pin: the stored one, kept also when this evaluation answers for another
 * cluster (that is refused, not re-pinned); else, on its first evaluation, the cluster it saw. None
 * when the stored evaluation could not be read (the store keeps the stored pin on write).
 */
function clusterIdPinOf(view: ClusterView, input: EvaluationInput): Pick<Evaluation, 'clusterIdPin'> {
  const pinned = input.clusterIdPin?.pinned;
  if (pinned === undefined || pinned === 'unreadable') return {};
  if (pinned !== null) return { clusterIdPin: pinned };
  return view.agreed === null ? {} : { clusterIdPin: { clusterId: view.agreed.answer.clusterId, since: input.evaluatedAt } };
}

/** This evaluation's voting size when it listed members, else the one carried from the stored evaluation. */
function lastMembershipOf(view: ClusterView, input: EvaluationInput): Pick<Evaluation, 'lastMembership'> {
  // Without a member list the voting members are only the endpoints we were given: no size.
  if (view.memberList.ok && view.voting.length > 0) {
    return { lastMembership: { votingMembers: view.voting.length, evaluatedAt: input.evaluatedAt } };
  }
  return input.lastMembership === undefined ? {} : { lastMembership: input.lastMembership };
}
