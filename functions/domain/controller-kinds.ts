// The controller kinds etcd-guard knows, by name: their identities (group, kind, resource) and
// the lookups every caller needs, read from the registry in kinds/. Every module that asks "is this
// a KubeadmControlPlane?" compares group AND kind: Talos and k0smotron control planes share KCP's
// API group, so the group alone says nothing. Pure.
export type { ControllerKindId } from './kinds/kind.js';
export { CLUSTER_NAME_LABEL, KUBEADM_CONTROL_PLANE } from './kinds/kubeadm-control-plane.js';
export { DRUID_ETCD } from './kinds/druid-etcd.js';
export { STATEFUL_SET } from './kinds/statefulset.js';
export { discoverySourceOf, isKind, kindOf } from './kinds/registry.js';

/** Where fleet discovery finds targets: a kind's `discovery.source` (`capi`, `druid`, …). */
export type DiscoverySource = string;
