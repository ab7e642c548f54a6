// The control-plane Nodes of a Cluster API workload cluster, read as KCP reads them (it lists the
// workload's Nodes by the control-plane label: cluster-api controlplane/kubeadm/internal/
// workload_cluster_conditions.go, getControlPlaneNodes): only their names and creation times,
// which date the Machine inventory (a new Node's grace to run an etcd member counts from its
// creation). The API server is the one the tenant-written `<cluster>-kubeconfig` names, so the
// call uses that kubeconfig's static credentials only (workload-kubeconfig.ts), has a deadline,
// reads at most MAX_NODE_LIST_BYTES and never quotes what came back.
import { request, type Agent, type RequestOptions } from 'node:https';
import type { ConnectionOptions } from 'node:tls';
import type { ControlPlaneNode } from '../ports/etcd-probe.js';
import { serverNameOptions, type WorkloadEndpoint } from './workload-kubeconfig.js';

/** kubeadm labels every control-plane Node with it. */
export const CONTROL_PLANE_NODE_LABEL = 'node-role.kubernetes.io/control-plane';
/** A control-plane Node object is a few KiB; this is room for hundreds, and bounds a hostile answer. */
export const MAX_NODE_LIST_BYTES = 2 * 1024 * 1024;
const PAGE_LIMIT = 500;

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Names and creation times from a NodeList; entries without a name are skipped, bad times dropped. */
export function nodesFromList(list: unknown): ControlPlaneNode[] {
  const items = isRecord(list) && Array.isArray(list.items) ? list.items : null;
  if (items === null) throw new Error('the workload API server did not answer with a NodeList');
  return items.flatMap((item) => {
    const metadata = isRecord(item) && isRecord(item.metadata) ? item.metadata : {};
    const name = typeof metadata.name === 'string' && metadata.name !== '' ? metadata.name : null;
    if (name === null) return [];
    const created = typeof metadata.creationTimestamp === 'string' ? Date.parse(metadata.creationTimestamp) : Number.NaN;
    return [{ name, addresses: [], ...(Number.isFinite(created) && { createdAt: new Date(created).toISOString() }) }];
  });
}

/**
 * The workload's control-plane Nodes within `timeoutMs`; rejects with our own short text on any
 * failure. `agent`: a keep-alive agent of this endpoint's own (a kept access's), so the next list
 * reuses the connection; absent, each list connects afresh.
 */
export function listWorkloadControlPlaneNodes(
  workload: WorkloadEndpoint,
  timeoutMs: number,
  agent?: Agent,
): Promise<ControlPlaneNode[]> {
  const url = new URL(`${workload.server.replace(/\/$/, '')}/api/v1/nodes`);
  url.searchParams.set('labelSelector', CONTROL_PLANE_NODE_LABEL);
  url.searchParams.set('limit', String(PAGE_LIMIT));
  const name = workload.tlsServerName;
  // https hands these to tls.connect, secureContext included, though its types do not list it. No
  // shared agent: a pooled socket is keyed by host and port, not by the credentials it was opened
  // with; an agent of the endpoint's own only ever holds connections made with its credentials.
  const options: RequestOptions & Pick<ConnectionOptions, 'secureContext'> = {
    method: 'GET',
    agent: agent ?? false,
    secureContext: workload.secureContext,
    rejectUnauthorized: true,
    headers: { Accept: 'application/json', ...(workload.token !== undefined && { Authorization: `Bearer ${workload.token}` }) },
    signal: AbortSignal.timeout(timeoutMs),
    ...(name !== undefined && serverNameOptions(name)),
  };
  return new Promise((resolve, reject) => {
    const call = request(url, options);
    call.on('error', () => reject(new Error(`listing the workload's control-plane Nodes failed or took over ${timeoutMs} ms`)));
    call.on('response', (response) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      response.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > MAX_NODE_LIST_BYTES) {
          call.destroy();
          reject(new Error(`the workload's Node list is larger than ${MAX_NODE_LIST_BYTES / 1024 / 1024} MiB`));
          return;
        }
        chunks.push(chunk);
      });
      response.on('end', () => {
        if (response.statusCode !== 200) {
          reject(new Error(`listing the workload's control-plane Nodes: HTTP ${response.statusCode ?? 0}`));
          return;
        }
        try {
          resolve(nodesFromList(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
        } catch {
          reject(new Error('the workload API server did not answer with a NodeList'));
        }
      });
      response.on('error', () => reject(new Error(`reading the workload's Node list failed`)));
    });
    call.end();
  });
}
