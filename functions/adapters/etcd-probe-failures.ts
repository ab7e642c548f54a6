// The one place a library error becomes a ProbeFailure: its kind (what checks judge by) and our
// short text naming the endpoint. etcd3, grpc-js and OpenSSL word their errors in their own ways;
// this module reads them, so nothing else matches a library message.
import { X509Certificate } from 'node:crypto';
import {
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  EtcdPermissionDeniedError,
  EtcdUserNotFoundError,
  GRPCUnauthenticatedError,
} from 'etcd3';
import type { ProbeFailure, ProbeFailureKind } from '../domain/probe-failure.js';

/** The probe's own wall-clock guard gave up on a call (gRPC's deadline did not settle it). */
export class WallClockTimeout extends Error {}

function isTimeout(error: unknown): boolean {
  return error instanceof WallClockTimeout || /deadline exceeded/i.test(errorMessage(error));
}

export function errorMessage(error: unknown): string {
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

const SERVER_NOT_TRUSTED =
  /(unable to verify the first certificate|self[- ]signed certificate(?: in certificate chain)?|unable to get (?:local )?issuer certificate|certificate has expired|Hostname\/IP does not match certificate's altnames|certificate signature failure)/i;
export const CLIENT_REJECTED =
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
