// Shim over etcd3 1.1.2's connection pool internals (checked by functions/adapters/etcd3-host-shim.test.ts on
// the installed version): a one-endpoint client's single Host (`pool.hosts`), its gRPC channel
// credentials, target, channel options and per-service clients. etcd3 offers no public way to
// share a channel between its services, pick grpc-js's ip resolver or ask a channel's state.
// When the internals differ, each function changes nothing and the client works as etcd3 built it.
import { isIPv4, isIPv6 } from 'node:net';
import type { Etcd3 } from 'etcd3';

/** The part of etcd3 1.1.2's internals a session reuses: each Host's gRPC channel credentials. */
interface PoolInternals {
  pool?: { hosts?: Array<{ channelCredentials?: unknown }> };
}

/** The single Host of a one-endpoint client, when etcd3's internals look as expected; else null. */
export function onlyHost(client: Etcd3): { channelCredentials?: unknown } | null {
  const hosts = (client as unknown as PoolInternals).pool?.hosts;
  const host = Array.isArray(hosts) && hosts.length === 1 ? hosts[0] : undefined;
  return host !== undefined && typeof host === 'object' && host !== null && 'channelCredentials' in host ? host : null;
}

/** The part of a grpc-js channel that says whether it was closed. */
interface ChannelInternals {
  getConnectivityState(tryToConnect: boolean): number;
}
/** grpc-js's connectivityState.SHUTDOWN. */
const CHANNEL_SHUT_DOWN = 4;
/** The part of etcd3 1.1.2's Host that makes and resets its per-service gRPC clients. */
interface HostInternals {
  channelOptions?: Record<string, unknown>;
  getServiceClient?: (name: string) => { getChannel?: () => ChannelInternals };
  resetAllServices?: () => void;
}

/**
 * Makes every service of a one-endpoint client (Maintenance, KV, Cluster, Watch) use one gRPC
 * channel. etcd3 builds a client, and so a channel, per service; with the local subchannel pool
 * (the session's CHANNEL_OPTIONS) each channel dialled its own TLS connection: 3–4 handshakes per member per
 * evaluation where one does. The first service's channel is handed to the next ones through
 * grpc-js's channelOverride; after a reset (etcd3 closes all services of a failing host) or a
 * close, the next service makes a fresh channel. When etcd3's internals differ, nothing changes.
 */
export function shareOneChannel(client: Etcd3): void {
  const host = onlyHost(client) as HostInternals | null;
  const make = host?.getServiceClient;
  const reset = host?.resetAllServices;
  if (host === null || typeof make !== 'function' || typeof reset !== 'function') return;
  let shared: ChannelInternals | null = null;
  host.resetAllServices = () => {
    shared = null;
    reset.call(host);
  };
  host.getServiceClient = (name: string) => {
    if (shared !== null && shared.getConnectivityState(false) === CHANNEL_SHUT_DOWN) shared = null;
    const options = host.channelOptions;
    if (shared !== null) host.channelOptions = { ...options, channelOverride: shared };
    try {
      const service = make.call(host, name);
      shared ??= typeof service.getChannel === 'function' ? service.getChannel() : null;
      return service;
    } finally {
      host.channelOptions = options;
    }
  };
}

/** The part of etcd3 1.1.2's Host that names its gRPC target ("host:port", scheme removed). */
interface HostTarget {
  host?: unknown;
}

/**
 * Gives an IP endpoint grpc-js's ipv4:/ipv6: target instead of its default dns: one. The DNS
 * resolver answers an IP literal without a lookup too, but builds a c-ares channel per channel
 * first (a quarter of a millisecond per member per evaluation). The address dialled, the TLS
 * name checked and the :authority sent stay the same. When etcd3's internals differ, nothing
 * changes.
 */
export function resolveIpDirectly(client: Etcd3): void {
  const host = onlyHost(client) as HostTarget | null;
  if (host === null || typeof host.host !== 'string') return;
  const target = ipTarget(host.host);
  if (target !== undefined) host.host = target;
}

/** "ipv4:1.2.3.4:2379" or "ipv6:[::1]:2379" for an IP authority, undefined for a name. */
function ipTarget(authority: string): string | undefined {
  const v6 = /^\[([^\]]+)\](:\d+)?$/.exec(authority);
  if (v6 !== null) return isIPv6(v6[1] ?? '') ? `ipv6:${authority}` : undefined;
  const v4 = /^([\d.]+)(:\d+)?$/.exec(authority);
  return v4 !== null && isIPv4(v4[1] ?? '') ? `ipv4:${authority}` : undefined;
}

/** grpc-js's connectivityState values a kept channel must not be handed out in. */
const CHANNEL_TRANSIENT_FAILURE = 3;

/** Whether a kept client's channel may be handed out; true when etcd3's internals differ (nothing to ask). */
export function channelUsable(client: Etcd3): boolean {
  const host = onlyHost(client) as HostInternals | null;
  if (host === null || typeof host.getServiceClient !== 'function') return true;
  const state = host.getServiceClient('Maintenance').getChannel?.().getConnectivityState(false);
  return state !== CHANNEL_SHUT_DOWN && state !== CHANNEL_TRANSIENT_FAILURE;
}
