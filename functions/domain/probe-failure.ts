// Why a probe call failed, as a kind the checks can read. The adapter maps a library error to a
// kind once, where it catches it (etcd-member-probe.ts); the text beside it is for people and may
// be reworded freely: no verdict depends on it.

export const PROBE_FAILURE_KINDS = [
  /** Our own deadline passed while the member did not answer. */
  'timeout',
  /** The deadline was spent before the call could start: nothing was asked. */
  'no-time',
  'refused',
  'reset',
  'unreachable',
  'dns',
  /** The peer closed before TLS began: a relay (port-forward) whose far end is gone. */
  'closed-before-tls',
  /** The TLS handshake failed (trust, expiry, a client certificate refused). */
  'tls',
  /** The server's certificate does not name the member we dialled. */
  'tls-identity',
  /** etcd refused our credentials or role. */
  'auth',
  /** The member says it was removed from the cluster. */
  'not-member',
  /** No client could be built (e.g. a key that does not match its certificate). */
  'setup',
  /** The way to the member (a port-forward through a workload API server) could not be opened. */
  'access',
  /** The probe session was closed before the call. */
  'closed',
  /** The member list shows no client URL yet, or no probe was made for the member. */
  'not-probed',
  /** Anything else: an error we cannot classify. */
  'other',
] as const;

export type ProbeFailureKind = (typeof PROBE_FAILURE_KINDS)[number];

/** One failed call at the adapter boundary: what kind, where, and our wording of it. */
export interface ProbeFailure {
  kind: ProbeFailureKind;
  endpoint: string;
  /** "<endpoint>: <cause>", for people; never read by a check. */
  text: string;
  /** For a timeout: the budget the call had. */
  budgetMs?: number;
}

/** A failed Outcome as the core sees it: the text to show, and the kind to judge by. */
export interface Failed {
  ok: false;
  error: string;
  kind: ProbeFailureKind;
  budgetMs?: number;
}

export function failedWith(failure: ProbeFailure): Failed {
  const failed: Failed = { ok: false, error: failure.text, kind: failure.kind };
  if (failure.budgetMs !== undefined) failed.budgetMs = failure.budgetMs;
  return failed;
}

/**
 * Failures that show a member is down: nothing listening, nothing answering within our deadline,
 * gone from the network, or never started. An election, refused credentials or an error we cannot
 * read leave the member possibly healthy ("quorum unknown", not "quorum lost").
 */
const MEMBER_DOWN: ReadonlySet<ProbeFailureKind> = new Set<ProbeFailureKind>([
  'timeout',
  'refused',
  'reset',
  'unreachable',
  'dns',
  'not-probed',
]);

export function showsMemberDown(kind: ProbeFailureKind): boolean {
  return MEMBER_DOWN.has(kind);
}
