// A druid Etcd's backup facts for the backup check: the Etcd itself (spec.backup.store,
// status.conditions[type=BackupReady]) and its snapshot Leases `<etcd>-full-snap` and
// `<etcd>-delta-snap` (coordination.k8s.io/v1, spec.renewTime), read as druid's own BackupReady
// check reads them (etcd-druid internal/health/condition/check_backup_ready.go). Never rejects:
// what cannot be read is an unknown backup, saying why.
import type { CustomObjectsApi } from '@kubernetes/client-node';
import type { Deadline } from '../domain/deadline.js';
import type { DruidBackupFacts } from '../domain/judgement/input.js';
import { DRUID_ETCD } from '../domain/kinds/druid-etcd.js';
import { callKube } from './kube.js';

type Json = Record<string, unknown>;
const record = (value: unknown): Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {};
const text = (value: unknown): string => (typeof value === 'string' ? value : '');

function getObject(
  api: CustomObjectsApi,
  ref: { group: string; version: string; plural: string; namespace: string; name: string },
  deadline: Deadline,
): Promise<unknown> {
  return callKube(
    { verb: 'get', resource: `${ref.plural}.${ref.group}`, name: ref.name, namespace: ref.namespace },
    deadline,
    (options) => api.getNamespacedCustomObject(ref, options) as Promise<unknown>,
  );
}

/** The BackupReady condition of an Etcd's status, or null when it has none. */
export function backupReadyOf(etcd: unknown): DruidBackupFacts['condition'] {
  const conditions = record(etcd).status === undefined ? [] : record(record(etcd).status).conditions;
  if (!Array.isArray(conditions)) return null;
  const found = conditions.map(record).find((condition) => condition.type === 'BackupReady');
  if (found === undefined) return null;
  return { status: text(found.status), reason: text(found.reason), message: text(found.message) };
}

/** The Lease's spec.renewTime when it is a date; null when unset. */
function renewTimeOf(lease: unknown): string | null {
  const renew = record(record(lease).spec).renewTime;
  return typeof renew === 'string' && Number.isFinite(Date.parse(renew)) ? renew : null;
}

export async function readDruidBackupFacts(
  api: CustomObjectsApi,
  etcd: { namespace: string; name: string },
  maxSnapshotAgeMs: number,
  deadline: Deadline,
): Promise<DruidBackupFacts> {
  const { namespace, name } = etcd;
  const lease = (suffix: string) =>
    getObject(
      api,
      { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespace, name: `${name}-${suffix}` },
      deadline,
    );
  const [object, full, delta] = await Promise.allSettled([
    getObject(api, { group: DRUID_ETCD.group, version: 'v1alpha1', plural: DRUID_ETCD.resource, namespace, name }, deadline),
    lease('full-snap'),
    lease('delta-snap'),
  ]);
  const unknown = { storeConfigured: false, condition: null, fullSnapshotAt: null, deltaSnapshotAt: null, leaseProblems: [] };
  // callKube's messages name the verb, the object and the namespace, and only the apiserver's Status message.
  if (object.status === 'rejected') return { ...unknown, unreadable: (object.reason as Error).message, maxSnapshotAgeMs };
  const leaseProblems = [full, delta].flatMap((settled) =>
    settled.status === 'rejected' ? [(settled.reason as Error).message] : [],
  );
  const store = record(record(record(object.value).spec).backup).store;
  return {
    storeConfigured: store !== undefined && store !== null,
    condition: backupReadyOf(object.value),
    fullSnapshotAt: full.status === 'fulfilled' ? renewTimeOf(full.value) : null,
    deltaSnapshotAt: delta.status === 'fulfilled' ? renewTimeOf(delta.value) : null,
    leaseProblems,
    maxSnapshotAgeMs,
  };
}
