// The connections a long-running process (the webhook, with its POST /evaluations) keeps open
// between evaluations, as the config's `connections` says: every member's gRPC channel and, for
// Cluster API targets, the port-forward access (its listeners, the WebSockets their etcd
// connections hold, a keep-alive connection to the workload API server). Whoever builds it closes
// it on shutdown; the serverless handlers keep one per container (handlers.ts). The CLI and the
// CronJob's scheduled run never build one.
import { KeptPool } from '../adapters/channel-pool.js';
import type { KeptCapiAccess } from '../adapters/capi-etcd-access.js';
import { EtcdChannelPool } from '../adapters/etcd-member-probe.js';
import type { GuardConfig } from '../domain/config.js';
import { TlsFileReuse } from './etcd-access.js';

export interface WarmConnections {
  readonly channels: EtcdChannelPool;
  /** Cluster API accesses; closing one retires the channels that went through its listeners. */
  readonly capiAccesses: KeptPool<KeptCapiAccess>;
  /** Static targets' TLS files, read again only after a while: the bytes the channels are keyed by. */
  readonly tlsFiles: TlsFileReuse;
  /** How many are open now, for tests, benchmarks and metrics. */
  counts(): { channels: number; idleChannels: number; capiAccesses: number };
  /** Closes every kept connection; later evaluations open and close their own. */
  close(): void;
}

/** The kept connections the config asks for, or null when `connections.keep` is off. */
export function createWarmConnections(config: Pick<GuardConfig, 'connections'>): WarmConnections | null {
  const { keep, idleTimeout, maxPerTarget, maxTotal } = config.connections;
  if (!keep) return null;
  const limits = { idleTimeoutMs: idleTimeout, maxPerTarget, maxTotal };
  const channels = new EtcdChannelPool(limits);
  const capiAccesses = new KeptPool<KeptCapiAccess>(limits);
  const tlsFiles = new TlsFileReuse();
  return {
    channels,
    capiAccesses,
    tlsFiles,
    counts: () => {
      const { open, idle } = channels.counts();
      return { channels: open, idleChannels: idle, capiAccesses: capiAccesses.counts().open };
    },
    close: () => {
      capiAccesses.close();
      channels.close();
      tlsFiles.clear();
    },
  };
}
