// Discovery's pure half: turns the objects a provider listed into targets (see core/targets.ts for
// the names). The adapter lists; this decides. Objects arrive as the apiserver's JSON, untrusted:
// every field is read defensively and a problem names the object, never quotes its content.
import type { EnforcementMode } from '../entrypoints/config.js';
import {
  discoveredTargetName,
  type DiscoveredTarget,
  type DiscoveryProblem,
  type GuardedObject,
  type Target,
} from './targets.js';

import { CLUSTER_NAME_LABEL, DRUID_ETCD, KUBEADM_CONTROL_PLANE } from './controller-kinds.js';

export const KCP_GROUP = KUBEADM_CONTROL_PLANE.group;
export const ETCD_GROUP = DRUID_ETCD.group;
const CLUSTER_GROUP = 'cluster.x-k8s.io';
export { CLUSTER_NAME_LABEL };
/** etcd's own default --quota-backend-bytes (kubeadm sets none). */
const ETCD_DEFAULT_QUOTA = 2 * 1024 ** 3;
/** etcd-druid's default spec.etcd.quota. */
const DRUID_DEFAULT_QUOTA = 8 * 1024 ** 3;
const DRUID_DEFAULT_CLIENT_PORT = 2379;

export interface DiscoveryDefaults {
  timeout: number;
  /** The management cluster's kubeconfig, for the Secrets and Machines an evaluation reads. */
  kubeconfigFile?: string;
  /** Run the opt-in watch round trip on every discovered target. */
  watchProbe?: boolean;
  /** The provider scope's enforcement, copied onto each of its targets. */
  enforcement?: EnforcementMode;
  /** How the discovered targets' serving certificates are checked (targets[].tlsVerify). */
  tlsVerify?: 'full' | 'chain-only';
  /** How long a learner may stay unpromoted, in milliseconds (the core's default when absent). */
  learnerGrace?: number;
}

export interface ProviderResult {
  targets: DiscoveredTarget[];
  problems: DiscoveryProblem[];
}

type Json = Record<string, unknown>;

function record(value: unknown): Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {};
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function at(object: unknown, ...path: string[]): unknown {
  let current: unknown = object;
  for (const key of path) current = record(current)[key];
  return current;
}

function identity(object: unknown, group: string, kind: string): GuardedObject | null {
  const namespace = text(at(object, 'metadata', 'namespace'));
  const name = text(at(object, 'metadata', 'name'));
  return namespace !== undefined && name !== undefined ? { group, kind, namespace, name } : null;
}

type Report = (message: string, options?: { staticMayJudge?: true }) => undefined;

/**
 * The loop every provider shares: an object without namespace or name is a problem; `toTarget`
 * makes the others' target, or reports why not (and returns what the report returns).
 */
function provide(
  objects: readonly unknown[],
  provider: { source: DiscoveryProblem['source']; group: string; kind: string; unnamed: string },
  toTarget: (object: unknown, guards: GuardedObject, problem: Report) => Target | undefined,
): ProviderResult {
  const result: ProviderResult = { targets: [], problems: [] };
  for (const item of objects) {
    const object = identity(item, provider.group, provider.kind);
    const problem: Report = (message, options) =>
      void result.problems.push({ source: provider.source, object, message, ...options });
    const target = object === null ? problem(provider.unnamed) : toTarget(item, object, problem);
    // The provider names the source: a target can never claim another provider's.
    if (target !== undefined) result.targets.push({ ...target, source: provider.source });
  }
  return result;
}

/** A Kubernetes quantity ("8Gi", "2G", "2147483648") in bytes; undefined when it is not one. */
export function quantityBytes(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? value : undefined;
  const match = typeof value === 'string' ? /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(value.trim()) : null;
  if (!match) return undefined;
  const factors: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  const bytes = Math.round(Number(match[1]) * (match[2] ? (factors[match[2]] ?? 1) : 1));
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : undefined;
}

/** The group of an apiVersion ("group/version"), or of a bare apiGroup field; '' for the core group. */
function groupOf(reference: Json): string | undefined {
  const apiGroup = text(reference.apiGroup);
  if (apiGroup !== undefined) return apiGroup;
  const apiVersion = text(reference.apiVersion);
  if (apiVersion === undefined) return undefined;
  return apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
}

/** The Cluster owner references of an object (kind Cluster in group cluster.x-k8s.io). */
function clusterOwners(object: unknown): Json[] {
  const owners = at(object, 'metadata', 'ownerReferences');
  return (Array.isArray(owners) ? owners : [])
    .map(record)
    .filter((owner) => owner.kind === 'Cluster' && groupOf(owner) === CLUSTER_GROUP);
}

/**
 * Whether a Cluster's spec.controlPlaneRef names this KCP: kind and name, and the namespace and
 * group where the reference gives them (v1beta1: an ObjectReference with apiVersion and an
 * optional namespace; v1beta2: apiGroup, kind, name).
 */
function controlPlaneRefNames(cluster: unknown, kcp: GuardedObject): boolean {
  const ref = record(at(cluster, 'spec', 'controlPlaneRef'));
  if (ref.kind !== kcp.kind || text(ref.name) !== kcp.name) return false;
  const namespace = text(ref.namespace);
  if (namespace !== undefined && namespace !== kcp.namespace) return false;
  const group = groupOf(ref);
  return group === undefined || group === kcp.group;
}

/**
 * The Cluster a KCP belongs to, by identity both ways: its one Cluster owner reference carries
 * the uid of a listed Cluster of that name in its namespace, and that Cluster's controlPlaneRef
 * names this KCP. A name alone (an owner reference without uid, the cluster-name label) is
 * something any tenant can write, so it resolves nothing; the reason says what is missing.
 */
export function owningCluster(
  kcp: unknown,
  object: GuardedObject,
  clusters: readonly unknown[],
): { name: string } | { problem: string } {
  const owners = clusterOwners(kcp);
  if (owners.length === 0) return { problem: 'has no Cluster owner reference (the Cluster controller sets it)' };
  if (owners.length > 1) return { problem: `has ${owners.length} Cluster owner references; exactly one is expected` };
  const owner = owners[0] ?? {};
  const name = text(owner.name);
  const uid = text(owner.uid);
  if (name === undefined || uid === undefined) return { problem: 'its Cluster owner reference names no Cluster by name and uid' };
  const cluster = clusters.find(
    (item) => text(at(item, 'metadata', 'namespace')) === object.namespace && text(at(item, 'metadata', 'name')) === name,
  );
  if (cluster === undefined) return { problem: 'its Cluster owner reference names a Cluster not found in its namespace' };
  if (text(at(cluster, 'metadata', 'uid')) !== uid) {
    return { problem: 'its Cluster owner reference carries a uid other than that Cluster’s (a re-created or another Cluster)' };
  }
  if (!controlPlaneRefNames(cluster, object)) {
    return { problem: 'its owning Cluster’s spec.controlPlaneRef does not name this KubeadmControlPlane' };
  }
  const label = record(at(kcp, 'metadata', 'labels'))[CLUSTER_NAME_LABEL];
  if (label !== undefined && label !== name) {
    return { problem: `its ${CLUSTER_NAME_LABEL} label disagrees with its Cluster owner reference` };
  }
  return { name };
}

/** quota-backend-bytes from the local etcd's extraArgs: a map in v1beta1, a name/value list in v1beta2. */
function kcpQuotaBytes(etcdLocal: unknown): number {
  const extraArgs = at(etcdLocal, 'extraArgs');
  let value: unknown = record(extraArgs)['quota-backend-bytes'];
  if (Array.isArray(extraArgs)) {
    value = extraArgs.find((arg) => record(arg).name === 'quota-backend-bytes')?.value;
  }
  return quantityBytes(value) ?? ETCD_DEFAULT_QUOTA;
}

/**
 * A target per KubeadmControlPlane with stacked etcd. A KCP with external etcd is skipped with a
 * problem: its members are not the control-plane Machines and their endpoints and client
 * certificates live on the nodes, so give it a static target (match by namespace and name).
 */
export function capiTargets(kcps: readonly unknown[], clusters: readonly unknown[], defaults: DiscoveryDefaults): ProviderResult {
  const provider = {
    source: 'capi',
    group: KCP_GROUP,
    kind: 'KubeadmControlPlane',
    unnamed: 'a KubeadmControlPlane without namespace or name',
  } as const;
  return provide(kcps, provider, (kcp, object, problem) => {
    const etcd = at(kcp, 'spec', 'kubeadmConfigSpec', 'clusterConfiguration', 'etcd');
    if (at(etcd, 'external') !== undefined) {
      return problem('uses external etcd: not discovered (add a static target that names it)', { staticMayJudge: true });
    }
    const cluster = owningCluster(kcp, object, clusters);
    if ('problem' in cluster) return problem(cluster.problem);
    const clusterName = cluster.name;
    return {
      name: discoveredTargetName('capi', object.namespace, clusterName),
      source: 'capi',
      guards: object,
      reach: { kind: 'capi', namespace: object.namespace, clusterName, ...management(defaults) },
      machines: { namespace: object.namespace, clusterName },
      endpoints: [],
      timeout: defaults.timeout,
      quotaBackendBytes: kcpQuotaBytes(at(etcd, 'local')),
      match: {},
      ...(defaults.watchProbe === true && { watchProbe: true }),
      ...(defaults.enforcement !== undefined && { enforcement: defaults.enforcement }),
      ...(defaults.tlsVerify === undefined ? {} : { tlsVerify: defaults.tlsVerify }),
      ...(defaults.learnerGrace !== undefined && { learnerGrace: defaults.learnerGrace }),
    };
  });
}

const management = (defaults: DiscoveryDefaults) =>
  defaults.kubeconfigFile === undefined ? {} : { kubeconfigFile: defaults.kubeconfigFile };

function druidTls(etcd: unknown): Target['reach'] | { problem: string } {
  const namespace = text(at(etcd, 'metadata', 'namespace')) ?? '';
  const tls = at(etcd, 'spec', 'etcd', 'clientUrlTls');
  if (tls === undefined || tls === null) return { kind: 'druid', namespace, tls: null };
  const caSecret = text(at(tls, 'tlsCASecretRef', 'name'));
  if (caSecret === undefined) return { problem: 'spec.etcd.clientUrlTls names no tlsCASecretRef.name' };
  const caNamespace = text(at(tls, 'tlsCASecretRef', 'namespace'));
  if (caNamespace !== undefined && caNamespace !== namespace) {
    return { problem: 'spec.etcd.clientUrlTls.tlsCASecretRef points into another namespace: not followed' };
  }
  const clientSecret = text(at(tls, 'clientTLSSecretRef', 'name'));
  const caDataKey = text(at(tls, 'tlsCASecretRef', 'dataKey')) ?? 'ca.crt';
  return { kind: 'druid', namespace, tls: { caSecret, caDataKey, ...(clientSecret !== undefined ? { clientSecret } : {}) } };
}

/**
 * A target per etcd-druid Etcd. Members are reached at the client URLs druid advertises:
 * `<scheme>://<etcd>-<i>.<etcd>-peer.<namespace>.svc:<clientPort>` for each ordinal; https when
 * spec.etcd.clientUrlTls is set, with the CA (and client certificate) from the Secrets it names.
 */
export function druidTargets(etcds: readonly unknown[], defaults: DiscoveryDefaults): ProviderResult {
  const provider = { source: 'druid', group: ETCD_GROUP, kind: 'Etcd', unnamed: 'an Etcd without namespace or name' } as const;
  return provide(etcds, provider, (etcd, object, problem) => {
    const replicas = at(etcd, 'spec', 'replicas');
    if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 1 || replicas > 99) {
      return problem('spec.replicas is not a member count from 1 to 99 (hibernated or invalid): nothing to evaluate', {
        staticMayJudge: true,
      });
    }
    const tls = druidTls(etcd);
    if ('problem' in tls) return problem(tls.problem);
    const reach = { ...tls, ...management(defaults) };
    const portValue = at(etcd, 'spec', 'etcd', 'clientPort');
    const port = typeof portValue === 'number' && Number.isInteger(portValue) ? portValue : DRUID_DEFAULT_CLIENT_PORT;
    const scheme = reach.kind === 'druid' && reach.tls !== null ? 'https' : 'http';
    const { namespace, name } = object;
    return {
      name: discoveredTargetName('druid', namespace, name),
      source: 'druid',
      guards: object,
      reach,
      endpoints: Array.from({ length: replicas }, (_, i) => `${scheme}://${name}-${i}.${name}-peer.${namespace}.svc:${port}`),
      timeout: defaults.timeout,
      quotaBackendBytes: quantityBytes(at(etcd, 'spec', 'etcd', 'quota')) ?? DRUID_DEFAULT_QUOTA,
      match: {},
      ...(defaults.watchProbe === true && { watchProbe: true }),
      ...(defaults.enforcement !== undefined && { enforcement: defaults.enforcement }),
      ...(defaults.tlsVerify === undefined ? {} : { tlsVerify: defaults.tlsVerify }),
      ...(defaults.learnerGrace !== undefined && { learnerGrace: defaults.learnerGrace }),
    };
  });
}
