// Checks about headroom: database size against the quota, raft index lag, versions, latency.
import { type CheckFunction, type Finding, concluded, fail, warn } from '../check.js';
import { statusOf } from '../cluster-view.js';
import { formatBytes, label } from '../wording.js';

// Against the quota the member reports (etcd 3.6+), else the configured one (quotaBackendBytes).
export const dbSizeCheck: CheckFunction = ({ members, input, thresholds }) => {
  const result = concluded([], 'no DB size known');
  const quotas = new Set<string>();
  for (const member of members) {
    const status = statusOf(member);
    if (!status) continue;
    const reported = status.dbSizeQuotaBytes;
    const quotaBytes = reported ?? input.quotaBackendBytes;
    const quota = `${formatBytes(quotaBytes)}${reported === undefined ? '' : ' (reported by the member)'}`;
    quotas.add(quota);
    result.passMessage = `every DB below ${Math.round(thresholds.dbWarnRatio * 100)}% of quota ${[...quotas].join(', ')}`;
    const ratio = status.dbSizeBytes / quotaBytes;
    const text = `member ${label(member)} DB ${formatBytes(status.dbSizeBytes)} is ${Math.round(ratio * 100)}% of quota ${quota}`;
    if (ratio >= thresholds.dbFailRatio) result.findings.push(fail(text));
    else if (ratio >= thresholds.dbWarnRatio) result.findings.push(warn(text));
  }
  return result;
};

/**
 * Free pages in a member's DB file (dbSize − dbSizeInUse, etcd 3.4+): space a compaction freed
 * that only a defrag returns, and that still counts against the quota. It never fails: the member
 * serves, and a defrag blocks the member it runs on for as long as it rewrites the file, so the
 * hint names one member at a time.
 */
export const fragmentationCheck: CheckFunction = ({ members, thresholds }) => {
  const findings: Finding[] = [];
  let judged = 0;
  for (const member of members) {
    const status = statusOf(member);
    // A member before 3.4 leaves dbSizeInUse at proto3's 0: not a DB with nothing in use.
    if (!status || status.dbSizeBytes <= 0 || status.dbSizeInUseBytes <= 0) continue;
    judged += 1;
    const free = Math.max(0, status.dbSizeBytes - status.dbSizeInUseBytes);
    const share = free / status.dbSizeBytes;
    if (share > thresholds.fragmentationWarnRatio && free >= thresholds.fragmentationMinFreeBytes) {
      const url = member.clientUrls[0] ?? member.endpoint;
      findings.push(
        warn(
          `member ${label(member)} DB fragmented: ${formatBytes(free)} of ${formatBytes(status.dbSizeBytes)} free (${Math.round(share * 100)}%, ${formatBytes(status.dbSizeInUseBytes)} in use); defragment one member at a time, it blocks the member while it runs: etcdctl defrag --endpoints=${url}`,
        ),
      );
    }
  }
  const rule = `more than ${Math.round(thresholds.fragmentationWarnRatio * 100)}% and ${formatBytes(thresholds.fragmentationMinFreeBytes)} free`;
  return concluded(findings, judged === 0 ? 'no DB size in use known' : `no DB ${rule}`);
};

// Measured against the leader when known, else against the most advanced member.
export const raftIndexCheck: CheckFunction = ({ members, leader, thresholds }) => {
  const indexes = members.flatMap((member) => {
    const status = statusOf(member);
    return status ? [{ member, status }] : [];
  });
  const leaderStatus = leader.id === null ? undefined : indexes.find((entry) => entry.member.id === leader.id)?.status;
  const referenceIndex = leaderStatus?.raftIndex ?? Math.max(0, ...indexes.map((entry) => entry.status.raftIndex));
  const findings = indexes
    .filter(({ status }) => referenceIndex - status.raftIndex > thresholds.raftLagWarnEntries)
    .map(({ member, status }) =>
      warn(
        `member ${label(member)} lags ${referenceIndex - status.raftIndex} raft entries behind (${status.raftIndex} vs ${referenceIndex})`,
      ),
    );
  return concluded(findings, `no member more than ${thresholds.raftLagWarnEntries} entries behind`);
};

export const versionCheck: CheckFunction = ({ members }) => {
  const versions = new Map<string, string[]>();
  for (const member of members) {
    const status = statusOf(member);
    if (status) versions.set(status.version, [...(versions.get(status.version) ?? []), member.name || member.id]);
  }
  if (versions.size > 1) {
    const runs = [...versions.entries()].map(([version, names]) => `${names.join(', ')} run ${version}`);
    const findings = [warn(`version skew: ${runs.join('; ')}`)];
    const minors = [...versions.keys()].flatMap((version) => {
      const match = /^(\d+)\.(\d+)\./.exec(version);
      return match ? [{ version, rank: Number(match[1]) * 1000 + Number(match[2]) }] : [];
    });
    const oldest = minors.reduce<(typeof minors)[number] | undefined>((a, b) => (a && a.rank <= b.rank ? a : b), undefined);
    const newest = minors.reduce<(typeof minors)[number] | undefined>((a, b) => (a && a.rank >= b.rank ? a : b), undefined);
    // etcd upgrades one minor at a time; members further apart are a skipped step (or a member
    // of another cluster), which etcd's upgrade policy does not support.
    if (oldest && newest && newest.rank - oldest.rank > 1) {
      findings.push(
        warn(
          `version skew across more than one minor (${oldest.version} to ${newest.version}): etcd supports upgrading one minor at a time`,
        ),
      );
    }
    return concluded(findings);
  }
  return concluded([], versions.size === 1 ? `all members run ${[...versions.keys()].join('')}` : 'no version known');
};

export const latencyCheck: CheckFunction = ({ members, thresholds }) => {
  const findings: Finding[] = [];
  for (const member of members) {
    const latency = member.probe?.latencyMs;
    if (latency !== null && latency !== undefined && latency > thresholds.slowMemberMs) {
      findings.push(
        warn(`member ${label(member)} slow: status took ${Math.round(latency)} ms (limit ${thresholds.slowMemberMs} ms)`),
      );
    }
  }
  return concluded(findings, `every member answered within ${thresholds.slowMemberMs} ms`);
};
