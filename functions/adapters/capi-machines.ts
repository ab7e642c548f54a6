// Reads a Cluster's control-plane Machines (Cluster API) for two callers through one listing
// (paged, bounded, v1beta2 else v1beta1): the webhook, to tell which etcd member KCP will remove,
// and the evaluation of a discovered capi target, whose inventory they are.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { CAPI_VERSIONS, KCP_MACHINES } from '../domain/kinds/kubeadm-control-plane.js';
import type { Deadline } from '../domain/deadline.js';
import type { ControlPlaneNode } from '../ports/etcd-probe.js';
import {
  controlPlaneFailureDomains,
  machineFromObject,
  machineSelector,
  ownedBy,
  type ControlPlaneMachine,
  type MachinesQuery,
} from '../domain/machines.js';
import { compareCodeUnits } from '../shared/names.js';
import { callKube, KubeApiError, loadKubeConfig } from './kube.js';
import { listCustomObjects, MACHINES } from './kube-discovery.js';
import { inventoryAddresses } from './kube-nodes.js';

export type { MachinesQuery } from '../domain/machines.js';

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The control plane's Machines, and its Cluster's control-plane failure domains (null: not read). */
export interface MachineListing {
  machines: ControlPlaneMachine[];
  failureDomains: string[] | null;
}

export type MachineReader = (query: MachinesQuery, deadline: Deadline) => Promise<MachineListing>;

/**
 * The Cluster's control-plane failure domains, read by name within the deadline (v1beta2, else
 * v1beta1); null when there is no name (a /scale request) or the read fails: KCP's pick is then
 * weighed over every set of domains the Cluster may list.
 */
async function readFailureDomains(api: CustomObjectsApi, query: MachinesQuery, deadline: Deadline): Promise<string[] | null> {
  const name = query.clusterName;
  if (name === null) return null;
  for (const version of CAPI_VERSIONS) {
    try {
      const cluster: unknown = await callKube(
        { verb: 'get', resource: `clusters.cluster.x-k8s.io/${version}`, namespace: query.namespace, name },
        deadline,
        (options) =>
          api.getNamespacedCustomObject(
            { group: 'cluster.x-k8s.io', version, namespace: query.namespace, plural: 'clusters', name },
            options,
          ),
      );
      return controlPlaneFailureDomains(cluster, query);
    } catch (error) {
      if (!(error instanceof KubeApiError && error.isNotFound)) return null;
    }
  }
  return null;
}

/** The Machine objects `query` selects in its namespace, within the deadline. */
function listMachineObjects(api: CustomObjectsApi, query: MachinesQuery, deadline: Deadline): Promise<unknown[]> {
  return listCustomObjects(api, MACHINES, { namespaces: [query.namespace], labelSelector: machineSelector(query) }, deadline);
}

export function createMachineReader(loadConfig: () => KubeConfig = () => loadKubeConfig()): MachineReader {
  let api: CustomObjectsApi | undefined;
  return async (query, deadline) => {
    api ??= loadConfig().makeApiClient(CustomObjectsApi);
    const [items, failureDomains] = await Promise.all([
      listMachineObjects(api, query, deadline),
      readFailureDomains(api, query, deadline),
    ]);
    const machines = items
      .filter((item) => ownedBy(item, query.controlPlaneName, query.ownerKind ?? KCP_MACHINES.ownerKind))
      .map(machineFromObject)
      .filter((machine): machine is ControlPlaneMachine => machine !== null);
    return { machines, failureDomains };
  };
}

/**
 * The control-plane Machines of one Cluster as inventory entries, as KCP reads them
 * (cluster-api controlplane/kubeadm/internal/workload_cluster_conditions.go): named by their Node
 * (status.nodeRef) so they meet etcd members named by host, with the Machine's reported addresses
 * and creation time (datedByNodes replaces it with the Node's when the Nodes are known). A Machine
 * without a Node is `provisioning` (named by the Machine; KCP skips it), one with a
 * deletionTimestamp `deleting` (its member is expected to go). Sorted by name.
 */
export async function listControlPlaneMachines(
  api: CustomObjectsApi,
  cluster: { namespace: string; clusterName: string },
  deadline: Deadline,
): Promise<ControlPlaneNode[]> {
  // Selected by the cluster's name: a Cluster has one control plane, whatever the KCP is called.
  const machines = await listMachineObjects(api, { ...cluster, controlPlaneName: '' }, deadline);
  const entries: ControlPlaneNode[] = [];
  for (const object of machines) {
    const machine = machineFromObject(object);
    if (machine === null) continue;
    const status = isRecord(object) && isRecord(object.status) ? object.status : {};
    const addresses = Array.isArray(status.addresses) ? (status.addresses as { type?: unknown; address?: unknown }[]) : [];
    entries.push({
      name: machine.nodeName ?? machine.name,
      addresses: inventoryAddresses(addresses),
      ...(machine.createdAt !== null && { createdAt: machine.createdAt }),
      ...(machine.deleting && { deleting: true }),
      ...(machine.nodeName === null && { provisioning: true }),
    });
  }
  // For determinism only (which entry a member meets first, the order of findings), and the
  // names come from untrusted Machines: code units, never the process's locale.
  return entries.sort((a, b) => compareCodeUnits(a.name, b.name));
}
