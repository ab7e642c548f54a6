// The trust boundary for a Cluster API workload kubeconfig (`<cluster>-kubeconfig`, key `value`).
// Whoever can write Secrets in a Cluster's namespace (a tenant) writes it, so it is data, never
// instructions: only static credentials are taken from it (a bearer token, client certificate and
// key data, CA data, an https server URL and optionally the TLS server name to verify). Everything
// that would run code (exec, auth-provider), read a local file (token files, certificate and key
// paths: the guard's own service-account token included), re-route the connection (proxy-url),
// weaken TLS (insecure-skip-tls-verify) or change who we are (username/password, impersonation)
// is refused with a reason naming the field, never its value; so is any field we do not know.
// client-node's KubeConfig is not used for it: its applyToHTTPSOptions runs exec and auth-provider
// commands and reads token files.
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { checkServerIdentity, createSecureContext, type PeerCertificate, type SecureContext } from 'node:tls';
import { parse as parseYaml } from 'yaml';
import { EtcdAccessError } from '../ports/etcd-access.js';

/**
 * The most we decode from one value of a Secret. The largest legitimate one is a kubeconfig with
 * a CA bundle, a client certificate and key inline: a few KiB. 64 KiB leaves room for a bundle of
 * dozens of CAs while a fleet of hundreds of clusters, each value decoded and parsed per
 * evaluation, stays far below the pods' 384 MiB limit (a Secret may hold up to 1 MiB).
 */
export const MAX_SECRET_VALUE_BYTES = 64 * 1024;

/** base64 is 4 characters per 3 bytes: the longest value decoded. */
const MAX_ENCODED_LENGTH = Math.ceil(MAX_SECRET_VALUE_BYTES / 3) * 4 + 4;

/** What the port-forward needs to reach a workload API server, from static fields only. */
export interface WorkloadEndpoint {
  /** https://host[:port][/path], without user info, query or fragment. */
  server: string;
  /** TLS context with the kubeconfig's CA (system roots without one) and client certificate. */
  secureContext: SecureContext;
  /** The name the server certificate must carry when it is not the URL's host (tls-server-name). */
  tlsServerName?: string;
  /** Bearer token: visible ASCII only (it goes into a header). */
  token?: string;
  /** "<namespace>/<cluster>-kubeconfig": named in reasons. */
  secret: string;
  /**
   * Digest of the trust and identity this endpoint connects with (CA, client certificate and key,
   * token): TLS sessions are only ever resumed within the same one (workload-tunnel.ts).
   */
  tlsScope: string;
}

/** The decoded bytes of a Secret's value, bounded before decoding; errors name the Secret and key only. */
export function boundedSecretValue(data: Record<string, string> | undefined, key: string, secret: string): Buffer {
  const encoded = data?.[key];
  if (encoded === undefined || encoded === '') throw new EtcdAccessError(`Secret ${secret} has no ${JSON.stringify(key)}`);
  // base64 is 4 characters per 3 bytes: refuse by length before decoding anything.
  if (encoded.length > MAX_ENCODED_LENGTH) {
    throw new EtcdAccessError(`Secret ${secret}: ${JSON.stringify(key)} is larger than ${MAX_SECRET_VALUE_BYTES / 1024} KiB`);
  }
  return Buffer.from(encoded, 'base64');
}

type Fields = Record<string, unknown>;

/** Fields that must not be there, with why. Every other unknown field is refused too. */
const REFUSED_CLUSTER_FIELDS: Record<string, string> = {
  'certificate-authority': 'names a file on the guard (only certificate-authority-data is used)',
  'proxy-url': 're-routes the connection through a proxy',
  'insecure-skip-tls-verify': 'turns off server certificate verification',
};
const REFUSED_USER_FIELDS: Record<string, string> = {
  exec: 'runs a command',
  'auth-provider': 'runs a command or reads files through an auth provider',
  tokenFile: 'names a file on the guard (only token is used)',
  'token-file': 'names a file on the guard (only token is used)',
  'client-certificate': 'names a file on the guard (only client-certificate-data is used)',
  'client-key': 'names a file on the guard (only client-key-data is used)',
  username: 'basic auth is not used',
  password: 'basic auth is not used',
  as: 'impersonation is not used',
  'as-uid': 'impersonation is not used',
  'as-groups': 'impersonation is not used',
  'as-user-extra': 'impersonation is not used',
};
const ALLOWED_TOP = new Set([
  'apiVersion',
  'kind',
  'clusters',
  'users',
  'contexts',
  'current-context',
  'preferences',
  'extensions',
]);
const ALLOWED_CLUSTER = new Set(['server', 'certificate-authority-data', 'tls-server-name', 'disable-compression', 'extensions']);
const ALLOWED_USER = new Set(['token', 'client-certificate-data', 'client-key-data', 'extensions']);
const ALLOWED_CONTEXT = new Set(['cluster', 'user', 'namespace', 'extensions']);

/** A field name as it may appear in a reason: ours, or a plain one; never arbitrary tenant text. */
function fieldName(name: string): string {
  return /^[A-Za-z0-9_.-]{1,40}$/.test(name) ? name : '(a field with an unusual name)';
}

function isFields(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reasons for every field of `object` at `path` that is refused or unknown. */
function refusals(object: Fields, path: string, allowed: Set<string>, refused: Record<string, string> = {}): string[] {
  const reasons: string[] = [];
  for (const key of Object.keys(object)) {
    const why = Object.hasOwn(refused, key) ? refused[key] : undefined;
    // insecure-skip-tls-verify: false says what we do anyway.
    if (key === 'insecure-skip-tls-verify' && object[key] === false) continue;
    if (why !== undefined) reasons.push(`${path}.${key} is refused: ${why}`);
    else if (!allowed.has(key)) reasons.push(`${path}.${fieldName(key)} is not a field etcd-guard uses (refused)`);
  }
  return reasons;
}

/** The named entries of a kubeconfig list (`clusters`, `users`, `contexts`), each checked. */
function namedEntries(config: Fields, list: 'clusters' | 'users' | 'contexts', reasons: string[]): Map<string, Fields> {
  const inner = { clusters: 'cluster', users: 'user', contexts: 'context' }[list];
  const allowed = { clusters: ALLOWED_CLUSTER, users: ALLOWED_USER, contexts: ALLOWED_CONTEXT }[list];
  const refused = { clusters: REFUSED_CLUSTER_FIELDS, users: REFUSED_USER_FIELDS, contexts: {} }[list];
  const entries = new Map<string, Fields>();
  const value = config[list] ?? [];
  if (!Array.isArray(value)) {
    reasons.push(`${list} is not a list`);
    return entries;
  }
  value.forEach((entry: unknown, index) => {
    const path = `${list}[${index}]`;
    const body = isFields(entry) ? entry[inner] : undefined;
    if (!isFields(entry) || typeof entry.name !== 'string' || !isFields(body)) {
      reasons.push(`${path} is not a named ${inner}`);
      return;
    }
    reasons.push(...refusals(entry, path, new Set(['name', inner])));
    reasons.push(...refusals(body, `${path}.${inner}`, allowed, refused));
    entries.set(entry.name, body);
  });
  return entries;
}

/** PEM certificates (one or more) or a reason. */
function certificates(pem: Buffer): X509Certificate[] | null {
  const blocks = pem.toString('latin1').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  try {
    const parsed = blocks.map((block) => new X509Certificate(block));
    return parsed.length > 0 ? parsed : null;
  } catch {
    return null;
  }
}

/** The bytes of a `*-data` field (base64 in a kubeconfig), or a reason. */
function dataField(body: Fields, field: string, path: string): Buffer | string | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^[A-Za-z0-9+/=\s]+$/.test(value)) return `${path}.${field} is not base64 data`;
  return Buffer.from(value, 'base64');
}

interface StaticUser {
  token?: string;
  cert?: Buffer;
  key?: Buffer;
}

function staticUser(user: Fields, path: string, reasons: string[]): StaticUser {
  const result: StaticUser = {};
  const token = user.token;
  if (token !== undefined) {
    if (typeof token !== 'string' || token === '') reasons.push(`${path}.token is not a string`);
    else if (/[\r\n]/.test(token)) reasons.push(`${path}.token contains a line break`);
    else if (!/^[\x21-\x7e]+$/.test(token)) reasons.push(`${path}.token contains a space, control or non-ASCII character`);
    else result.token = token;
  }
  const cert = dataField(user, 'client-certificate-data', path);
  const key = dataField(user, 'client-key-data', path);
  for (const value of [cert, key]) if (typeof value === 'string') reasons.push(value);
  if (Buffer.isBuffer(cert) !== Buffer.isBuffer(key)) {
    reasons.push(`${path} has only one of client-certificate-data and client-key-data`);
  } else if (Buffer.isBuffer(cert) && Buffer.isBuffer(key)) {
    const certificate = certificates(cert)?.[0];
    let privateKey;
    try {
      privateKey = createPrivateKey(key);
    } catch {
      reasons.push(`${path}.client-key-data is not an unencrypted PEM private key`);
    }
    if (certificate === undefined) reasons.push(`${path}.client-certificate-data is not a PEM certificate`);
    else if (privateKey !== undefined && !certificate.checkPrivateKey(privateKey)) {
      reasons.push(`${path}.client-key-data does not belong to client-certificate-data`);
    } else {
      result.cert = cert;
      result.key = key;
    }
  }
  if (result.token === undefined && result.cert === undefined && reasons.length === 0) {
    reasons.push(`${path} has neither a token nor client-certificate-data and client-key-data`);
  }
  return result;
}

/** The https server URL, normalised without a trailing slash, or a reason. */
function serverUrl(value: unknown, path: string): string | { reason: string } {
  if (typeof value !== 'string' || value === '') return { reason: `${path}.server is missing` };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { reason: `${path}.server is not a URL` };
  }
  if (url.protocol !== 'https:') return { reason: `${path}.server is not an https URL` };
  if (url.username !== '' || url.password !== '') return { reason: `${path}.server carries credentials` };
  if (url.search !== '' || url.hash !== '') return { reason: `${path}.server has a query or fragment` };
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

const DNS_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

interface StaticCluster {
  server: string;
  ca?: Buffer;
  tlsServerName?: string;
}

function staticCluster(cluster: Fields, path: string, reasons: string[]): StaticCluster | null {
  const server = serverUrl(cluster.server, `${path}`);
  if (typeof server !== 'string') {
    reasons.push(server.reason);
    return null;
  }
  const result: StaticCluster = { server };
  const ca = dataField(cluster, 'certificate-authority-data', path);
  if (typeof ca === 'string') reasons.push(ca);
  else if (ca !== undefined && certificates(ca) === null) {
    reasons.push(`${path}.certificate-authority-data is not PEM certificates`);
  } else if (ca !== undefined) result.ca = ca;
  // Trust comes from certificate-authority-data, which the same writer controls, so naming the
  // certificate's expected name gives it no power it lacks; it is only a well-formed name.
  const name = cluster['tls-server-name'];
  if (name !== undefined) {
    if (typeof name !== 'string' || (!DNS_NAME.test(name) && isIP(name) === 0)) {
      reasons.push(`${path}.tls-server-name is not a DNS name or IP address`);
    } else result.tlsServerName = name;
  }
  return result;
}

function parseDocument(text: string, secret: string): Fields {
  let config: unknown;
  try {
    // No aliases: a kubeconfig never needs them, and they are the way to expand a small text.
    config = parseYaml(text, { maxAliasCount: 0, uniqueKeys: true, prettyErrors: false });
  } catch {
    throw new EtcdAccessError(`Secret ${secret}: "value" is not a kubeconfig (not YAML or JSON)`);
  }
  if (!isFields(config)) throw new EtcdAccessError(`Secret ${secret}: "value" is not a kubeconfig (not a mapping)`);
  return config;
}

function refuse(secret: string, reasons: string[]): never {
  throw new EtcdAccessError(`Secret ${secret}: kubeconfig refused: ${reasons.slice(0, 5).join('; ')}`);
}

/**
 * The static credentials of `<cluster>-kubeconfig` for its current context, or an EtcdAccessError
 * naming the Secret and every refused field (never a value). The whole file is checked, not only
 * the current context: a refused stanza anywhere means the writer expects something we never do.
 */
export function parseWorkloadKubeconfig(data: Record<string, string> | undefined, secret: string): WorkloadEndpoint {
  const encoded = data?.value;
  // Only a value that parsed is kept; a refused one is parsed (and refused) again every time.
  const key =
    typeof encoded === 'string' && encoded !== '' && encoded.length <= MAX_ENCODED_LENGTH
      ? parsedKey(secret, encoded)
      : undefined;
  const kept = key === undefined ? undefined : PARSED.get(key);
  if (key !== undefined && kept !== undefined) {
    PARSED.delete(key);
    PARSED.set(key, kept);
    return kept;
  }
  const parsed = Object.freeze(parseFresh(data, secret));
  if (key !== undefined) {
    if (PARSED.size >= PARSED_KEPT) PARSED.delete(PARSED.keys().next().value ?? '');
    PARSED.set(key, parsed);
  }
  return parsed;
}

/**
 * Kubeconfigs parsed before, by Secret name and digest of the Secret's value exactly as read: the
 * fleet re-reads every Secret each evaluation, and parsing the YAML and building the TLS context
 * from its PEM was a share of every cluster's evaluation (figures: BENCHMARKS.md). The
 * same bytes always give the same result; different bytes (a rotated CA, new credentials) never
 * find an entry, so a changed Secret takes effect on the next read. Least recently used out first;
 * a larger fleet just parses again. Each entry holds its TLS context off the heap; 128 cover a
 * 100-cluster fleet and keep that memory small (figures: BENCHMARKS.md).
 */
const PARSED = new Map<string, WorkloadEndpoint>();
const PARSED_KEPT = 128;

function parsedKey(secret: string, encoded: string): string {
  return `${secret}\0${createHash('sha256').update(encoded).digest('hex')}`;
}

/** Length-prefixed digest of what a TLS session to the workload API server is vouched for with. */
function tlsScopeOf(ca: Buffer | undefined, user: StaticUser): string {
  const hash = createHash('sha256');
  for (const part of [ca, user.cert, user.key, user.token === undefined ? undefined : Buffer.from(user.token)]) {
    hash.update(part === undefined ? '-1:' : `${part.length}:`);
    if (part !== undefined) hash.update(part);
  }
  return hash.digest('hex');
}

function parseFresh(data: Record<string, string> | undefined, secret: string): WorkloadEndpoint {
  const config = parseDocument(boundedSecretValue(data, 'value', secret).toString('utf8'), secret);
  const reasons = refusals(config, 'kubeconfig', ALLOWED_TOP);
  const clusters = namedEntries(config, 'clusters', reasons);
  const users = namedEntries(config, 'users', reasons);
  const contexts = namedEntries(config, 'contexts', reasons);
  if (reasons.length > 0) refuse(secret, reasons);
  const current = config['current-context'];
  const context = typeof current === 'string' ? contexts.get(current) : undefined;
  if (context === undefined) refuse(secret, ['current-context names no context']);
  const cluster = typeof context.cluster === 'string' ? clusters.get(context.cluster) : undefined;
  const user = typeof context.user === 'string' ? users.get(context.user) : undefined;
  if (cluster === undefined) refuse(secret, ['the current context names no cluster']);
  if (user === undefined) refuse(secret, ['the current context names no user']);
  const reach = staticCluster(cluster, 'the current cluster', reasons);
  const credentials = staticUser(user, 'the current user', reasons);
  if (reasons.length > 0 || reach === null) refuse(secret, reasons);
  let secureContext: SecureContext;
  try {
    secureContext = createSecureContext({
      ...(reach.ca !== undefined && { ca: reach.ca }),
      ...(credentials.cert !== undefined && { cert: credentials.cert, key: credentials.key }),
    });
  } catch {
    refuse(secret, ['its CA or client certificate cannot be used for TLS']);
  }
  return {
    server: reach.server,
    secureContext,
    ...(reach.tlsServerName !== undefined && { tlsServerName: reach.tlsServerName }),
    ...(credentials.token !== undefined && { token: credentials.token }),
    secret,
    tlsScope: tlsScopeOf(reach.ca, credentials),
  };
}

/** Verifies the server certificate against the kubeconfig's tls-server-name instead of the URL's host. */
export function serverIdentityCheck(tlsServerName: string): (host: string, cert: PeerCertificate) => Error | undefined {
  return (_host, cert) => checkServerIdentity(tlsServerName, cert);
}

/**
 * The TLS options that verify the workload API server as `name`: the certificate is always checked
 * against it; it is sent as SNI only when it is a DNS name (RFC 6066 allows no IP there).
 */
export function serverNameOptions(name: string): {
  servername: string;
  checkServerIdentity: (host: string, cert: PeerCertificate) => Error | undefined;
} {
  return { servername: isIP(name) === 0 ? name : '', checkServerIdentity: serverIdentityCheck(name) };
}
