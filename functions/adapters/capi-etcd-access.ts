// The EtcdAccess of a Cluster API workload cluster, opened the way KCP reaches its etcd: credentials
// from the management cluster's Secrets (minted client certificate, in memory), and each member
// through the workload API server's port-forward to its static pod kube-system/etcd-<node>:2379.
// kubeadm names a stacked etcd member after its node, so a listed member is reached through the
// listener of the node with its name.
//
// The serving certificate is verified against the cluster's etcd CA with the node name as the
// expected server name (kubeadm puts the node name, localhost, 127.0.0.1 and the node IP into it),
// so a forward that lands on another member or another cluster's etcd is refused. KCP skips the
// host name check and verifies only the chain; we can do better because we know the node.
import { createHash } from 'node:crypto';
import { Agent } from 'node:https';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Deadline } from '../domain/deadline.js';
import { EtcdAccessError, type EtcdAccess } from '../ports/etcd-access.js';
import { ClientCertificateMinter, readCapiCredentials, type CapiCluster, type CapiCredentials } from './capi-credentials.js';
import { listWorkloadControlPlaneNodes } from './workload-nodes.js';
import { listenForPodPort, type PortForwardListener } from './pod-port-forward.js';
import type { TlsSessionCache } from './tls-sessions.js';
import type { KeptPool, Lease } from './channel-pool.js';
import type { WorkloadEndpoint } from './workload-kubeconfig.js';
import type { ProbeCredentials } from '../ports/etcd-access.js';

const ETCD_NAMESPACE = 'kube-system';
const ETCD_CLIENT_PORT = 2379;

/** Certificates minted by this process, reused across evaluations until near expiry. */
const processMinter = new ClientCertificateMinter();

export interface CapiEtcdAccessOptions {
  /** Where minted certificates are kept; the process-wide one by default. */
  minter?: ClientCertificateMinter;
  /** HTTPS_PROXY/NO_PROXY for the workload API servers (default: the process's environment). */
  environment?: Record<string, string | undefined>;
  /** Where TLS sessions to the workload API servers are kept; the process-wide one by default. */
  workloadTlsSessions?: TlsSessionCache;
  /**
   * Keeps the port-forward listeners (with the WebSockets their etcd connections hold) and a
   * keep-alive connection to the workload API server open between evaluations of `target` (the
   * webhook's, warm-connections.ts); `onClosed` hears the endpoints of a kept access it closes.
   */
  keep?: { accesses: KeptPool<KeptCapiAccess>; target: string; onClosed?: (endpoints: readonly string[]) => void };
  /**
   * Where the credentials come from: `read` reads both Secrets now; a long-running process may
   * hand back what a recent read got instead (reach-target.ts). Default: read now.
   */
  credentials?: (read: () => Promise<CapiCredentials>) => Promise<CapiCredentials>;
}

/** A Cluster API target's listeners and workload API agent, kept open between evaluations. */
export class KeptCapiAccess {
  private closed = false;

  constructor(
    readonly listeners: ReadonlyMap<string, PortForwardListener>,
    readonly agent: Agent,
    private readonly onClosed?: (endpoints: readonly string[]) => void,
  ) {}

  usable(): boolean {
    return !this.closed && [...this.listeners.values()].every((listener) => listener.listening());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    const endpoints = [...this.listeners.values()].map((listener) => listener.endpoint);
    for (const listener of this.listeners.values()) void listener.close();
    this.agent.destroy();
    this.onClosed?.(endpoints);
  }
}

/**
 * What a kept access is known by: the cluster, the workload API server and the trust and identity
 * used with it, the etcd credentials (a minted certificate renewed means another access), and the
 * nodes forwarded to. Digests only: no key material is held in a key.
 */
function keptAccessKey(
  cluster: CapiCluster,
  workload: WorkloadEndpoint,
  etcd: Required<ProbeCredentials>,
  nodes: readonly string[],
): string {
  const hash = createHash('sha256');
  for (const part of [etcd.ca, etcd.cert, etcd.key]) hash.update(`${part.length}:`).update(part);
  return [
    `${cluster.namespace}/${cluster.clusterName}`,
    workload.server,
    workload.tlsServerName ?? '',
    workload.tlsScope,
    hash.digest('hex'),
    nodes.join(','),
  ].join('\0');
}

/** "kube-system/etcd-<node>:2379 via port-forward": how a member is named in reasons. */
export function describePodForward(nodeName: string): string {
  return `${ETCD_NAMESPACE}/etcd-${nodeName}:${ETCD_CLIENT_PORT} via port-forward`;
}

/** `management` reads the Cluster's Secrets on the management cluster. */
export async function openCapiEtcdAccess(
  management: CoreV1Api,
  cluster: CapiCluster,
  controlPlaneNodeNames: readonly string[] | Promise<readonly string[]>,
  deadline: Deadline,
  options: CapiEtcdAccessOptions = {},
): Promise<EtcdAccess> {
  // The Secrets do not depend on the nodes: read while the caller still lists its Machines.
  const read = () => readCapiCredentials(management, cluster, deadline, options.minter ?? processMinter);
  const reading = options.credentials === undefined ? read() : options.credentials(read);
  reading.catch(() => undefined);
  const nodeNames = [...new Set(await controlPlaneNodeNames)].sort();
  if (nodeNames.length === 0) {
    throw new EtcdAccessError(`cluster ${cluster.namespace}/${cluster.clusterName} has no control-plane node to reach etcd on`);
  }
  const credentials = await reading;
  const keep = options.keep;
  const key = keep === undefined ? '' : keptAccessKey(cluster, credentials.workload, credentials.etcd, nodeNames);
  const kept = keep?.accesses.lookup(keep.target, key) ?? null;
  if (kept !== null) {
    for (const listener of kept.value.listeners.values()) listener.renew(deadline);
    return accessOver(cluster, credentials, kept.value.listeners, { agent: kept.value.agent, lease: kept });
  }
  const listeners = await openListeners(cluster, credentials.workload, nodeNames, deadline, options);
  if (keep === undefined) return accessOver(cluster, credentials, listeners, {});
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const value = new KeptCapiAccess(listeners, agent, keep.onClosed);
  const lease = keep.accesses.adopt(keep.target, key, value);
  // No room to keep it: this evaluation's alone, closed with it.
  return lease === null
    ? accessOver(cluster, credentials, listeners, { agent, owned: value })
    : accessOver(cluster, credentials, listeners, { agent, lease });
}

/** A listener per node, each forwarding to the node's etcd pod; all closed again when one cannot open. */
async function openListeners(
  cluster: CapiCluster,
  workload: WorkloadEndpoint,
  nodeNames: readonly string[],
  deadline: Deadline,
  options: CapiEtcdAccessOptions,
): Promise<Map<string, PortForwardListener>> {
  const listeners = new Map<string, PortForwardListener>();
  const closeAll = () => Promise.all([...listeners.values()].map((listener) => listener.close())).then(() => undefined);
  try {
    for (const node of nodeNames) {
      const target = { namespace: ETCD_NAMESPACE, pod: `etcd-${node}`, port: ETCD_CLIENT_PORT };
      const listener = await listenForPodPort(
        workload,
        target,
        deadline,
        options.environment ?? process.env,
        options.workloadTlsSessions,
      );
      listeners.set(node, listener);
    }
  } catch (error) {
    await closeAll();
    throw new EtcdAccessError(`cannot open a port-forward listener: ${(error as Error).message}`);
  }
  return listeners;
}

/**
 * The access over `listeners`: closing it releases a kept access (`lease`), closes one no pool
 * could keep (`owned`), or closes the listeners of an evaluation that keeps nothing.
 */
function accessOver(
  cluster: CapiCluster,
  credentials: { workload: WorkloadEndpoint; etcd: Required<ProbeCredentials> },
  listeners: ReadonlyMap<string, PortForwardListener>,
  held: { agent?: Agent; lease?: Lease<KeptCapiAccess>; owned?: KeptCapiAccess },
): EtcdAccess {
  const nodeByEndpoint = new Map<string, string>();
  for (const [node, listener] of listeners) nodeByEndpoint.set(listener.endpoint, node);
  const listenerOf = (endpoint: string) => {
    const node = nodeByEndpoint.get(endpoint);
    return node === undefined ? undefined : listeners.get(node);
  };
  // One text for every way the workload API server can fail before a port-forward opens: it is
  // what tenants see in denials, and the kubeconfig's writer picks the server (see pod-port-forward).
  const unreachable =
    `workload API server of ${cluster.namespace}/${cluster.clusterName} unreachable or refused the port-forward ` +
    `(server and credentials from Secret ${cluster.namespace}/${cluster.clusterName}-kubeconfig)`;
  const close = async () => {
    if (held.lease !== undefined) held.lease.release();
    else if (held.owned !== undefined) held.owned.close();
    else await Promise.all([...listeners.values()].map((listener) => listener.close()));
  };
  return {
    seedEndpoints: [...listeners.values()].map((listener) => listener.endpoint),
    credentials: credentials.etcd,
    endpointFor: (member) => listeners.get(member.name)?.endpoint,
    serverNameFor: (endpoint) => nodeByEndpoint.get(endpoint),
    describe: (endpoint) => {
      const node = nodeByEndpoint.get(endpoint);
      return node === undefined ? endpoint : describePodForward(node);
    },
    failureDetail: (endpoint) => {
      const failure = listenerOf(endpoint)?.failure();
      return failure?.reachedApiServer === true ? failure.detail : undefined;
    },
    unreachable: (endpoint) => (listenerOf(endpoint)?.failure()?.reachedApiServer === false ? unreachable : undefined),
    // The creation times that date the Machine inventory, read where KCP reads them.
    listControlPlaneNodes: (timeoutMs) => listWorkloadControlPlaneNodes(credentials.workload, timeoutMs, held.agent),
    close,
  };
}
