// Lists the control-plane Nodes of a cluster, so the evaluation can check that every etcd member
// runs on a node the cluster knows about (a member on no node is a leftover that still votes).
// Each Node carries its creation time: a new Node's grace to run a member counts from it, as
// KCP counts its two minutes from the Node's creation.
import type { CoreV1Api } from '@kubernetes/client-node';
import type { InventoryConfig } from '../domain/config.js';
import { Deadline } from '../domain/deadline.js';
import type { ControlPlaneNode } from '../ports/etcd-probe.js';
import { StoreError } from '../domain/store.js';
import { compareCodeUnits } from '../shared/names.js';
import { callKube, createCoreV1Api } from './kube.js';

export type { ControlPlaneNode };

/** Address types an etcd member URL may use, in the order we report them. */
const ADDRESS_TYPES = ['InternalIP', 'ExternalIP', 'Hostname'] as const;
const PAGE_SIZE = 500;
const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/**
 * Turns `inventory.nodeLabel` ("key" = the label exists, or "key=value") into a label selector,
 * refusing anything else so a typo cannot silently select all or no nodes.
 */
export function nodeLabelSelector(nodeLabel: string): string {
  const [key = '', value, ...rest] = nodeLabel.split('=');
  const keyOk = LABEL_KEY.test(key) && key.length <= 316;
  const valueOk = value === undefined || (LABEL_VALUE.test(value) && value.length <= 63);
  if (!keyOk || !valueOk || rest.length > 0) {
    throw new StoreError(
      'invalid',
      `invalid inventory.nodeLabel ${JSON.stringify(nodeLabel)}: want "key" or "key=value", e.g. "node-role.kubernetes.io/control-plane"`,
    );
  }
  return value === undefined ? key : `${key}=${value}`;
}

/** InternalIP, ExternalIP and Hostname addresses in that order (Nodes and Machines report alike). */
export function inventoryAddresses(addresses: readonly { type?: unknown; address?: unknown }[] | undefined): string[] {
  const result: string[] = [];
  for (const type of ADDRESS_TYPES) {
    for (const entry of addresses ?? []) {
      const address = entry.address;
      if (entry.type === type && typeof address === 'string' && address !== '' && !result.includes(address)) result.push(address);
    }
  }
  return result;
}

/** The client library hands creationTimestamp over as a Date (a string from older ones); null when absent or invalid. */
function rfc3339(stamp: unknown): string | null {
  const date = stamp instanceof Date ? stamp : typeof stamp === 'string' ? new Date(stamp) : null;
  return date !== null && Number.isFinite(date.getTime()) ? date.toISOString() : null;
}

/**
 * The Nodes carrying the inventory label, sorted by name, with their InternalIP, ExternalIP and
 * Hostname addresses and their creation time. The whole listing (all pages) finishes within `timeoutMs` or fails with a
 * StoreError('unavailable') saying it timed out; other failures name the verb and resource.
 */
export async function listControlPlaneNodes(
  inventory: InventoryConfig,
  timeoutMs: number,
  api: CoreV1Api = createCoreV1Api(inventory.kubeconfigFile),
): Promise<ControlPlaneNode[]> {
  const labelSelector = nodeLabelSelector(inventory.nodeLabel);
  const deadline = Deadline.after(timeoutMs);
  const nodes: ControlPlaneNode[] = [];
  let continueToken: string | undefined;
  do {
    const page = await callKube({ verb: 'list', resource: 'nodes' }, deadline, (options) =>
      api.listNode({ labelSelector, limit: PAGE_SIZE, ...(continueToken ? { _continue: continueToken } : {}) }, options),
    );
    for (const node of page.items) {
      const name = node.metadata?.name;
      const createdAt = rfc3339(node.metadata?.creationTimestamp);
      if (name) nodes.push({ name, addresses: inventoryAddresses(node.status?.addresses), ...(createdAt && { createdAt }) });
    }
    continueToken = page.metadata?._continue || undefined;
  } while (continueToken !== undefined);
  // For determinism only (which entry a member meets first, the order of findings), and the
  // names come from the workload cluster's Nodes: code units, never the process's locale.
  return nodes.sort((a, b) => compareCodeUnits(a.name, b.name));
}
