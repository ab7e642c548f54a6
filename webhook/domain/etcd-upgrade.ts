// The etcd 3.5 → 3.6 upgrade gate for changes of a kind whose etcd kubeadm picks (KubeadmControlPlane). Pure.
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
// Kubernetes version it rolls to is one whose kubeadm defaults to etcd 3.6. Such a change is
// denied while any member runs etcd below the minimum, naming those members. Every other change
// (a version step that stays on 3.5, a change of anything else) is left to the other rules.
import { kindOf } from '../../functions/domain/kinds/registry.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { DecisionInput } from './contract.js';
import { valueAtPointer } from './detect-change.js';

/** The 3.5 patch every member must run before any member moves to 3.6 (see above). */
export const MIN_ETCD_FOR_3_6 = '3.5.32';

/**
 * kubeadm's Kubernetes minor → default etcd image tag: kubernetes/kubernetes,
 * cmd/kubeadm/app/constants/constants.go, `SupportedEtcdVersion`, taken from the release
 * branches' tables (1.29–1.32: "3.5.24-0" on release-1.32; 1.33: "3.5.24-0" on release-1.33) and
 * master (34–36: "3.6.9-0"). Only the minor of etcd matters to the gate; the patches are kept as
 * kubeadm writes them so the table can be checked against the source. A Kubernetes minor outside
 * the table takes its nearest entry, as kubeadm's EtcdSupportedVersion does.
 */
export const KUBEADM_DEFAULT_ETCD: ReadonlyMap<number, string> = new Map([
  [29, '3.5.24-0'],
  [30, '3.5.24-0'],
  [31, '3.5.24-0'],
  [32, '3.5.24-0'],
  [33, '3.5.24-0'],
  [34, '3.6.9-0'],
  [35, '3.6.9-0'],
  [36, '3.6.9-0'],
]);

const IMAGE_TAG_POINTER = '/spec/kubeadmConfigSpec/clusterConfiguration/etcd/local/imageTag';
const VERSION_POINTER = '/spec/version';

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

/** kubeadm's default etcd for a KCP spec.version ("v1.34.2"), nearest table entry outside it; null when unparsable. */
export function kubeadmDefaultEtcd(kubernetesVersion: unknown): string | null {
  if (typeof kubernetesVersion !== 'string') return null;
  const match = /^v?1\.(\d{1,3})(?:\.\d{1,6})?(?:[-+].*)?$/.exec(kubernetesVersion.trim());
  if (!match) return null;
  const minor = Number(match[1]);
  const known = [...KUBEADM_DEFAULT_ETCD.keys()];
  const nearest = Math.min(Math.max(minor, Math.min(...known)), Math.max(...known));
  return KUBEADM_DEFAULT_ETCD.get(nearest) ?? null;
}

/** The etcd a KCP object runs: its explicit image tag, else kubeadm's default for its Kubernetes version. */
export function kcpEtcd(object: unknown): { version: EtcdVersion | null; source: string } {
  const tag = valueAtPointer(object, IMAGE_TAG_POINTER);
  if (typeof tag === 'string' && tag !== '') {
    return { version: parseEtcdVersion(tag), source: `etcd imageTag ${clipped(tag)}` };
  }
  const kubernetes = valueAtPointer(object, VERSION_POINTER);
  const etcd = kubeadmDefaultEtcd(kubernetes);
  const version = etcd === null ? null : parseEtcdVersion(etcd);
  const named = typeof kubernetes === 'string' ? clipped(kubernetes) : 'unset';
  return { version, source: `kubeadm's default etcd ${etcd ?? 'unknown'} for Kubernetes ${named}` };
}

/** Tags and versions are tenant input: a bounded, printable excerpt only. */
function clipped(text: string): string {
  const printable = text.replace(/[^\x21-\x7e]/g, '?');
  return printable.length > 40 ? `${printable.slice(0, 37)}...` : printable;
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
  if (kindOf(classification.object)?.kubeadmEtcdUpgrade !== true) return null;
  if (classification.change.kind !== 'rollout') return null;
  const next = kcpEtcd(request.object);
  if (next.version === null || compare(next.version, { major: 3, minor: 6, patch: 0 }) < 0) return null;
  const previous = kcpEtcd(request.oldObject).version;
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
