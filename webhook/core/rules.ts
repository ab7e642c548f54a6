// Which resources the guard protects, as data: an API group, the resource (plural) and kind, and
// the JSON pointers whose change moves etcd membership. Pure: no I/O, no library imports.

/** How a rule's objects are selected for guarding. */
export type GuardScope =
  /** Every object of the resource is guarded (then a target must match it, or it is denied). */
  | 'all'
  /**
   * Only objects that some target's `match` names by namespace AND name are guarded; a /scale
   * request carries no labels, so labels can never select these. Others are not guarded at all.
   */
  | 'named-by-target';

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
  /** RFC 6901 pointers (escaped form) of the guarded fields in the parent object. */
  pointers: readonly string[];
  /** Pointer of the replica count inside the parent object. */
  replicasPointer: string;
  /** The replica count an object has when the field is absent (the API server's default). */
  defaultReplicas: number;
  scope: GuardScope;
}

/** The /scale subresource always carries an autoscaling/v1 Scale, whatever the parent is. */
export const SCALE_SUBRESOURCE = 'scale';
export const SCALE_REPLICAS_POINTER = '/spec/replicas';
export const SCALE_POINTERS: readonly string[] = [SCALE_REPLICAS_POINTER];

export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';

export const GUARD_RULES: readonly GuardRule[] = [
  {
    group: 'controlplane.cluster.x-k8s.io',
    kind: 'KubeadmControlPlane',
    resource: 'kubeadmcontrolplanes',
    versions: ['v1beta1', 'v1beta2'],
    pointers: [
      '/spec/replicas',
      '/spec/version',
      '/spec/machineTemplate',
      '/spec/kubeadmConfigSpec',
      '/spec/rolloutAfter',
      '/spec/rollout',
      '/spec/rolloutStrategy',
    ],
    replicasPointer: '/spec/replicas',
    defaultReplicas: 1,
    scope: 'all',
  },
  {
    group: 'druid.gardener.cloud',
    kind: 'Etcd',
    resource: 'etcds',
    versions: ['v1alpha1'],
    pointers: ['/spec/replicas', '/spec/etcd', '/spec/backup'],
    replicasPointer: '/spec/replicas',
    // etcd-druid requires replicas; 0 keeps an absent field from looking like a live cluster.
    defaultReplicas: 0,
    scope: 'all',
  },
  {
    group: 'apps',
    kind: 'StatefulSet',
    resource: 'statefulsets',
    versions: ['v1'],
    pointers: ['/spec/replicas', '/spec/template', '/spec/updateStrategy'],
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

/** The pointers that count for a request: the rule's own, or only replicas for /scale. */
export function guardedPointersFor(rule: GuardRule, subResource: string | undefined): readonly string[] {
  return subResource === SCALE_SUBRESOURCE ? SCALE_POINTERS : rule.pointers;
}
