// The only importer of etcd3. Asks single etcd members what they see, each call bounded by one
// overall deadline, and turns every library error into our own short text naming the endpoint.
// One client per member with retries and circuit breakers off: etcd3's defaults would retry a
// sick member on another host and hide it, or later throw BrokenCircuitError for a healthy one.
// The session lives here; what it leans on beside it: etcd-probe-failures.ts (library errors to
// ProbeFailure), etcd-tls-identity.ts (identity check, credentials checks), session-sockets.ts,
// and one shim per library internal (etcd3-host-shim.ts, grpc-service-client-shim.ts,
// grpc-secure-connector-shim.ts, grpc-secure-credentials-shim.ts).
import { noop } from 'cockatiel';
import { Etcd3, type IDuplexStream, type IOptions, type IWatchRequest, type IWatchResponse } from 'etcd3';
import { Deadline, withDeadline } from '../domain/deadline.js';
import { trackCleanup } from '../shared/cleanups.js';
import type { EndpointProbe, HashKVAnswer, MemberStatus, Outcome, RaisedAlarm, WatchOutcome } from '../ports/etcd-probe.js';
import type { ProbeCredentials } from '../ports/etcd-access.js';
import type { MemberListAnswer } from '../domain/member-view.js';
import { failedWith, type ProbeFailure } from '../domain/probe-failure.js';
import { processTlsSessions, type TlsSessionCache } from './tls-sessions.js';
import { KeptPool, type Lease, type PoolLimits } from './channel-pool.js';
import {
  CLIENT_REJECTED,
  WallClockTimeout,
  clientCertificateInvalidity,
  errorMessage,
  probeFailure,
} from './etcd-probe-failures.js';
import { credentialsDigest, describeCredentialsError } from './etcd-tls-identity.js';
import { SessionSockets } from './session-sockets.js';
import { channelUsable, onlyHost, resolveIpDirectly, shareOneChannel } from './etcd3-host-shim.js';
import { hashKVRaw, memberListRaw, rangeRaw, statusWithExtras } from './grpc-service-client-shim.js';
import { instrumentCredentials, type Resumption } from './grpc-secure-connector-shim.js';
import { credentialsAround, rememberSecureContext, withIdentityCheck } from './grpc-secure-credentials-shim.js';

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
export const PROBE_KEY = Buffer.from('etcd-guard.io/probe');
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
  // close grew with every evaluation, and RSS with them (figures: BENCHMARKS.md). A pool per
  // channel goes with the channel. Sessions never share channels anyway (see
  // tlsChannelCredentials).
  'grpc.use_local_subchannel_pool': 1,
} as const;

/**
 * How long the watch probe's key may take to delete once its round trip is over. The delete runs
 * after the verdict is fixed, so it never lengthens an evaluation; the session keeps its clients
 * open until then.
 */
const WATCH_KEY_CLEANUP_MS = 1_000;

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

function toNumber(value: unknown): number {
  // int64 fields arrive as decimal strings.
  const number = typeof value === 'number' ? value : Number(value);
  return Number.isFinite(number) ? number : 0;
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
   * CA, certificate and key into a new OpenSSL context (a large share of a fleet run's CPU;
   * figures: BENCHMARKS.md), so the session's other clients reuse them. The credentials object is
   * the session's own (its sockets and identity check hang on it); the OpenSSL context inside may
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
      const response = await memberListRaw(client, linearizable ? { linearizable } : {}, callDeadline);
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
      await rangeRaw(client, { key: PROBE_KEY, serializable: false, count_only: true }, callDeadline);
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
    return channelUsable(this.client);
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
