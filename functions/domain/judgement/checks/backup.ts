// An etcd-druid Etcd's backup, as druid reports it (etcd-druid api v0.38.0, core/v1alpha1):
// status.conditions[type=BackupReady] (etcd.go ConditionTypeBackupReady; conditions.go Condition:
// status, reason, message) and the snapshot Leases druid's BackupReady check itself reads
// (helper.go GetFullSnapshotLeaseName / GetDeltaSnapshotLeaseName: `<etcd>-full-snap`,
// `<etcd>-delta-snap`, whose spec.renewTime is the last snapshot of each kind). The Etcd status has
// no snapshot time of its own. Everything here is tenant-writable text: shown bounded and printable.
import { type CheckFunction, concluded, fail, warn } from '../check.js';
import { formatAge } from '../wording.js';
import type { DruidBackupFacts } from '../input.js';

const MAX_CONDITION_TEXT = 120;

/** A condition's reason or message in a reason: control characters replaced, whitespace folded, bounded. */
export function conditionText(text: string): string {
  const printable = text
    .replace(/\s+/g, ' ')
    .replace(/[^\x20-\x7e]/g, '?')
    .trim();
  return printable.length > MAX_CONDITION_TEXT ? `${printable.slice(0, MAX_CONDITION_TEXT - 3)}...` : printable;
}

function said(condition: NonNullable<DruidBackupFacts['condition']>): string {
  const parts = [condition.reason, condition.message].map(conditionText).filter((part) => part !== '');
  return parts.length === 0 ? '' : ` (${parts.join(': ')})`;
}

/** The newer of the two snapshot times, with its kind; null when neither lease was ever renewed. */
function lastSnapshot(facts: DruidBackupFacts): { kind: 'full' | 'delta'; at: string; ms: number } | null {
  const dated = (['full', 'delta'] as const).flatMap((kind) => {
    const at = kind === 'full' ? facts.fullSnapshotAt : facts.deltaSnapshotAt;
    const ms = at === null ? Number.NaN : Date.parse(at);
    return Number.isFinite(ms) && at !== null ? [{ kind, at, ms }] : [];
  });
  return dated.sort((a, b) => b.ms - a.ms)[0] ?? null;
}

const UNKNOWN = 'backup unknown';

/**
 * Fails when druid says BackupReady=False; warns when the backup state is unknown (the Etcd or its
 * condition absent, BackupReady neither True nor False, no snapshot ever dated) or the last
 * snapshot is older than the configured age. Passes only on BackupReady=True with a recent
 * snapshot. Not judged (null) for targets without backup facts (not a druid Etcd, not configured).
 */
export const backupCheck: CheckFunction = ({ input }) => {
  const facts = input.backup;
  if (facts === undefined) return null;
  if (facts.unreadable !== undefined) return concluded([warn(`${UNKNOWN}: ${facts.unreadable}`)]);
  const condition = facts.condition;
  if (condition === null) {
    const why = facts.storeConfigured
      ? 'the Etcd status has no BackupReady condition yet'
      : 'the Etcd status has no BackupReady condition (druid writes none while spec.backup.store is unset)';
    return concluded([warn(`${UNKNOWN}: ${why}`)]);
  }
  if (condition.status === 'False') return concluded([fail(`backup failing: BackupReady=False${said(condition)}`)]);
  if (condition.status !== 'True') {
    return concluded([warn(`${UNKNOWN}: BackupReady=${conditionText(condition.status)}${said(condition)}`)]);
  }
  const last = lastSnapshot(facts);
  const problems = facts.leaseProblems.length > 0 ? ` (${facts.leaseProblems.join('; ')})` : '';
  if (last === null) {
    return concluded([warn(`${UNKNOWN}: BackupReady=True but no snapshot Lease has a renewTime${problems}`)]);
  }
  const ageMs = Math.max(0, Date.parse(input.evaluatedAt) - last.ms);
  const seen = `last snapshot ${last.kind} at ${last.at}, ${formatAge(ageMs)} ago`;
  if (ageMs > facts.maxSnapshotAgeMs) {
    return concluded([warn(`backup stale: ${seen}, older than ${formatAge(facts.maxSnapshotAgeMs)} (BackupReady=True)`)]);
  }
  return concluded([], `BackupReady=True, ${seen} (at most ${formatAge(facts.maxSnapshotAgeMs)})`);
};
