// The connections a long-running process (the webhook, with its POST /evaluations) keeps open
// between evaluations, as the config's `connections` says: every member's gRPC channel and, for
// Cluster API targets, the port-forward access (its listeners, the WebSockets their etcd
// connections hold, a keep-alive connection to the workload API server). Whoever builds it closes
// it on shutdown; the serverless handlers keep one per container (handlers.ts). The CLI and the
// CronJob's scheduled run never build one.
import { KeptPool } from '../adapters/channel-pool.js';
import type { CapiCredentials } from '../adapters/capi-credentials.js';
import type { KeptCapiAccess } from '../adapters/capi-etcd-access.js';
import type { CoreV1Api } from '../adapters/kube.js';
import type { CustomObjectsApi } from '../adapters/kube-discovery.js';
import { EtcdChannelPool } from '../adapters/etcd-member-probe.js';
import type { GuardConfig } from '../domain/config.js';
import type { ControlPlaneNode } from '../ports/etcd-probe.js';
import { BriefReuse } from './brief-reuse.js';
import { TlsFileReuse } from './etcd-access.js';

/**
 * How long a Cluster API target's management clients, and what they read from the Cluster's
 * Secrets, are used before they are built and read again. The Secrets only say how to reach the
 * workload's etcd (its API server, the etcd CA): a rotated CA or a moved API server takes effect
 * within this bound, and what is judged (etcd's answers, the Machine list) is read every time.
 * The workload's Node list is kept as long: it only dates the Machines (reach-target.ts).
 */
export const CAPI_MANAGEMENT_REUSE_MS = 5_000;

/** The management cluster's clients of one kubeconfig, and the credentials read through them. */
export interface CapiManagement {
  readonly coreApi: CoreV1Api;
  readonly customObjectsApi: CustomObjectsApi;
  /** By Cluster (`namespace/name`): what its Secrets gave, for as long as these clients are used. */
  readonly credentials: BriefReuse<CapiCredentials>;
  /** By Cluster: the workload's control-plane Nodes, listed through those credentials. */
  readonly workloadNodes: BriefReuse<ControlPlaneNode[]>;
}

export interface WarmConnections {
  readonly channels: EtcdChannelPool;
  /** Cluster API accesses; closing one retires the channels that went through its listeners. */
  readonly capiAccesses: KeptPool<KeptCapiAccess>;
  /** Static targets' TLS files, read again only after a while: the bytes the channels are keyed by. */
  readonly tlsFiles: TlsFileReuse;
  /** By kubeconfig file ('' for the process's default): built again after CAPI_MANAGEMENT_REUSE_MS. */
  readonly capiManagement: BriefReuse<CapiManagement>;
  /** How many are open now, for tests, benchmarks and metrics. */
  counts(): { channels: number; idleChannels: number; capiAccesses: number };
  /** Closes every kept connection; later evaluations open and close their own. */
  close(): void;
}

/**
 * The kept connections the config asks for, or null when `connections.keep` is off. `nowMs`: the
 * clock the reuse windows (TLS files, Cluster API management clients) are measured on.
 */
export function createWarmConnections(
  config: Pick<GuardConfig, 'connections'>,
  nowMs: () => number = () => performance.now(),
): WarmConnections | null {
  const { keep, idleTimeout, maxPerTarget, maxTotal } = config.connections;
  if (!keep) return null;
  const limits = { idleTimeoutMs: idleTimeout, maxPerTarget, maxTotal };
  const channels = new EtcdChannelPool(limits);
  const capiAccesses = new KeptPool<KeptCapiAccess>(limits);
  const tlsFiles = new TlsFileReuse(undefined, nowMs);
  const capiManagement = new BriefReuse<CapiManagement>(CAPI_MANAGEMENT_REUSE_MS, nowMs);
  return {
    channels,
    capiAccesses,
    tlsFiles,
    capiManagement,
    counts: () => {
      const { open, idle } = channels.counts();
      return { channels: open, idleChannels: idle, capiAccesses: capiAccesses.counts().open };
    },
    close: () => {
      capiAccesses.close();
      channels.close();
      tlsFiles.clear();
      capiManagement.clear();
    },
  };
}
