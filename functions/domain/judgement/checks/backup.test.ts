// The backup check of a druid target, pure: what druid's Etcd status and snapshot Leases say,
// judged at the evaluation's time. BackupReady=False fails (and only degrades the verdict: etcd
// still serves); anything unknown warns, never passes; a snapshot older than the configured age warns.
import { describe, expect, it } from 'vitest';
import { evaluateCluster } from '../evaluate-cluster.js';
import type { DruidBackupFacts } from '../input.js';
import { probedThree } from '../../../../test/harness/probe-input.js';

const AT = '2026-01-02T03:04:05.000Z';
const HOUR = 3_600_000;
const ago = (ms: number) => new Date(Date.parse(AT) - ms).toISOString();

const ready = (overrides: Partial<DruidBackupFacts> = {}): DruidBackupFacts => ({
  storeConfigured: true,
  condition: { status: 'True', reason: 'BackupSucceeded', message: 'Snapshot backup succeeded' },
  fullSnapshotAt: ago(5 * HOUR),
  deltaSnapshotAt: ago(20_000),
  leaseProblems: [],
  maxSnapshotAgeMs: HOUR,
  ...overrides,
});

function judged(backup: DruidBackupFacts | undefined) {
  const evaluation = evaluateCluster({ ...probedThree({}, AT), ...(backup === undefined ? {} : { backup }) });
  return { evaluation, check: evaluation.checks.find((check) => check.name === 'backup') };
}

describe('backup check: what druid reports about an Etcd backup', () => {
  it.each<[string, DruidBackupFacts, 'pass' | 'warn' | 'fail', RegExp]>([
    [
      'passes on BackupReady=True with a recent delta snapshot',
      ready(),
      'pass',
      /^BackupReady=True, last snapshot delta at 2026-01-02T03:03:45.000Z, 20s ago \(at most 60m\)$/,
    ],
    [
      'fails on BackupReady=False, with the condition reason and message',
      ready({
        condition: { status: 'False', reason: 'BackupFailed', message: 'Stale snapshot leases. Not renewed in a long time' },
      }),
      'fail',
      /^backup failing: BackupReady=False \(BackupFailed: Stale snapshot leases\. Not renewed in a long time\)$/,
    ],
    [
      'warns stale when the newest snapshot is older than the configured age',
      ready({ deltaSnapshotAt: ago(3 * HOUR), fullSnapshotAt: ago(2 * HOUR) }),
      'warn',
      /^backup stale: last snapshot full at 2026-01-02T01:04:05.000Z, 120m ago, older than 60m \(BackupReady=True\)$/,
    ],
    [
      'is unknown (warns) without a BackupReady condition',
      ready({ condition: null }),
      'warn',
      /^backup unknown: the Etcd status has no BackupReady condition yet$/,
    ],
    [
      'is unknown without a backup store, saying druid then writes no condition',
      ready({ condition: null, storeConfigured: false }),
      'warn',
      /druid writes none while spec\.backup\.store is unset/,
    ],
    [
      'is unknown on BackupReady=Unknown',
      ready({ condition: { status: 'Unknown', reason: 'Unknown', message: 'Cannot determine etcd backup status' } }),
      'warn',
      /^backup unknown: BackupReady=Unknown \(Unknown: Cannot determine etcd backup status\)$/,
    ],
    [
      'is unknown when no snapshot Lease was ever renewed, naming why a Lease was unreadable',
      ready({ fullSnapshotAt: null, deltaSnapshotAt: null, leaseProblems: ['not found: cannot get leases "e-full-snap"'] }),
      'warn',
      /^backup unknown: BackupReady=True but no snapshot Lease has a renewTime \(not found: cannot get leases "e-full-snap"\)$/,
    ],
    [
      'is unknown when the Etcd cannot be read',
      { ...ready(), unreadable: 'forbidden: cannot get etcds.druid.gardener.cloud "e"' },
      'warn',
      /^backup unknown: forbidden: cannot get etcds/,
    ],
  ])('%s', (_name, facts, status, message) => {
    const { check } = judged(facts);
    expect(check?.status).toBe(status);
    expect(check?.message).toMatch(message);
  });

  it('is not judged for a target without backup facts (not druid, or backup not configured)', () => {
    expect(judged(undefined).check).toBeUndefined();
  });

  it.each([
    ['a failing backup', 'Degraded', ready({ condition: { status: 'False', reason: 'BackupFailed', message: 'x' } })],
    ['an unknown backup', 'Degraded', ready({ condition: null })],
    ['a passing backup', 'Healthy', ready()],
  ] as const)('%s leaves a serving etcd %s (the rule, not the verdict, holds changes back)', (_name, verdict, facts) => {
    const { evaluation } = judged(facts);
    expect(evaluation.verdict).toBe(verdict);
    expect(evaluation.passed).toBe(true);
  });

  it('bounds and sanitises the tenant-written condition text', () => {
    const message = `line one\nline\u0000two\u001b[31m ${'x'.repeat(500)}`;
    const { check } = judged(ready({ condition: { status: 'False', reason: 'Bad\r\nReason', message } }));
    expect(check?.status).toBe('fail');
    expect([...(check?.message ?? '')].every((char) => char >= ' ' && char <= '~')).toBe(true);
    expect(check?.message).toContain('Bad Reason: line one line?two?[31m');
    expect(check?.message.length).toBeLessThan(300);
  });
});
