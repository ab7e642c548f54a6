// The CLI's human output: the default table fits 120 columns whatever the endpoints and errors,
// member IDs are hex as etcdctl prints them, fault tolerance is never negative, and no reason is
// ever cut; `wide` shows every column and check.
import { describe, expect, it } from 'vitest';
import type { Evaluation } from '../domain/evaluation-document.js';
import { formatEvaluationTable, formatEvaluationWide, memberIdHex, TABLE_WIDTH } from './format-table.js';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';

const longError = `https://etcd-member-2.control-plane.prod.example.internal:2379: ${'TLS rejected: '.repeat(12)}`;

const cases: Array<{ name: string; evaluation: Evaluation }> = [
  { name: 'a healthy three-member cluster', evaluation: makeEvaluation() },
  {
    name: 'five members with long host names, one failing with a long error',
    evaluation: makeEvaluation({
      verdict: 'Unhealthy',
      passed: false,
      members: [0, 1, 2, 3, 4].map((index) =>
        makeMember(index, {
          id: '10276657743932975437',
          name: `etcd-member-${index}-with-a-rather-long-name`,
          endpoint: `https://etcd-member-${index}.control-plane.prod.example.internal:2379`,
          ...(index === 2 ? { healthy: false, error: longError, alarms: ['NOSPACE', 'CORRUPT'] } : {}),
        }),
      ),
      reasons: [`member etcd-member-2 unreachable: ${longError}`, 'alarm NOSPACE raised on etcd-member-2'],
    }),
  },
];

describe('formatEvaluationTable', () => {
  it.each(cases)('fits $name into 120 columns and prints every reason whole', ({ evaluation }) => {
    const output = formatEvaluationTable(evaluation);
    const tableLines = output.split('\n').filter((line) => /^[+|]/.test(line));
    expect(tableLines.length).toBeGreaterThan(3);
    for (const line of tableLines) expect(line.length, line).toBeLessThanOrEqual(TABLE_WIDTH);
    for (const reason of evaluation.reasons) expect(output).toContain(`  - ${reason}`);
    for (const member of evaluation.members) expect(output).toContain(memberIdHex(member.id));
  });

  it('summarises the checks and says where to see them all', () => {
    const evaluation = makeEvaluation();
    const [first, ...rest] = evaluation.checks;
    if (first === undefined) throw new Error('the fixture has no checks');
    const failing: Evaluation = { ...evaluation, checks: [{ ...first, status: 'fail' }, ...rest] };
    expect(formatEvaluationTable(failing)).toContain(
      `checks: ${rest.length} pass, 0 warn, 1 fail (${first.name}); every check: --output wide`,
    );
  });

  it('says quorum lost beside a fault tolerance of 0', () => {
    const evaluation = makeEvaluation();
    const lost: Evaluation = {
      ...evaluation,
      cluster: { ...evaluation.cluster, healthyVoting: 1, quorum: 2, faultTolerance: 0 },
    };
    expect(formatEvaluationTable(lost)).toContain('fault tolerance 0 (quorum lost)');
  });
});

describe('formatEvaluationWide', () => {
  it('shows every member column, the whole error and every check message', () => {
    const evaluation = cases[1]?.evaluation ?? makeEvaluation();
    const output = formatEvaluationWide(evaluation);
    for (const header of ['DB IN USE', 'RAFT TERM', 'LATENCY', 'ERROR', 'CHECK', 'MESSAGE']) expect(output).toContain(header);
    expect(output).toContain(longError.trim());
    for (const check of evaluation.checks) expect(output).toContain(check.message);
  });
});

describe('memberIdHex', () => {
  it.each([
    { id: '10276657743932975437', hex: '8e9e05c52164694d' },
    { id: '1', hex: '1' },
    { id: '', hex: '-' },
    { id: 'not-a-number', hex: 'not-a-number' },
  ])('prints $id as $hex, as etcdctl does', ({ id, hex }) => {
    expect(memberIdHex(id)).toBe(hex);
  });
});
