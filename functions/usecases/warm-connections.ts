// The connections a long-running process (the webhook, with its POST /evaluations) keeps open
// between evaluations, as the config's `connections` says: every member's gRPC channel. Whoever
// builds it closes it on shutdown; the CLI and the scheduled run never build one.
import { EtcdChannelPool } from '../adapters/etcd-member-probe.js';
import type { GuardConfig } from '../entrypoints/config.js';

export interface WarmConnections {
  readonly channels: EtcdChannelPool;
  /** How many are open now (member channels), for tests, benchmarks and metrics. */
  counts(): { channels: number; idleChannels: number };
  /** Closes every kept connection; later evaluations open and close their own. */
  close(): void;
}

/** The kept connections the config asks for, or null when `connections.keep` is off. */
export function createWarmConnections(config: Pick<GuardConfig, 'connections'>): WarmConnections | null {
  const { keep, idleTimeout, maxPerTarget, maxTotal } = config.connections;
  if (!keep) return null;
  const channels = new EtcdChannelPool({ idleTimeoutMs: idleTimeout, maxPerTarget, maxTotal });
  return {
    channels,
    counts: () => {
      const { open, idle } = channels.counts();
      return { channels: open, idleChannels: idle };
    },
    close: () => channels.close(),
  };
}
