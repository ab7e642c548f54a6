// An etcd downgrade (`etcdctl downgrade enable <minor>`, etcd 3.6+): the cluster is being taken to
// the previous minor, member by member in place. It serves meanwhile, so this is a warning; the
// webhook holds back members being added until it completes or is cancelled (projection.ts).
import { type CheckFunction, concluded, warn } from '../check.js';
import { statusOf } from '../cluster-view.js';

// Members before 3.6 report nothing: the check then does not apply (null), as on 3.4 and 3.5.
export const downgradeCheck: CheckFunction = ({ members }) => {
  const reporting = members.flatMap((member) => {
    const downgrade = statusOf(member)?.downgrade;
    return downgrade === undefined ? [] : [{ member, downgrade }];
  });
  if (reporting.length === 0) return null;
  const byTarget = new Map<string, string[]>();
  for (const { member, downgrade } of reporting) {
    if (!downgrade.enabled) continue;
    const target = downgrade.targetVersion === '' ? 'an unnamed version' : downgrade.targetVersion;
    byTarget.set(target, [...(byTarget.get(target) ?? []), member.name || member.id]);
  }
  const findings = [...byTarget.entries()].map(([target, names]) =>
    warn(
      `etcd downgrade to ${target} enabled, reported by ${names.join(', ')}: changes that add a member wait until it completes or is cancelled (etcdctl downgrade cancel)`,
    ),
  );
  return concluded(findings, `no downgrade enabled (${reporting.length} of ${members.length} members report)`);
};
