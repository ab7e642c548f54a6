// A stored document from a newer etcd-guard (one more check, fields this version never heard of,
// a higher format revision) as today's reader and writer meet it during a rolling upgrade.
import { describe, expect, it } from 'vitest';
import { consistencyOf, evaluateCluster } from './judgement/evaluate-cluster.js';
import { CHECK_NAMES, FORMAT_REVISION, withUnknownChecksExplained, type Evaluation } from './evaluation-document.js';
import { probedThree } from '../../test/harness/probe-input.js';
import { NEWER_FORMAT_HOLD_MS, StoreError, parseStoredEvaluation, writeDecision } from './store.js';

const NOW = Date.parse('2026-01-02T03:04:05.000Z');

function healthyThree(evaluatedAt: string): Evaluation {
  return evaluateCluster(probedThree({}, evaluatedAt));
}

/** What a newer writer stores: today's document plus a check and fields this reader does not know. */
function fromNewerWriter(newCheck: 'pass' | 'fail', evaluatedAt = new Date(NOW).toISOString()): Record<string, unknown> {
  const today = healthyThree(evaluatedAt);
  const failed = newCheck === 'fail';
  return {
    ...today,
    formatRevision: FORMAT_REVISION + 1,
    verdict: failed ? 'Unhealthy' : today.verdict,
    passed: !failed,
    reasons: failed ? ['member etcd-2 fsync p99 41 ms above 20 ms'] : [],
    cluster: { ...today.cluster, learnerProgress: [] },
    members: today.members.map((member) => ({ ...member, fsyncP99Ms: 3 })),
    checks: [...today.checks, { name: 'disk-latency', status: newCheck, message: 'fsync p99 within 20 ms', weight: 2 }],
    provenance: { writer: 'etcd-guard 0.9.0' },
  };
}

function read(document: Record<string, unknown>): Evaluation {
  const parsed = parseStoredEvaluation(JSON.stringify(document), 'prod', { source: 'ConfigMap x', holder: 'ConfigMap x' });
  if (parsed instanceof StoreError) throw parsed;
  return parsed;
}

describe("today's reader on a newer writer's document", () => {
  it('accepts an unknown passing check and unknown fields, and adds no reason', () => {
    const evaluation = read(fromNewerWriter('pass'));
    expect(evaluation.verdict).toBe('Healthy');
    expect(evaluation.passed).toBe(true);
    expect(evaluation.reasons).toEqual([]);
    expect(evaluation.checks.at(-1)).toEqual({ name: 'disk-latency', status: 'pass', message: 'fsync p99 within 20 ms' });
  });

  it("keeps the writer's verdict when an unknown check failed, and says which check it was", () => {
    const evaluation = read(fromNewerWriter('fail'));
    expect(evaluation.verdict).toBe('Unhealthy');
    expect(evaluation.passed).toBe(false);
    expect(evaluation.reasons).toEqual([
      'member etcd-2 fsync p99 41 ms above 20 ms',
      'check disk-latency (fail) comes from a newer etcd-guard; this reader keeps its verdict',
    ]);
  });

  it('still refuses a check name that is not a name, without quoting it', () => {
    const document = fromNewerWriter('pass');
    document.checks = [{ name: 'Robert"); DROP', status: 'pass', message: '' }];
    const parsed = parseStoredEvaluation(JSON.stringify(document), 'prod', { source: 'ConfigMap x', holder: 'ConfigMap x' });
    expect(parsed).toBeInstanceOf(StoreError);
    expect((parsed as StoreError).message).toContain('checks.0.name');
    expect((parsed as StoreError).message).not.toContain('DROP');
  });
});

describe("today's writer beside a newer writer's stored document", () => {
  const stored = (ageMs: number) => read(fromNewerWriter('pass', new Date(NOW - ageMs).toISOString()));
  const rows = [
    {
      behaviour: 'does not replace a fresh newer-format document with a passing verdict',
      ageMs: 60_000,
      verdict: 'Healthy',
      write: false,
    },
    {
      behaviour: 'replaces it with an Unhealthy verdict (failing closed is always safe)',
      ageMs: 60_000,
      verdict: 'Unhealthy',
      write: true,
    },
    {
      behaviour: 'takes over once no newer writer has written for the hold (a rolled-back upgrade)',
      ageMs: NEWER_FORMAT_HOLD_MS + 1,
      verdict: 'Healthy',
      write: true,
    },
  ] as const;
  it.each(rows)('$behaviour', ({ ageMs, verdict, write }) => {
    const candidate = healthyThree(new Date(NOW).toISOString());
    const ours: Evaluation = verdict === 'Unhealthy' ? { ...candidate, verdict, passed: false } : candidate;
    expect(ours.formatRevision).toBe(FORMAT_REVISION);
    expect(writeDecision(ours, stored(ageMs), { writerNowMs: NOW }).write).toBe(write);
  });

  it('replaces a same-revision document as before (newest wins)', () => {
    const older = healthyThree(new Date(NOW - 60_000).toISOString());
    expect(writeDecision(healthyThree(new Date(NOW).toISOString()), older, { writerNowMs: NOW }).write).toBe(true);
  });
});

describe('what the stored document remembers (issue 30 item 1: lastMembership)', () => {
  const remembered = { votingMembers: 3, evaluatedAt: new Date(NOW - 3_600_000).toISOString() };
  it('is carried into a write whose writer could not read it (a slow or failed store read)', () => {
    const stored = { ...healthyThree(new Date(NOW - 60_000).toISOString()), lastMembership: remembered };
    const { lastMembership: _none, ...unaware } = healthyThree(new Date(NOW).toISOString());
    const decision = writeDecision(unaware, stored, { writerNowMs: NOW });
    expect(decision.write && decision.evaluation.lastMembership).toEqual(remembered);
  });

  it('gives way to the size a newer evaluation listed', () => {
    const stored = { ...healthyThree(new Date(NOW - 60_000).toISOString()), lastMembership: remembered };
    const listed = healthyThree(new Date(NOW).toISOString());
    const decision = writeDecision(listed, stored, { writerNowMs: NOW });
    expect(decision.write && decision.evaluation.lastMembership).toEqual(listed.lastMembership);
    expect(listed.lastMembership?.votingMembers).toBe(3);
  });
});

describe('the pinned cluster ID (issue 30 item 10: clusterIdPin)', () => {
  const pin = { clusterId: '42', since: new Date(NOW - 3_600_000).toISOString() };
  it('is carried into a write whose writer could not read it, so a failed read never re-pins', () => {
    const stored = { ...healthyThree(new Date(NOW - 60_000).toISOString()), clusterIdPin: pin };
    const unaware = { ...healthyThree(new Date(NOW).toISOString()), verdict: 'Unhealthy' as const, passed: false };
    const decision = writeDecision(unaware, stored, { writerNowMs: NOW });
    expect(decision.write && decision.evaluation.clusterIdPin).toEqual(pin);
  });

  it('is parsed from a stored document and refused when it is not a decimal cluster ID', () => {
    const document = { ...healthyThree(new Date(NOW).toISOString()), clusterIdPin: { clusterId: '0x2a', since: pin.since } };
    const parsed = parseStoredEvaluation(JSON.stringify(document), 'prod', { source: 'file x', holder: 'file x' });
    expect(parsed).toBeInstanceOf(StoreError);
    expect((parsed as StoreError).message).toContain('clusterIdPin.clusterId');
  });
});

describe('the backup check (issue 32, revision 6) beside a reader and a writer of revision 5', () => {
  // Nor does a revision-5 reader know fragmentation (revision 7).
  const REVISION_5_CHECKS = new Set(
    CHECK_NAMES.filter((name) => name !== 'backup' && name !== 'fragmentation' && name !== 'consistency'),
  );
  const withFailingBackup = (evaluatedAt: string): Evaluation =>
    evaluateCluster({
      ...probedThree({}, evaluatedAt),
      backup: {
        storeConfigured: true,
        condition: { status: 'False', reason: 'BackupFailed', message: 'Stale snapshot leases' },
        fullSnapshotAt: null,
        deltaSnapshotAt: null,
        leaseProblems: [],
        maxSnapshotAgeMs: 3_600_000,
      },
    });

  it('a revision-5 reader keeps the Degraded verdict of a failing backup and names the check', () => {
    const document = withFailingBackup(new Date(NOW).toISOString());
    expect(document.formatRevision).toBeGreaterThanOrEqual(6);
    expect(document.verdict).toBe('Degraded');
    const parsed = read(document as unknown as Record<string, unknown>);
    const older = withUnknownChecksExplained(parsed, REVISION_5_CHECKS);
    expect(older.verdict).toBe('Degraded');
    expect(older.passed).toBe(true);
    expect(older.reasons).toEqual([
      'backup failing: BackupReady=False (BackupFailed: Stale snapshot leases)',
      'check backup (fail) comes from a newer etcd-guard; this reader keeps its verdict',
    ]);
    // Today's reader knows the check: nothing is added.
    expect(parsed.reasons).toEqual(['backup failing: BackupReady=False (BackupFailed: Stale snapshot leases)']);
  });
});

describe('the fragmentation check (issue 32, revision 7) beside a reader of revision 6', () => {
  const REVISION_6_CHECKS = new Set(CHECK_NAMES.filter((name) => name !== 'fragmentation' && name !== 'consistency'));
  const MIB = 1024 * 1024;

  it('a revision-6 reader keeps the Degraded verdict of a fragmented DB and names the check', () => {
    const input = { ...probedThree({}, new Date(NOW).toISOString()), quotaBackendBytes: 8192 * MIB };
    const [first] = input.probes;
    if (first === undefined || !first.status.ok) throw new Error('probedThree gave no status');
    first.status.value.dbSizeBytes = 400 * MIB;
    first.status.value.dbSizeInUseBytes = 100 * MIB;
    const document = evaluateCluster(input);
    expect(document.formatRevision).toBeGreaterThanOrEqual(7);
    expect(document.verdict).toBe('Degraded');
    const parsed = read(document as unknown as Record<string, unknown>);
    const older = withUnknownChecksExplained(parsed, REVISION_6_CHECKS);
    expect(older.verdict).toBe('Degraded');
    expect(older.passed).toBe(true);
    expect(older.reasons).toHaveLength(2);
    expect(older.reasons[0]).toMatch(/^member etcd-1 \(https:\/\/10\.0\.0\.1:2379\) DB fragmented: /);
    expect(older.reasons[1]).toBe('check fragmentation (warn) comes from a newer etcd-guard; this reader keeps its verdict');
    expect(parsed.reasons).toEqual([older.reasons[0]]);
  });
});

describe('the consistency check (issue 32, revision 8) beside a reader of revision 7', () => {
  const REVISION_7_CHECKS = new Set(CHECK_NAMES.filter((name) => name !== 'consistency'));

  it('a revision-7 reader keeps the Unhealthy verdict of diverged data and names the check', () => {
    const input = probedThree({}, new Date(NOW).toISOString());
    input.probes.forEach((probe, index) => {
      probe.hashKV = { ok: true, value: { revision: 30, hash: index === 2 ? '9' : '8', compactRevision: 4 } };
    });
    const document = evaluateCluster({ ...input, consistency: { revision: 30 } });
    expect(document.formatRevision).toBeGreaterThanOrEqual(8);
    expect(document.verdict).toBe('Unhealthy');
    const parsed = read(document as unknown as Record<string, unknown>);
    const older = withUnknownChecksExplained(parsed, REVISION_7_CHECKS);
    expect(older.verdict).toBe('Unhealthy');
    expect(older.passed).toBe(false);
    expect(older.reasons.at(-1)).toBe('check consistency (fail) comes from a newer etcd-guard; this reader keeps its verdict');
    expect(older.reasons[0]).toMatch(/^data diverges at revision 30 \(compact revision 4\): member etcd-3 /);
  });
});

describe('a carried consistency result (issue 32, revision 9) beside a reader and a writer of revision 8', () => {
  const diverged = () => {
    const input = probedThree({}, new Date(NOW - 20 * 60_000).toISOString());
    input.probes.forEach((probe, index) => {
      probe.hashKV = { ok: true, value: { revision: 30, hash: index === 2 ? '9' : '8', compactRevision: 4 } };
    });
    return evaluateCluster({ ...input, consistency: { revision: 30 } });
  };

  it('a revision-8 reader drops measuredAt and keeps the carried failure and its Unhealthy verdict', () => {
    const carried = evaluateCluster({
      ...probedThree({}, new Date(NOW).toISOString()),
      consistency: { carried: consistencyOf(diverged()), maxAgeMs: 3_600_000 },
    });
    expect(carried.formatRevision).toBe(9);
    const stored = JSON.parse(JSON.stringify(carried)) as Record<string, unknown>;
    const today = read(stored).checks.find((check) => check.name === 'consistency');
    expect(today?.measuredAt).toBe(new Date(NOW - 20 * 60_000).toISOString());
    // A revision-8 reader's check schema has no measuredAt: an unknown field, which it strips.
    const older = read({
      ...stored,
      checks: (stored.checks as Record<string, unknown>[]).map(({ measuredAt: _dropped, ...check }) => check),
    });
    expect(older.verdict).toBe('Unhealthy');
    expect(older.checks.find((check) => check.name === 'consistency')).toEqual({
      name: 'consistency',
      status: 'fail',
      message: expect.stringMatching(/^carried \(hashed 20m earlier, at [^)]+\): data diverges at revision 30 /) as unknown,
    });
  });

  it("a revision-8 writer's document (no measuredAt) is dated by its evaluatedAt when carried", () => {
    const stored = diverged();
    expect(consistencyOf(stored)).toEqual({
      status: 'fail',
      message: expect.stringMatching(/^data diverges at revision 30 /) as unknown,
      measuredAt: stored.evaluatedAt,
    });
  });
});
