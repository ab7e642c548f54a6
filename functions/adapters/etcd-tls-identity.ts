// Who the probe trusts and how it says so: the server identity check (names the member's
// certificate must carry, or 'chain-only'), and whether a CA/certificate/key triple can make a TLS
// client at all. Installing the check into grpc-js's credentials is grpc-secure-credentials-shim.ts.
import { checkServerIdentity, createSecureContext, type PeerCertificate } from 'node:tls';
import type { ProbeCredentials } from '../ports/etcd-access.js';
import { errorMessage } from './etcd-probe-failures.js';
import { tlsMaterialDigest } from './tls-digest.js';

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
export function identityChecker(mode: 'full' | 'chain-only'): (hostname: string, cert: PeerCertificate) => Error | undefined {
  return (hostname, cert) => {
    const mismatch = checkServerIdentity(hostname, cert);
    if (mismatch === undefined || mode === 'chain-only') return undefined;
    const names = cert.subjectaltname
      ? printable(cert.subjectaltname)
      : `no subject alternative names (CN ${printable(String(cert.subject?.CN ?? 'none'), 64)})`;
    return new Error(`TLS identity: the server certificate does not name ${printable(hostname, 100)}; it names ${names}`);
  };
}

/** What Node's TLS layer says about bad key material, in words that name no content. */
export function describeCredentialsError(error: unknown): string {
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

/**
 * The last digest of each set of credentials bytes, by the Buffer objects themselves: a process
 * that reuses the bytes it read (TlsFileReuse) digests them once, not twice per evaluation. A
 * Buffer is never written after it is read, and another Buffer (new bytes) is a miss.
 */
const DIGESTS = new WeakMap<Buffer, { ca?: Buffer; cert?: Buffer; key?: Buffer; digest: string }>();

export function credentialsDigest(credentials: ProbeCredentials): string {
  const anchor = credentials.key ?? credentials.cert ?? credentials.ca;
  const known = anchor === undefined ? undefined : DIGESTS.get(anchor);
  if (known !== undefined && known.ca === credentials.ca && known.cert === credentials.cert && known.key === credentials.key) {
    return known.digest;
  }
  const digest = tlsMaterialDigest({ ca: credentials.ca, cert: credentials.cert, key: credentials.key });
  if (anchor !== undefined) DIGESTS.set(anchor, { ...credentials, digest });
  return digest;
}
