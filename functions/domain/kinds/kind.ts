// What etcd-guard must know about a controller kind to guard it, as one contract: its identity,
// its guard rule, how it removes members, how its Machines or pods map to members, how discovery
// turns its objects into targets, and how its etcd is reached. Each kind is one module in this
// folder (kubeadm-control-plane.ts, druid-etcd.ts, statefulset.ts) and registry.ts lists them;
// the webhook, discovery and the evaluation read the registry, never a kind's name. Pure: the I/O
// (listing, reading Machines, opening etcd) stays in the adapters and use cases, which a kind only
// names. See ARCHITECTURE.md, "How to add a guarded kind".
import type { MemberReport } from '../evaluation-document.js';
import type { ControlPlaneMachine } from '../machines.js';
import type { DiscoveredTarget, DiscoveryProblem, TargetReach } from '../targets.js';
import type { DiscoveryDefaults } from './discovery-common.js';

export interface ControllerKindId {
  group: string;
  kind: string;
  /** Plural resource name, as in AdmissionRequest.resource.resource. */
  resource: string;
}

/** How a rule's objects are selected for guarding. */
export type GuardScope =
  /** Every object of the resource is guarded (then a target must match it, or it is denied). */
  | 'all'
  /**
   * Only objects that some target's `match` names by namespace AND name are guarded; a /scale
   * request carries no labels, so labels can never select these. Others are not guarded at all.
   */
  | 'named-by-target';

/** A field under a guarded pointer whose change the controller applies without replacing a member. */
export interface HarmlessChild {
  pointer: string;
  /** Why changing it replaces or restarts no member (the controller's behaviour, from its source). */
  reason: string;
}

/**
 * A guarded subtree: any change at or under `pointer` counts, except changes at or under one of
 * its `harmless` children. Guarding the parent and listing the harmless children (rather than
 * listing dangerous children one by one) fails closed: a field a controller adds later is guarded
 * until someone shows it is harmless.
 */
export interface GuardedPointer {
  pointer: string;
  /** Why a change here moves etcd membership. */
  reason: string;
  harmless: readonly HarmlessChild[];
}

export interface GuardRule extends ControllerKindId {
  /**
   * Versions the rule was written for. Requests for another version of the same group/resource are
   * still guarded with the same pointers (failing closed beats silently ignoring a new version).
   * The first one names the kind's objects in Events (every supported release serves it).
   */
  versions: readonly string[];
  /** RFC 6901 pointers (escaped form) of the guarded subtrees in the parent object. */
  guarded: readonly GuardedPointer[];
  /** Pointer of the replica count inside the parent object. */
  replicasPointer: string;
  /** The replica count an object has when the field is absent (the API server's default). */
  defaultReplicas: number;
  scope: GuardScope;
}

/** How a guarded change moves the etcd membership, as the controller would carry it out. */
export type MembershipChange =
  | { kind: 'scale-up'; from: number; to: number }
  | { kind: 'scale-down'; from: number; to: number }
  /** Template/version/strategy change: one new member joins before an old one leaves. */
  | {
      kind: 'rollout';
      replicas: number;
      changedPaths: string[];
      /**
       * Set when the same request also changes the replica count (from previousReplicas to
       * replicas): the projection then applies BOTH the rollout and the scale rules (stricter).
       */
      previousReplicas?: number;
    };

/**
 * Whether the change seeds a new member from the leader's snapshot: a scale-up, or a rollout
 * (each new member joins before an old one leaves). Those are the changes consistency.scaleUps
 * hashes for, since a new member copies whichever data the leader holds.
 */
export function addsMember(change: { kind: string }): boolean {
  return change.kind === 'scale-up' || change.kind === 'rollout';
}

/**
 * A label edit (no guarded field changed) that moves a guarded object away from the target it
 * belonged to, to another target or to none. Later changes would be judged against another etcd
 * cluster's evaluation, so the move itself is judged against the target it leaves: it must not be
 * Unhealthy.
 */
export interface TargetMove {
  kind: 'retarget';
  /** The target the object moves to, or null when no target matches it any more. */
  to: string | null;
}

/** What one removal takes out of etcd: a healthy voting member, an unhealthy one, or no member at all. */
export type RemovedMember = 'healthy' | 'unhealthy' | 'none';

/** How the controller carries a change out, as far as known: what the projection walks. */
export interface ProjectionOptions {
  /**
   * Every member the shrink removes, in the controller's order (null where its choice is not
   * determined: the worst case, a healthy member). Absent: every removal is the worst case.
   */
  removalOrder?: readonly (RemovedMember | null)[];
  /**
   * The orders the controller may take when its rule leaves more than one open (KCP: which of
   * several Machines it picks changes what it picks next); each is projected and every one must
   * hold. Used instead of `removalOrder` when present.
   */
  removalOrders?: readonly (readonly (RemovedMember | null)[])[];
  /** Why the choice is not determined and how to make it so; added to a denial that the worst case caused. */
  undeterminedHint?: string;
  /**
   * KCP rollout strategy maxSurge 0: an old member leaves before its replacement joins; 'unknown'
   * (a value the guard cannot read): either order, both projected.
   */
  removeBeforeAdd?: boolean | 'unknown';
  /** Alarms the controller does not wait on: KCP's scale-down preflight skips the Machine it deletes. */
  excusedAlarms?: number;
  /** KCP with external etcd: replica changes are not etcd membership changes. */
  externalEtcd?: boolean;
}

export type MachinesRead =
  | {
      ok: true;
      machines: ControlPlaneMachine[];
      /** The Cluster's control-plane failure domains; absent or null when they were not read. */
      failureDomains?: readonly string[] | null;
    }
  | { ok: false; error: string };

/**
 * The object a /scale request scales, as the server read it (only the fields at the kind's
 * `parentPointers`, and its labels), or why it could not be read.
 */
export type ParentRead = { ok: true; object: unknown } | { ok: false; error: string };

/** The request's objects, as the admission request carries them (untrusted JSON). */
export interface RequestObjects {
  object?: unknown;
  oldObject?: unknown;
}

/** What a kind's removal order is computed from. */
export interface RemovalFacts {
  object: { namespace: string; name: string; viaScale: boolean };
  change: MembershipChange | TargetMove;
  /** Replicas before and after, when the change shrinks the object; null when it does not. */
  shrink: { from: number; to: number } | null;
  request: RequestObjects;
  members: readonly MemberReport[];
  /** Read for a shrinking kind whose `machines` say so; absent when the server has no way to read them. */
  machines?: MachinesRead;
  /** Read for a /scale shrink of a kind with `parentPointers`; absent when the server has no way to read it. */
  parent?: ParentRead;
}

export interface KindRemoval {
  /** How the controller carries `facts.change` out: its removal order and whatever else the projection needs. */
  projectionOptions(facts: RemovalFacts): ProjectionOptions;
  /**
   * The membership change the controller really makes, when that differs from what the request
   * changes (KCP: a rollout-strategy edit alone starts no rollout); null: no member moves.
   */
  effectiveChange?(change: MembershipChange, request: RequestObjects): MembershipChange | TargetMove | null;
  /** Scaling to 0 and back is hibernation, allowed whatever the verdict (etcd-druid's Gardener use). */
  hibernates?: boolean;
  /**
   * What the removal order reads from the object itself (RFC 6901 pointers), which a /scale
   * request's Scale does not carry: the server then reads the parent object on a /scale shrink.
   */
  parentPointers?: readonly string[];
}

/** How a kind's Machines map to its etcd members, when Machines decide which member leaves. */
export interface KindMachines {
  /** The owner reference kind a Machine of this kind's objects carries. */
  ownerKind: string;
  /** The label naming the object's Cluster (absent on a /scale request, whose Scale has no labels). */
  clusterNameOf(object: unknown): string | null;
}

/** A resource discovery lists: tried version by version, newest first (a 404 moves on). */
export interface ListedResource {
  group: string;
  versions: readonly string[];
  plural: string;
}

export interface ProviderResult {
  targets: DiscoveredTarget[];
  problems: DiscoveryProblem[];
}

export interface KindDiscovery {
  /** The provider's name: `discovery.<source>` in the config, `<source>-…` in target names. */
  source: string;
  /**
   * What a round lists: first the kind's own objects (in the scope's namespaces, with its labels),
   * then whatever else its mapping reads (in the scope's namespaces, any labels).
   */
  lists: readonly [ListedResource, ...ListedResource[]];
  /** Listed objects (in `lists` order) to targets, or problems naming the object. */
  toTargets(listed: readonly (readonly unknown[])[], defaults: DiscoveryDefaults): ProviderResult;
  /** Labels besides the scope's selector that decide the object's target (changing one is a move). */
  identityLabels: readonly string[];
  /** Its target follows its Cluster owner reference (changing it is a move). */
  followsClusterOwner: boolean;
}

/**
 * How a discovered target's etcd is reached: one of the strategies the use case implements
 * (usecases/reach-target.ts), named by the `reach.kind` the kind's discovery puts on its targets.
 */
export type ReachStrategy = TargetReach['kind'];

/** Everything etcd-guard knows about one controller kind. */
export interface ControllerKind {
  /** Group, kind, resource, versions, guarded pointers, replicas and scope. */
  rule: GuardRule;
  removal: KindRemoval;
  machines?: KindMachines;
  /**
   * The etcd version an object of this kind runs (as its spec says, e.g. "3.6.9-0"; null when it
   * cannot be told) and where that came from: webhook/domain/etcd-upgrade.ts then gates a rollout
   * that moves etcd to 3.6. `reference: 'image'`: `version` is a whole image reference (a druid
   * Etcd's spec.etcd.image, a StatefulSet's etcd container image), not a bare tag. Absent: its
   * rollouts are not gated.
   */
  etcdVersion?(object: unknown): { version: string | null; source: string; reference?: 'tag' | 'image' };
  discovery?: KindDiscovery;
  /** How its discovered targets' etcd is reached; static targets are always reached statically. */
  reach: ReachStrategy;
}
