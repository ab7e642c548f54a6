// A ClusterClass Cluster (Cluster API "managed topology"): a person changes the control plane by
// editing the Cluster, and the topology controller then writes the KubeadmControlPlane. Judging
// only the KCP would deny the controller, later and unattended, while the Cluster sits at
// TopologyReconciled=False (cluster-api#5853's pattern); so the Cluster UPDATE itself is judged as
// the KCP change it will cause, against the KCP's target, through the same projection. Pure.
//
// Facts, from Cluster API v1.14 (core/config/crd/bases/cluster.x-k8s.io_clusters.yaml,
// exp/topology/desiredstate/desired_state.go):
// - Both served versions keep `spec.topology.version` and `spec.topology.controlPlane.replicas`
//   (v1beta1 names the class `spec.topology.class`, v1beta2 `spec.topology.classRef`: neither is
//   read here). `spec.controlPlaneRef` is an ObjectReference in v1beta1 (apiVersion, kind, name,
//   optional namespace) and apiGroup, kind, name in v1beta2; the topology controller reads the
//   current control plane through it and creates one when it is unset.
// - computeControlPlaneVersion compares the topology version with the control plane's own
//   spec.version: only a difference is a rollout. The replicas are written to the control plane
//   only when the topology sets them (unset: the control plane's own count stays).
// So the change is read against the KCP as it is now (the server's parent read): a version other
// than the KCP's is a rollout like a KCP spec.version change (the 3.5 → 3.6 gate included, on the
// KCP's etcd image tag when it has one, else kubeadm's default for the new version), replicas
// other than the KCP's a scale. Other topology fields (workers, variables, rollout.after) are not
// membership changes judged here.
import type { GuardConfig } from '../../functions/domain/config.js';
import { KUBEADM_CONTROL_PLANE } from '../../functions/domain/kinds/kubeadm-control-plane.js';
import type { FleetView, Target } from '../../functions/domain/targets.js';
import { jsonEqual, valueAtPointer } from '../../functions/shared/json-pointer.js';
import { describeObject } from './classify.js';
import type {
  AdmissionRequest,
  Classification,
  ControllerView,
  GuardedObjectRef,
  MembershipChange,
  ParentLabels,
} from './contract.js';
import { detectGuardedChange } from './detect-change.js';
import { ownerRead, ownerTarget, readVersion, type OwnerReading } from './member-exits.js';
import { MAX_JUDGED_REPLICAS, type GuardedPointer } from './rules.js';
import { record, text } from '../../functions/shared/records.js';

export const CLUSTER = { group: 'cluster.x-k8s.io', kind: 'Cluster', resource: 'clusters' } as const;
export const TOPOLOGY_VERSION_POINTER = '/spec/topology/version';
export const TOPOLOGY_REPLICAS_POINTER = '/spec/topology/controlPlane/replicas';

const TOPOLOGY_FIELDS: readonly GuardedPointer[] = [
  {
    pointer: TOPOLOGY_VERSION_POINTER,
    reason: 'the topology controller writes it to the control plane spec.version (a rollout)',
    harmless: [],
  },
  {
    pointer: TOPOLOGY_REPLICAS_POINTER,
    reason: 'the topology controller writes it to the control plane spec.replicas (a scale)',
    harmless: [],
  },
];

/**
 * What the KCP read keeps for a topology change: what the projection and the etcd upgrade gate
 * read of a KCP (its version, etcd image tag and rollout strategy; replicas and external etcd are
 * kept for a DELETE's owner already).
 */
export const CONTROL_PLANE_POINTERS: readonly string[] = [
  '/spec/version',
  '/spec/kubeadmConfigSpec/clusterConfiguration/etcd/local/imageTag',
  '/spec/rollout/strategy/rollingUpdate/maxSurge',
  '/spec/rolloutStrategy/rollingUpdate/maxSurge',
];

const CHANGING: OwnerReading = { doing: 'changing the topology of', relation: 'the control plane of' };

const allow = (reason: string): Classification => ({ kind: 'allow', reason });

/** Whether the request is an UPDATE of a Cluster API Cluster (any version). */
export function isClusterUpdate(request: AdmissionRequest): boolean {
  return (
    request.operation === 'UPDATE' && request.resource.group === CLUSTER.group && request.resource.resource === CLUSTER.resource
  );
}

interface ControlPlaneRef {
  group: string | undefined;
  version: string | undefined;
  kind: string | undefined;
  name: string | undefined;
  namespace: string | undefined;
}

/** spec.controlPlaneRef in either shape (v1beta1 apiVersion, v1beta2 apiGroup), or null when unset. */
function controlPlaneRefOf(cluster: unknown): ControlPlaneRef | null {
  const ref = valueAtPointer(cluster, '/spec/controlPlaneRef');
  if (ref === undefined || ref === null) return null;
  const { apiGroup, apiVersion, kind, name, namespace } = record(ref);
  const version = text(apiVersion);
  const slash = version?.indexOf('/') ?? -1;
  return {
    group: text(apiGroup) ?? (version === undefined ? undefined : slash < 0 ? '' : version.slice(0, slash)),
    version: version === undefined || slash < 0 ? undefined : version.slice(slash + 1),
    kind: text(kind),
    name: text(name),
    namespace: text(namespace),
  };
}

/** A replica count the topology sets: the number, undefined when unset, or why it cannot be judged. */
function topologyReplicas(cluster: unknown): number | undefined | string {
  const value = valueAtPointer(cluster, TOPOLOGY_REPLICAS_POINTER);
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_JUDGED_REPLICAS) return value;
  return `spec.topology.controlPlane.replicas is not an integer from 0 to ${MAX_JUDGED_REPLICAS}`;
}

/** The KCP the Cluster's controlPlaneRef names now, or the classification that settles it. */
function controlPlaneOf(
  request: AdmissionRequest,
  cluster: GuardedObjectRef,
): { ref: ControlPlaneRef & { name: string } } | Classification {
  const before = controlPlaneRefOf(request.oldObject);
  const after = controlPlaneRefOf(request.object);
  // Unset: the topology controller creates the control plane from the topology, no etcd to judge.
  const ref = before ?? after;
  if (ref === null) return allow('no-control-plane-yet');
  if (before !== null && after !== null && !jsonEqual({ ...before, version: null }, { ...after, version: null })) {
    return {
      kind: 'deny',
      reason: 'moves-target',
      object: cluster,
      message:
        `this change of ${describeObject(cluster)} changes spec.controlPlaneRef while changing its topology's ` +
        `version or control plane replicas, so etcd-guard cannot tell which etcd cluster to judge it against`,
    };
  }
  // Another control-plane provider (Talos, k0smotron) or none that etcd-guard knows: not guarded.
  if (ref.kind !== KUBEADM_CONTROL_PLANE.kind || (ref.group !== undefined && ref.group !== KUBEADM_CONTROL_PLANE.group)) {
    return allow('not-guarded');
  }
  if (ref.name === undefined || (ref.namespace !== undefined && ref.namespace !== cluster.namespace)) {
    return {
      kind: 'deny',
      reason: 'invalid',
      object: cluster,
      message: `etcd-guard cannot judge ${describeObject(cluster)}: its spec.controlPlaneRef names no KubeadmControlPlane in its namespace`,
    };
  }
  return { ref: { ...ref, name: ref.name } };
}

/**
 * The KCP change the topology edit causes, against the KCP as read: null when it causes none (the
 * KCP already runs that version at that size), or the text saying why it cannot be judged.
 */
function causedChange(request: AdmissionRequest, changed: readonly string[], kcp: unknown): MembershipChange | null | string {
  const current = valueAtPointer(kcp, '/spec/replicas') ?? 1;
  if (typeof current !== 'number' || !Number.isInteger(current) || current < 0 || current > MAX_JUDGED_REPLICAS) {
    return `its KubeadmControlPlane's spec.replicas is not an integer from 0 to ${MAX_JUDGED_REPLICAS}`;
  }
  const replicas = changed.includes(TOPOLOGY_REPLICAS_POINTER) ? topologyReplicas(request.object) : undefined;
  if (typeof replicas === 'string') return replicas;
  const to = replicas ?? current;
  const version = valueAtPointer(request.object, TOPOLOGY_VERSION_POINTER);
  const rolls =
    changed.includes(TOPOLOGY_VERSION_POINTER) &&
    version !== undefined &&
    !jsonEqual(version, valueAtPointer(kcp, '/spec/version'));
  if (rolls) {
    const changedPaths = changed.filter((pointer) => pointer === TOPOLOGY_VERSION_POINTER || to !== current);
    return { kind: 'rollout', replicas: to, changedPaths, ...(to !== current ? { previousReplicas: current } : {}) };
  }
  if (to === current) return null;
  return { kind: to > current ? 'scale-up' : 'scale-down', from: current, to };
}

/** The KCP before and after the topology controller writes the change, as its kind's rules read a KCP. */
function carriedOutOn(
  kcpRef: GuardedObjectRef,
  read: { labels: Readonly<Record<string, string>>; object: unknown },
  request: AdmissionRequest,
  change: MembershipChange,
): ControllerView {
  const spec = record(record(read.object).spec);
  const metadata = { namespace: kcpRef.namespace, name: kcpRef.name, labels: { ...read.labels } };
  const oldObject = { metadata, spec };
  const to = change.kind === 'rollout' ? change.replicas : change.to;
  const version = change.kind === 'rollout' ? valueAtPointer(request.object, TOPOLOGY_VERSION_POINTER) : spec.version;
  return { object: kcpRef, request: { oldObject, object: { metadata, spec: { ...spec, replicas: to, version } } } };
}

/**
 * A Cluster UPDATE: judged when it has a topology whose version or control plane replicas change
 * the KCP its controlPlaneRef names; every other Cluster edit is allowed unread.
 */
export function classifyClusterUpdate(
  request: AdmissionRequest,
  config: GuardConfig,
  parent: ParentLabels | undefined,
  targets: readonly Target[],
  fleet: FleetView | undefined,
): Classification {
  if ((request.subResource ?? '') !== '') return allow('not-guarded');
  if (valueAtPointer(request.object, '/spec/topology') === undefined) return allow('no-topology');
  // A field unset on the new object is no longer written to the control plane: nothing changes.
  const changed = detectGuardedChange(request.oldObject, request.object, TOPOLOGY_FIELDS).changedPointers.filter(
    (pointer) => (valueAtPointer(request.object, pointer) ?? null) !== null,
  );
  if (changed.length === 0) return allow('no-guarded-change');
  const metadata = record(record(request.object).metadata);
  const cluster: GuardedObjectRef = {
    ...CLUSTER,
    namespace: text(request.namespace) ?? text(metadata.namespace) ?? '',
    name: text(request.name) ?? text(metadata.name) ?? '',
    viaScale: false,
  };
  const named = controlPlaneOf(request, cluster);
  if (!('ref' in named)) return named;
  const { ref } = named;
  const { name } = ref;
  const kcpRef: GuardedObjectRef = { ...KUBEADM_CONTROL_PLANE, namespace: cluster.namespace, name, viaScale: false };
  // A v1beta2 reference names no version; Cluster API that serves a v1beta2 Cluster serves a v1beta2 KCP.
  const fallback = request.resource.version === 'v1beta1' ? 'v1beta1' : 'v1beta2';
  const version = readVersion(ref.version, ['v1beta1', 'v1beta2'], fallback);
  const owner = { ...KUBEADM_CONTROL_PLANE, version, namespace: cluster.namespace, name };
  const read = ownerRead(cluster, owner, parent, CHANGING);
  if ('kind' in read) return read;
  const target = ownerTarget(config, cluster, kcpRef, read.labels, targets, fleet, CHANGING);
  if ('kind' in target) return target;
  const change = causedChange(request, changed, read.object);
  if (typeof change === 'string') {
    return {
      kind: 'deny',
      object: cluster,
      target,
      reason: 'invalid',
      message: `etcd-guard cannot judge ${describeObject(cluster)}: ${change}`,
    };
  }
  if (change === null) return allow('no-membership-change');
  return { kind: 'needs-evaluation', target, object: cluster, change, controller: carriedOutOn(kcpRef, read, request, change) };
}

/**
 * The classification and request as the controller that carries the change out sees them: for a
 * Cluster's topology its KCP (whose kind's rules project it), else the request as it came.
 */
export function carriedOut<
  C extends { object: GuardedObjectRef; controller?: ControllerView },
  R extends { object?: unknown; oldObject?: unknown },
>(classification: C, request: R): { classification: C; request: R } {
  const { controller } = classification;
  if (controller === undefined) return { classification, request };
  return { classification: { ...classification, object: controller.object }, request: { ...request, ...controller.request } };
}

/** How the edited object reads in a message, with the object that carries the change out when it is another. */
export function describeSubject(classification: { object: GuardedObjectRef; controller?: ControllerView }): string {
  const { controller } = classification;
  const edited = describeObject(classification.object);
  return controller === undefined ? edited : `${edited} (carried out by its ${describeObject(controller.object)})`;
}
