// Human output in the style of `etcdctl -w table`: boxes drawn with + - |, member IDs in hex as
// etcdctl prints them. `table` fits 120 columns (the member essentials, a one-line check summary);
// `wide` has every member column and every check. Both end with every reason, never cut.
import type { Evaluation, MemberReport } from '../domain/evaluation-document.js';
import { formatBytes } from '../shared/bytes.js';

/** The width the default table keeps to. */
export const TABLE_WIDTH = 120;

/** Renders rows under headers; cells are single-line (newlines become spaces). */
export function formatTable(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = columnWidths(headers, rows);
  return drawTable(headers, rows, widths);
}

function clean(cell: string): string {
  return cell.replace(/\s*\n\s*/g, ' ');
}

function columnWidths(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): number[] {
  return headers.map((header, column) => Math.max(header.length, ...rows.map((row) => clean(row[column] ?? '').length)));
}

function drawTable(headers: readonly string[], rows: ReadonlyArray<readonly string[]>, widths: readonly number[]): string {
  const fit = (cell: string, width: number) => {
    const text = clean(cell);
    return (text.length > width ? `${text.slice(0, width - 1)}~` : text).padEnd(width);
  };
  const rule = `+${widths.map((width) => '-'.repeat(width + 2)).join('+')}+`;
  const line = (cells: readonly string[]) => `| ${widths.map((width, column) => fit(cells[column] ?? '', width)).join(' | ')} |`;
  return [rule, line(headers), rule, ...rows.map(line), rule].join('\n');
}

/**
 * A table no wider than `maxWidth`: the columns listed in `shrinkable` give up width (their cells
 * end in ~ when cut; `--output wide` shows them whole), the others keep theirs.
 */
function formatTableWithin(
  headers: readonly string[],
  rows: ReadonlyArray<readonly string[]>,
  shrinkable: readonly number[],
  maxWidth: number,
): string {
  const widths = columnWidths(headers, rows);
  const total = () => widths.reduce((sum, width) => sum + width + 3, 1);
  while (total() > maxWidth) {
    const widest = shrinkable.reduce((best, column) => ((widths[column] ?? 0) > (widths[best] ?? 0) ? column : best));
    const width = widths[widest] ?? 0;
    if (width <= (headers[widest]?.length ?? 0) + 2) break;
    widths[widest] = width - 1;
  }
  return drawTable(headers, rows, widths);
}

function bytes(value: number | null): string {
  return value === null ? '-' : formatBytes(value);
}

function orDash(value: string | number | null | undefined): string {
  return value === null || value === undefined || value === '' ? '-' : String(value);
}

/** etcd member IDs are uint64, kept as decimal strings; etcdctl prints them in hex. */
export function memberIdHex(id: string | null): string {
  if (id === null || id === '') return '-';
  return /^\d+$/.test(id) ? BigInt(id).toString(16) : id;
}

function role(member: MemberReport): string {
  if (member.leader) return 'leader';
  return member.learner ? 'learner' : 'follower';
}

function header(evaluation: Evaluation): string[] {
  const leader = evaluation.members.find((member) => member.leader);
  const { cluster } = evaluation;
  const leaderText = leader ? `${leader.name || '?'} (${memberIdHex(leader.id)})` : 'none';
  const quorumLost = cluster.healthyVoting < cluster.quorum ? ' (quorum lost)' : '';
  return [
    `target ${evaluation.target}: ${evaluation.verdict} (${evaluation.passed ? 'passed' : 'not passed'}), evaluated ${evaluation.evaluatedAt} in ${evaluation.durationMs} ms`,
    `leader ${leaderText}; ${cluster.votingMembers} voting (${cluster.healthyVoting} healthy), ${cluster.learners} learners, quorum ${cluster.quorum}, fault tolerance ${cluster.faultTolerance}${quorumLost}`,
  ];
}

function reasonLines(evaluation: Evaluation): string[] {
  return evaluation.reasons.length > 0 ? ['reasons:', ...evaluation.reasons.map((reason) => `  - ${reason}`)] : [];
}

/** Every member column, by header; the default table shows some, `wide` all. */
function memberCells(member: MemberReport): Record<string, string> {
  return {
    NAME: orDash(member.name),
    ID: memberIdHex(member.id),
    ENDPOINT: orDash(member.endpoint),
    HEALTHY: String(member.healthy),
    ROLE: role(member),
    VERSION: orDash(member.version),
    'DB SIZE': bytes(member.dbSizeBytes),
    'DB IN USE': bytes(member.dbSizeInUseBytes),
    'RAFT TERM': orDash(member.raftTerm),
    'RAFT INDEX': orDash(member.raftIndex),
    LATENCY: member.latencyMs === null ? '-' : `${member.latencyMs} ms`,
    ALARMS: member.alarms.length > 0 ? member.alarms.join(',') : '-',
    ERROR: orDash(member.error),
  };
}

function memberRows(evaluation: Evaluation, headers: readonly string[]): string[][] {
  return evaluation.members.map((member) => {
    const cells = memberCells(member);
    return headers.map((header) => cells[header] ?? '-');
  });
}

const TABLE_COLUMNS = ['NAME', 'ID', 'ENDPOINT', 'HEALTHY', 'ROLE', 'VERSION', 'DB SIZE', 'RAFT INDEX', 'ALARMS'];
const WIDE_COLUMNS = [
  'NAME',
  'ID',
  'ENDPOINT',
  'HEALTHY',
  'ROLE',
  'VERSION',
  'DB SIZE',
  'DB IN USE',
  'RAFT TERM',
  'RAFT INDEX',
  'LATENCY',
  'ALARMS',
  'ERROR',
];

/** `--output table`: fits 120 columns; the members' errors are in the reasons below the table. */
export function formatEvaluationTable(evaluation: Evaluation): string {
  // ENDPOINT, then NAME, then ALARMS give up width when the table would pass 120 columns.
  const members = formatTableWithin(TABLE_COLUMNS, memberRows(evaluation, TABLE_COLUMNS), [2, 0, 8], TABLE_WIDTH);
  const notPassing = evaluation.checks.filter((check) => check.status !== 'pass');
  const counts = (['pass', 'warn', 'fail'] as const).map(
    (status) => `${evaluation.checks.filter((check) => check.status === status).length} ${status}`,
  );
  const summary = `checks: ${counts.join(', ')}${notPassing.length > 0 ? ` (${notPassing.map((check) => check.name).join(', ')})` : ''}; every check: --output wide`;
  return [...header(evaluation), members, summary, ...reasonLines(evaluation)].join('\n');
}

/** `--output wide`: every member column and every check, whatever the width. */
export function formatEvaluationWide(evaluation: Evaluation): string {
  const members = formatTable(WIDE_COLUMNS, memberRows(evaluation, WIDE_COLUMNS));
  const checks = formatTable(
    ['CHECK', 'STATUS', 'MESSAGE'],
    evaluation.checks.map((check) => [check.name, check.status.toUpperCase(), check.message]),
  );
  return [...header(evaluation), members, checks, ...reasonLines(evaluation)].join('\n');
}
