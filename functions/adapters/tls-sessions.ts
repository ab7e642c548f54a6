// TLS sessions of earlier evaluations, so the next evaluation's new connection to the same member
// resumes (TLS 1.3 PSK) instead of a full handshake: no certificate exchange, no signatures, and
// none of Node's per-handshake certificate parsing. Every evaluation still dials new TCP and a
// new (abbreviated) TLS handshake; nothing but the session ticket outlives a connection.
//
// A resumed handshake proves the server holds the secret of a session we verified in full, and
// Node skips the certificate and identity checks on it. So a session is only ever offered where
// that earlier verification answers the same question: the same trust and client identity (digest
// of the CA, certificate and key bytes), the same verification mode, the same name verified and the
// same member address (see sessionKey). It is kept only from a handshake that passed our identity
// check, and offered only until the earlier of the server certificate's notAfter and a TTL after
// that check; after that the next connection verifies everything again.
import type { PeerCertificate } from 'node:tls';

/** What a kept session was vouched for by: the full handshake that verified the server. */
export interface SessionBasis {
  /** When the full handshake's identity check passed (the cache's clock, ms). */
  verifiedAt: number;
  /** The server certificate's notAfter seen at that check (ms since the epoch). */
  notAfter: number;
}

interface KeptSession extends SessionBasis {
  session: Buffer;
}

export interface TlsSessionCacheOptions {
  /** How long after a full verification its sessions may be offered. */
  ttlMs?: number;
  /** Keys kept; the least recently used goes first. */
  capacity?: number;
  /** The clock (ms since the epoch); tests move it instead of sleeping. */
  now?: () => number;
}

/**
 * 10 minutes. The scheduled loop and the webhook's refresh re-evaluate every 30–60 s, so each
 * member gets one full, fully verified handshake per 10–20 evaluations and the saving is most of
 * what resumption can give. It is also how long a decision about a member's certificate can
 * outlive that certificate's replacement on a member that keeps running (etcd reloads its
 * serving certificate without a restart); a restart changes its ticket keys at once. Go servers
 * accept tickets for 7 days, which would be far too long a trust horizon here.
 */
export const TLS_SESSION_TTL_MS = 10 * 60_000;
/**
 * A kept session is a few KiB (the sizes measured are in BENCHMARKS.md), so 1,024 stay small and
 * cover a fleet of 100 three-member Cluster API clusters three times over. A fleet with more
 * members than this, evaluated in turn, evicts each key before its next use and resumes nothing
 * (speed only).
 */
export const TLS_SESSIONS_KEPT = 1024;

export class TlsSessionCache {
  private readonly sessions = new Map<string, KeptSession>();
  private readonly ttlMs: number;
  private readonly capacity: number;
  readonly now: () => number;
  private resumedCount = 0;
  private verifiedCount = 0;

  constructor(options: TlsSessionCacheOptions = {}) {
    this.ttlMs = options.ttlMs ?? TLS_SESSION_TTL_MS;
    this.capacity = Math.max(1, options.capacity ?? TLS_SESSIONS_KEPT);
    this.now = options.now ?? Date.now;
  }

  /** Handshakes that resumed a kept session, and full handshakes whose identity check passed. */
  counts(): { resumed: number; verified: number } {
    return { resumed: this.resumedCount, verified: this.verifiedCount };
  }

  /** The session to offer for `key`, while its basis still holds; an outdated one is dropped. */
  offer(key: string): KeptSession | undefined {
    const kept = this.sessions.get(key);
    if (kept === undefined) return undefined;
    this.sessions.delete(key);
    const now = this.now();
    if (!(now < Math.min(kept.notAfter, kept.verifiedAt + this.ttlMs)) || now < kept.verifiedAt) return undefined;
    this.sessions.set(key, kept);
    return kept;
  }

  /**
   * Keeps `session` for `key` on `basis`. A session a resumed connection receives keeps the basis
   * of the one it resumed, so chaining resumptions never extends the time since the last full
   * verification.
   */
  keep(key: string, session: Buffer, basis: SessionBasis): void {
    if (!Number.isFinite(basis.notAfter) || !Number.isFinite(basis.verifiedAt)) return;
    this.sessions.delete(key);
    if (this.sessions.size >= this.capacity) this.sessions.delete(this.sessions.keys().next().value ?? '');
    this.sessions.set(key, { session, verifiedAt: basis.verifiedAt, notAfter: basis.notAfter });
  }

  drop(key: string): void {
    this.sessions.delete(key);
  }

  noteResumed(): void {
    this.resumedCount++;
  }

  noteVerified(): void {
    this.verifiedCount++;
  }
}

/** The process's sessions: every probe session uses these unless given its own cache. */
export const processTlsSessions = new TlsSessionCache();

/**
 * The key a session is kept and offered under. `scope` is the digest of the CA/certificate/key
 * bytes and the verification mode. Direct: the name verified (SNI, or the host for an IP
 * endpoint), the host dialled and its port. Relayed (a pod port-forward: a new random loopback
 * port per evaluation), the member's name alone: a ticket can only be decrypted by the member
 * process that issued it (etcd leaves Go's ticket keys per process and random), so a relay that
 * reaches another member, or one restarted since, gets a full handshake that verifies that name
 * again; the relay's port says nothing about which member answers.
 */
export function sessionKey(
  scope: string,
  target: { relayedName?: string; name: string; host: string; port: number | undefined },
): string | undefined {
  if (target.relayedName !== undefined) return `${scope}\0relay\0${target.relayedName}`;
  if (target.port === undefined) return undefined;
  return `${scope}\0direct\0${target.name}\0${target.host}\0${target.port}`;
}

type IdentityCheck = (hostname: string, cert: PeerCertificate) => Error | undefined;

/**
 * One connection's part in resumption, the same for the etcd probe and the workload tunnel: the
 * identity check to hand Node in place of `check` (it notes when a full check passed, and the
 * server certificate's notAfter), and, once the handshake is done, `settle` with whether Node
 * resumed: the basis any session the connection then receives is kept on (the offered session's
 * own when it resumed, the check's when it verified in full, none when neither happened), with
 * the handshake counted.
 */
export function resumptionAttempt(
  cache: TlsSessionCache,
  offered: SessionBasis | undefined,
  check: IdentityCheck,
): { checkServerIdentity: IdentityCheck; settle(reused: boolean): SessionBasis | undefined } {
  let verified: SessionBasis | undefined;
  return {
    checkServerIdentity: (hostname, cert) => {
      const mismatch = check(hostname, cert);
      if (mismatch === undefined) verified = { verifiedAt: cache.now(), notAfter: Date.parse(cert.valid_to) };
      return mismatch;
    },
    settle(reused) {
      if (offered !== undefined && reused) {
        cache.noteResumed();
        return { verifiedAt: offered.verifiedAt, notAfter: offered.notAfter };
      }
      if (verified !== undefined) cache.noteVerified();
      return verified;
    },
  };
}
