// The etcd minor-version upgrade gate (3.5 → 3.6, 3.6 → 3.7) for rollouts of a kind that says
// which etcd its objects run (ControllerKind.etcdVersion: a KubeadmControlPlane through kubeadm or
// its imageTag, a druid Etcd's spec.etcd.image, a guarded StatefulSet's etcd container image). Pure.
//
// etcd's upgrade guide (etcd-io/website, content/en/docs/v3.6/upgrades/upgrade_3_6.md, "Update
// 3.5", as of its commit 9acb6b48 of 2026-08-14): "Before upgrading to 3.6, make sure that all of
// your 3.5 members are updated to 3.5.32 or later. Patch releases 3.5.24 through 3.5.32 fix
// several potential upgrade blockers". Earlier versions of the guide named 3.5.20, then 3.5.26;
// we follow the newest. A rolling 3.6 member joining members below it can fail the upgrade (e.g.
// "too many learner members", leftover v2store content); going back takes etcd's own downgrade
// procedure (`etcdctl downgrade enable`, then member by member), not a rollout.
// The 3.7 guide (https://etcd.io/docs/v3.7/upgrades/upgrade_3_7/, "Update 3.6", still a draft
// when read on 2026-12-02): "Before upgrading to 3.7, make sure that all of your 3.6 members are
// updated to 3.6.11 or later. Earlier 3.6 patch releases may not be compatible with a rolling
// upgrade to 3.7."
//
// A KCP's etcd moves to a new minor when its etcd image tag says so, or, without a tag, when the
// Kubernetes version it rolls to is one whose kubeadm defaults to it (its module reads which; this
// file judges). Such a change is denied while any member runs etcd below that crossing's minimum,
// naming those members. So is a rollout whose etcd cannot be read (a tag outside the published
// grammars, a digest, no tag): undetermined, it may be the next crossing of any member. Every
// other change (a patch step within a minor, a change of anything else) is left to the other
// rules. Another kind gates its rollouts through readEtcdTag / readEtcdImage and judgeEtcdRollout.
import { printableExcerpt as clipped } from '../../functions/shared/redact.js';
import { kindOf } from '../../functions/domain/kinds/registry.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { ControllerKind } from '../../functions/domain/kinds/kind.js';
import type { DecisionInput } from './contract.js';

export { KUBEADM_DEFAULT_ETCD, kubeadmDefaultEtcd } from '../../functions/domain/kinds/kubeadm-control-plane.js';

export interface EtcdVersion {
  major: number;
  minor: number;
  patch: number;
}

/** A minor upgrade etcd's guides name a minimum for: every member on `minimum`+ before any runs `into`. */
interface Crossing {
  into: EtcdVersion;
  minimum: EtcdVersion;
}

/** Oldest first; a minor past the newest is judged by the newest, the last one a guide names. */
const CROSSINGS: readonly Crossing[] = [
  { into: { major: 3, minor: 6, patch: 0 }, minimum: { major: 3, minor: 5, patch: 32 } },
  { into: { major: 3, minor: 7, patch: 0 }, minimum: { major: 3, minor: 6, patch: 11 } },
];

/** The 3.5 patch every member must run before any member moves to 3.6 (see above). */
export const MIN_ETCD_FOR_3_6 = '3.5.32';
/** The 3.6 patch every member must run before any member moves to 3.7 (see above). */
export const MIN_ETCD_FOR_3_7 = '3.6.11';

/** A member's version as etcd reports it ("3.5.16", "3.6.0-rc.2") → its numbers; null for anything else. */
export function parseEtcdVersion(text: unknown): EtcdVersion | null {
  if (typeof text !== 'string') return null;
  const match = /^v?(\d{1,4})\.(\d{1,4})\.(\d{1,6})(?:[-+].*)?$/.exec(text.trim());
  if (!match) return null;
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]) };
}

/**
 * What an image tag or reference says about the etcd it runs. `version`: the tag reads as one
 * etcd release (`prerelease` for an alpha, beta or rc of it); `undetermined`: it does not, and
 * `why` says so for a denial.
 */
export type EtcdVersionReading =
  | { kind: 'version'; version: EtcdVersion; prerelease: boolean; text: string }
  | { kind: 'undetermined'; text: string; why: string };

const SHOWN = 60;
/** Images whose tag is their own version, not etcd's: druid's etcd-wrapper embeds etcd. */
export const VERSIONLESS_ETCD_IMAGES: readonly string[] = ['etcd-wrapper'];

/**
 * The tag grammars etcd images are published under, and nothing else: etcd's own releases
 * (`v3.6.5`, pre-releases `v3.6.0-rc.2`, `v3.6.0-alpha.0`), registry.k8s.io/etcd for kubeadm
 * (`3.5.21-0`, `3.6.4-0`: the version and an image revision) and Gardener's etcd-custom-image
 * (`v3.4.26-2`, `v3.4.13-bootstrap-12`). Anything else (`3.6`, `latest`, `V3.6.5`, `3.6.5_amd64`,
 * `3.6.5.0`) may run any etcd, so it is not read as a version at all.
 */
const PUBLISHED_TAG =
  /^v?(0|[1-9]\d{0,3})\.(0|[1-9]\d{0,3})\.(0|[1-9]\d{0,5})(?:-(\d{1,4})|-bootstrap-(\d{1,4})|-(alpha|beta|rc)(?:\.(\d{1,4}))?)?$/;

/** A bare image tag (a KCP's `etcd.local.imageTag`, the part after `:` of a reference). */
export function readEtcdTag(tag: unknown): EtcdVersionReading {
  if (typeof tag !== 'string') return { kind: 'undetermined', text: String(typeof tag), why: 'no image tag is given' };
  const text = clipped(tag, SHOWN);
  if (tag.includes('@')) {
    return { kind: 'undetermined', text, why: `tag ${text} carries a digest, which decides the image and says no version` };
  }
  const match = PUBLISHED_TAG.exec(tag);
  if (!match) return { kind: 'undetermined', text, why: `tag ${text} is not a published etcd release tag` };
  const version = { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]) };
  if (version.major !== 3) return { kind: 'undetermined', text, why: `tag ${text} is not an etcd 3 release` };
  return { kind: 'version', version, prerelease: match[6] !== undefined, text };
}

/**
 * A full image reference (`[registry[:port]/]repository[:tag][@digest]`, e.g. a druid Etcd's
 * `spec.etcd.image`): a digest decides which image runs whatever the tag says, and a reference
 * without a tag runs `latest`, so both are undetermined. `versionlessRepositories` names images
 * whose tag is their own version, not etcd's (druid's etcd-wrapper embeds etcd).
 */
export function readEtcdImage(reference: unknown, versionlessRepositories: readonly string[] = []): EtcdVersionReading {
  if (typeof reference !== 'string' || reference.trim() === '') {
    return { kind: 'undetermined', text: '', why: 'no image is given' };
  }
  const text = clipped(reference, SHOWN);
  if (reference.includes('@')) {
    return { kind: 'undetermined', text, why: `image ${text} is pinned by digest, which says no version` };
  }
  const slash = reference.lastIndexOf('/');
  const colon = reference.lastIndexOf(':');
  // A colon before the last slash is a registry's port (`registry:5000/etcd`), not a tag.
  if (colon <= slash) return { kind: 'undetermined', text, why: `image ${text} has no tag (it runs whatever latest is)` };
  const repository = reference.slice(0, colon);
  const name = repository.slice(slash + 1);
  if (versionlessRepositories.some((each) => each === repository || each === name)) {
    return { kind: 'undetermined', text, why: `image ${text}'s tag is ${name}'s own version, not etcd's` };
  }
  const tag = readEtcdTag(reference.slice(colon + 1));
  return tag.kind === 'version' ? { ...tag, text } : { ...tag, text, why: `image ${text}: ${tag.why}` };
}

function compare(a: EtcdVersion, b: EtcdVersion): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch;
}

const format = (version: EtcdVersion): string => `${version.major}.${version.minor}.${version.patch}`;
const minorOf = (version: EtcdVersion): string => `${version.major}.${version.minor}`;
const FIRST_3_6 = (CROSSINGS[0] as Crossing).into;

/** The crossing a move into `version`'s minor takes: the newest one into that minor or below it. */
function crossingInto(version: EtcdVersion): Crossing | undefined {
  return CROSSINGS.filter((crossing) => compare(crossing.into, version) <= 0).at(-1);
}

/**
 * The crossing a member on `version` takes next: into the following minor; a member below 3.5
 * faces the first one too (its next step, 3.5, has no minimum here, and 3.6 would skip a minor).
 */
function nextCrossingOf(version: EtcdVersion): Crossing | undefined {
  return CROSSINGS.find((crossing) => compare(version, crossing.into) < 0);
}

/** Members that run an etcd below the minimum, as "name (version)"; members of unknown version are not counted. */
function membersBelow(members: Evaluation['members'], minimum: EtcdVersion): string[] {
  return members.flatMap((member) => {
    const version = parseEtcdVersion(member.version);
    if (version === null || compare(version, minimum) >= 0) return [];
    return [`${clipped(member.name || member.id)} (${format(version)})`];
  });
}

/** What a rollout runs after the change and ran before it, as read, and where the reading came from. */
export interface EtcdRollout {
  next: EtcdVersionReading;
  /** Where `next` was read, for the denial (e.g. "etcd imageTag 3.6.5-0"). */
  source: string;
  previous: EtcdVersionReading;
}

function requirement(crossing: Crossing, below: readonly string[]): string {
  const minimum = format(crossing.minimum);
  return (
    `etcd's upgrade guide requires every member on ${minimum} or later before any member moves to ` +
    `${minorOf(crossing.into)}, and ${below.join(', ')} ${below.length === 1 ? 'runs' : 'run'} below it: ` +
    `upgrade them to ${minimum}+ first`
  );
}

/**
 * The gate itself, for any kind that can say what its rollout runs: null when the rollout stays
 * below 3.6, when the object already ran a release of the minor it rolls to (the crossing was
 * judged when it was made), or when every member runs the crossing's minimum; otherwise the reason
 * to deny. A rollout whose etcd cannot be read is undetermined: it may take each member's next
 * crossing (a member on 3.5 into 3.6, one on 3.6 into 3.7), past the minor the object ran before.
 */
export function judgeEtcdRollout(rollout: EtcdRollout, members: Evaluation['members']): string | null {
  const { next, previous } = rollout;
  // A pre-release is not a release the crossing could have been judged on.
  const crossed = previous.kind === 'version' && !previous.prerelease ? previous.version : null;
  const alreadyOn = (into: EtcdVersion) => crossed !== null && crossed.major === into.major && crossed.minor >= into.minor;
  if (next.kind === 'version') {
    if (compare(next.version, FIRST_3_6) < 0 || alreadyOn(next.version)) return null;
    const crossing = crossingInto(next.version);
    const below = crossing === undefined ? [] : membersBelow(members, crossing.minimum);
    if (crossing === undefined || below.length === 0) return null;
    return `this change moves etcd to ${format(next.version)} (${rollout.source}); ${requirement(crossing, below)}`;
  }
  const blocked = new Map<Crossing, string[]>();
  for (const member of members) {
    const version = parseEtcdVersion(member.version);
    const crossing = version === null ? undefined : nextCrossingOf(version);
    if (version === null || crossing === undefined || alreadyOn(crossing.into)) continue;
    if (compare(version, crossing.minimum) >= 0) continue;
    blocked.set(crossing, [...(blocked.get(crossing) ?? []), `${clipped(member.name || member.id)} (${format(version)})`]);
  }
  if (blocked.size === 0) return null;
  const crossings = CROSSINGS.filter((crossing) => blocked.has(crossing));
  return (
    `this change runs an etcd whose version is undetermined (${rollout.source}: ${next.why}), so it may move etcd to ` +
    `${crossings.map((crossing) => minorOf(crossing.into)).join(' or ')}; ` +
    crossings.map((crossing) => requirement(crossing, blocked.get(crossing) ?? [])).join('; ')
  );
}

/** The etcd a guarded object runs by its kind's `etcdVersion`, read as a tag; undetermined when it cannot be told. */
function etcdOf(
  read: NonNullable<ControllerKind['etcdVersion']>,
  object: unknown,
): { reading: EtcdVersionReading; source: string; raw: string | null } {
  const etcd = read(object);
  const reading: EtcdVersionReading =
    etcd.version === null
      ? { kind: 'undetermined', text: '', why: 'no etcd version can be told from it' }
      : etcd.reference === 'image'
        ? readEtcdImage(etcd.version, VERSIONLESS_ETCD_IMAGES)
        : readEtcdTag(etcd.version);
  return { reading, source: etcd.source, raw: etcd.version };
}

/**
 * Null when the change does not move a kind's etcd into a new minor or every member is ready for it;
 * otherwise the reason to deny, naming the members below the minimum.
 */
/** Whether a rollout changes the etcd its object runs (its kind's etcdVersion: image or tag), i.e. an etcd upgrade or downgrade. */
export function changesEtcd(input: Pick<DecisionInput, 'request' | 'classification'>): boolean {
  const read = kindOf(input.classification.object)?.etcdVersion;
  if (read === undefined || input.classification.change.kind !== 'rollout') return false;
  const next = read(input.request.object);
  const previous = read(input.request.oldObject);
  return next.version !== previous.version || next.source !== previous.source;
}

export function judgeEtcdUpgrade(
  input: Pick<DecisionInput, 'request' | 'classification'>,
  evaluation: Evaluation,
): string | null {
  const { classification, request } = input;
  const read = kindOf(classification.object)?.etcdVersion;
  if (read === undefined || classification.change.kind !== 'rollout') return null;
  const next = etcdOf(read, request.object);
  const previous = etcdOf(read, request.oldObject);
  // The image (or tag) the members run already, unchanged: the rollout restarts them on it, it
  // crosses nothing (e.g. a druid Etcd on etcd-wrapper, whose tag says no etcd version, resized).
  if (next.raw === previous.raw && next.source === previous.source) return null;
  return judgeEtcdRollout({ next: next.reading, source: next.source, previous: previous.reading }, evaluation.members);
}
