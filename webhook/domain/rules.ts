// Which resources the guard protects, as data: an API group, the resource (plural) and kind, and
// the JSON pointers whose change moves etcd membership, each with its reason. Pure: no I/O, no
// library imports.
import { CLUSTER_NAME_LABEL, DRUID_ETCD, KUBEADM_CONTROL_PLANE, STATEFUL_SET } from '../../functions/domain/controller-kinds.js';

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

export interface GuardRule {
  group: string;
  kind: string;
  /** Plural resource name, as in AdmissionRequest.resource.resource. */
  resource: string;
  /**
   * Versions the rule was written for. Requests for another version of the same group/resource are
   * still guarded with the same pointers (failing closed beats silently ignoring a new version).
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

/** The /scale subresource always carries an autoscaling/v1 Scale, whatever the parent is. */
export const SCALE_SUBRESOURCE = 'scale';
export const SCALE_REPLICAS_POINTER = '/spec/replicas';
export const SCALE_GUARDED: readonly GuardedPointer[] = [
  { pointer: SCALE_REPLICAS_POINTER, reason: 'the replica count is the number of etcd members', harmless: [] },
];
/**
 * autoscaling/v1 ScaleSpec.replicas is `omitempty`: a Scale to 0 arrives as `spec: {}`, so an
 * absent count in a Scale means 0, never the parent's default.
 */
export const SCALE_DEFAULT_REPLICAS = 0;

/**
 * The largest replica count the guard judges. etcd clusters have 1-9 members (etcd recommends at
 * most 7); a count beyond this is a typo or an attack, and is denied at once, before any
 * projection, so no request can make the webhook compute over billions of members.
 */
export const MAX_JUDGED_REPLICAS = 100;

export { CLUSTER_NAME_LABEL };

export const GUARD_RULES: readonly GuardRule[] = [
  {
    ...KUBEADM_CONTROL_PLANE,
    versions: ['v1beta1', 'v1beta2'],
    guarded: [
      {
        pointer: '/spec',
        reason:
          'KCP scales on spec.replicas and marks Machines outdated (replaced one by one) when spec.version, ' +
          'spec.machineTemplate, spec.kubeadmConfigSpec differ from them, or on spec.rolloutAfter, ' +
          'spec.rolloutBefore.certificatesExpiryDays (v1beta1) / spec.rollout (v1beta2); spec.rolloutStrategy ' +
          'decides surge or remove-first',
        harmless: [
          {
            pointer: '/spec/remediationStrategy',
            reason: 'v1beta1: only tunes retries of remediation that MachineHealthChecks start; changing it replaces nothing',
          },
          {
            pointer: '/spec/remediation',
            reason: 'v1beta2: the same remediation tuning; changing it replaces nothing',
          },
          {
            pointer: '/spec/machineNamingStrategy',
            reason: 'v1beta1: names of Machines created later; existing Machines are not renamed or replaced',
          },
          {
            pointer: '/spec/machineNaming',
            reason: 'v1beta2: names of Machines created later; existing Machines are not renamed or replaced',
          },
        ],
      },
    ],
    replicasPointer: '/spec/replicas',
    defaultReplicas: 1,
    scope: 'all',
  },
  {
    ...DRUID_ETCD,
    versions: ['v1alpha1'],
    guarded: [
      {
        pointer: '/spec',
        reason:
          'etcd-druid builds the StatefulSet from the Etcd spec: replicas; etcd and backup (containers, args, ' +
          'config checksum); labels and annotations (pod template metadata); schedulingConstraints (affinity, ' +
          'topology spread); priorityClassName; sharedConfig (compaction args); storage fields (volume claim ' +
          'template). A change of any of them rolls every member',
        harmless: [],
      },
    ],
    replicasPointer: '/spec/replicas',
    // etcd-druid requires replicas; 0 keeps an absent field from looking like a live cluster.
    defaultReplicas: 0,
    scope: 'all',
  },
  {
    ...STATEFUL_SET,
    versions: ['v1'],
    guarded: [
      {
        pointer: '/spec',
        reason:
          'the StatefulSet controller adds or removes pods on spec.replicas, renames them on spec.ordinals, and ' +
          'replaces them on a spec.template revision as spec.updateStrategy says',
        harmless: [
          { pointer: '/spec/minReadySeconds', reason: 'only delays when a started pod counts as available' },
          { pointer: '/spec/revisionHistoryLimit', reason: 'only prunes old ControllerRevisions' },
          {
            pointer: '/spec/persistentVolumeClaimRetentionPolicy',
            reason: 'only decides whether PVCs outlive pods that are deleted later',
          },
        ],
      },
    ],
    replicasPointer: '/spec/replicas',
    defaultReplicas: 1,
    scope: 'named-by-target',
  },
];

/** The rule guarding `group`/`resource` (any version), or undefined when it is not guarded. */
export function findGuardRule(
  resource: { group: string; resource: string },
  rules: readonly GuardRule[] = GUARD_RULES,
): GuardRule | undefined {
  return rules.find((rule) => rule.group === resource.group && rule.resource === resource.resource);
}

/** The subtrees that count for a request: the rule's own, or only replicas for /scale. */
export function guardedPointersFor(rule: GuardRule, subResource: string | undefined): readonly GuardedPointer[] {
  return subResource === SCALE_SUBRESOURCE ? SCALE_GUARDED : rule.guarded;
}
