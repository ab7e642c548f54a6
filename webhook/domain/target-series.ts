// What one target's stored evaluation says as Prometheus samples: one fixed set of series per
// target (and per check), never per request, so the series count is bounded by the targets the
// webhook judges. Pure: the webhook's metrics module turns these into gauges at scrape time.
import { CHECK_NAMES, type CheckStatus, type Evaluation, type Verdict } from '../../functions/domain/evaluation-document.js';

export const VERDICTS: readonly Verdict[] = ['Healthy', 'Degraded', 'Unhealthy'];

/**
 * Check status as a number whose order is its severity, so `max by (target)` finds the worst:
 * one series per check instead of three (a state set would triple the check series of every target).
 */
export const CHECK_STATUS_VALUES: Readonly<Record<CheckStatus, number>> = { pass: 0, warn: 1, fail: 2 };

/** A gauge fed from the evaluation alone; null means "no series" (the evaluation does not say). */
export interface EvaluationGauge {
  name: string;
  help: string;
  value: (evaluation: Evaluation) => number | null;
}

/** Largest value any member reported: the member that reaches the quota first is the one that matters. */
function largestMember(evaluation: Evaluation, pick: (member: Evaluation['members'][number]) => number | null): number | null {
  const values = evaluation.members.map(pick).filter((value): value is number => value !== null);
  return values.length === 0 ? null : Math.max(...values);
}

export const EVALUATION_GAUGES: readonly EvaluationGauge[] = [
  {
    name: 'etcd_guard_target_voting_members',
    help: 'Voting members of the target etcd cluster in its newest evaluation.',
    value: (evaluation) => evaluation.cluster.votingMembers,
  },
  {
    name: 'etcd_guard_target_healthy_voting_members',
    help: 'Voting members that answered healthy in the newest evaluation.',
    value: (evaluation) => evaluation.cluster.healthyVoting,
  },
  {
    name: 'etcd_guard_target_learners',
    help: 'Learner (non-voting) members in the newest evaluation; above 0 while a member joins.',
    value: (evaluation) => evaluation.cluster.learners,
  },
  {
    name: 'etcd_guard_target_quorum',
    help: 'Members needed for quorum: a majority of the voting members.',
    value: (evaluation) => evaluation.cluster.quorum,
  },
  {
    name: 'etcd_guard_target_fault_tolerance',
    help: 'Voting members that may still fail before quorum is lost; 0 when one more failure (or none) loses it.',
    value: (evaluation) => evaluation.cluster.faultTolerance,
  },
  {
    name: 'etcd_guard_target_db_size_bytes',
    help: 'Largest backend DB size any member reported (compare with etcd_guard_target_db_quota_bytes).',
    value: (evaluation) => largestMember(evaluation, (member) => member.dbSizeBytes),
  },
  {
    name: 'etcd_guard_target_db_size_in_use_bytes',
    help: 'Largest logically used DB size any member reported (what a defragmentation would shrink the file to).',
    value: (evaluation) => largestMember(evaluation, (member) => member.dbSizeInUseBytes),
  },
  {
    name: 'etcd_guard_target_evaluation_timestamp_seconds',
    help: 'Unix time the newest evaluation was made (its evaluatedAt).',
    value: (evaluation) => Date.parse(evaluation.evaluatedAt) / 1000,
  },
  {
    name: 'etcd_guard_target_evaluation_duration_seconds',
    help: 'How long the newest evaluation took, as its writer (the scheduled run, or an inline refresh) recorded it.',
    value: (evaluation) => evaluation.durationMs / 1000,
  },
];

/** 1 for the evaluation's verdict and 0 for the others (a Prometheus state set). */
export function verdictSamples(evaluation: Evaluation): { verdict: Verdict; value: number }[] {
  return VERDICTS.map((verdict) => ({ verdict, value: verdict === evaluation.verdict ? 1 : 0 }));
}

/** One sample per check the evaluation carries, in CHECK_NAMES order. */
export function checkSamples(evaluation: Evaluation): { check: string; value: number }[] {
  const byName = new Map(evaluation.checks.map((check) => [check.name, check.status]));
  return CHECK_NAMES.flatMap((check) => {
    const status = byName.get(check);
    return status === undefined ? [] : [{ check, value: CHECK_STATUS_VALUES[status] }];
  });
}
