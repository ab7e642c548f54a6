// The opt-in consistency check: every voting member's HashKV at one revision, compared. Members
// whose data differ at the same revision (and the same compact revision) serve different answers
// to the same read, and a member added now is seeded from the leader's snapshot, spreading
// whichever copy the leader holds (etcd-io/etcd#8313): that is corruption, so a mismatch fails
// (Unhealthy holds membership changes back until an operator repairs the member). A member that
// could not be hashed leaves the check not judged (a warning), never a pass.
import type { HashKVAnswer } from '../../../ports/etcd-probe.js';
import { type CheckFunction, type CheckResult, type Finding, concluded, fail, warn } from '../check.js';
import { firstError } from '../cluster-view.js';
import type { CarriedConsistency } from '../input.js';
import { formatAge, label } from '../wording.js';

/** One voting member's part: its HashKV answer, or why it has none. */
export type MemberHash = { who: string; hash: HashKVAnswer } | { who: string; unknown: string };

function mostCommon<T>(values: readonly T[]): T | undefined {
  const counts = new Map<T, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  let best: T | undefined;
  let bestCount = 0;
  for (const [value, count] of counts) {
    if (count > bestCount) {
      best = value;
      bestCount = count;
    }
  }
  return best;
}

const names = (entries: readonly { who: string }[]) => entries.map((entry) => entry.who).join(', ');

/** "at revision 40 (compact revision 5)", or "(never compacted)": etcd reports -1 then. */
function atRevision(revision: number, compactRevision: number): string {
  return `at revision ${revision} (${compactRevision > 0 ? `compact revision ${compactRevision}` : 'never compacted'})`;
}

/**
 * The comparison itself, pure. Hashes compare only between members that hashed the same revision
 * having compacted to the same one (etcd's own corruption check skips the others too): the most
 * common such pair is compared, a member at another is not judged this time.
 */
export function compareMemberHashes(entries: readonly MemberHash[]): CheckResult {
  const answered = entries.flatMap((entry) => ('hash' in entry ? [{ who: entry.who, ...entry.hash }] : []));
  const unknown = entries.flatMap((entry) => ('unknown' in entry ? [entry] : []));
  const pointOf = (entry: HashKVAnswer) => atRevision(entry.revision, entry.compactRevision);
  const point = mostCommon(answered.map(pointOf));
  const compared = answered.filter((entry) => pointOf(entry) === point);
  for (const entry of answered) {
    if (pointOf(entry) !== point) {
      unknown.push({ who: entry.who, unknown: `hashed ${pointOf(entry)}, the others ${point}: not comparable` });
    }
  }
  const notJudged = unknown.map((entry) => `member ${entry.who}: ${entry.unknown}`).join('; ');
  const byHash = new Map<string, typeof compared>();
  for (const entry of compared) byHash.set(entry.hash, [...(byHash.get(entry.hash) ?? []), entry]);
  const at = point ?? '';
  const findings: Finding[] = [];
  if (byHash.size > 1) {
    const groups = [...byHash.entries()].sort((a, b) => b[1].length - a[1].length);
    const [majorityHash, majority] = groups[0] ?? ['', []];
    const text =
      majority.length * 2 > compared.length
        ? `data diverges ${at}: ${groups
            .slice(1)
            .map(([hash, members]) => `member ${names(members)} hash ${hash}`)
            .join(', ')} differs from hash ${majorityHash} of ${names(majority)}`
        : `data diverges ${at}, no majority: ${groups.map(([hash, members]) => `${names(members)} hash ${hash}`).join('; ')}`;
    findings.push(fail(notJudged === '' ? text : `${text}; not compared: ${notJudged}`));
    return concluded(findings);
  }
  if (unknown.length > 0 || compared.length === 0) {
    const agreeing = compared.length >= 2 ? `; ${names(compared)} agree ${at}` : '';
    findings.push(warn(`consistency not judged: ${notJudged === '' ? 'no voting member hashed' : notJudged}${agreeing}`));
    return concluded(findings);
  }
  const [hash] = byHash.keys();
  return concluded(
    [],
    compared.length === 1
      ? `the only voting member hashed ${at}: nothing to compare`
      : `${compared.length} voting members agree ${at}: hash ${hash}`,
  );
}

/** What a carried message begins with; a result carried again is carried from its own hash. */
const CARRIED = /^carried \(hashed [^)]*\): /;

/**
 * An evaluation that did not hash (consistency: where it runs) shows the last result, dated, so
 * the next inline evaluation does not erase a divergence the scheduled run found. A failure
 * stays however old (diverged data do not mend by themselves: only a hash that agrees clears it);
 * a pass or a not-judged warning older than maxAgeMs says nothing about now and is left out.
 */
export function carriedConsistency(
  carried: CarriedConsistency | null,
  maxAgeMs: number,
  evaluatedAt: string,
): CheckResult | null {
  if (carried === null) return null;
  const ageMs = Math.max(0, Date.parse(evaluatedAt) - Date.parse(carried.measuredAt));
  if (Number.isNaN(ageMs)) return null;
  const stale = ageMs > maxAgeMs;
  if (stale && carried.status !== 'fail') return null;
  const when = `hashed ${formatAge(ageMs)} earlier, at ${carried.measuredAt}${
    stale ? `; older than ${formatAge(maxAgeMs)}, kept until a hash agrees` : ''
  }`;
  const message = `carried (${when}): ${carried.message.replace(CARRIED, '')}`;
  const result =
    carried.status === 'pass' ? concluded([], message) : concluded([carried.status === 'fail' ? fail(message) : warn(message)]);
  return { ...result, measuredAt: carried.measuredAt };
}

export const consistencyCheck: CheckFunction = ({ input, voting }) => {
  if (input.consistency === undefined) return null;
  if ('carried' in input.consistency) {
    return carriedConsistency(input.consistency.carried, input.consistency.maxAgeMs, input.evaluatedAt);
  }
  if (input.consistency.revision === null) {
    return concluded([warn('consistency not judged: no voting member reported its revision')]);
  }
  const entries = voting.map((member): MemberHash => {
    const who = label(member);
    const hashed = member.probe?.hashKV;
    if (hashed === undefined) return { who, unknown: firstError(member) ?? 'not hashed' };
    return hashed.ok ? { who, hash: hashed.value } : { who, unknown: hashed.error };
  });
  return compareMemberHashes(entries);
};
