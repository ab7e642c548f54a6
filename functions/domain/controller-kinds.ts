// The controller kinds etcd-guard knows, named once: their API group, kind and resource, the
// discovery source that finds them, and the Cluster API label. Every module that asks "is this a
// KubeadmControlPlane?" compares group AND kind here: Talos and k0smotron control planes share
// KCP's API group, so the group alone says nothing. Pure data.

export interface ControllerKindId {
  group: string;
  kind: string;
  /** Plural resource name, as in AdmissionRequest.resource.resource. */
  resource: string;
}

export const KUBEADM_CONTROL_PLANE = {
  group: 'controlplane.cluster.x-k8s.io',
  kind: 'KubeadmControlPlane',
  resource: 'kubeadmcontrolplanes',
} as const satisfies ControllerKindId;

export const DRUID_ETCD = { group: 'druid.gardener.cloud', kind: 'Etcd', resource: 'etcds' } as const satisfies ControllerKindId;

export const STATEFUL_SET = { group: 'apps', kind: 'StatefulSet', resource: 'statefulsets' } as const satisfies ControllerKindId;

/** Cluster API's label naming the Cluster an object belongs to. */
export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';

/** Where fleet discovery finds targets; each source lists exactly one controller kind. */
export const DISCOVERY_SOURCES = ['capi', 'druid'] as const;
export type DiscoverySource = (typeof DISCOVERY_SOURCES)[number];

export const DISCOVERED_KIND: Readonly<Record<DiscoverySource, ControllerKindId>> = {
  capi: KUBEADM_CONTROL_PLANE,
  druid: DRUID_ETCD,
};

/** Whether `object` is of kind `id`: group and kind both, never the group alone. */
export function isKind(object: { group: string; kind: string }, id: ControllerKindId): boolean {
  return object.group === id.group && object.kind === id.kind;
}

/** The discovery source that owns objects of this group and kind, or undefined when none does. */
export function discoverySourceOf(object: { group: string; kind: string }): DiscoverySource | undefined {
  return DISCOVERY_SOURCES.find((source) => isKind(object, DISCOVERED_KIND[source]));
}
