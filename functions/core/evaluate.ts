// The judgement: turns what the probes saw (member list, per-member status, alarms, a
// linearizable read, and optionally the control-plane Node inventory) into an Evaluation.
// Pure: no I/O, no clock; the adapters hand in plain data, so every rule is table-testable.
import {
  SCHEMA_VERSION,
  quorumOf,
  verdictFromChecks,
  type Check,
  type CheckStatus,
  type Evaluation,
  type MemberReport,
} from './evaluation.js';

/** The result of one call: a value, or our own short error text (never a library error object). */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: string };

/** One entry of the cluster's member list (ids as decimal strings: they are uint64). */
export interface DiscoveredMember {
  id: string;
  /** Empty while a newly added member has not started. */
  name: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

/** What maintenance Status says about the member that answered. */
export interface MemberStatus {
  memberId: string;
  /** "0" when the member knows no leader. */
  leaderId: string;
  raftIndex: number;
  raftTerm: number;
  dbSizeBytes: number;
  dbSizeInUseBytes: number;
  version: string;
  isLearner: boolean;
}

export interface RaisedAlarm {
  memberId: string;
  /** etcd's alarm name, e.g. NOSPACE or CORRUPT. */
  alarm: string;
}

/** Everything one endpoint answered within the deadline. */
export interface EndpointProbe {
  endpoint: string;
  status: Outcome<MemberStatus>;
  /** Alarm GET goes through raft, so it also fails without quorum. */
  alarms: Outcome<RaisedAlarm[]>;
  /** A linearizable (quorum) read; learners refuse it by design. */
  linearizableRead: Outcome<null>;
  /** Round trip of the Status call, null when it did not answer. */
  latencyMs: number | null;
}

export interface ControlPlaneNode {
  name: string;
  addresses: string[];
}

/** The Nodes adapter's result: the nodes, or why they could not be listed. */
export type ControlPlaneInventory = ControlPlaneNode[] | { error: string };

export interface EvaluationThresholds {
  /** DB size as a fraction of the backend quota that warns / fails. */
  dbWarnRatio: number;
  dbFailRatio: number;
  /** Raft entries a member may trail the leader's index before it counts as lagging. */
  raftLagWarnEntries: number;
  /** A Status round trip slower than this marks a slow member. */
  slowMemberMs: number;
}

export const DEFAULT_THRESHOLDS: EvaluationThresholds = {
  dbWarnRatio: 0.8,
  dbFailRatio: 0.95,
  raftLagWarnEntries: 1000,
  slowMemberMs: 500,
};

export interface EvaluationInput {
  target: string;
  /** The endpoints the caller was configured with (used when no member list was obtained). */
  endpoints: string[];
  /** The member list from the first endpoint that answered, or why none did. */
  memberList: Outcome<DiscoveredMember[]>;
  /** One probe per endpoint that was probed (member client URLs, or the given endpoints). */
  probes: EndpointProbe[];
  quotaBackendBytes: number;
  controlPlaneNodes?: ControlPlaneInventory;
  evaluatedAt: string;
  durationMs: number;
  thresholds?: Partial<EvaluationThresholds>;
}

/** Check names, in the order they appear in every evaluation. */
export const CHECK_NAMES = [
  'member-list',
  'reachable',
  'linearizable-read',
  'leader',
  'quorum',
  'alarms',
  'learners',
  'db-size',
  'raft-index',
  'version',
  'latency',
  'member-count',
  'inventory',
] as const;
export type CheckName = (typeof CHECK_NAMES)[number];

interface Finding {
  check: CheckName;
  status: Exclude<CheckStatus, 'pass'>;
  message: string;
}

/** A member as judged: the list entry joined with the probe of its client URL. */
interface JudgedMember {
  id: string;
  name: string;
  endpoint: string;
  peerUrls: string[];
  clientUrls: string[];
  learner: boolean;
  probe: EndpointProbe | undefined;
  /** Why the member has no probe at all (not started, no client URL). */
  missingReason: string | undefined;
}

const MIB = 1024 * 1024;

function formatBytes(bytes: number): string {
  if (bytes >= 1024 * MIB) return `${(bytes / (1024 * MIB)).toFixed(1)} GiB`;
  return `${(bytes / MIB).toFixed(1)} MiB`;
}

function hostOf(url: string): string | null {
  try {
    // URL keeps IPv6 hosts in brackets; node addresses carry none.
    return new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return null;
  }
}

function label(member: Pick<JudgedMember, 'name' | 'id' | 'endpoint'>): string {
  const who = member.name !== '' ? member.name : member.id !== '' ? `id ${member.id}` : '';
  if (who === '') return member.endpoint !== '' ? member.endpoint : 'unnamed member';
  return member.endpoint !== '' ? `${who} (${member.endpoint})` : who;
}

/** "member X (endpoint) <what>: <error>", without repeating an endpoint the error already names. */
function memberProblem(kind: 'member' | 'learner', member: JudgedMember, what: string, error: string): string {
  const who = member.name !== '' ? member.name : member.id !== '' ? `id ${member.id}` : '';
  const named = member.endpoint !== '' && error.includes(member.endpoint);
  if (who === '') {
    const cause = named && error.startsWith(`${member.endpoint}: `) ? error.slice(member.endpoint.length + 2) : error;
    return `${kind} ${member.endpoint || 'unnamed member'} ${what}: ${cause}`;
  }
  return named || member.endpoint === ''
    ? `${kind} ${who} ${what}: ${error}`
    : `${kind} ${who} (${member.endpoint}) ${what}: ${error}`;
}

function judgedMembers(input: EvaluationInput): JudgedMember[] {
  const probeByEndpoint = new Map(input.probes.map((probe) => [probe.endpoint, probe]));
  if (input.memberList.ok) {
    return [...input.memberList.value]
      .sort((a, b) => (a.name || a.id).localeCompare(b.name || b.id))
      .map((member) => {
        // A member may be reached through its advertised client URL or through a given endpoint
        // that turned out to be it (e.g. a load balancer or another host name): prefer an answer.
        const candidates = [
          ...member.clientUrls
            .map((url) => probeByEndpoint.get(url))
            .filter((found): found is EndpointProbe => found !== undefined),
          ...input.probes.filter((candidate) => candidate.status.ok && candidate.status.value.memberId === member.id),
        ];
        const probe = candidates.find((candidate) => candidate.status.ok) ?? candidates[0];
        const endpoint = probe?.endpoint ?? member.clientUrls[0] ?? '';
        return {
          id: member.id,
          name: member.name,
          endpoint,
          peerUrls: member.peerUrls,
          clientUrls: member.clientUrls,
          learner: member.isLearner,
          probe,
          missingReason:
            probe !== undefined
              ? undefined
              : member.clientUrls.length === 0
                ? 'not started (the member list shows no client URL)'
                : 'not probed',
        };
      });
  }
  // Without a member list all we know are the endpoints we were given; judge each as a voting member.
  return input.endpoints.map((endpoint) => {
    const probe = probeByEndpoint.get(endpoint);
    return {
      id: probe?.status.ok ? probe.status.value.memberId : '',
      name: '',
      endpoint,
      peerUrls: [],
      clientUrls: [endpoint],
      learner: probe?.status.ok ? probe.status.value.isLearner : false,
      probe,
      missingReason: probe === undefined ? 'not probed' : undefined,
    };
  });
}

function statusOf(member: JudgedMember): MemberStatus | null {
  return member.probe?.status.ok ? member.probe.status.value : null;
}

/** Reachable = Status answered. Healthy voting = also a linearizable read and the alarm GET. */
function isHealthy(member: JudgedMember): boolean {
  const probe = member.probe;
  if (!probe || !probe.status.ok) return false;
  if (member.learner) return true;
  return probe.linearizableRead.ok && probe.alarms.ok;
}

function firstError(member: JudgedMember): string | undefined {
  if (member.missingReason !== undefined) return member.missingReason;
  const probe = member.probe;
  if (!probe) return undefined;
  if (!probe.status.ok) return probe.status.error;
  if (member.learner) return undefined;
  if (!probe.linearizableRead.ok) return probe.linearizableRead.error;
  if (!probe.alarms.ok) return probe.alarms.error;
  return undefined;
}

export function evaluateCluster(input: EvaluationInput): Evaluation {
  const thresholds = { ...DEFAULT_THRESHOLDS, ...input.thresholds };
  const findings: Finding[] = [];
  const passMessages = new Map<CheckName, string>();
  const fail = (check: CheckName, message: string) => findings.push({ check, status: 'fail', message });
  const warn = (check: CheckName, message: string) => findings.push({ check, status: 'warn', message });

  const members = judgedMembers(input);
  const voting = members.filter((member) => !member.learner);
  const learners = members.filter((member) => member.learner);
  const healthyVoting = voting.filter(isHealthy);
  const quorum = quorumOf(voting.length);

  // member-list
  if (!input.memberList.ok) {
    fail('member-list', `member list unavailable from every endpoint: ${input.memberList.error}`);
  } else {
    passMessages.set('member-list', `${members.length} members listed`);
  }

  // reachable + linearizable-read (voting members; a learner's reachability shows in its row)
  for (const member of voting) {
    const probe = member.probe;
    if (!probe) {
      fail('reachable', memberProblem('member', member, 'unreachable', member.missingReason ?? 'not probed'));
    } else if (!probe.status.ok) {
      fail('reachable', memberProblem('member', member, 'unreachable', probe.status.error));
    } else if (!probe.linearizableRead.ok) {
      fail(
        'linearizable-read',
        memberProblem('member', member, 'did not answer a linearizable read', probe.linearizableRead.error),
      );
    } else if (!probe.alarms.ok) {
      fail('alarms', memberProblem('member', member, 'could not list alarms', probe.alarms.error));
    }
  }
  for (const member of learners) {
    if (!member.probe?.status.ok) {
      fail('reachable', memberProblem('learner', member, 'unreachable', firstError(member) ?? 'no answer'));
    }
  }
  passMessages.set('reachable', `all ${members.length} members answered`);
  const reachableVoting = voting.filter((member) => member.probe?.status.ok === true);
  const readers = reachableVoting.filter((member) => member.probe?.linearizableRead.ok === true);
  passMessages.set(
    'linearizable-read',
    `${readers.length} of ${reachableVoting.length} reachable voting members answered a linearizable read`,
  );

  // quorum
  const quorumHeld = voting.length > 0 && healthyVoting.length >= quorum;
  if (voting.length === 0) {
    fail('quorum', 'no voting member known');
  } else if (!quorumHeld) {
    fail('quorum', `quorum lost: ${healthyVoting.length} of ${voting.length} voting members healthy, quorum needs ${quorum}`);
  } else {
    passMessages.set(
      'quorum',
      `${healthyVoting.length} of ${voting.length} voting members healthy, quorum ${quorum}, fault tolerance ${healthyVoting.length - quorum}`,
    );
  }

  // leader: every reachable member must name the same leader, and since Status answers without
  // quorum (and keeps naming the old leader for a while after losing it) quorum must be proven too.
  let leaderId: string | null = null;
  const reachable = members.filter((member) => statusOf(member) !== null);
  const leaderViews = new Map<string, string[]>();
  for (const member of reachable) {
    const view = statusOf(member)?.leaderId ?? '0';
    leaderViews.set(view, [...(leaderViews.get(view) ?? []), member.name || member.id]);
  }
  if (reachable.length === 0) {
    fail('leader', 'no leader: no member answered');
  } else if (!quorumHeld) {
    fail(
      'leader',
      `no leader: quorum lost (${healthyVoting.length} of ${voting.length} voting members answered a linearizable read)`,
    );
  } else if (leaderViews.size > 1) {
    const views = [...leaderViews.entries()].map(
      ([id, names]) => `${names.join(', ')} → ${id === '0' ? 'none' : nameOf(members, id)}`,
    );
    fail('leader', `members disagree on the leader: ${views.join('; ')}`);
  } else {
    const [onlyView] = [...leaderViews.keys()];
    if (onlyView === undefined || onlyView === '0') {
      fail('leader', 'no leader: reachable members report none');
    } else if (!voting.some((member) => member.id === onlyView)) {
      fail('leader', `leader ${onlyView} is not a voting member in the member list`);
    } else {
      leaderId = onlyView;
      passMessages.set('leader', `leader ${nameOf(members, onlyView)} agreed by all ${reachable.length} reachable members`);
    }
  }

  // alarms: the alarm list is cluster-wide, so merge every answer.
  const alarmsByMember = new Map<string, Set<string>>();
  let alarmAnswers = 0;
  for (const member of members) {
    const alarms = member.probe?.alarms;
    if (!alarms?.ok) continue;
    alarmAnswers += 1;
    for (const raised of alarms.value) {
      const set = alarmsByMember.get(raised.memberId) ?? new Set<string>();
      set.add(raised.alarm);
      alarmsByMember.set(raised.memberId, set);
    }
  }
  for (const [memberId, alarms] of alarmsByMember) {
    for (const alarm of alarms) fail('alarms', `alarm ${alarm} raised on member ${nameOf(members, memberId)}`);
  }
  passMessages.set('alarms', alarmAnswers > 0 ? 'no alarm raised' : 'alarm list unavailable (no member answered it)');

  // learners
  for (const member of learners) fail('learners', `learner ${label(member)} not yet promoted`);
  passMessages.set('learners', 'no learner');

  // db-size
  for (const member of members) {
    const status = statusOf(member);
    if (!status) continue;
    const ratio = status.dbSizeBytes / input.quotaBackendBytes;
    const text = `member ${label(member)} DB ${formatBytes(status.dbSizeBytes)} is ${Math.round(ratio * 100)}% of quota ${formatBytes(input.quotaBackendBytes)}`;
    if (ratio >= thresholds.dbFailRatio) fail('db-size', text);
    else if (ratio >= thresholds.dbWarnRatio) warn('db-size', text);
  }
  const sized = members.some((member) => statusOf(member) !== null);
  if (!sized) passMessages.set('db-size', 'no DB size known');
  else
    passMessages.set(
      'db-size',
      `every DB below ${Math.round(thresholds.dbWarnRatio * 100)}% of quota ${formatBytes(input.quotaBackendBytes)}`,
    );

  // raft-index: measured against the leader when known, else against the most advanced member.
  const indexes = members.map((member) => ({ member, status: statusOf(member) })).filter((entry) => entry.status !== null);
  const leaderStatus = leaderId === null ? null : (indexes.find((entry) => entry.member.id === leaderId)?.status ?? null);
  const referenceIndex = leaderStatus?.raftIndex ?? Math.max(0, ...indexes.map((entry) => entry.status?.raftIndex ?? 0));
  for (const { member, status } of indexes) {
    if (!status) continue;
    const lag = referenceIndex - status.raftIndex;
    if (lag > thresholds.raftLagWarnEntries) {
      warn('raft-index', `member ${label(member)} lags ${lag} raft entries behind (${status.raftIndex} vs ${referenceIndex})`);
    }
  }
  passMessages.set('raft-index', `no member more than ${thresholds.raftLagWarnEntries} entries behind`);

  // version
  const versions = new Map<string, string[]>();
  for (const member of members) {
    const status = statusOf(member);
    if (status) versions.set(status.version, [...(versions.get(status.version) ?? []), member.name || member.id]);
  }
  if (versions.size > 1) {
    warn(
      'version',
      `version skew: ${[...versions.entries()].map(([version, names]) => `${names.join(', ')} run ${version}`).join('; ')}`,
    );
  } else {
    passMessages.set('version', versions.size === 1 ? `all members run ${[...versions.keys()].join('')}` : 'no version known');
  }

  // latency
  for (const member of members) {
    const latency = member.probe?.latencyMs;
    if (latency !== null && latency !== undefined && latency > thresholds.slowMemberMs) {
      warn(
        'latency',
        `member ${label(member)} slow: status took ${Math.round(latency)} ms (limit ${thresholds.slowMemberMs} ms)`,
      );
    }
  }
  passMessages.set('latency', `every member answered within ${thresholds.slowMemberMs} ms`);

  // member-count
  if (voting.length > 0 && voting.length % 2 === 0) {
    warn(
      'member-count',
      `even number of voting members (${voting.length}): tolerates no more failures than ${voting.length - 1}`,
    );
  } else {
    passMessages.set('member-count', `${voting.length} voting member${voting.length === 1 ? '' : 's'}`);
  }

  // inventory (only when configured)
  const inventory = input.controlPlaneNodes;
  if (inventory !== undefined) {
    if (!Array.isArray(inventory)) {
      fail('inventory', `control-plane node inventory unavailable: ${inventory.error}`);
    } else {
      const matched = new Set<string>();
      for (const member of members) {
        const hosts = [...member.peerUrls, ...member.clientUrls].map(hostOf).filter((host): host is string => host !== null);
        const node = inventory.find(
          (candidate) =>
            (member.name !== '' && candidate.name === member.name) ||
            candidate.addresses.some((address) => hosts.includes(address)),
        );
        if (node) matched.add(node.name);
        else fail('inventory', `member ${label(member)} matches no control-plane node`);
      }
      for (const node of inventory) {
        if (!matched.has(node.name)) warn('inventory', `control-plane node ${node.name} runs no etcd member`);
      }
      passMessages.set('inventory', `every member matches one of ${inventory.length} control-plane nodes`);
    }
  }

  const checkNames = CHECK_NAMES.filter((name) => name !== 'inventory' || inventory !== undefined);
  const checks: Check[] = checkNames.map((name) => {
    const own = findings.filter((finding) => finding.check === name);
    if (own.length === 0) return { name, status: 'pass', message: passMessages.get(name) ?? 'ok' };
    const status: CheckStatus = own.some((finding) => finding.status === 'fail') ? 'fail' : 'warn';
    return { name, status, message: own.map((finding) => finding.message).join('; ') };
  });
  const verdict = verdictFromChecks(checks);
  const reasons = [
    ...findings.filter((finding) => finding.status === 'fail'),
    ...findings.filter((finding) => finding.status === 'warn'),
  ].map((finding) => finding.message);

  const memberReports: MemberReport[] = members.map((member) => {
    const status = statusOf(member);
    const error = firstError(member);
    const report: MemberReport = {
      id: member.id,
      name: member.name,
      endpoint: member.endpoint,
      healthy: isHealthy(member),
      leader: leaderId !== null && member.id === leaderId,
      learner: member.learner,
      version: status?.version ?? null,
      dbSizeBytes: status?.dbSizeBytes ?? null,
      dbSizeInUseBytes: status?.dbSizeInUseBytes ?? null,
      raftIndex: status?.raftIndex ?? null,
      raftTerm: status?.raftTerm ?? null,
      latencyMs: member.probe?.latencyMs ?? null,
      alarms: [...(alarmsByMember.get(member.id) ?? [])],
    };
    if (error !== undefined) report.error = error;
    return report;
  });

  return {
    schemaVersion: SCHEMA_VERSION,
    target: input.target,
    evaluatedAt: input.evaluatedAt,
    durationMs: input.durationMs,
    verdict,
    passed: verdict !== 'Unhealthy',
    reasons,
    cluster: {
      leaderId,
      votingMembers: voting.length,
      learners: learners.length,
      healthyVoting: healthyVoting.length,
      quorum,
      faultTolerance: healthyVoting.length - quorum,
    },
    members: memberReports,
    checks,
  };
}

function nameOf(members: readonly JudgedMember[], id: string): string {
  const member = members.find((candidate) => candidate.id === id);
  return member && member.name !== '' ? member.name : `id ${id}`;
}
