// Human output in the style of `etcdctl -w table`: boxes drawn with + - |, one table for the
// members and one for the checks, then the reasons.
import type { Evaluation } from './core/evaluation.js';
import { formatBytes } from './shared/bytes.js';

/** Renders rows under headers; cells are single-line (newlines become spaces). */
export function formatTable(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const clean = (cell: string) => cell.replace(/\s*\n\s*/g, ' ');
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => clean(row[column] ?? '').length)));
  const rule = `+${widths.map((width) => '-'.repeat(width + 2)).join('+')}+`;
  const line = (cells: readonly string[]) =>
    `| ${widths.map((width, column) => clean(cells[column] ?? '').padEnd(width)).join(' | ')} |`;
  return [rule, line(headers), rule, ...rows.map(line), rule].join('\n');
}

function bytes(value: number | null): string {
  return value === null ? '-' : formatBytes(value);
}

function orDash(value: string | number | null | undefined): string {
  return value === null || value === undefined || value === '' ? '-' : String(value);
}

export function formatEvaluationTable(evaluation: Evaluation): string {
  const leader = evaluation.members.find((member) => member.leader);
  const { cluster } = evaluation;
  const header = [
    `target ${evaluation.target}: ${evaluation.verdict} (${evaluation.passed ? 'passed' : 'not passed'}), evaluated ${evaluation.evaluatedAt} in ${evaluation.durationMs} ms`,
    `leader ${leader ? leader.name || leader.id : 'none'}; ${cluster.votingMembers} voting (${cluster.healthyVoting} healthy), ${cluster.learners} learners, quorum ${cluster.quorum}, fault tolerance ${cluster.faultTolerance}`,
  ];
  const members = formatTable(
    [
      'NAME',
      'ID',
      'ENDPOINT',
      'HEALTHY',
      'LEADER',
      'LEARNER',
      'VERSION',
      'DB SIZE',
      'DB IN USE',
      'RAFT TERM',
      'RAFT INDEX',
      'LATENCY',
      'ALARMS',
      'ERROR',
    ],
    evaluation.members.map((member) => [
      orDash(member.name),
      orDash(member.id),
      orDash(member.endpoint),
      String(member.healthy),
      String(member.leader),
      String(member.learner),
      orDash(member.version),
      bytes(member.dbSizeBytes),
      bytes(member.dbSizeInUseBytes),
      orDash(member.raftTerm),
      orDash(member.raftIndex),
      member.latencyMs === null ? '-' : `${member.latencyMs} ms`,
      member.alarms.length > 0 ? member.alarms.join(',') : '-',
      orDash(member.error),
    ]),
  );
  const checks = formatTable(
    ['CHECK', 'STATUS', 'MESSAGE'],
    evaluation.checks.map((check) => [check.name, check.status.toUpperCase(), check.message]),
  );
  const reasons = evaluation.reasons.length > 0 ? ['reasons:', ...evaluation.reasons.map((reason) => `  - ${reason}`)] : [];
  return [...header, members, checks, ...reasons].join('\n');
}
