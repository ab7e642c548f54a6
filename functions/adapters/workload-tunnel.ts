// The TLS connection to a workload API server, direct or through the guard's own HTTP CONNECT
// proxy (HTTPS_PROXY / NO_PROXY, as kubectl and client-go read them). The proxy comes from the
// guard's environment, which its operator sets; a workload kubeconfig's `proxy-url` stays refused
// (workload-kubeconfig.ts): a tenant must not re-route the guard's connections.
import net, { BlockList, isIP } from 'node:net';
import tls from 'node:tls';
import type { Deadline } from '../domain/deadline.js';
import { resumptionAttempt, sessionKey, TlsSessionCache, type SessionBasis } from './tls-sessions.js';
import { serverNameOptions, type WorkloadEndpoint } from './workload-kubeconfig.js';

/** The most of a proxy's CONNECT answer read before its blank line: a status line and a few headers. */
const MAX_PROXY_RESPONSE_BYTES = 16 * 1024;

export interface ProxySetting {
  host: string;
  port: number;
  /** "Basic …" from the proxy URL's user info; sent to the proxy only. */
  authorization?: string;
}

function env(environment: Record<string, string | undefined>, name: string): string | undefined {
  const value = environment[name] ?? environment[name.toLowerCase()];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function bareHost(host: string): string {
  return host.replace(/^\[|\]$/g, '').toLowerCase();
}

/** Go's net.SplitHostPort: `host:port` or `[v6]:port` (the port may be empty), else undefined. */
function splitHostPort(entry: string): { host: string; port: string } | undefined {
  const colon = entry.lastIndexOf(':');
  if (colon < 0) return undefined;
  let host: string;
  let from = 0;
  let to = 0;
  if (entry.startsWith('[')) {
    const end = entry.indexOf(']');
    if (end < 0 || end + 1 !== colon) return undefined;
    host = entry.slice(1, end);
    from = 1;
    to = end + 1;
  } else {
    host = entry.slice(0, colon);
    if (host.includes(':')) return undefined;
  }
  if (entry.slice(from).includes('[') || entry.slice(to).includes(']')) return undefined;
  return { host, port: entry.slice(colon + 1) };
}

function family(ip: string): 'ipv4' | 'ipv6' {
  return isIP(ip) === 4 ? 'ipv4' : 'ipv6';
}

/** One NO_PROXY entry as a matcher of (host, port), or undefined for an entry Go ignores. */
type NoProxyMatcher = (host: string, port: string) => boolean;

/**
 * NO_PROXY read as Go's golang.org/x/net/http/httpproxy reads it (the copy vendored in Go 1.26's
 * net/http, which kubectl and client-go use): `*` covers everything; an IP/prefix (CIDR) or an IP
 * with an optional `:port` covers IP hosts only; anything else is a domain (`example.com` also
 * covers its subdomains, `.example.com` and `*.example.com` only them, each with an optional
 * `:port`) and covers names only, never an IP literal (`.0.0.1` does not cover 10.0.0.1).
 * Go also never proxies `localhost` and loopback IPs; the guard does when HTTPS_PROXY is set and
 * NO_PROXY does not cover them, so a tenant's kubeconfig naming loopback is sent to the operator's
 * proxy rather than to the guard's own host.
 */
function noProxyMatcher(raw: string): NoProxyMatcher | undefined {
  const entry = raw.trim().toLowerCase();
  if (entry === '') return undefined;
  if (entry === '*') return () => true;
  const cidr = /^([^/]+)\/(\d{1,3})$/.exec(entry);
  if (cidr !== null && isIP(cidr[1] ?? '') !== 0) {
    const list = new BlockList();
    try {
      list.addSubnet(cidr[1] ?? '', Number(cidr[2]), family(cidr[1] ?? ''));
    } catch {
      return undefined;
    }
    return (host) => isIP(host) !== 0 && list.check(host, family(host));
  }
  const split = splitHostPort(entry);
  const pattern = split?.host ?? entry;
  const wantPort = split?.port ?? '';
  if (pattern === '') return undefined;
  const portMatches = (port: string) => wantPort === '' || wantPort === port;
  if (isIP(pattern) !== 0) {
    const list = new BlockList();
    list.addAddress(pattern, family(pattern));
    return (host, port) => isIP(host) !== 0 && list.check(host, family(host)) && portMatches(port);
  }
  const withoutStar = pattern.startsWith('*.') ? pattern.slice(1) : pattern;
  const matchHost = !withoutStar.startsWith('.');
  const suffix = matchHost ? `.${withoutStar}` : withoutStar;
  return (host, port) =>
    isIP(host) === 0 && (host.endsWith(suffix) || (matchHost && host === suffix.slice(1))) && portMatches(port);
}

/**
 * The proxy for an https URL from HTTPS_PROXY/https_proxy unless NO_PROXY/no_proxy covers its
 * host: undefined for a direct connection. An unusable HTTPS_PROXY is an error naming the variable.
 */
export function proxyFor(url: URL, environment: Record<string, string | undefined>): ProxySetting | undefined {
  const proxy = env(environment, 'HTTPS_PROXY');
  if (proxy === undefined) return undefined;
  const host = bareHost(url.hostname);
  const port = Number(url.port || 443);
  const noProxy = env(environment, 'NO_PROXY');
  if (noProxy !== undefined) {
    const matchers = noProxy.split(',').map(noProxyMatcher);
    if (matchers.some((matches) => matches?.(host, String(port)) === true)) return undefined;
  }
  let parsed: URL;
  try {
    parsed = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(proxy) ? proxy : `http://${proxy}`);
  } catch {
    throw new Error('HTTPS_PROXY is not a URL');
  }
  if (parsed.protocol !== 'http:') throw new Error('HTTPS_PROXY must be an http:// proxy (HTTP CONNECT)');
  const setting: ProxySetting = { host: bareHost(parsed.hostname), port: Number(parsed.port || 80) };
  if (parsed.username !== '') {
    const user = `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`;
    setting.authorization = `Basic ${Buffer.from(user).toString('base64')}`;
  }
  return setting;
}

/** Resolves or rejects once, and destroys `socket` on the deadline. */
function settleBy<T>(
  deadline: Deadline,
  socket: net.Socket,
  what: string,
  run: (done: (error: Error | null, value?: T) => void) => void,
) {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => done(new Error(`${what} timed out`)), Math.max(1, Math.round(deadline.remainingMs())));
    function done(error: Error | null, value?: T): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error === null) resolve(value as T);
      else {
        socket.destroy();
        reject(error);
      }
    }
    run(done);
  });
}

/** A TCP socket to host:port through the proxy's CONNECT tunnel; the answer is read bounded, never quoted. */
async function connectThroughProxy(proxy: ProxySetting, host: string, port: number, deadline: Deadline): Promise<net.Socket> {
  const socket = net.connect(proxy.port, proxy.host);
  return settleBy<net.Socket>(deadline, socket, 'proxy CONNECT', (done) => {
    let received = Buffer.alloc(0);
    socket.once('error', () => done(new Error('proxy unreachable')));
    socket.once('close', () => done(new Error('proxy closed the connection during CONNECT')));
    socket.once('connect', () => {
      const authority = isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
      const auth = proxy.authorization === undefined ? '' : `Proxy-Authorization: ${proxy.authorization}\r\n`;
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
    });
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) {
        if (received.length > MAX_PROXY_RESPONSE_BYTES) done(new Error('proxy sent an oversized CONNECT answer'));
        return;
      }
      socket.off('data', onData);
      socket.removeAllListeners('close');
      socket.removeAllListeners('error');
      // TLS takes the socket over and reports its errors; until then none may go unheard.
      socket.on('error', () => undefined);
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(received.subarray(0, end).toString('latin1'));
      if (status === null) return done(new Error('proxy sent no HTTP answer to CONNECT'));
      if (!status[1]?.startsWith('2')) return done(new Error(`proxy refused CONNECT with HTTP ${status[1]}`));
      // Bytes after the blank line already belong to the tunnel.
      if (end + 4 < received.length) socket.unshift(received.subarray(end + 4));
      done(null, socket);
    };
    socket.on('data', onData);
  });
}

/** The kubeconfig's TLS settings: its CA and client certificate, the name to verify, never less. */
export function workloadTlsOptions(workload: WorkloadEndpoint, host: string): tls.ConnectionOptions {
  return {
    secureContext: workload.secureContext,
    rejectUnauthorized: true,
    ALPNProtocols: ['http/1.1'],
    ...serverNameOptions(workload.tlsServerName ?? host),
  };
}

/**
 * TLS sessions of earlier connections to workload API servers, under the same rules as the
 * probe's to etcd members (tls-sessions.ts): every evaluation of a CAPI cluster opens one
 * port-forward per member, each a new TLS connection to the same API server, and a full handshake
 * (certificate chain parsed and verified, name checked, key exchange signed) cost more CPU than
 * the evaluation's own etcd calls. Resumed, none of that is repeated within the TTL.
 */
export const workloadTlsSessions = new TlsSessionCache();

/** Connections to workload API servers that resumed a kept session, and full ones verified. */
export function workloadTlsHandshakeCounts(): { resumed: number; verified: number } {
  return workloadTlsSessions.counts();
}

/** The host (brackets off, lower case) and port the workload API server's URL names. */
export function workloadAddress(workload: WorkloadEndpoint): { host: string; port: number } {
  const url = new URL(workload.server);
  return { host: bareHost(url.hostname), port: Number(url.port || 443) };
}

/**
 * tls.connect to the workload API server with the kubeconfig's TLS settings (to host:port, or over
 * `tcp`, a proxy's tunnel to it), offering the session kept for this server and keeping the one it
 * sends. The key (sessionKey) pins the kubeconfig's CA, client certificate, key and token (its
 * tlsScope), the name verified and host:port: a resumed handshake skips Node's certificate and
 * name checks, so a session only stands in for a full check of that same question. It is kept only
 * from a connection that passed them now (or resumed one that did, keeping that one's basis), and
 * dropped when a connection offered it fails before its handshake ends.
 */
export function workloadTlsConnect(workload: WorkloadEndpoint, sessions: TlsSessionCache, tcp?: net.Socket): tls.TLSSocket {
  const { host, port } = workloadAddress(workload);
  const options = workloadTlsOptions(workload, host);
  const key = sessionKey(`${workload.tlsScope}\0full`, { name: workload.tlsServerName ?? host, host, port });
  const offered = key === undefined ? undefined : sessions.offer(key);
  const resumption = resumptionAttempt(sessions, offered, options.checkServerIdentity ?? tls.checkServerIdentity);
  const socket = tls.connect({
    ...options,
    checkServerIdentity: resumption.checkServerIdentity,
    ...(offered !== undefined && { session: offered.session }),
    ...(tcp === undefined ? { host, port } : { socket: tcp }),
  });
  if (key === undefined) return socket;
  let basis: SessionBasis | undefined;
  // TLS 1.2 hands the session over before the identity check: hold it until the check passed.
  let pending: Buffer | undefined;
  socket.on('session', (session: Buffer) => {
    if (basis !== undefined) sessions.keep(key, session, basis);
    else pending = session;
  });
  socket.once('secureConnect', () => {
    basis = resumption.settle(socket.isSessionReused());
    if (basis !== undefined && pending !== undefined) sessions.keep(key, pending, basis);
    pending = undefined;
  });
  socket.once('close', () => {
    if (basis === undefined) sessions.drop(key);
  });
  return socket;
}

/**
 * A verified TLS connection to the workload API server (through the proxy when one applies),
 * finished before `deadline`. Errors say which step failed, never what the server or proxy sent.
 */
export async function connectWorkload(
  workload: WorkloadEndpoint,
  deadline: Deadline,
  environment: Record<string, string | undefined>,
  sessions: TlsSessionCache = workloadTlsSessions,
): Promise<tls.TLSSocket> {
  const url = new URL(workload.server);
  const { host, port } = workloadAddress(workload);
  const proxy = proxyFor(url, environment);
  const tcp = proxy === undefined ? undefined : await connectThroughProxy(proxy, host, port, deadline);
  const socket = workloadTlsConnect(workload, sessions, tcp);
  return settleBy<tls.TLSSocket>(deadline, socket, 'TLS handshake with the workload API server', (done) => {
    socket.once('error', () => done(new Error('TLS connection to the workload API server failed')));
    socket.once('secureConnect', () => {
      socket.removeAllListeners('error');
      // The caller attaches its own handlers; an error in between must not crash the process.
      socket.on('error', () => undefined);
      done(null, socket);
    });
  });
}
