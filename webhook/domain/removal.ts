// How the guarded object's controller carries a change out, as far as its rules determine that:
// which members leave on a shrink, in which order, and what else the projection must know. Each
// controller kind's module (functions/domain/kinds/) owns its own answer; this file looks the kind
// up in the registry and hands it the facts. Pure: the server hands in the Machines it read (or
// why it could not).
import type { Evaluation, LastMembership } from '../../functions/domain/evaluation-document.js';
import type { MachinesRead, ParentRead, ProjectionOptions } from '../../functions/domain/kinds/kind.js';
import { kindOf } from '../../functions/domain/kinds/registry.js';
import type { Classification, GuardedChange, MemberExit } from './contract.js';

export type { MachinesRead, ParentRead } from '../../functions/domain/kinds/kind.js';
export {
  kcpRemovalOrder,
  listingGap,
  possiblePicks as kcpPossiblePicks,
  surgeOf,
  type KcpPickFacts,
  type KcpRemovalPlan,
} from '../../functions/domain/kinds/kubeadm-control-plane.js';
export { ordinalRemovalOrder } from '../../functions/domain/kinds/ordinal-removal.js';

type Guarded = Extract<Classification, { kind: 'needs-evaluation' }>;

/** A DELETE of a member-bearing object (member-exits.ts), judged apart from replica changes. */
export function isMemberExit(change: GuardedChange): change is MemberExit {
  return change.kind === 'machine-delete' || change.kind === 'pod-delete';
}

/** Replicas before and after, when the change shrinks the object; null when it does not. */
export function shrinkOf(change: GuardedChange): { from: number; to: number } | null {
  if (change.kind === 'scale-down') return { from: change.from, to: change.to };
  if (change.kind === 'rollout' && change.previousReplicas !== undefined && change.previousReplicas > change.replicas) {
    return { from: change.previousReplicas, to: change.replicas };
  }
  return null;
}

/** The server reads Machines only when they decide something: a kind with Machines that shrinks. */
export function needsMachines(classification: Guarded): boolean {
  return kindOf(classification.object)?.machines !== undefined && shrinkOf(classification.change) !== null;
}

/**
 * What the server reads from a /scale request's parent object for the removal order: the kind's
 * pointers on a /scale shrink of a kind whose removal reads the object; null when nothing.
 */
export function parentPointersFor(classification: Guarded): readonly string[] | null {
  if (!classification.object.viaScale || shrinkOf(classification.change) === null) return null;
  return kindOf(classification.object)?.removal.parentPointers ?? null;
}

/** The object's Cluster name label, when its kind has Machines (absent on a /scale request: no labels). */
export function clusterNameOf(classification: Guarded, object: unknown): string | null {
  return kindOf(classification.object)?.machines?.clusterNameOf(object) ?? null;
}

/** The owner reference kind of the object's Machines, for the server's Machine read. */
export function machineOwnerOf(classification: Guarded): { ownerKind?: string } {
  const ownerKind = kindOf(classification.object)?.machines?.ownerKind;
  return ownerKind === undefined ? {} : { ownerKind };
}

export interface ProjectionFacts {
  classification: Guarded;
  request: { object?: unknown; oldObject?: unknown };
  evaluation: Evaluation;
  /** Read for a shrinking kind with Machines; absent when the server has no way to read them. */
  machines?: MachinesRead;
  /** Read for a /scale shrink when parentPointersFor names something; absent when the server has no way to read it. */
  parent?: ParentRead;
}

/** The membership change the controller really makes (its kind may say a request moves nothing: null). */
export function effectiveChange(
  classification: Guarded,
  request: { object?: unknown; oldObject?: unknown },
): GuardedChange | null {
  const { change } = classification;
  const effective = kindOf(classification.object)?.removal.effectiveChange;
  return change.kind === 'retarget' || isMemberExit(change) || effective === undefined ? change : effective(change, request);
}

/** A hibernation (to 0) or a wake-up (from 0 back to the size it had), as from → to. */
export interface Hibernation {
  what: 'hibernation' | 'wake-up';
  from: number;
  to: number;
  /** A wake-up's: the evaluation that last saw the cluster at that size. */
  lastMembership?: LastMembership;
}

/**
 * A hibernating kind going to 0 replicas, or coming back from 0 to the voting size the target's
 * evaluations last saw (`lastMembership`: etcd-guard's own record, which no tenant writes), with
 * replicas the only guarded change. Anything else (a spec change riding along, a wake-up to
 * another size or to a size nobody knows) is no hibernation: it is judged like any change.
 */
export function hibernationOf(classification: Guarded, lastMembership: LastMembership | undefined): Hibernation | null {
  if (kindOf(classification.object)?.removal.hibernates !== true) return null;
  const { change } = classification;
  if (change.kind === 'scale-down' && change.to === 0) return { what: 'hibernation', from: change.from, to: 0 };
  if (change.kind === 'scale-up' && change.from === 0 && lastMembership?.votingMembers === change.to) {
    return { what: 'wake-up', from: 0, to: change.to, lastMembership };
  }
  return null;
}

/** How the guarded object's controller will carry the change out, as far as known. */
export function projectionOptionsFor(facts: ProjectionFacts): ProjectionOptions {
  const { classification } = facts;
  const kind = kindOf(classification.object);
  const { change } = classification;
  // A kind no module describes cannot be guarded (classify found no rule); nothing is known of it.
  if (kind === undefined || isMemberExit(change)) return {};
  return kind.removal.projectionOptions({
    object: classification.object,
    change,
    shrink: shrinkOf(classification.change),
    request: facts.request,
    members: facts.evaluation.members,
    ...(facts.machines === undefined ? {} : { machines: facts.machines }),
    ...(facts.parent === undefined ? {} : { parent: facts.parent }),
  });
}
