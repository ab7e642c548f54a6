// An etcd-druid Etcd. Druid builds a StatefulSet from the Etcd's spec (so any spec change rolls
// every member), names its pods `<etcd>-<ordinal>` from 0 and removes the highest first, and
// advertises each member at `<scheme>://<etcd>-<i>.<etcd>-peer.<namespace>.svc:<clientPort>`, with
// TLS material in the Secrets spec.etcd.clientUrlTls names. Gardener hibernates a shoot by scaling
// its Etcd to 0 and back. A rollout follows the StatefulSet's RollingUpdate order: etcd-druid's
// DEP-07 quorum-aware order (docs/proposals/07-quorum-aware-pod-updates.md) sits behind an
// operator-wide feature gate, off by default, that nothing on the Etcd shows. Pure.
import { printableExcerpt as clipped } from '../../shared/redact.js';
import { discoveredTargetName, type Target } from '../targets.js';
import { management, provide, quantityBytes, targetDefaults, type DiscoveryDefaults } from './discovery-common.js';
import { at, text } from '../../shared/records.js';
import type { ControllerKind, ProviderResult } from './kind.js';
import { ordinalProjection } from './ordinal-removal.js';

export const DRUID_ETCD = { group: 'druid.gardener.cloud', kind: 'Etcd', resource: 'etcds' } as const;

/** etcd-druid's default spec.etcd.quota. */
const DRUID_DEFAULT_QUOTA = 8 * 1024 ** 3;
const DRUID_DEFAULT_CLIENT_PORT = 2379;

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
  return provide(etcds, { source: 'druid', id: DRUID_ETCD }, (etcd, object, problem) => {
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
      quotaBackendBytes: quantityBytes(at(etcd, 'spec', 'etcd', 'quota')) ?? DRUID_DEFAULT_QUOTA,
      ...targetDefaults(defaults),
    };
  });
}

/**
 * The etcd image a druid Etcd runs: spec.etcd.image (druid's own default, from its image vector,
 * when unset: unknown here). druid copies it into the StatefulSet's etcd container, so changing it
 * rolls every member onto it.
 */
function druidEtcdImage(object: unknown): { version: string | null; source: string; reference: 'image' } {
  const image = text(at(object, 'spec', 'etcd', 'image'));
  if (image === undefined) return { version: null, source: "spec.etcd.image unset (druid's default image)", reference: 'image' };
  return { version: image, source: `spec.etcd.image ${clipped(image)}`, reference: 'image' };
}

export const druidEtcd: ControllerKind = {
  rule: {
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
  removal: {
    // Druid's StatefulSet always starts at ordinal 0, also when scaled through /scale.
    projectionOptions: (facts) => ordinalProjection(facts.members, facts.object.name, 0, facts.shrink, ''),
    hibernates: true,
  },
  etcdVersion: druidEtcdImage,
  discovery: {
    source: 'druid',
    lists: [{ group: DRUID_ETCD.group, versions: ['v1alpha1'], plural: DRUID_ETCD.resource }],
    toTargets: ([etcds = []], defaults) => druidTargets(etcds, defaults),
    identityLabels: [],
    followsClusterOwner: false,
  },
  reach: 'druid',
};
