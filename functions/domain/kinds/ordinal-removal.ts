// The removal order of a controller that names its pods `<name>-<ordinal>` and removes the highest
// ordinal first (the StatefulSet controller, and etcd-druid through its StatefulSet), and what one
// removal takes out of etcd. Shared by the kinds whose members are such pods. Pure.
import type { MemberReport } from '../evaluation-document.js';
import type { ProjectionOptions, RemovedMember } from './kind.js';

/** What removing `member`'s pod or Machine takes out of etcd; undefined when no member is there. */
export function removedBy(member: MemberReport | undefined): RemovedMember | undefined {
  if (member === undefined) return undefined;
  if (member.learner) return 'none';
  return member.healthy ? 'healthy' : 'unhealthy';
}

/** The order for one known `start`, or undefined when a voting member is not one of the pods. */
function ordinalOrderFrom(
  entries: readonly { member: MemberReport; ordinal: number }[],
  start: number,
  from: number,
  to: number,
): (RemovedMember | null)[] | undefined {
  // A voting member outside the pods' ordinals is not one of these pods: which pod is whose is unknown.
  if (entries.some(({ member, ordinal }) => !member.learner && (ordinal < start || ordinal >= start + from))) return undefined;
  return entries
    .filter(({ ordinal }) => ordinal >= start + to && ordinal < start + from)
    .sort((a, b) => b.ordinal - a.ordinal)
    .map(({ member }) => removedBy(member) ?? null);
}

/**
 * StatefulSet / druid removals: ordinals from start+from−1 down to start+to. Determined only when
 * every voting member is named `<name>-<ordinal>` within the pods' ordinals; a removed ordinal
 * without a member removes none. O(members): the ordinals themselves (which may be absurd
 * numbers) are never walked.
 */
export function ordinalRemovalOrder(
  members: readonly MemberReport[],
  name: string,
  start: number,
  from: number,
  to: number,
): (RemovedMember | null)[] | undefined {
  const ordinalOf = (member: MemberReport): number | null => {
    const match = /^(.*)-(\d+)$/.exec(member.name);
    return match && match[1] === name ? Number(match[2]) : null;
  };
  const voting = members.filter((member) => !member.learner);
  if (voting.length === 0 || voting.some((member) => ordinalOf(member) === null)) return undefined;
  const entries = members
    .map((member) => ({ member, ordinal: ordinalOf(member) }))
    .filter((entry): entry is { member: MemberReport; ordinal: number } => entry.ordinal !== null);
  return ordinalOrderFrom(entries, start, from, to);
}

/**
 * A shrink's options for an ordinal controller whose first ordinal is `start` (null: the request
 * does not tell it, `unknownStartHint` says why), with the hint when members do not follow the pods.
 */
export function ordinalProjection(
  members: readonly MemberReport[],
  name: string,
  start: number | null,
  shrink: { from: number; to: number } | null,
  unknownStartHint: string,
): ProjectionOptions {
  if (shrink === null) return {};
  const order = start === null ? undefined : ordinalRemovalOrder(members, name, start, shrink.from, shrink.to);
  if (order !== undefined) return { removalOrder: order };
  if (start === null) return { undeterminedHint: unknownStartHint };
  return {
    undeterminedHint: `etcd member names do not follow the pod names ${name}-<ordinal>, so a healthy member is assumed to leave`,
  };
}
