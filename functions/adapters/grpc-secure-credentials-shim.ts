// Shim over grpc-js 1.x's SecureChannelCredentials internals (checked by
// functions/adapters/grpc-secure-credentials-shim.test.ts on the installed version): `verifyOptions`, where our
// identity check goes (etcd3 builds the credentials itself and passes no verify options), and
// `secureContext` with the class's createFromSecureContext, so that a later session reuses an
// OpenSSL context. When the internals differ, each function changes nothing (Node's own identity
// check stays; contexts are built afresh): verification never weakens by accident.
import { identityChecker } from './etcd-tls-identity.js';

/** The part of grpc-js 1.x's secure channel credentials that holds the certificate checks. */
interface VerifyOptionsInternals {
  verifyOptions?: { checkServerIdentity?: unknown };
}

/**
 * Puts our identity check into the credentials. When grpc-js's internals differ nothing changes:
 * Node's own check stays (described as TLS identity from its wording), and chain-only is not
 * applied, so verification never weakens by accident.
 */
export function withIdentityCheck(credentials: unknown, mode: 'full' | 'chain-only'): void {
  if (typeof credentials !== 'object' || credentials === null) return;
  const verify = (credentials as VerifyOptionsInternals).verifyOptions;
  if (typeof verify !== 'object' || verify === null || verify.checkServerIdentity !== undefined) return;
  verify.checkServerIdentity = identityChecker(mode);
}

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
 * anew each run; a context with a CA, certificate and key holds memory off the heap, and the
 * bound keeps that small (figures: BENCHMARKS.md).
 */
const SECURE_CONTEXTS = new Map<string, { context: unknown; make: SecureCredentialsInternals['constructor'] }>();
const SECURE_CONTEXTS_KEPT = 128;

export function rememberSecureContext(digest: string, credentials: unknown): void {
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
export function credentialsAround(digest: string): unknown {
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
