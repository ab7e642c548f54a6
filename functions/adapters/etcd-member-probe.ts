// The only importer of etcd3. Asks single etcd members what they see, each call bounded by one
// overall deadline, and turns every library error into our own short text naming the endpoint.
// One client per member with retries and circuit breakers off: etcd3's defaults would retry a
// sick member on another host and hide it, or later throw BrokenCircuitError for a healthy one.
import { createHash, X509Certificate } from 'node:crypto';
import { isIP, isIPv4, isIPv6, type Socket } from 'node:net';
import { checkServerIdentity, createSecureContext, type PeerCertificate, type TLSSocket } from 'node:tls';
import { noop } from 'cockatiel';
import {
  Etcd3,
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  EtcdPermissionDeniedError,
  EtcdUserNotFoundError,
  GRPCUnauthenticatedError,
  type IDuplexStream,
  type IOptions,
  type IHashKVResponse,
  type IStatusResponse,
  type IWatchRequest,
  type IWatchResponse,
} from 'etcd3';
import { Deadline, withDeadline } from '../domain/deadline.js';
import { trackCleanup } from '../shared/cleanups.js';
import { statusExtras, type StatusExtras } from './etcd-status-extras.js';
import type { EndpointProbe, HashKVAnswer, MemberStatus, Outcome, RaisedAlarm, WatchOutcome } from '../ports/etcd-probe.js';
import type { ProbeCredentials } from '../ports/etcd-access.js';
import type { MemberListAnswer } from '../domain/member-view.js';
import { failedWith, type ProbeFailure, type ProbeFailureKind } from '../domain/probe-failure.js';
import { processTlsSessions, resumptionAttempt, sessionKey, type TlsSessionCache } from './tls-sessions.js';
import { KeptPool, type Lease, type PoolLimits } from './channel-pool.js';

export interface ProbeSessionOptions {
  /**
   * The name the member's serving certificate must carry, for endpoints that are relays (a
   * loopback port-forward) rather than the member's own address; the endpoint's host otherwise.
   */
  serverNameFor?: (endpoint: string) => string | undefined;
  /**
   * 'chain-only': the server certificate must chain to the trusted CA, but need not name the
   * member (its node name or address). Off by default; see docs for the risk.
   */
  tlsVerify?: 'full' | 'chain-only';
  /** Where TLS sessions are kept for resumption (tls-sessions.ts); the process's by default. Tests give their own clock. */
  tlsSessions?: TlsSessionCache;
  /**
   * Channels kept open between evaluations (a long-running webhook): the session borrows each
   * member's channel from `pool` under `target` and hands it back when it closes; a channel on
   * which a call failed or timed out is retired, so the next evaluation dials afresh.
   */
  pool?: { channels: EtcdChannelPool; target: string };
}

/** Handshakes of the process's probe sessions that resumed a kept TLS session, and full ones verified. */
export function tlsHandshakeCounts(): { resumed: number; verified: number } {
  return processTlsSessions.counts();
}

/** A key nobody writes: a range on it is a cheap linearizable read. */
const PROBE_KEY = Buffer.from('etcd-guard.io/probe');
/** etcd's ErrNoLeader text, the one entry of Status `errors` that is not an alarm. */
const ETCD_NO_LEADER = 'etcdserver: no leader';
/** Time the wall-clock guard allows past the gRPC deadline before it gives up on a call. */
const WALL_CLOCK_GRACE_MS = 25;

const CHANNEL_OPTIONS = {
  // etcd refuses pings more often than its --grpc-keepalive-min-time (5 s by default).
  'grpc.keepalive_time_ms': 5_000,
  'grpc.keepalive_timeout_ms': 1_000,
  'grpc.keepalive_permit_without_calls': 0,
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1_000,
  // A transparent retry could spend the deadline on a second attempt we never see.
  'grpc.enable_retries': 0,
  // grpc-js's global subchannel pool keeps a key per target it ever dialled and never deletes
  // one, and every channel close walks all keys, allocating an array for each. A port-forward
  // listener is a new random loopback port per evaluation, so the keys and the garbage per
  // close grew with every evaluation (RSS 246 → 394 MiB over 1,000). A pool per channel goes
  // with the channel. Sessions never share channels anyway (see tlsChannelCredentials).
  'grpc.use_local_subchannel_pool': 1,
} as const;

/**
 * How long the watch probe's key may take to delete once its round trip is over. The delete runs
 * after the verdict is fixed, so it never lengthens an evaluation; the session keeps its clients
 * open until then.
 */
const WATCH_KEY_CLEANUP_MS = 1_000;

class WallClockTimeout extends Error {}
/** A client could not be built from the credentials (bad PEM, a key that is not the certificate's). */
class ClientSetupFailed extends Error {}
/** The round trip's write did not get through: the watched member was not tested. */
class WatchWriteFailed extends Error {}

type WatchStream = IDuplexStream<IWatchRequest, IWatchResponse>;

/** The next response on `stream` that `wanted` accepts; rejects when the stream errs or ends first. */
function nextResponse(stream: WatchStream, wanted: (response: IWatchResponse) => boolean): Promise<IWatchResponse> {
  // etcd3's stream type offers no off(): the listeners live as long as the stream, which the
  // round trip cancels when it ends; settling twice is a no-op.
  const next = new Promise<IWatchResponse>((resolve, reject) => {
    stream
      .on('data', (response) => {
        if (response.canceled) reject(new Error(`watch cancelled by etcd: ${response.cancel_reason || 'no reason given'}`));
        else if (wanted(response)) resolve(response);
      })
      .on('error', reject)
      .on('end', () => reject(new Error('watch stream ended')));
  });
  // Awaited later or abandoned with its stream: never an unhandled rejection.
  next.catch(() => undefined);
  return next;
}

/**
 * etcd's answers while leadership moves or a proposal is dropped: the same call a moment later
 * succeeds. One retry, inside the same deadline (it never extends it).
 */
// "Stream refused by server" is HTTP/2 REFUSED_STREAM: the server processed nothing (safe for a
// write too); etcd's TLS listener refuses a new stream now and then on a busy connection.
const TRANSIENT =
  /leader changed|raft proposal dropped|no leader|etcdserver: request timed out|too many requests|stream refused by server/i;
const RETRY_PAUSE_MS = 20;
/**
 * The share of the budget after which a call through raft (alarm list, linearizable read) that
 * has not answered is sent once more beside the first attempt (see `call`).
 */
const HEDGE_AFTER_SHARE = 0.5;

type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** The attempt's result if it settles within `ms`, else null (the attempt goes on). */
async function settledWithin<T>(attempt: Promise<Settled<T>>, ms: number): Promise<Settled<T> | null> {
  let timer: NodeJS.Timeout | undefined;
  const due = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
  });
  try {
    return await Promise.race([attempt, due]);
  } finally {
    clearTimeout(timer);
  }
}

/** The first successful of two attempts; when both fail, the first attempt's error (it had the whole budget). */
function firstSuccess<T>(first: Promise<Settled<T>>, hedge: Promise<Settled<T>>): Promise<Settled<T>> {
  return new Promise((resolve) => {
    let failures = 0;
    const settle = (result: Settled<T>) => {
      if (result.ok) resolve(result);
      else if (++failures === 2) void first.then(resolve);
    };
    void first.then(settle);
    void hedge.then(settle);
  });
}

function isTimeout(error: unknown): boolean {
  return error instanceof WallClockTimeout || /deadline exceeded/i.test(errorMessage(error));
}

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/** etcd's answers to bad credentials or a role without permission, as etcd3 types them. */
const AUTH_ERRORS = [
  GRPCUnauthenticatedError,
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  EtcdPermissionDeniedError,
  EtcdUserNotFoundError,
];

/**
 * The one place a library error becomes a failure: its kind (what checks judge by) and our wording
 * "<endpoint>: <cause>". Only the first line of a library message survives, clipped, so nothing
 * beyond the cause (and never key material) leaks.
 */
export function probeFailure(endpoint: string, error: unknown, budgetMs: number): ProbeFailure {
  const [kind, cause] = classify(error, budgetMs);
  const failure: ProbeFailure = { kind, endpoint, text: `${endpoint}: ${cause}` };
  if (kind === 'timeout') failure.budgetMs = budgetMs;
  return failure;
}

/** probeFailure's text alone. */
export function describeProbeError(endpoint: string, error: unknown, budgetMs: number): string {
  return probeFailure(endpoint, error, budgetMs).text;
}

function classify(error: unknown, budgetMs: number): [ProbeFailureKind, string] {
  const message = errorMessage(error);
  if (isTimeout(error)) return ['timeout', `timed out after ${budgetMs} ms`];
  if (AUTH_ERRORS.some((type) => error instanceof type)) return ['auth', `etcd refused our credentials: ${clip(message)}`];
  if (/ECONNREFUSED|connection refused/i.test(message)) return ['refused', 'connection refused'];
  if (/ENOTFOUND|EAI_AGAIN|name resolution|DNS resolution|getaddrinfo/i.test(message)) return ['dns', 'DNS lookup failed'];
  if (/socket disconnected before secure TLS connection/i.test(message)) {
    return ['closed-before-tls', 'connection closed before the TLS handshake'];
  }
  const identity = TLS_IDENTITY.exec(message) ?? NODE_IDENTITY.exec(message);
  // NODE_IDENTITY is Node's own wording, when our identity check could not be installed.
  if (identity !== null)
    return ['tls-identity', `TLS identity: ${clip(identity[1] ?? 'the server certificate does not name the member')}`];
  const tls = tlsCause(message);
  if (tls !== undefined) return ['tls', tls];
  if (/permanently removed from the cluster|member not found/i.test(message)) return ['not-member', clip(message)];
  if (/ECONNRESET|socket hang up|Connection dropped|ended by the other party/i.test(message))
    return ['reset', 'connection reset'];
  if (/EHOSTUNREACH|ENETUNREACH/i.test(message)) return ['unreachable', 'host unreachable'];
  return ['other', clip(message)];
}

function tlsCause(message: string): string | undefined {
  if (/alert certificate expired/i.test(message)) return 'TLS rejected: client certificate expired';
  if (/certificate has expired/i.test(message)) return 'TLS rejected: server certificate expired';
  const untrusted = SERVER_NOT_TRUSTED.exec(message);
  if (untrusted !== null) return `TLS rejected: server certificate not trusted (${untrusted[1] ?? 'verification failed'})`;
  const rejected = CLIENT_REJECTED.exec(message);
  if (rejected !== null) return `TLS rejected: client certificate missing or not accepted (${rejected[1] ?? 'handshake failed'})`;
  if (/SSL|TLS|handshake|certificate/i.test(message)) return `TLS rejected: ${translateOpenSsl(message)}`;
  return undefined;
}

/** Our identity check's own error (identityChecker); the rest of the line says which names. */
const TLS_IDENTITY = /TLS identity: ([^\n]*)/;
const NODE_IDENTITY = /Hostname\/IP does not match certificate's altnames: ([^\n]*)/i;

/** Printable and bounded: a certificate's names come from whoever runs the server. */
function printable(text: string, max = 200): string {
  const clean = text.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > max ? `${clean.slice(0, max - 3)}...` : clean;
}

/**
 * Node's checkServerIdentity, worded as "TLS identity" naming the name we expected and the names
 * the certificate has; with 'chain-only', any name passes. Node calls it only after the chain
 * verified, so chain-only never accepts a certificate from another CA.
 */
function identityChecker(mode: 'full' | 'chain-only'): (hostname: string, cert: PeerCertificate) => Error | undefined {
  return (hostname, cert) => {
    const mismatch = checkServerIdentity(hostname, cert);
    if (mismatch === undefined || mode === 'chain-only') return undefined;
    const names = cert.subjectaltname
      ? printable(cert.subjectaltname)
      : `no subject alternative names (CN ${printable(String(cert.subject?.CN ?? 'none'), 64)})`;
    return new Error(`TLS identity: the server certificate does not name ${printable(hostname, 100)}; it names ${names}`);
  };
}

/** The part of grpc-js 1.x's secure channel credentials that holds the certificate checks. */
interface VerifyOptionsInternals {
  verifyOptions?: { checkServerIdentity?: unknown };
}

/**
 * Puts our identity check into the credentials. When grpc-js's internals differ nothing changes:
 * Node's own check stays (described as TLS identity from its wording), and chain-only is not
 * applied, so verification never weakens by accident.
 */
function withIdentityCheck(credentials: unknown, mode: 'full' | 'chain-only'): void {
  if (typeof credentials !== 'object' || credentials === null) return;
  const verify = (credentials as VerifyOptionsInternals).verifyOptions;
  if (typeof verify !== 'object' || verify === null || verify.checkServerIdentity !== undefined) return;
  verify.checkServerIdentity = identityChecker(mode);
}

const SERVER_NOT_TRUSTED =
  /(unable to verify the first certificate|self[- ]signed certificate(?: in certificate chain)?|unable to get (?:local )?issuer certificate|certificate has expired|Hostname\/IP does not match certificate's altnames|certificate signature failure)/i;
const CLIENT_REJECTED =
  /(alert (?:bad certificate|certificate required|unknown ca|certificate unknown|handshake failure|certificate revoked))/i;

/** OpenSSL's own words ("error:0A00010B:SSL routines::wrong version number") in ours. */
const OPENSSL_REASONS: ReadonlyArray<[RegExp, string]> = [
  [/wrong version number|packet length too long|http request/i, 'the endpoint does not speak TLS (an http:// endpoint?)'],
  [/unsupported protocol|no protocols available|version too low/i, 'no TLS version both sides support'],
  [/no shared cipher|sslv3 alert handshake failure/i, 'no cipher both sides support'],
  [/tlsv1 alert internal error/i, 'the server failed the handshake'],
  [/decryption failed|bad record mac/i, 'the connection was corrupted'],
];

/**
 * Why our own client certificate is not valid right now ("expired on …"), or null. etcd (Go)
 * answers an expired client certificate with a bare "bad certificate" alert, so only we can say.
 */
export function clientCertificateInvalidity(certPem: Buffer | undefined, now: Date = new Date()): string | null {
  if (certPem === undefined) return null;
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(certPem);
  } catch {
    return null;
  }
  const notAfter = new Date(certificate.validTo);
  const notBefore = new Date(certificate.validFrom);
  if (now > notAfter) return `client certificate expired (not valid after ${notAfter.toISOString()})`;
  if (now < notBefore) return `client certificate not yet valid (not before ${notBefore.toISOString()}; clock skew?)`;
  return null;
}

function translateOpenSsl(message: string): string {
  for (const [pattern, meaning] of OPENSSL_REASONS) if (pattern.test(message)) return meaning;
  return clip(message.replace(/error:[0-9A-Fa-f]+:[A-Za-z0-9 ]*routines:[A-Za-z0-9_]*:/g, ''));
}

function clip(text: string): string {
  // grpc-js prefixes "14 UNAVAILABLE: " and appends timestamps and resolution notes; keep the cause.
  const firstLine = text.split('\n')[0] ?? text;
  const trimmed = firstLine
    .replace(/^\d+ [A-Z_]+: /, '')
    .replace(/\s*\(\d{4}-\d\d-\d\dT[^)]*\)/g, '')
    .replace(/\.?\s*Resolution note:.*$/, '')
    .trim();
  return trimmed.length > 160 ? `${trimmed.slice(0, 157)}...` : trimmed;
}

function toNumber(value: unknown): number {
  // int64 fields arrive as decimal strings.
  const number = typeof value === 'number' ? value : Number(value);
  return Number.isFinite(number) ? number : 0;
}

/** The part of etcd3 1.1.2's internals a session reuses: each Host's gRPC channel credentials. */
interface PoolInternals {
  pool?: { hosts?: Array<{ channelCredentials?: unknown }> };
}

/** The single Host of a one-endpoint client, when etcd3's internals look as expected; else null. */
function onlyHost(client: Etcd3): { channelCredentials?: unknown } | null {
  const hosts = (client as unknown as PoolInternals).pool?.hosts;
  const host = Array.isArray(hosts) && hosts.length === 1 ? hosts[0] : undefined;
  return host !== undefined && typeof host === 'object' && host !== null && 'channelCredentials' in host ? host : null;
}

/** The part of grpc-js 1.x's channel credentials that makes each connection's connector. */
interface ConnectorInternals {
  _createSecureConnector?: (...args: unknown[]) => GrpcConnector;
  [INSTRUMENTED]?: true;
}

/** The part of a grpc-js service client (etcd3's Maintenance client) a raw Status call needs. */
interface UnaryMethod {
  path: string;
  requestSerialize: (value: unknown) => Buffer;
  responseDeserialize: (bytes: Buffer) => unknown;
}
interface RawServiceClient {
  makeUnaryRequest(
    path: string,
    serialize: (value: unknown) => Buffer,
    deserialize: (bytes: Buffer) => unknown,
    argument: unknown,
    options: { deadline: Date },
    callback: (error: Error | null, value?: unknown) => void,
  ): unknown;
  constructor: { service?: Record<string, UnaryMethod | undefined> };
}

type StatusWithExtras = IStatusResponse & { extras: StatusExtras };

/**
 * maintenance Status, decoded by etcd3's own definition, plus what etcd 3.6 added to the response
 * (etcd-status-extras.ts), read from the same bytes. It goes through the client's Maintenance
 * service directly, so the raw bytes are seen; when etcd3's internals differ, its documented call
 * answers without the extras (a 3.6 member's quota then falls back to the configured one).
 */
function statusWithExtras(client: Etcd3, deadline: Date): Promise<StatusWithExtras> {
  const host = onlyHost(client) as { getServiceClient?: (name: string) => unknown } | null;
  const service =
    typeof host?.getServiceClient === 'function' ? (host.getServiceClient('Maintenance') as RawServiceClient) : null;
  const method = service?.constructor.service?.Status;
  if (service === null || typeof service.makeUnaryRequest !== 'function' || method === undefined) {
    return client.maintenance.status({ deadline }).then((response) => ({ ...response, extras: {} }));
  }
  return new Promise((resolve, reject) => {
    service.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      (bytes) => ({ ...(method.responseDeserialize(bytes) as IStatusResponse), extras: statusExtras(bytes) }),
      {},
      { deadline },
      (error, value) => (error ? reject(error) : resolve(value as StatusWithExtras)),
    );
  });
}

/**
 * maintenance HashKV, through the Maintenance service's own definition: etcd3 1.1.2's
 * `maintenance.hashKV` asks grpc-js for a method `hashKV`, but grpc-js names it by lodash's
 * camelCase of `HashKV`, `hashKv`, so etcd3's documented call never reaches the member.
 */
function hashKVRaw(client: Etcd3, revision: number, deadline: Date): Promise<IHashKVResponse> {
  const host = onlyHost(client) as { getServiceClient?: (name: string) => unknown } | null;
  const service =
    typeof host?.getServiceClient === 'function' ? (host.getServiceClient('Maintenance') as RawServiceClient) : null;
  const method = service?.constructor.service?.HashKV;
  if (service === null || typeof service.makeUnaryRequest !== 'function' || method === undefined) {
    return Promise.reject(new Error('this etcd3 client offers no HashKV call'));
  }
  return new Promise((resolve, reject) => {
    service.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      { revision: String(revision) },
      { deadline },
      (error, value) => (error ? reject(error) : resolve(value as IHashKVResponse)),
    );
  });
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
 * (CHANNEL_OPTIONS) each channel dialled its own TLS connection: 3–4 handshakes per member per
 * evaluation where one does. The first service's channel is handed to the next ones through
 * grpc-js's channelOverride; after a reset (etcd3 closes all services of a failing host) or a
 * close, the next service makes a fresh channel. When etcd3's internals differ, nothing changes.
 */
function shareOneChannel(client: Etcd3): void {
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
function resolveIpDirectly(client: Etcd3): void {
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

/** grpc-js 1.x's connector: wraps each new TCP socket (in TLS, or as it is) for one subchannel connect. */
interface GrpcConnector {
  connectionOptions?: ConnectionOptionsInternals;
  connect?: (socket: Socket) => Promise<{ socket: Socket; secure: boolean }>;
}
/** The tls.connect options grpc-js 1.x's SecureConnectorImpl keeps and passes on each connect. */
interface ConnectionOptionsInternals {
  servername?: unknown;
  host?: unknown;
  secureContext?: unknown;
  checkServerIdentity?: unknown;
}

/** Where a session's connections keep and find TLS sessions, and the scope of its trust. */
interface Resumption {
  cache: TlsSessionCache;
  /** Digest of the CA/certificate/key bytes and the verification mode. */
  scope: string;
}
const INSTRUMENTED = Symbol('etcd-guard: connector instrumented');

/**
 * The sockets a session's gRPC channels hold, so close() can destroy them. grpc-js's channel
 * close() shuts its subchannel connector down but never the socket of a connect in progress: a
 * TLS handshake that a hung (SIGSTOPped) member or a stalled relay never answers keeps its
 * socket until the peer wakes up or dies, and a handshake that completes after the shutdown is
 * handed to createSession, which rejects without destroying it (transport.js, grpc-js 1.14).
 * That was 3-4 sockets per evaluation of a hung member. Every socket that reaches the connector
 * is recorded here and destroyed when the session closes; one arriving after that is destroyed
 * at once.
 */
class SessionSockets {
  private readonly open = new Set<Socket>();
  private closed = false;

  track(socket: Socket): void {
    if (this.closed) {
      destroyOutsideReads(socket);
      return;
    }
    if (socket.destroyed) return;
    this.open.add(socket);
    socket.once('close', () => this.open.delete(socket));
  }

  /**
   * `tls` now carries `raw` (grpc-js's TLS connect wraps the TCP socket it was given): only `tls`
   * is destroyed at close, which closes `raw` under it; destroying `raw` itself would pull the
   * TCP handle from under a live TLS socket.
   */
  wrapped(raw: Socket, tls: Socket): void {
    if (tls !== raw) this.open.delete(raw);
    this.track(tls);
  }

  destroyAll(): void {
    this.closed = true;
    for (const socket of this.open) destroyOutsideReads(socket);
    this.open.clear();
  }
}

/**
 * Destroys `socket` from the event loop's check phase, never from inside a read. A session closes
 * when its last answer arrives, i.e. from promise callbacks Node runs while a TLS socket is still
 * delivering that answer (TLSWrap::ClearOut → EmitRead → JS → microtasks); destroying that very
 * socket there let Node 22's ClearOut touch its freed TLSWrap: a SIGSEGV in 1 of ~3 runs of 300
 * evaluations here (core dump: ClearOut after EmitRead, `this` already freed). setImmediate runs
 * once every read callback has returned; a socket already destroyed by then is left alone.
 */
function destroyOutsideReads(socket: Socket): void {
  setImmediate(() => {
    if (!socket.destroyed) socket.destroy();
  });
}

/**
 * Wraps the connectors `credentials` makes so that every socket goes through `sockets`, and so
 * that an IP endpoint gets no TLS server name: grpc-js sends the endpoint's host as SNI even when
 * it is an IP address, which RFC 6066 forbids and Node answers with the DEP0123 warning. Without a
 * server name Node checks the certificate against the connection's host, i.e. the IP against the
 * certificate's IP SANs, exactly as before; host names keep their SNI. With `resumption`, each
 * TLS connect offers and keeps sessions (resumingConnect). When grpc-js's internals differ,
 * nothing is changed (verification never weakens; only the cleanup and resumption are lost).
 */
function instrumentCredentials(credentials: unknown, sockets: SessionSockets, resumption?: Resumption): void {
  if (typeof credentials !== 'object' || credentials === null) return;
  const internals = credentials as ConnectorInternals;
  const create = internals._createSecureConnector;
  if (typeof create !== 'function' || internals[INSTRUMENTED]) return;
  internals._createSecureConnector = (...args: unknown[]) => {
    const connector = create.apply(credentials, args);
    const options = connector.connectionOptions;
    if (typeof options?.servername === 'string' && isIP(options.servername) !== 0) delete options.servername;
    const connect = connector.connect;
    if (typeof connect === 'function') {
      const relayedName = relayedServerName(args[1]);
      connector.connect = (socket: Socket) => {
        sockets.track(socket);
        const connecting = resumption === undefined ? null : resumingConnect(connector, connect, socket, resumption, relayedName);
        return (connecting ?? connect.call(connector, socket)).then((result) => {
          sockets.wrapped(socket, result.socket);
          return result;
        });
      };
    }
    return connector;
  };
  internals[INSTRUMENTED] = true;
}

/** The server name a relayed channel verifies (channelOptions sets the override only for relays). */
function relayedServerName(channelOptions: unknown): string | undefined {
  if (typeof channelOptions !== 'object' || channelOptions === null) return undefined;
  const name = (channelOptions as Record<string, unknown>)['grpc.ssl_target_name_override'];
  return typeof name === 'string' ? name : undefined;
}

/**
 * One TLS connect through grpc-js's own connector, offering the session kept for this member
 * (sessionKey) and keeping the one the server sends. The connect runs with a copy of the
 * connector's options for this attempt alone: the session to offer, and the identity check
 * wrapped to note the server certificate's notAfter when it passes (Node calls it on every full
 * handshake, and skips it on a resumed one, which is why the key must pin the name verified).
 * A session is kept only from a connection that passed: verified in full now, or resumed from a
 * session that was (keeping that one's basis). A failed connect drops the key's session, so a
 * member that refuses it (new keys, another certificate) is next met with a full handshake.
 * The 'session' listener goes on once grpc-js hands the socket over: a server that asks for a
 * client certificate (etcd with client-cert auth) sends its ticket after our Finished, so in a
 * later read; one that asks for none sends it in its first flight, Node emits it right after
 * secureConnect, before the listener is on, and such members are simply not resumed.
 * Null when grpc-js's options do not look like 1.x's: the caller connects as before.
 */
function resumingConnect(
  connector: GrpcConnector,
  connect: NonNullable<GrpcConnector['connect']>,
  socket: Socket,
  { cache, scope }: Resumption,
  relayedName: string | undefined,
): Promise<{ socket: Socket; secure: boolean }> | null {
  const options = connector.connectionOptions;
  if (typeof options !== 'object' || options === null || options.secureContext === undefined) return null;
  if (typeof options.host !== 'string') return null;
  const name = typeof options.servername === 'string' ? options.servername : options.host;
  const key = sessionKey(scope, { relayedName, name, host: options.host, port: socket.remotePort });
  if (key === undefined) return null;
  const check = (
    typeof options.checkServerIdentity === 'function' ? options.checkServerIdentity : checkServerIdentity
  ) as typeof checkServerIdentity;
  const offered = cache.offer(key);
  const resumption = resumptionAttempt(cache, offered, check);
  const attemptOptions: ConnectionOptionsInternals & { session?: Buffer } = {
    ...options,
    checkServerIdentity: resumption.checkServerIdentity,
  };
  if (offered !== undefined) attemptOptions.session = offered.session;
  const attempt = Object.create(connector, { connectionOptions: { value: attemptOptions } }) as GrpcConnector;
  return connect.call(attempt, socket).then(
    (result) => {
      const tls = result.socket as Partial<TLSSocket>;
      const basis = resumption.settle(typeof tls.isSessionReused === 'function' && tls.isSessionReused());
      if (basis !== undefined && typeof tls.on === 'function') {
        tls.on('session', (session: Buffer) => cache.keep(key, session, basis));
      }
      return result;
    },
    (error: unknown) => {
      cache.drop(key);
      throw error;
    },
  );
}

/** What Node's TLS layer says about bad key material, in words that name no content. */
function describeCredentialsError(error: unknown): string {
  const message = errorMessage(error);
  if (/key values mismatch|KEY_VALUES_MISMATCH/i.test(message)) return 'the client key does not belong to the client certificate';
  if (/no start line|PEM|ASN1|asn1|bad decrypt|unsupported/i.test(message)) return 'a CA, certificate or key is not valid PEM';
  return 'the CA, certificate or key cannot be used';
}

/**
 * Why `credentials` cannot make a TLS client, or null when they can: the same check grpc-js makes
 * when a client is built (tls.createSecureContext), which throws synchronously.
 */
export function probeCredentialsProblem(credentials: ProbeCredentials): string | null {
  const digest = credentialsDigest(credentials);
  if (USABLE_CREDENTIALS.has(digest)) return null;
  try {
    createSecureContext({
      ...(credentials.ca !== undefined && { ca: credentials.ca }),
      ...(credentials.cert !== undefined && { cert: credentials.cert }),
      ...(credentials.key !== undefined && { key: credentials.key }),
    });
  } catch (error) {
    return describeCredentialsError(error);
  }
  if (USABLE_CREDENTIALS.size >= USABLE_CREDENTIALS_KEPT) USABLE_CREDENTIALS.clear();
  USABLE_CREDENTIALS.add(digest);
  return null;
}

/**
 * Digests of CA/certificate/key triples that made a TLS context. The check parses all three into
 * an OpenSSL context, as much CPU as the evaluation's own client context (the CLI and the
 * scheduled loop re-read the same files every run); the same bytes always give the same answer,
 * so a repeat is answered from here. Only digests are held, never the PEM bytes. Bounded: a fleet
 * of more distinct triples than this just checks again.
 */
const USABLE_CREDENTIALS = new Set<string>();
const USABLE_CREDENTIALS_KEPT = 1024;

/** The part of grpc-js 1.x's secure channel credentials that holds the OpenSSL context. */
interface SecureCredentialsInternals {
  secureContext?: unknown;
  verifyOptions?: unknown;
  constructor: { createFromSecureContext?: (context: unknown, verifyOptions: object) => unknown };
}

/**
 * OpenSSL contexts of earlier sessions, by digest of the CA/certificate/key bytes they were built
 * from (the CLI's scheduled loop, the webhook's refreshes and a fleet's repeat runs evaluate the
 * same targets with the same files). A context holds no connection state (Node keeps no client
 * sessions in it): each connection makes its own handshake, resuming only a session that
 * resumingConnect offers it explicitly. Bounded, least recently used first out; a fleet of more
 * credential sets just builds contexts as before. 128: a Cluster API fleet has one set per
 * cluster (each its own minted certificate), and 32 made a 100-cluster fleet build every context
 * anew each run (~0.7 ms of CPU per evaluation); a context with a CA, certificate and key holds
 * ~65 KiB off the heap (RSS, measured), so 128 hold ~8 MiB at most.
 */
const SECURE_CONTEXTS = new Map<string, { context: unknown; make: SecureCredentialsInternals['constructor'] }>();
const SECURE_CONTEXTS_KEPT = 128;

function rememberSecureContext(digest: string, credentials: unknown): void {
  const internals = credentials as SecureCredentialsInternals;
  if (typeof internals.secureContext !== 'object' || internals.secureContext === null) return;
  if (typeof internals.constructor.createFromSecureContext !== 'function') return;
  SECURE_CONTEXTS.delete(digest);
  if (SECURE_CONTEXTS.size >= SECURE_CONTEXTS_KEPT) SECURE_CONTEXTS.delete(SECURE_CONTEXTS.keys().next().value ?? '');
  SECURE_CONTEXTS.set(digest, { context: internals.secureContext, make: internals.constructor });
}

/**
 * New grpc-js credentials (grpc-js's documented createFromSecureContext) around the context kept
 * for `digest`, or undefined. When what comes back does not look like grpc-js 1.x's secure
 * credentials, nothing is reused and the caller builds its own, so TLS never weakens by accident.
 */
function credentialsAround(digest: string): unknown {
  const kept = SECURE_CONTEXTS.get(digest);
  if (kept === undefined) return undefined;
  SECURE_CONTEXTS.delete(digest);
  SECURE_CONTEXTS.set(digest, kept);
  const credentials = kept.make.createFromSecureContext?.(kept.context, {}) as SecureCredentialsInternals | undefined;
  const looksRight =
    typeof credentials === 'object' &&
    credentials !== null &&
    credentials.secureContext === kept.context &&
    typeof credentials.verifyOptions === 'object';
  return looksRight ? credentials : undefined;
}

function credentialsDigest(credentials: ProbeCredentials): string {
  const hash = createHash('sha256');
  for (const part of [credentials.ca, credentials.cert, credentials.key]) {
    // Length-prefixed, so moving bytes between the parts never gives the same digest.
    hash.update(part === undefined ? '-1:' : `${part.length}:`);
    if (part !== undefined) hash.update(part);
  }
  return hash.digest('hex');
}

/**
 * Probes members under deadlines. One Etcd3 client per endpoint, created on first use and all
 * closed by close(); a session serves one evaluation.
 */
export class EtcdProbeSession {
  private readonly clients = new Map<string, Etcd3>();
  private readonly sockets = new SessionSockets();
  /** Deletes of watch probe keys still running: close() releases the clients once they settle. */
  private readonly cleanups = new Set<Promise<unknown>>();
  private closed = false;
  /**
   * The TLS channel credentials of the session's first https client. Building them parses the
   * CA, certificate and key into a new OpenSSL context (~1 ms of CPU each, a fifth of a fleet
   * run's CPU), so the session's other clients reuse them. The credentials object is the
   * session's own (its sockets and identity check hang on it); the OpenSSL context inside may
   * come from an earlier session with the same bytes (SECURE_CONTEXTS). Connections are never
   * shared: every channel has its own subchannel pool (CHANNEL_OPTIONS) and dials afresh.
   */
  private tlsChannelCredentials: unknown;
  /** The channels borrowed from options.pool, by endpoint. */
  private readonly leases = new Map<string, Lease<MemberChannel>>();
  private digest: string | undefined;

  constructor(
    private readonly credentials: ProbeCredentials,
    private readonly options: ProbeSessionOptions = {},
    /** Set for the session of a kept channel (MemberChannel): idle keepalive pings at this interval. */
    private readonly keepaliveMs?: number,
  ) {}

  /** probeFailure, plus what only we know: the server refused our client certificate because it is out of date. */
  private failure(endpoint: string, error: unknown, budgetMs: number): ProbeFailure {
    if (error instanceof ClientSetupFailed) {
      return { kind: 'setup', endpoint, text: `${endpoint}: cannot set up the etcd client: ${error.message}` };
    }
    const failure = probeFailure(endpoint, error, budgetMs);
    if (!CLIENT_REJECTED.test(errorMessage(error))) return failure;
    const invalidity = clientCertificateInvalidity(this.credentials.cert);
    return invalidity === null ? failure : { ...failure, text: `${endpoint}: TLS rejected: ${invalidity}` };
  }

  /**
   * Sessions are shared only within the same trust, client identity and verification mode: a
   * session verified with chain-only never stands in for a full check, and another CA or client
   * certificate never finds one.
   */
  private resumption(): Resumption {
    const cache = this.options.tlsSessions ?? processTlsSessions;
    return { cache, scope: `${credentialsDigest(this.credentials)}\0${this.options.tlsVerify ?? 'full'}` };
  }

  /** The channel options for an endpoint: ours, plus the server name to verify when a relay is dialled. */
  private channelOptions(endpoint: string): Record<string, string | number> {
    const serverName = this.options.serverNameFor?.(endpoint);
    const base =
      this.keepaliveMs === undefined ? { ...CHANNEL_OPTIONS } : { ...CHANNEL_OPTIONS, ...idleKeepalive(this.keepaliveMs) };
    if (serverName === undefined) return base;
    return { ...base, 'grpc.ssl_target_name_override': serverName, 'grpc.default_authority': serverName };
  }

  /**
   * What a kept channel of `endpoint` is known by: the session's trust, identity and verification
   * (a channel never serves other credentials), the endpoint and the name verified through it.
   */
  private channelKey(endpoint: string): string {
    this.digest ??= credentialsDigest(this.credentials);
    return [endpoint, this.options.serverNameFor?.(endpoint) ?? '', this.options.tlsVerify ?? 'full', this.digest].join('\0');
  }

  /** The pool's channel for `endpoint` (borrowed until close), or null when there is no pool or no room in it. */
  private borrowed(endpoint: string): Etcd3 | null {
    const pool = this.options.pool;
    if (pool === undefined) return null;
    const { tlsSessions, serverNameFor, tlsVerify } = this.options;
    const lease = pool.channels.acquire(pool.target, this.channelKey(endpoint), () => {
      const options: ProbeSessionOptions = {
        ...(serverNameFor === undefined ? {} : { serverNameFor }),
        ...(tlsVerify === undefined ? {} : { tlsVerify }),
        ...(tlsSessions === undefined ? {} : { tlsSessions }),
      };
      return new MemberChannel(this.credentials, options, endpoint, pool.channels.keepaliveMs);
    });
    if (lease === null) return null;
    this.leases.set(endpoint, lease);
    return lease.value.client;
  }

  /** A call on `endpoint` failed or timed out: its kept channel (if any) is not handed to anyone again. */
  private failedOn(endpoint: string): void {
    this.leases.get(endpoint)?.fail();
  }

  private client(endpoint: string): Etcd3 {
    const existing = this.clients.get(endpoint);
    if (existing) return existing;
    let client: Etcd3;
    try {
      // A kept channel's client was set up once, by the session that owns it: wrapping it again
      // on every borrow nested one more layer around each of its calls per evaluation.
      const kept = this.borrowed(endpoint);
      if (kept !== null) client = kept;
      else {
        client = this.reusingTlsCredentials(endpoint) ?? this.newClient(endpoint);
        shareOneChannel(client);
        resolveIpDirectly(client);
      }
    } catch (error) {
      // etcd3 builds TLS credentials in its constructor, which throws on a key that does not
      // match its certificate: that must be this member's failure, never the caller's exception.
      throw error instanceof ClientSetupFailed ? error : new ClientSetupFailed(describeCredentialsError(error));
    }
    this.clients.set(endpoint, client);
    return client;
  }

  private newClient(endpoint: string): Etcd3 {
    const options: IOptions = {
      hosts: endpoint,
      grpcOptions: this.channelOptions(endpoint),
      faultHandling: { host: () => noop, global: noop },
    };
    const withCa = endpoint.startsWith('https:') && this.credentials.ca !== undefined;
    if (withCa && this.credentials.ca !== undefined) {
      options.credentials = { rootCertificate: this.credentials.ca };
      if (this.credentials.cert !== undefined && this.credentials.key !== undefined) {
        options.credentials.certChain = this.credentials.cert;
        options.credentials.privateKey = this.credentials.key;
      }
    }
    const client = new Etcd3(options);
    const host = onlyHost(client);
    if (host?.channelCredentials !== undefined) {
      instrumentCredentials(host.channelCredentials, this.sockets, this.resumption());
      if (endpoint.startsWith('https:') && this.tlsChannelCredentials === undefined) {
        if (withCa) rememberSecureContext(credentialsDigest(this.credentials), host.channelCredentials);
        withIdentityCheck(host.channelCredentials, this.options.tlsVerify ?? 'full');
        this.tlsChannelCredentials = host.channelCredentials;
      }
    }
    return client;
  }

  /**
   * Credentials of the session's own around a TLS context an earlier session built from the same
   * CA, certificate and key, or undefined (none kept, or not an https endpoint with a CA).
   */
  private credentialsFromKeptContext(endpoint: string): unknown {
    if (!endpoint.startsWith('https://') || this.credentials.ca === undefined) return undefined;
    const credentials = credentialsAround(credentialsDigest(this.credentials));
    if (credentials === undefined) return undefined;
    instrumentCredentials(credentials, this.sockets, this.resumption());
    withIdentityCheck(credentials, this.options.tlsVerify ?? 'full');
    return credentials;
  }

  /**
   * A client for an https endpoint that uses the session's TLS credentials instead of building
   * its own. It is made without a scheme (so etcd3 builds only cheap insecure credentials) and
   * gets the TLS ones before its first call opens a channel. Null when there is nothing to reuse
   * or etcd3's internals differ: then the caller builds a client the documented way, so a
   * change in etcd3 costs speed, never TLS.
   */
  private reusingTlsCredentials(endpoint: string): Etcd3 | null {
    this.tlsChannelCredentials ??= this.credentialsFromKeptContext(endpoint);
    if (this.tlsChannelCredentials === undefined || !endpoint.startsWith('https://')) return null;
    const client = new Etcd3({
      hosts: endpoint.slice('https://'.length),
      grpcOptions: this.channelOptions(endpoint),
      faultHandling: { host: () => noop, global: noop },
    });
    const host = onlyHost(client);
    if (host === null) {
      client.close();
      return null;
    }
    host.channelCredentials = this.tlsChannelCredentials;
    return client;
  }

  /**
   * Runs one unary call under `deadline`, never throwing. gRPC gets the deadline as its call
   * option; a wall-clock guard a little later settles the call if gRPC does not. A transient
   * answer is retried once. A call `throughRaft` that has not answered by a share of the budget is
   * hedged: the same read is sent again beside it, and the first answer wins. etcd drops a request
   * proposed during a leader transfer without answering; the hedge gets it through, while the
   * first attempt keeps its whole deadline, so a slow but live member is never cut short.
   */
  private async call<T>(
    endpoint: string,
    deadline: Deadline,
    run: (client: Etcd3, callDeadline: Date) => Promise<T>,
    throughRaft = false,
  ): Promise<Outcome<T>> {
    const budgetMs = Math.round(deadline.remainingMs());
    if (this.closed) return { ok: false, kind: 'closed', error: `${endpoint}: probe session closed` };
    if (budgetMs <= 0) return { ok: false, kind: 'no-time', error: `${endpoint}: timed out (no time left in the deadline)` };
    const attempt = (): Promise<Settled<T>> => {
      let client: Etcd3;
      try {
        client = this.client(endpoint);
      } catch (error) {
        return Promise.resolve({ ok: false, error });
      }
      return withDeadline(run(client, deadline.toDate()), deadline.extendedBy(WALL_CLOCK_GRACE_MS), () => {
        return new WallClockTimeout('wall clock');
      }).then(
        (value): Settled<T> => ({ ok: true, value }),
        (error: unknown): Settled<T> => ({ ok: false, error }),
      );
    };
    const failed = (error: unknown): Outcome<T> => {
      this.failedOn(endpoint);
      return failedWith(this.failure(endpoint, error, deadline.timeoutMs));
    };
    const canTryAgain = () => !this.closed && deadline.remainingMs() > RETRY_PAUSE_MS;
    const first = attempt();
    const early = throughRaft ? await settledWithin(first, budgetMs * HEDGE_AFTER_SHARE) : await first;
    if (early !== null) {
      if (early.ok) return early;
      if (!TRANSIENT.test(errorMessage(early.error)) || !canTryAgain()) return failed(early.error);
      await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
      const again = await attempt();
      return again.ok ? again : failed(again.error);
    }
    if (!canTryAgain()) {
      const only = await first;
      return only.ok ? only : failed(only.error);
    }
    const answer = await firstSuccess(first, attempt());
    return answer.ok ? answer : failed(answer.error);
  }

  private callThroughRaft<T>(
    endpoint: string,
    deadline: Deadline,
    run: (client: Etcd3, callDeadline: Date) => Promise<T>,
  ): Promise<Outcome<T>> {
    return this.call(endpoint, deadline, run, true);
  }

  /**
   * The member list as `endpoint` sees it, with the cluster and member that answered (served
   * locally by the member: a removed or isolated member still answers its own stale list).
   * `linearizable` asks etcd 3.5+ for the committed list instead (it goes through raft and fails
   * without quorum); etcd 3.4 ignores the field and answers locally.
   */
  listMembers(endpoint: string, deadline: Deadline, linearizable = false): Promise<Outcome<MemberListAnswer>> {
    return this.call(endpoint, deadline, async (client, callDeadline) => {
      const response = await client.cluster.memberList(linearizable ? { linearizable } : {}, { deadline: callDeadline });
      return {
        clusterId: String(response.header.cluster_id),
        memberId: String(response.header.member_id),
        members: response.members.map((member) => ({
          id: String(member.ID),
          name: member.name ?? '',
          peerUrls: member.peerURLs ?? [],
          clientUrls: member.clientURLs ?? [],
          isLearner: member.isLearner === true,
        })),
      };
    });
  }

  /**
   * Status and a linearizable read, concurrently, and the alarm list, all under `deadline`. etcd
   * puts the alarms it has applied into Status's `errors` (3.4+, as its own /health reads them),
   * so on the healthy path Status answers the alarm question and the read, which waits until the
   * member has applied everything committed, vouches that the member is current: the alarm list
   * is then empty, or the read's failure (the alarm GET goes through raft and would have failed
   * with it). Only when Status did not answer or reports anything but "no leader" is the alarm
   * list asked for (through raft, like `etcdctl alarm list`), and its answer is the alarm list.
   * The GET was a raft proposal per member per evaluation, the slowest call of the probe.
   * `onStatus` hears the Status outcome as soon as it is known, before the other calls settle.
   */
  async probe(endpoint: string, deadline: Deadline, onStatus?: (status: Outcome<MemberStatus>) => void): Promise<EndpointProbe> {
    let latencyMs: number | null = null;
    let statusErrors: readonly string[] = [];
    const statusCall = this.call(endpoint, deadline, async (client, callDeadline): Promise<MemberStatus> => {
      const started = performance.now();
      const response = await statusWithExtras(client, callDeadline);
      latencyMs = Math.round((performance.now() - started) * 10) / 10;
      statusErrors = response.errors ?? [];
      return {
        memberId: String(response.header.member_id),
        clusterId: String(response.header.cluster_id),
        leaderId: String(response.leader),
        raftIndex: toNumber(response.raftIndex),
        raftTerm: toNumber(response.raftTerm),
        dbSizeBytes: toNumber(response.dbSize),
        dbSizeInUseBytes: toNumber(response.dbSizeInUse),
        version: response.version,
        isLearner: response.isLearner === true,
        ...(response.extras.dbSizeQuotaBytes === undefined ? {} : { dbSizeQuotaBytes: response.extras.dbSizeQuotaBytes }),
        ...(response.extras.downgrade === undefined ? {} : { downgrade: response.extras.downgrade }),
        ...(response.header.revision === undefined ? {} : { revision: toNumber(response.header.revision) }),
      };
    });
    if (onStatus !== undefined) void statusCall.then(onStatus);
    const readCall = this.callThroughRaft(endpoint, deadline, async (client, callDeadline): Promise<null> => {
      await client.kv.range({ key: PROBE_KEY, serializable: false, count_only: true }, { deadline: callDeadline });
      return null;
    });
    const alarmsCall = statusCall.then(async (status): Promise<Outcome<RaisedAlarm[]>> => {
      if (!status.ok || statusErrors.some((error) => error !== ETCD_NO_LEADER)) return this.listAlarms(endpoint, deadline);
      const read = await readCall;
      return read.ok ? { ok: true, value: [] } : read;
    });
    const [status, alarms, linearizableRead] = await Promise.all([statusCall, alarmsCall, readCall]);
    return { endpoint, status, alarms, linearizableRead, latencyMs };
  }

  /**
   * maintenance HashKV at `revision`: the member reads every key up to it (its whole keyspace), so
   * the call takes as long as that read; the deadline bounds it like every other call.
   */
  hashKV(endpoint: string, revision: number, deadline: Deadline): Promise<Outcome<HashKVAnswer>> {
    return this.call(endpoint, deadline, async (client, callDeadline): Promise<HashKVAnswer> => {
      // Nothing written since the last compaction leaves no revision above it to ask for: the
      // member's latest (0) then, with the revision it hashed from its header, compared as such.
      const response = await hashKVRaw(client, revision, callDeadline).catch((error: unknown) => {
        if (!/required revision has been compacted/.test(String((error as Error)?.message))) throw error;
        return hashKVRaw(client, 0, callDeadline);
      });
      return {
        revision: toNumber(response.header?.revision ?? revision) || revision,
        hash: String(response.hash),
        compactRevision: toNumber(response.compact_revision),
      };
    });
  }

  /** The cluster's alarms as `endpoint` answers an alarm GET (through raft). */
  private listAlarms(endpoint: string, deadline: Deadline): Promise<Outcome<RaisedAlarm[]>> {
    return this.callThroughRaft(endpoint, deadline, async (client, callDeadline): Promise<RaisedAlarm[]> => {
      const response = await client.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' }, { deadline: callDeadline });
      return (response.alarms ?? []).map((raised) => ({
        memberId: String(raised.memberID),
        alarm: String(raised.alarm).toUpperCase(),
      }));
    });
  }

  /**
   * Watches `key` on `watchEndpoint`, then writes it through `writer` (another member, once one
   * is known; null when none is) and returns how many milliseconds the watch took to deliver the
   * write. The key is deleted afterwards, also when the watch timed out: through the member that
   * wrote it, with a deadline of its own, after the outcome is fixed (see deleteWatchKey). The watch stream carries the deadline as its gRPC
   * deadline and is cancelled on every path, so a hung member cannot keep it (or us) waiting.
   */
  async watchRoundTrip(
    watchEndpoint: string,
    writer: Promise<string | null>,
    key: string,
    deadline: Deadline,
  ): Promise<WatchOutcome> {
    if (this.closed) return { ok: false, kind: 'closed', error: `${watchEndpoint}: probe session closed` };
    if (deadline.expired())
      return { ok: false, kind: 'no-time', error: `${watchEndpoint}: timed out (no time left in the deadline)` };
    const keyBytes = Buffer.from(key);
    let finished = false;
    let stream: WatchStream | undefined;
    let writtenThrough: string | null = null;
    const roundTrip = async (): Promise<number> => {
      const opened = await this.client(watchEndpoint).watchClient.watch({ deadline: deadline.toDate() });
      stream = opened;
      // A stream cancelled by us errs with CANCELLED; etcd3's own listener only marks the host.
      opened.on('error', () => undefined);
      if (finished) {
        opened.cancel();
        throw new WallClockTimeout('wall clock');
      }
      const created = nextResponse(opened, (response) => response.created);
      opened.write({ create_request: { key: keyBytes } });
      await created;
      const delivered = nextResponse(opened, (response) =>
        (response.events ?? []).some((event) => event.type === 'Put' && Buffer.from(event.kv.key).equals(keyBytes)),
      );
      writtenThrough = await writer;
      if (writtenThrough === null) throw new WatchWriteFailed('no other member answered to write through');
      const started = performance.now();
      const put = await this.callThroughRaft(writtenThrough, deadline, (client, callDeadline) =>
        client.kv.put({ key: keyBytes, value: Buffer.from(new Date().toISOString()) }, { deadline: callDeadline }),
      );
      if (!put.ok) throw new WatchWriteFailed(`the write through another member failed: ${put.error}`);
      await delivered;
      return Math.round((performance.now() - started) * 10) / 10;
    };
    try {
      const value = await withDeadline(
        roundTrip(),
        deadline.extendedBy(WALL_CLOCK_GRACE_MS),
        () => new WallClockTimeout('wall clock'),
      );
      return { ok: true, value };
    } catch (error) {
      this.failedOn(watchEndpoint);
      const failed = failedWith(this.failure(watchEndpoint, error, deadline.timeoutMs));
      return error instanceof WatchWriteFailed ? { ...failed, writeFailed: true } : failed;
    } finally {
      finished = true;
      stream?.cancel();
      if (writtenThrough !== null) await this.deleteWatchKey(writtenThrough, keyBytes, deadline);
    }
  }

  /**
   * Deletes a watch probe key: within the round trip's deadline while time is left, else (a hung
   * watched member spent it right after the write) in the background with a deadline of its own,
   * not awaited, so the evaluation's hard bound holds; the CLI waits for it before it exits
   * (shared/cleanups.ts).
   */
  private async deleteWatchKey(endpoint: string, key: Buffer, deadline: Deadline): Promise<void> {
    const remove = (client: Etcd3, callDeadline: Date) => client.kv.deleteRange({ key }, { deadline: callDeadline });
    if (!deadline.expired() && (await this.callThroughRaft(endpoint, deadline, remove)).ok) return;
    const cleanup = this.call(endpoint, Deadline.after(WATCH_KEY_CLEANUP_MS), remove, true);
    this.cleanups.add(cleanup);
    trackCleanup(cleanup);
    void cleanup.then(() => {
      this.cleanups.delete(cleanup);
      if (this.closed && this.cleanups.size === 0) setImmediate(() => this.release());
    });
  }

  /**
   * Closes every client and destroys every socket they opened (once the watch keys are deleted);
   * calls still in flight settle at once with an error or through their wall clock.
   */
  close(): void {
    this.closed = true;
    // From the check phase, not from inside the read that delivered the last answer: see
    // destroyOutsideReads. Calls still in flight were already told to stop (`closed`).
    if (this.cleanups.size > 0) return;
    // Kept channels go back at once, so the next evaluation finds them idle; closing one that
    // failed is deferred by its own session the same way.
    this.returnLeases();
    setImmediate(() => this.release());
  }

  private returnLeases(): void {
    for (const [endpoint, lease] of this.leases) {
      this.clients.delete(endpoint);
      lease.release();
    }
    this.leases.clear();
  }

  private release(): void {
    this.returnLeases();
    for (const client of this.clients.values()) {
      try {
        client.close();
      } catch {
        // A client that cannot close has nothing left for us to release.
      }
    }
    this.clients.clear();
    this.sockets.destroyAll();
  }

  /** The client of a session that serves one kept channel (MemberChannel), built as any other. */
  ownClient(endpoint: string): Etcd3 {
    return this.client(endpoint);
  }
}

/** grpc-js's connectivityState values a kept channel must not be handed out in. */
const CHANNEL_TRANSIENT_FAILURE = 3;

/** Keepalive pings on an idle kept channel, at the pool's interval (EtcdChannelPool.keepaliveMs). */
function idleKeepalive(keepaliveMs: number): Record<string, number> {
  return {
    'grpc.keepalive_time_ms': keepaliveMs,
    'grpc.keepalive_permit_without_calls': 1,
  };
}

/**
 * One member's channel kept between evaluations: a session of its own (its own sockets, its own
 * credentials object around the kept TLS context), so that closing it destroys exactly its sockets.
 */
class MemberChannel {
  private readonly owner: EtcdProbeSession;
  readonly client: Etcd3;

  constructor(credentials: ProbeCredentials, options: ProbeSessionOptions, endpoint: string, keepaliveMs: number) {
    this.owner = new EtcdProbeSession(credentials, options, keepaliveMs);
    this.client = this.owner.ownClient(endpoint);
  }

  usable(): boolean {
    const host = onlyHost(this.client) as HostInternals | null;
    if (host === null || typeof host.getServiceClient !== 'function') return true;
    const state = host.getServiceClient('Maintenance').getChannel?.().getConnectivityState(false);
    return state !== CHANNEL_SHUT_DOWN && state !== CHANNEL_TRANSIENT_FAILURE;
  }

  close(): void {
    this.owner.close();
  }
}

/** The member channels a long-running process keeps open between evaluations (channel-pool.ts). */
export class EtcdChannelPool extends KeptPool<MemberChannel> {
  /**
   * The keepalive interval of its idle channels, so that a member that went away is noticed before
   * the next evaluation rather than by it. etcd allows pings without a call in flight only rarely
   * (its gRPC server counts a strike for each within 2 hours of the last and drops the connection
   * after the third; a call resets the count), so: half the idle timeout, 5 s at least (etcd's
   * --grpc-keepalive-min-time), which is at most two pings before the idle timeout closes it.
   */
  readonly keepaliveMs: number;

  constructor(limits: PoolLimits) {
    super(limits);
    this.keepaliveMs = Math.max(5_000, Math.floor(limits.idleTimeoutMs / 2));
  }
}
