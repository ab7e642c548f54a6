// Typed probe failures: the adapter maps a library error to a kind once, and verdicts are read
// from kinds, so rewording any message can never turn "quorum lost" into "quorum unknown".
import { describe, expect, it } from 'vitest';
import {
  EtcdAuthenticationFailedError,
  EtcdPermissionDeniedError,
  GRPCDeadlineExceededError,
  GRPCUnauthenticatedError,
  GRPCUnavailableError,
} from 'etcd3';
import { probeFailure } from './etcd-probe-failures.js';
import { evaluateCluster } from '../domain/judgement/evaluate-cluster.js';
import { type EvaluationInput } from '../domain/judgement/input.js';
import type { CheckStatus } from '../domain/evaluation-document.js';
import type { ProbeFailureKind } from '../domain/probe-failure.js';
import { probedEndpoint, probedThree } from '../../test/harness/probe-input.js';

const ENDPOINT = 'https://10.0.0.1:2379';

describe('the adapter maps each library error to one failure kind', () => {
  const rows: Array<{ behaviour: string; error: unknown; kind: ProbeFailureKind; text: string }> = [
    {
      behaviour: 'a gRPC deadline is our timeout, with the budget',
      error: new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED: Deadline exceeded'),
      kind: 'timeout',
      text: 'timed out after 900 ms',
    },
    {
      behaviour: 'nothing listening is refused',
      error: new GRPCUnavailableError(
        '14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED 10.0.0.1:2379',
      ),
      kind: 'refused',
      text: 'connection refused',
    },
    {
      behaviour: 'a name that does not resolve is dns',
      error: new Error('14 UNAVAILABLE: Name resolution failed for target dns:etcd-a:2379 (getaddrinfo ENOTFOUND etcd-a)'),
      kind: 'dns',
      text: 'DNS lookup failed',
    },
    {
      behaviour: 'a reset connection is reset',
      error: new Error('14 UNAVAILABLE: read ECONNRESET'),
      kind: 'reset',
      text: 'connection reset',
    },
    {
      behaviour: 'no route is unreachable',
      error: new Error('14 UNAVAILABLE: connect EHOSTUNREACH 10.0.0.1:2379'),
      kind: 'unreachable',
      text: 'host unreachable',
    },
    {
      behaviour: 'a relay closed before TLS is not a TLS verdict',
      error: new Error('Client network socket disconnected before secure TLS connection was established'),
      kind: 'closed-before-tls',
      text: 'connection closed before the TLS handshake',
    },
    {
      behaviour: 'an untrusted server certificate is tls',
      error: new Error('14 UNAVAILABLE: self-signed certificate in certificate chain'),
      kind: 'tls',
      text: 'TLS rejected: server certificate not trusted',
    },
    {
      behaviour: 'our client certificate refused is tls',
      error: new Error('14 UNAVAILABLE: ssl3_read_bytes:sslv3 alert bad certificate'),
      kind: 'tls',
      text: 'TLS rejected: client certificate missing or not accepted',
    },
    {
      behaviour: 'a certificate naming another host is tls-identity',
      error: new Error("Hostname/IP does not match certificate's altnames: IP: 10.0.0.1 is not in the cert's list: 10.0.0.9"),
      kind: 'tls-identity',
      text: 'TLS identity:',
    },
    {
      behaviour: 'etcd refusing our token is auth',
      error: new GRPCUnauthenticatedError('16 UNAUTHENTICATED: etcdserver: invalid auth token'),
      kind: 'auth',
      text: 'etcd refused our credentials',
    },
    {
      behaviour: 'a wrong password is auth',
      error: new EtcdAuthenticationFailedError('etcdserver: authentication failed, invalid user ID or password'),
      kind: 'auth',
      text: 'etcd refused our credentials',
    },
    {
      behaviour: 'a role without permission is auth',
      error: new EtcdPermissionDeniedError('etcdserver: permission denied'),
      kind: 'auth',
      text: 'etcd refused our credentials',
    },
    {
      behaviour: 'a removed member is not-member',
      error: new Error('etcdserver: the member has been permanently removed from the cluster'),
      kind: 'not-member',
      text: 'permanently removed',
    },
    {
      behaviour: 'an election in progress is other (the member may be healthy)',
      error: new Error('etcdserver: leader changed'),
      kind: 'other',
      text: 'etcdserver: leader changed',
    },
  ];
  it.each(rows)('$behaviour', ({ error, kind, text }) => {
    const failure = probeFailure(ENDPOINT, error, 900);
    expect(failure.kind).toBe(kind);
    expect(failure.endpoint).toBe(ENDPOINT);
    expect(failure.text.startsWith(`${ENDPOINT}: `)).toBe(true);
    expect(failure.text).toContain(text);
    expect(failure.budgetMs).toBe(kind === 'timeout' ? 900 : undefined);
  });
});

/** Three voting members; the second and third fail their Status and read with `kinds`, worded by `word`. */
function threeWith(
  kinds: [ProbeFailureKind, ProbeFailureKind],
  word: (kind: ProbeFailureKind, endpoint: string) => string,
): EvaluationInput {
  const failed = (kind: ProbeFailureKind, id: string) => ({ ok: false as const, kind, error: word(kind, probedEndpoint(id)) });
  return probedThree({ '2': failed(kinds[0], '2'), '3': failed(kinds[1], '3') });
}

const today = (kind: ProbeFailureKind, endpoint: string) =>
  ({ refused: `${endpoint}: connection refused`, timeout: `${endpoint}: timed out after 900 ms` })[kind as string] ??
  `${endpoint}: etcdserver: leader changed`;
/** Wording a translator or a later release might choose: none of today's phrases survive. */
const reworded = (kind: ProbeFailureKind, endpoint: string) => `${endpoint}: Verbindung fehlgeschlagen (${kind.length})`;
/** A misleading wording: an unclassified error whose text happens to read like a dead member. */
const misleading = (_kind: ProbeFailureKind, endpoint: string) => `${endpoint}: connection refused, timed out after 1 ms`;

describe('the verdict depends on failure kinds, never on their wording', () => {
  const rows: Array<{ behaviour: string; kinds: [ProbeFailureKind, ProbeFailureKind]; quorum: string }> = [
    { behaviour: 'two members refusing connections is quorum lost', kinds: ['refused', 'refused'], quorum: 'quorum lost' },
    { behaviour: 'two members past our deadline is quorum lost', kinds: ['timeout', 'refused'], quorum: 'quorum lost' },
    { behaviour: 'two members in an election is quorum unknown', kinds: ['other', 'other'], quorum: 'quorum unknown' },
    { behaviour: 'credentials refused by two members is quorum unknown', kinds: ['auth', 'tls'], quorum: 'quorum unknown' },
  ];
  it.each(rows)('$behaviour, whatever the words', ({ kinds, quorum }) => {
    const verdicts = [today, reworded, misleading].map((word) => {
      const evaluation = evaluateCluster(threeWith(kinds, word));
      const check = evaluation.checks.find((entry) => entry.name === 'quorum');
      return { verdict: evaluation.verdict, quorum: check?.message.includes(quorum) };
    });
    expect(verdicts).toEqual([
      { verdict: 'Unhealthy', quorum: true },
      { verdict: 'Unhealthy', quorum: true },
      { verdict: 'Unhealthy', quorum: true },
    ]);
  });
});

describe('a certificate naming another host is judged by its kind, never by its wording', () => {
  const rows: Array<{
    behaviour: string;
    kind: ProbeFailureKind;
    text: string;
    tlsIdentity: CheckStatus;
    reachable: CheckStatus;
  }> = [
    {
      behaviour: "today's wording is a TLS identity failure, not an unreachable member",
      kind: 'tls-identity',
      text: 'TLS identity: the server certificate does not name 127.0.0.1; it names etcd-b',
      tlsIdentity: 'fail',
      reachable: 'pass',
    },
    {
      behaviour: 'a reworded identity failure still reads as TLS identity',
      kind: 'tls-identity',
      text: 'Zertifikat nennt einen anderen Host',
      tlsIdentity: 'fail',
      reachable: 'pass',
    },
    {
      behaviour: 'a refusal whose text mentions TLS identity stays an unreachable member',
      kind: 'refused',
      text: 'TLS identity: connection refused',
      tlsIdentity: 'pass',
      reachable: 'fail',
    },
  ];
  it.each(rows)('$behaviour', ({ kind, text, tlsIdentity, reachable }) => {
    const evaluation = evaluateCluster(
      probedThree({ '2': { ok: false as const, kind, error: `${probedEndpoint('2')}: ${text}` } }),
    );
    const statusOf = (name: string) => evaluation.checks.find((check) => check.name === name)?.status;
    expect({ tlsIdentity: statusOf('tls-identity'), reachable: statusOf('reachable') }).toEqual({ tlsIdentity, reachable });
  });
});
