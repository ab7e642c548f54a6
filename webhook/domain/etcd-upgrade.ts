// The etcd 3.5 → 3.6 upgrade gate for rollouts of a kind that says which etcd its objects run
// (ControllerKind.etcdVersion: a KubeadmControlPlane, through kubeadm). Pure.
//
// etcd's upgrade guide (etcd-io/website, content/en/docs/v3.6/upgrades/upgrade_3_6.md, "Update
// 3.5", as of its commit 9acb6b48 of 2026-08-14): "Before upgrading to 3.6, make sure that all of
// your 3.5 members are updated to 3.5.32 or later. Patch releases 3.5.24 through 3.5.32 fix
// several potential upgrade blockers". Earlier versions of the guide named 3.5.20, then 3.5.26;
// we follow the newest. A rolling 3.6 member joining members below it can fail the upgrade (e.g.
// "too many learner members", leftover v2store content), and etcd cannot be downgraded once
// every member runs 3.6.
//
// A KCP's etcd moves to 3.6 when its etcd image tag says so, or, without a tag, when the
// Kubernetes version it rolls to is one whose kubeadm defaults to etcd 3.6 (its module reads
// which; this file judges). Such a change is
// denied while any member runs etcd below the minimum, naming those members. Every other change
// (a version step that stays on 3.5, a change of anything else) is left to the other rules.
import { printableExcerpt as clipped } from '../../functions/shared/redact.js';
import { kindOf } from '../../functions/domain/kinds/registry.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { DecisionInput } from './contract.js';

export { KUBEADM_DEFAULT_ETCD, kubeadmDefaultEtcd } from '../../functions/domain/kinds/kubeadm-control-plane.js';

/** The 3.5 patch every member must run before any member moves to 3.6 (see above). */
export const MIN_ETCD_FOR_3_6 = '3.5.32';

export interface EtcdVersion {
  major: number;
  minor: number;
  patch: number;
}

/** "3.5.16", "v3.6.5", "3.6.9-0", "3.5.21-0@sha256:…" → its numbers; null for anything else. */
export function parseEtcdVersion(text: unknown): EtcdVersion | null {
  if (typeof text !== 'string') return null;
  const match = /^v?(\d{1,4})\.(\d{1,4})\.(\d{1,6})(?:[-+@].*)?$/.exec(text.trim());
  if (!match) return null;
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]) };
}

function compare(a: EtcdVersion, b: EtcdVersion): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch;
}

const format = (version: EtcdVersion): string => `${version.major}.${version.minor}.${version.patch}`;

/** The etcd a guarded object runs, by its kind's `etcdVersion`; null version when it cannot be told. */
function etcdOf(read: (object: unknown) => { version: string | null; source: string }, object: unknown) {
  const etcd = read(object);
  return { version: etcd.version === null ? null : parseEtcdVersion(etcd.version), source: etcd.source };
}

/** Members that run an etcd below the minimum, as "name (version)"; members of unknown version are not counted. */
function membersBelow(evaluation: Evaluation, minimum: EtcdVersion): string[] {
  return evaluation.members.flatMap((member) => {
    const version = parseEtcdVersion(member.version);
    if (version === null || compare(version, minimum) >= 0) return [];
    return [`${clipped(member.name || member.id)} (${format(version)})`];
  });
}

/**
 * Null when the change does not move a KubeadmControlPlane's etcd into 3.6 or every member is
 * ready for it; otherwise the reason to deny, naming the members below the minimum.
 */
export function judgeEtcdUpgrade(
  input: Pick<DecisionInput, 'request' | 'classification'>,
  evaluation: Evaluation,
): string | null {
  const { classification, request } = input;
  const read = kindOf(classification.object)?.etcdVersion;
  if (read === undefined || classification.change.kind !== 'rollout') return null;
  const next = etcdOf(read, request.object);
  if (next.version === null || compare(next.version, { major: 3, minor: 6, patch: 0 }) < 0) return null;
  const previous = etcdOf(read, request.oldObject).version;
  // Already on 3.6 before this change: the crossing was judged when it was made.
  if (previous !== null && compare(previous, { major: 3, minor: 6, patch: 0 }) >= 0) return null;
  const minimum = parseEtcdVersion(MIN_ETCD_FOR_3_6);
  if (minimum === null) return null;
  const below = membersBelow(evaluation, minimum);
  if (below.length === 0) return null;
  return (
    `this change moves etcd to ${format(next.version)} (${next.source}); etcd's upgrade guide requires every member ` +
    `on ${MIN_ETCD_FOR_3_6} or later before any member moves to 3.6, and ${below.join(', ')} ` +
    `${below.length === 1 ? 'runs' : 'run'} below it: upgrade them to ${MIN_ETCD_FOR_3_6}+ first`
  );
}
