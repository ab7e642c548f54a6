// Which guarded objects fleet discovery owns, and which of their fields decide the etcd that
// judges them. Pure.
//
// - Discovery owns every object of a discoverable kind (KubeadmControlPlane: capi, Etcd: druid) in its scope: a namespace it
//   lists (all when none are given) and labels carrying its labelSelector. Such an object is judged
//   by its own discovered target or not at all: when discovery could not resolve it (no uid-linked
//   Cluster, a name collision, a provider that has not listed yet because the management API was
//   unreachable) its guarded changes are denied with the reason, never judged by a static target,
//   whose catch-all (`match: {}`) would judge it by some other cluster's etcd.
// - The one exception is what discovery leaves to static targets on purpose (external etcd, a
//   hibernated Etcd): a static target that names the object by namespace and name judges it.
// - A discovered object's target follows what its kind's discovery says decides it (a KCP: its
//   Cluster owner reference and cluster-name label): changing that moves it to another etcd, so
//   the change is judged against the target it leaves.
import type { DiscoveryScope, GuardConfig } from '../../functions/domain/config.js';
import type { DiscoveryProblem, FleetView, GuardedObject } from '../../functions/domain/targets.js';
import { jsonEqual } from './detect-change.js';
import { scopeOf } from '../../functions/domain/kinds/discovery-common.js';
import { kindOf } from '../../functions/domain/kinds/registry.js';
import { record } from '../../functions/shared/records.js';

const CLUSTER_GROUP = 'cluster.x-k8s.io';

export type Ownership =
  /** Not a discovered kind, or outside every discovery scope: the static targets decide. */
  | { kind: 'not-owned' }
  /** A /scale request, and whether the labels put it in scope is unknown until the parent is read. */
  | { kind: 'labels-unknown' }
  /** Owned; discovery left it to a static target that names it. */
  | { kind: 'static-may-judge'; problem: DiscoveryProblem }
  /** Owned but unresolved: guarded changes are denied with `message`. */
  | { kind: 'unresolved'; message: string };

function inScope(scope: DiscoveryScope, namespace: string, labels: Readonly<Record<string, string>>) {
  if (scope.namespaces !== undefined && !scope.namespaces.includes(namespace)) return false;
  return Object.entries(scope.labelSelector ?? {}).every(([key, value]) => labels[key] === value);
}

/**
 * Whether discovery owns `object` (not already guarded by a discovered target) and what that
 * means. `labels` are the labels it had and will have (either in scope makes it owned: dropping
 * the selector label must not take it out of the guard); null for a /scale whose parent was not
 * read. `fleet` is absent when the caller knows nothing of discovery's rounds: nothing listed.
 */
export function discoveryOwnership(
  config: GuardConfig,
  object: GuardedObject,
  labels: ReadonlyArray<Readonly<Record<string, string>>> | null,
  fleet: FleetView | undefined,
): Ownership {
  const source = kindOf(object)?.discovery?.source;
  const scope = source === undefined ? undefined : scopeOf(config.discovery, source);
  if (source === undefined || scope === undefined) return { kind: 'not-owned' };
  if (scope.namespaces !== undefined && !scope.namespaces.includes(object.namespace)) return { kind: 'not-owned' };
  if (labels === null) {
    if (Object.keys(scope.labelSelector ?? {}).length > 0) return { kind: 'labels-unknown' };
  } else if (!labels.some((set) => inScope(scope, object.namespace, set))) {
    return { kind: 'not-owned' };
  }
  const what = `${object.kind} ${object.namespace}/${object.name}`;
  const problem = fleet?.problems.find(
    (item) =>
      item.object !== null &&
      item.object.group === object.group &&
      item.object.kind === object.kind &&
      item.object.namespace === object.namespace &&
      item.object.name === object.name,
  );
  if (problem?.staticMayJudge === true) return { kind: 'static-may-judge', problem };
  const prefix = `etcd-guard's ${source} discovery owns ${what} but cannot resolve its etcd cluster`;
  if (problem !== undefined) return { kind: 'unresolved', message: `${prefix}: ${problem.message}` };
  if (fleet === undefined || !fleet.listed.has(source)) {
    return {
      kind: 'unresolved',
      message: `${prefix}: discovery has not listed the management cluster yet (its API was unreachable); retry when it has`,
    };
  }
  return {
    kind: 'unresolved',
    message: `${prefix}: it was not there when discovery last listed; retry after the next discovery round`,
  };
}

/** The Cluster owner references of an object, as written (any version of the Cluster group). */
function clusterOwners(object: unknown): unknown[] {
  const owners = record(record(object).metadata).ownerReferences;
  return (Array.isArray(owners) ? owners : []).filter((owner) => {
    const { kind, apiVersion } = record(owner);
    return kind === 'Cluster' && typeof apiVersion === 'string' && apiVersion.split('/')[0] === CLUSTER_GROUP;
  });
}

/**
 * Whether an UPDATE changes what decides a discovered object's etcd: the labels its discovery
 * scope selects by (dropping one takes it out of discovery), and for a KCP its Cluster owner
 * references and its cluster-name label. An Etcd is otherwise its own target by namespace and name.
 */
export function identityChanged(config: GuardConfig, object: GuardedObject, oldObject: unknown, newObject: unknown): boolean {
  const discovery = kindOf(object)?.discovery;
  const selectorKeys = Object.keys((discovery && scopeOf(config.discovery, discovery.source))?.labelSelector ?? {});
  const keys = [...selectorKeys, ...(discovery?.identityLabels ?? [])];
  const labelsOf = (value: unknown) => record(record(record(value).metadata).labels);
  const [before, after] = [labelsOf(oldObject), labelsOf(newObject)];
  if (keys.some((key) => before[key] !== after[key])) return true;
  return discovery?.followsClusterOwner === true && !jsonEqual(clusterOwners(oldObject), clusterOwners(newObject));
}
