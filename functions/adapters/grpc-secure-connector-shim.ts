// Shim over grpc-js 1.x's ChannelCredentials._createSecureConnector and the SecureConnectorImpl
// it returns (`connectionOptions`, `connect`), checked by functions/adapters/grpc-secure-connector-shim.test.ts
// on the installed version. grpc-js offers no public hook on the sockets a channel opens: this is
// where the session tracks them (session-sockets.ts), drops SNI for IP endpoints and offers and
// keeps TLS sessions (tls-sessions.ts). When the internals differ, nothing is changed.
import { isIP, type Socket } from 'node:net';
import { checkServerIdentity, type TLSSocket } from 'node:tls';
import { resumptionAttempt, sessionKey, type TlsSessionCache } from './tls-sessions.js';
import type { SessionSockets } from './session-sockets.js';

/** The part of grpc-js 1.x's channel credentials that makes each connection's connector. */
interface ConnectorInternals {
  _createSecureConnector?: (...args: unknown[]) => GrpcConnector;
  [INSTRUMENTED]?: true;
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
export interface Resumption {
  cache: TlsSessionCache;
  /** Digest of the CA/certificate/key bytes and the verification mode. */
  scope: string;
}
const INSTRUMENTED = Symbol('etcd-guard: connector instrumented');

/**
 * Wraps the connectors `credentials` makes so that every socket goes through `sockets`, and so
 * that an IP endpoint gets no TLS server name: grpc-js sends the endpoint's host as SNI even when
 * it is an IP address, which RFC 6066 forbids and Node answers with the DEP0123 warning. Without a
 * server name Node checks the certificate against the connection's host, i.e. the IP against the
 * certificate's IP SANs, exactly as before; host names keep their SNI. With `resumption`, each
 * TLS connect offers and keeps sessions (resumingConnect). When grpc-js's internals differ,
 * nothing is changed (verification never weakens; only the cleanup and resumption are lost).
 */
export function instrumentCredentials(credentials: unknown, sockets: SessionSockets, resumption?: Resumption): void {
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
