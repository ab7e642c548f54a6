// The judgement: turns what the probes saw (member list, per-member status, alarms, a
// linearizable read, and optionally the control-plane Node inventory) into an Evaluation.
// Pure: no I/O, no clock; the adapters hand in plain data, so every rule is table-testable.
import {
  SCHEMA_VERSION,
  FORMAT_REVISION,
  quorumOf,
  verdictFromChecks,
  CHECK_NAMES,
  type Check,
  type CheckName,
  type CheckStatus,
  type Evaluation,
  type MemberReport,
} from './evaluation.js';
import {
  agreedView,
  hexId,
  listSignature,
  type AgreedView,
  type EndpointMemberList,
  type MemberListAnswer,
} from './member-view.js';
import { showsMemberDown, type Failed, type ProbeFailureKind } from './probe-failure.js';

/**
 * The result of one call: a value, or why not: our own short text (never a library error object)
 * and the failure's kind, which is what checks judge by.
 */
export type Outcome<T> = { ok: true; value: T } | Failed;

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
  /** The cluster the answering member belongs to (uint64 as a decimal string), when known. */
  clusterId?: string;
  /** The member's own --quota-backend-bytes, when it reports it (etcd 3.6+ Status dbSizeQuota). */
  dbSizeQuotaBytes?: number;
}

export interface RaisedAlarm {
  memberId: string;
  /** etcd's alarm name, e.g. NOSPACE or CORRUPT. */
  alarm: string;
}

/**
 * The watch round trip: milliseconds until the watch delivered the write, or why not;
 * `writeFailed` when the write through another member never got through (nothing was tested).
 */
export type WatchOutcome = { ok: true; value: number } | (Failed & { writeFailed?: true });

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
  /**
   * The listed member this endpoint was dialled to reach, when the way in is not one of its
   * advertised URLs (e.g. a port-forward to its pod): the probe is that member's even if it failed.
   */
  forMemberId?: string;
  /**
   * The opt-in watch round trip: milliseconds until a watch on this endpoint delivered a write
   * made through another member, or why it did not. Absent when the watch probe is off.
   */
  watch?: WatchOutcome;
}

export interface ControlPlaneNode {
  name: string;
  addresses: string[];
  /**
   * RFC 3339 creation time of the Node (of the Machine when its Node's is unknown): a new one gets
   * a grace period to join etcd, and a learner on it is as old as it.
   */
  createdAt?: string;
  /** A Cluster API Machine with a deletionTimestamp: its member is expected to go. */
  deleting?: boolean;
  /** A Cluster API Machine without a Node yet (no status.nodeRef): not compared, as KCP does. */
  provisioning?: boolean;
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
  /** How long a new control-plane node may run no etcd member before that fails (KCP allows 2 min). */
  nodeMemberGraceMs: number;
  /** How long a learner may stay unpromoted (a join in progress) before that fails. */
  learnerGraceMs: number;
}

export const DEFAULT_THRESHOLDS: EvaluationThresholds = {
  dbWarnRatio: 0.8,
  dbFailRatio: 0.95,
  raftLagWarnEntries: 1000,
  slowMemberMs: 500,
  nodeMemberGraceMs: 120_000,
  learnerGraceMs: 300_000,
};

export interface EvaluationInput {
  target: string;
  /** The endpoints the caller was configured with (used when no member list was obtained). */
  endpoints: string[];
  /** The member list from the first endpoint that answered, or why none did. */
  memberList: Outcome<DiscoveredMember[]>;
  /**
   * Every endpoint's own member list with the cluster and member that answered. When given, the
   * cluster's view (member-view.ts) replaces `memberList` and the lists are compared.
   */
  memberLists?: EndpointMemberList[];
  /**
   * A member list etcd 3.5+ served linearizably (the committed membership), when one answered:
   * it is the cluster's view. Never from a 3.4 member, which answers the same request locally.
   */
  linearizableMemberList?: MemberListAnswer & { endpoint: string };
  /** One probe per endpoint that was probed (member client URLs, or the given endpoints). */
  probes: EndpointProbe[];
  quotaBackendBytes: number;
  controlPlaneNodes?: ControlPlaneInventory;
  evaluatedAt: string;
  durationMs: number;
  thresholds?: Partial<EvaluationThresholds>;
  /**
   * When an earlier evaluation first saw each learner (member id → RFC 3339), from the stored
   * evaluation: the age of a learner no inventory entry dates.
   */
  learnersFirstSeen?: Readonly<Record<string, string>>;
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

function judgedMembers(input: EvaluationInput, memberList: Outcome<DiscoveredMember[]>): JudgedMember[] {
  const probeByEndpoint = new Map(input.probes.map((probe) => [probe.endpoint, probe]));
  if (memberList.ok) {
    return [...memberList.value]
      .sort((a, b) => (a.name || a.id).localeCompare(b.name || b.id))
      .map((member) => {
        // A member may be reached through its advertised client URL or through a given endpoint
        // that turned out to be it (e.g. a load balancer or another host name): prefer an answer.
        const candidates = [
          ...member.clientUrls
            .map((url) => probeByEndpoint.get(url))
            .filter((found): found is EndpointProbe => found !== undefined),
          ...input.probes.filter((candidate) => candidate.forMemberId === member.id),
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

/**
 * "quorum lost" only when enough members are known to be down that no majority can be healthy;
 * when the failures are ours to explain (credentials refused, an election in progress, errors we
 * cannot read), the cluster may well have quorum: "quorum unknown" (still a failure).
 */
function quorumState(voting: readonly JudgedMember[], healthy: number, quorum: number): 'quorum lost' | 'quorum unknown' {
  const maybeHealthy = voting.filter((member) => !isHealthy(member) && !showsMemberDown(firstFailureKind(member))).length;
  return healthy + maybeHealthy >= quorum ? 'quorum unknown' : 'quorum lost';
}

/** Reachable = Status answered. Healthy voting = also a linearizable read and the alarm GET. */
function isHealthy(member: JudgedMember): boolean {
  const probe = member.probe;
  if (!probe || !probe.status.ok) return false;
  if (member.learner) return true;
  return probe.linearizableRead.ok && probe.alarms.ok;
}

/** The kind of the failure firstError words: what the quorum check judges by. */
function firstFailureKind(member: JudgedMember): ProbeFailureKind {
  const probe = member.probe;
  if (member.missingReason !== undefined || !probe) return 'not-probed';
  if (!probe.status.ok) return probe.status.kind;
  if (member.learner) return 'other';
  if (!probe.linearizableRead.ok) return probe.linearizableRead.kind;
  if (!probe.alarms.ok) return probe.alarms.kind;
  return 'other';
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

/** One failure or warning of a check; each becomes a reason. */
export interface Finding {
  status: Exclude<CheckStatus, 'pass'>;
  message: string;
}

/** What one check concluded: its findings in the order found, and the summary shown when there are none. */
export interface CheckResult {
  findings: Finding[];
  passMessage: string;
}

const fail = (message: string): Finding => ({ status: 'fail', message });
const warn = (message: string): Finding => ({ status: 'warn', message });

function concluded(findings: Finding[], passMessage = ''): CheckResult {
  return { findings, passMessage };
}

/** The leader every reachable member agrees on, or why there is none. */
type LeaderView = { id: string; agreedBy: number } | { id: null; problem: string };

/** Everything the checks read, derived once from the input; the checks never change it. */
interface ClusterView {
  input: EvaluationInput;
  /** The cluster's own view when several lists were read (member-view.ts), else null. */
  agreed: AgreedView | null;
  /** The member list judged: the agreed view's, else the first that answered. */
  memberList: Outcome<DiscoveredMember[]>;
  thresholds: EvaluationThresholds;
  members: JudgedMember[];
  voting: JudgedMember[];
  learners: JudgedMember[];
  healthyVoting: JudgedMember[];
  quorum: number;
  quorumHeld: boolean;
  leader: LeaderView;
  /** The alarm list is cluster-wide: every member's answer merged, by member id. */
  alarmsByMember: Map<string, Set<string>>;
  alarmAnswers: number;
  /** Every learner's join, by member id: since when and whether it is past the grace. */
  joins: Map<string, LearnerJoin>;
}

/** A learner's join as judged: when it began (as far as known), how long ago, past the grace or not. */
interface LearnerJoin {
  since: string;
  ageMs: number;
  overdue: boolean;
}

type CheckFunction = (view: ClusterView) => CheckResult | null;

// leader: every reachable member must name the same leader, and since Status answers without
// quorum (and keeps naming the old leader for a while after losing it) quorum must be proven too.
function agreedLeader(members: JudgedMember[], voting: JudgedMember[], healthy: number, quorumHeld: boolean): LeaderView {
  const reachable = members.filter((member) => statusOf(member) !== null);
  const leaderViews = new Map<string, string[]>();
  for (const member of reachable) {
    const view = statusOf(member)?.leaderId ?? '0';
    leaderViews.set(view, [...(leaderViews.get(view) ?? []), member.name || member.id]);
  }
  if (reachable.length === 0) return { id: null, problem: 'no leader: no member answered' };
  if (!quorumHeld) {
    const state = quorumState(voting, healthy, quorumOf(voting.length));
    return {
      id: null,
      problem: `no leader: ${state} (${healthy} of ${voting.length} voting members answered a linearizable read)`,
    };
  }
  const newest = newestTermLeader(reachable);
  if (leaderViews.size > 1 && newest !== null) return { id: newest, agreedBy: reachable.length };
  if (leaderViews.size > 1) {
    const views = [...leaderViews.entries()].map(
      ([id, names]) => `${names.join(', ')} → ${id === '0' ? 'none' : nameOf(members, id)}`,
    );
    return { id: null, problem: `members disagree on the leader: ${views.join('; ')}` };
  }
  const [onlyView] = [...leaderViews.keys()];
  if (onlyView === undefined || onlyView === '0') return { id: null, problem: 'no leader: reachable members report none' };
  if (!voting.some((member) => member.id === onlyView)) {
    return { id: null, problem: `leader ${onlyView} is not a voting member in the member list` };
  }
  return { id: onlyView, agreedBy: reachable.length };
}

/**
 * Raft elects at most one leader per term, so members asked a moment apart while leadership moves
 * name different leaders at different terms; the leader of the highest term is the current one.
 * It counts only when every member at that term names it and every member naming another leader
 * is at an older term. Null when that does not hold: a real disagreement, reported as one.
 */
function newestTermLeader(reachable: JudgedMember[]): string | null {
  const statuses = reachable.flatMap((member) => {
    const status = statusOf(member);
    return status === null ? [] : [status];
  });
  const newestTerm = Math.max(...statuses.map((status) => status.raftTerm));
  const atNewest = new Set(statuses.filter((status) => status.raftTerm === newestTerm).map((status) => status.leaderId));
  const [leader] = [...atNewest];
  if (atNewest.size !== 1 || leader === undefined || leader === '0') return null;
  const olderOnly = statuses.every((status) => status.leaderId === leader || status.raftTerm < newestTerm);
  return olderOnly ? leader : null;
}

function mergedAlarms(members: JudgedMember[]): { alarmsByMember: Map<string, Set<string>>; alarmAnswers: number } {
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
  return { alarmsByMember, alarmAnswers };
}

function clusterView(input: EvaluationInput): ClusterView {
  const agreed = agreedView(input.memberLists ?? [], input.probes, input.linearizableMemberList);
  const memberList: Outcome<DiscoveredMember[]> = agreed ? { ok: true, value: agreed.answer.members } : input.memberList;
  const members = judgedMembers(input, memberList);
  const voting = members.filter((member) => !member.learner);
  const healthyVoting = voting.filter(isHealthy);
  const quorum = quorumOf(voting.length);
  const quorumHeld = voting.length > 0 && healthyVoting.length >= quorum;
  const thresholds = { ...DEFAULT_THRESHOLDS, ...input.thresholds };
  return {
    input,
    agreed,
    memberList,
    thresholds,
    members,
    voting,
    learners: members.filter((member) => member.learner),
    healthyVoting,
    quorum,
    quorumHeld,
    leader: agreedLeader(members, voting, healthyVoting.length, quorumHeld),
    ...mergedAlarms(members),
    joins: learnerJoins(input, members, thresholds),
  };
}

/**
 * A learner's age: from its Node's (else Machine's) creation where the inventory dates it, else
 * from when an earlier evaluation first saw it, else from now (first seen by this one). Of a Node
 * date and a sighting the earlier counts: the learner existed when it was seen, and a Node date
 * comes from the workload API server, which must not make a learner younger than we saw it.
 */
function learnerJoins(
  input: EvaluationInput,
  members: readonly JudgedMember[],
  thresholds: EvaluationThresholds,
): Map<string, LearnerJoin> {
  const now = Date.parse(input.evaluatedAt);
  const inventory = Array.isArray(input.controlPlaneNodes) ? comparedInventory(input.controlPlaneNodes) : [];
  const joins = new Map<string, LearnerJoin>();
  for (const member of members) {
    if (!member.learner) continue;
    const stamps = [nodeOf(member, inventory)?.createdAt, input.learnersFirstSeen?.[member.id]]
      .map((stamp) => (stamp === undefined ? Number.NaN : Date.parse(stamp)))
      .filter((stamp) => Number.isFinite(stamp) && stamp <= now);
    const sinceMs = Math.min(now, ...stamps);
    const ageMs = now - sinceMs;
    joins.set(member.id, {
      since: new Date(sinceMs).toISOString(),
      ageMs,
      overdue: ageMs >= thresholds.learnerGraceMs,
    });
  }
  return joins;
}

const memberListCheck: CheckFunction = ({ memberList, members, agreed }) =>
  memberList.ok
    ? concluded(
        [],
        `${members.length} members listed${agreed?.basis === 'linearizable' ? ' (linearizable: the committed membership)' : ''}`,
      )
    : concluded([fail(`member list unavailable from every endpoint: ${memberList.error}`)]);

/** Who answered a list, by name when the cluster's view knows the member. */
function answeredBy(endpoint: string, memberId: string, members: readonly JudgedMember[]): string {
  const member = members.find((candidate) => candidate.id === memberId);
  return member !== undefined && member.name !== '' ? `member ${member.name} (${endpoint})` : `endpoint ${endpoint}`;
}

function listedNames(list: readonly DiscoveredMember[]): string {
  return list
    .map((member) => member.name || hexId(member.id))
    .sort()
    .join(', ');
}

// Every member of this cluster that answered must list the same members as the cluster's view.
const memberListAgreementCheck: CheckFunction = ({ input, agreed, members }) => {
  if (input.memberLists === undefined || agreed === null) return null;
  const view = agreed.answer;
  const findings: Finding[] = [];
  let agreeing = 0;
  for (const { endpoint, answer } of input.memberLists) {
    if (!answer.ok || answer.value.clusterId !== view.clusterId) continue;
    if (!view.members.some((member) => member.id === answer.value.memberId)) continue;
    if (listSignature(answer.value) === listSignature(view)) {
      agreeing += 1;
      continue;
    }
    findings.push(
      fail(
        `${answeredBy(endpoint, answer.value.memberId, members)} lists ${answer.value.members.length} members (${listedNames(answer.value.members)}), the cluster lists ${view.members.length} (${listedNames(view.members)})`,
      ),
    );
  }
  return concluded(findings, `${agreeing} member${agreeing === 1 ? '' : 's'} agree on the member list`);
};

// An endpoint that answers for another cluster, or as a member this cluster no longer has.
const clusterIdCheck: CheckFunction = ({ input, agreed }) => {
  if (input.memberLists === undefined || agreed === null) return null;
  const view = agreed.answer;
  const findings: Finding[] = [];
  const answers = new Map<string, { clusterId: string; memberId: string }>();
  for (const { endpoint, answer } of input.memberLists) if (answer.ok) answers.set(endpoint, answer.value);
  for (const probe of input.probes) {
    const status = probe.status.ok ? probe.status.value : null;
    if (status?.clusterId !== undefined && !answers.has(probe.endpoint)) {
      answers.set(probe.endpoint, { clusterId: status.clusterId, memberId: status.memberId });
    }
  }
  for (const [endpoint, answer] of answers) {
    if (answer.clusterId !== view.clusterId) {
      findings.push(
        fail(
          `endpoint ${endpoint} answers for another cluster (${hexId(answer.clusterId)}, this cluster is ${hexId(view.clusterId)})`,
        ),
      );
    } else if (!view.members.some((member) => member.id === answer.memberId)) {
      findings.push(fail(`endpoint ${endpoint} (member ${hexId(answer.memberId)}) is not a member of this cluster`));
    }
  }
  return concluded(findings, `every endpoint answers for cluster ${hexId(view.clusterId)}`);
};

/** The probe adapter's wording for a certificate that chains but names another host. */
const TLS_IDENTITY = /^(?:.*?: )?TLS identity: (.*)$/;

/** Why the member's certificate is not its own, when that is what kept it from answering. */
function tlsIdentityProblem(member: JudgedMember): string | undefined {
  const status = member.probe?.status;
  return status?.ok === false ? TLS_IDENTITY.exec(status.error)?.[1] : undefined;
}

// A voting member's reachability shows here; a learner's too, though its read is not expected. A
// learner joining within its grace may not answer yet (added, its etcd not started): a warning.
// A member that answered with a certificate naming someone else is reported by tls-identity.
const reachableCheck: CheckFunction = ({ voting, learners, members, joins }) => {
  const findings: Finding[] = [];
  for (const member of voting) {
    const probe = member.probe;
    if (!probe) findings.push(fail(memberProblem('member', member, 'unreachable', member.missingReason ?? 'not probed')));
    else if (!probe.status.ok && tlsIdentityProblem(member) === undefined) {
      findings.push(fail(memberProblem('member', member, 'unreachable', probe.status.error)));
    }
  }
  for (const member of learners) {
    if (!member.probe?.status.ok && tlsIdentityProblem(member) === undefined) {
      const problem = memberProblem('learner', member, 'unreachable', firstError(member) ?? 'no answer');
      findings.push(joins.get(member.id)?.overdue === false ? warn(problem) : fail(problem));
    }
  }
  const unverified = members.filter((member) => tlsIdentityProblem(member) !== undefined).length;
  return concluded(
    findings,
    unverified === 0
      ? `all ${members.length} members answered`
      : `${members.length - unverified} of ${members.length} members answered; see tls-identity`,
  );
};

// A certificate that chains to the CA but names another host: not a network fault, and not one
// a retry fixes. Says which name was expected and which the certificate has (tlsVerify: chain-only
// is the documented way out).
const tlsIdentityCheck: CheckFunction = ({ members }) => {
  const findings = members.flatMap((member) => {
    const problem = tlsIdentityProblem(member);
    return problem === undefined
      ? []
      : [fail(`${member.learner ? 'learner' : 'member'} ${label(member)} TLS identity: ${problem}`)];
  });
  return concluded(findings, 'every member that answered presented a certificate naming it');
};

const linearizableReadCheck: CheckFunction = ({ voting }) => {
  const reachableVoting = voting.filter((member) => member.probe?.status.ok === true);
  const findings = reachableVoting.flatMap((member) => {
    const read = member.probe?.linearizableRead;
    return read?.ok === false ? [fail(memberProblem('member', member, 'did not answer a linearizable read', read.error))] : [];
  });
  const readers = reachableVoting.length - findings.length;
  return concluded(findings, `${readers} of ${reachableVoting.length} reachable voting members answered a linearizable read`);
};

// Only when the watch probe ran: a member can answer Status and reads while its watches stall
// (flannel's stuck watches), which no unary call shows.
const watchCheck: CheckFunction = ({ members }) => {
  const watched = members.flatMap((member) => (member.probe?.watch === undefined ? [] : [{ member, watch: member.probe.watch }]));
  if (watched.length === 0) return null;
  const findings: Finding[] = [];
  const delays: number[] = [];
  for (const { member, watch } of watched) {
    if (watch.ok) {
      delays.push(watch.value);
      continue;
    }
    if (watch.writeFailed === true) {
      findings.push(warn(`watch on member ${label(member)} not tested: ${watch.error}`));
      continue;
    }
    findings.push(
      fail(
        watch.kind === 'timeout' && watch.budgetMs !== undefined
          ? `watch on member ${label(member)} delivered nothing within ${watch.budgetMs} ms`
          : memberProblem('member', member, 'watch delivered nothing', watch.error),
      ),
    );
  }
  return concluded(
    findings,
    `${delays.length} watch${delays.length === 1 ? '' : 'es'} delivered a write made through another member (slowest ${Math.round(Math.max(0, ...delays))} ms)`,
  );
};

const quorumCheck: CheckFunction = ({ voting, healthyVoting, quorum, quorumHeld }) => {
  if (voting.length === 0) return concluded([fail('no voting member known')]);
  if (!quorumHeld) {
    const state = quorumState(voting, healthyVoting.length, quorum);
    const text = `${state}: ${healthyVoting.length} of ${voting.length} voting members healthy, quorum needs ${quorum}`;
    return concluded([fail(text)]);
  }
  return concluded(
    [],
    `${healthyVoting.length} of ${voting.length} voting members healthy, quorum ${quorum}, fault tolerance ${healthyVoting.length - quorum}`,
  );
};

const leaderCheck: CheckFunction = ({ leader, members }) =>
  leader.id === null
    ? concluded([fail(leader.problem)])
    : concluded([], `leader ${nameOf(members, leader.id)} agreed by all ${leader.agreedBy} reachable members`);

// A voting member that answered Status and the read but not the alarm GET fails here too.
const alarmsCheck: CheckFunction = ({ voting, members, alarmsByMember, alarmAnswers }) => {
  const findings: Finding[] = [];
  for (const member of voting) {
    const probe = member.probe;
    if (probe?.status.ok && probe.linearizableRead.ok && !probe.alarms.ok) {
      findings.push(fail(memberProblem('member', member, 'could not list alarms', probe.alarms.error)));
    }
  }
  for (const [memberId, alarms] of alarmsByMember) {
    for (const alarm of alarms) findings.push(fail(`alarm ${alarm} raised on member ${nameOf(members, memberId)}`));
  }
  return concluded(findings, alarmAnswers > 0 ? 'no alarm raised' : 'alarm list unavailable (no member answered it)');
};

// A learner is a join in progress (kubeadm adds every joining member as one since Kubernetes
// 1.29): Degraded while within the grace, Unhealthy once it stays unpromoted past it. The check
// warns rather than passes so that every reader (the webhook too) sees a membership change under way.
const learnersCheck: CheckFunction = ({ learners, joins, thresholds }) =>
  concluded(
    learners.map((member) => {
      const join = joins.get(member.id);
      const who = member.name !== '' ? member.name : `id ${member.id} (not started)`;
      if (join === undefined || join.overdue) {
        const age = join === undefined ? '' : ` for ${formatAge(join.ageMs)}`;
        return fail(`learner ${who} not promoted${age} (grace ${formatAge(thresholds.learnerGraceMs)})`);
      }
      return warn(`membership change in progress: learner ${who} joining for ${formatAge(join.ageMs)}`);
    }),
    'no learner',
  );

// Against the quota the member reports (etcd 3.6+), else the configured one (quotaBackendBytes).
const dbSizeCheck: CheckFunction = ({ members, input, thresholds }) => {
  const result = concluded([], 'no DB size known');
  const quotas = new Set<string>();
  for (const member of members) {
    const status = statusOf(member);
    if (!status) continue;
    const reported = status.dbSizeQuotaBytes;
    const quotaBytes = reported ?? input.quotaBackendBytes;
    const quota = `${formatBytes(quotaBytes)}${reported === undefined ? '' : ' (reported by the member)'}`;
    quotas.add(quota);
    result.passMessage = `every DB below ${Math.round(thresholds.dbWarnRatio * 100)}% of quota ${[...quotas].join(', ')}`;
    const ratio = status.dbSizeBytes / quotaBytes;
    const text = `member ${label(member)} DB ${formatBytes(status.dbSizeBytes)} is ${Math.round(ratio * 100)}% of quota ${quota}`;
    if (ratio >= thresholds.dbFailRatio) result.findings.push(fail(text));
    else if (ratio >= thresholds.dbWarnRatio) result.findings.push(warn(text));
  }
  return result;
};

// Measured against the leader when known, else against the most advanced member.
const raftIndexCheck: CheckFunction = ({ members, leader, thresholds }) => {
  const indexes = members.flatMap((member) => {
    const status = statusOf(member);
    return status ? [{ member, status }] : [];
  });
  const leaderStatus = leader.id === null ? undefined : indexes.find((entry) => entry.member.id === leader.id)?.status;
  const referenceIndex = leaderStatus?.raftIndex ?? Math.max(0, ...indexes.map((entry) => entry.status.raftIndex));
  const findings = indexes
    .filter(({ status }) => referenceIndex - status.raftIndex > thresholds.raftLagWarnEntries)
    .map(({ member, status }) =>
      warn(
        `member ${label(member)} lags ${referenceIndex - status.raftIndex} raft entries behind (${status.raftIndex} vs ${referenceIndex})`,
      ),
    );
  return concluded(findings, `no member more than ${thresholds.raftLagWarnEntries} entries behind`);
};

const versionCheck: CheckFunction = ({ members }) => {
  const versions = new Map<string, string[]>();
  for (const member of members) {
    const status = statusOf(member);
    if (status) versions.set(status.version, [...(versions.get(status.version) ?? []), member.name || member.id]);
  }
  if (versions.size > 1) {
    const runs = [...versions.entries()].map(([version, names]) => `${names.join(', ')} run ${version}`);
    const findings = [warn(`version skew: ${runs.join('; ')}`)];
    const minors = [...versions.keys()].flatMap((version) => {
      const match = /^(\d+)\.(\d+)\./.exec(version);
      return match ? [{ version, rank: Number(match[1]) * 1000 + Number(match[2]) }] : [];
    });
    const oldest = minors.reduce<(typeof minors)[number] | undefined>((a, b) => (a && a.rank <= b.rank ? a : b), undefined);
    const newest = minors.reduce<(typeof minors)[number] | undefined>((a, b) => (a && a.rank >= b.rank ? a : b), undefined);
    // etcd upgrades one minor at a time; members further apart are a skipped step (or a member
    // of another cluster), which etcd's upgrade policy does not support.
    if (oldest && newest && newest.rank - oldest.rank > 1) {
      findings.push(
        warn(
          `version skew across more than one minor (${oldest.version} to ${newest.version}): etcd supports upgrading one minor at a time`,
        ),
      );
    }
    return concluded(findings);
  }
  return concluded([], versions.size === 1 ? `all members run ${[...versions.keys()].join('')}` : 'no version known');
};

const latencyCheck: CheckFunction = ({ members, thresholds }) => {
  const findings: Finding[] = [];
  for (const member of members) {
    const latency = member.probe?.latencyMs;
    if (latency !== null && latency !== undefined && latency > thresholds.slowMemberMs) {
      findings.push(
        warn(`member ${label(member)} slow: status took ${Math.round(latency)} ms (limit ${thresholds.slowMemberMs} ms)`),
      );
    }
  }
  return concluded(findings, `every member answered within ${thresholds.slowMemberMs} ms`);
};

const memberCountCheck: CheckFunction = ({ voting }) => {
  if (voting.length > 0 && voting.length % 2 === 0) {
    const tolerated = voting.length / 2 - 1;
    const text = `even number of voting members (${voting.length}): tolerates ${tolerated} failure${tolerated === 1 ? '' : 's'}, no more than ${voting.length - 1} members would`;
    return concluded([warn(text)]);
  }
  return concluded([], `${voting.length} voting member${voting.length === 1 ? '' : 's'}`);
};

// Only when an inventory is configured: every member must match a control-plane node. As KCP
// reads it (cluster-api controlplane/kubeadm/internal/workload_cluster_conditions.go,
// compareMachinesAndMembers): a Machine without a Node is provisioning and matches nothing yet,
// and while one exists a member without a Machine is not a failure (its Node may be linked soon);
// a member whose Machine is being deleted is expected to go.
const inventoryCheck: CheckFunction = ({ input, members, joins }) => {
  const inventory = input.controlPlaneNodes;
  if (inventory === undefined) return null;
  if (!Array.isArray(inventory)) {
    return concluded([fail(`control-plane node inventory unavailable: ${inventory.error}`)]);
  }
  const compared = comparedInventory(inventory);
  const provisioning = inventory.length - compared.length;
  const findings: Finding[] = [];
  for (const member of members) {
    const node = nodeOf(member, compared);
    if (node?.deleting === true) {
      findings.push(
        warn(`membership change in progress: member ${label(member)} runs on node ${node.name}, whose Machine is being deleted`),
      );
    } else if (node === undefined && provisioning > 0) {
      findings.push(
        warn(`member ${label(member)} matches no control-plane node yet (${plural(provisioning, 'Machine')} still provisioning)`),
      );
    } else if (node === undefined && member.learner && member.name === '' && joins.get(member.id)?.overdue === false) {
      // Added but not started: no name yet to match by; the learners check fails it after the grace.
      findings.push(warn(`learner ${label(member)} matches no control-plane node yet (not started)`));
    } else if (node === undefined) {
      findings.push(fail(`member ${label(member)} matches no control-plane node`));
    }
  }
  const skipped = provisioning > 0 ? ` (${plural(provisioning, 'provisioning Machine')} not compared)` : '';
  return concluded(findings, `every member matches one of ${compared.length} control-plane nodes${skipped}`);
};

/** The inventory entries members are compared with: provisioning Machines (no Node yet) are not. */
function comparedInventory(inventory: readonly ControlPlaneNode[]): ControlPlaneNode[] {
  return inventory.filter((node) => node.provisioning !== true);
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

/** The inventory entry a member runs on: by name, or by a peer/client URL host. */
function nodeOf(member: JudgedMember, inventory: readonly ControlPlaneNode[]): ControlPlaneNode | undefined {
  const hosts = [...member.peerUrls, ...member.clientUrls].map(hostOf).filter((host): host is string => host !== null);
  return inventory.find(
    (candidate) =>
      (member.name !== '' && candidate.name === member.name) || candidate.addresses.some((address) => hosts.includes(address)),
  );
}

function formatAge(ms: number): string {
  return ms >= 120_000 ? `${Math.round(ms / 60_000)}m` : `${Math.round(ms / 1000)}s`;
}

// A control-plane node without a member: still joining within the grace (counted from the Node's
// creation, as KCP counts its two minutes), a leftover after it; a node whose Machine is being
// deleted has had its member removed first (KCP removes the member, then the Machine).
const nodeMembersCheck: CheckFunction = ({ input, members, thresholds }) => {
  const inventory = input.controlPlaneNodes;
  if (inventory === undefined || !Array.isArray(inventory)) return null;
  const compared = comparedInventory(inventory);
  const matched = new Set(members.map((member) => nodeOf(member, compared)?.name));
  const now = Date.parse(input.evaluatedAt);
  const grace = formatAge(thresholds.nodeMemberGraceMs);
  const findings = compared
    .filter((node) => !matched.has(node.name))
    .map((node) => {
      if (node.deleting === true) {
        return warn(`membership change in progress: node ${node.name} runs no etcd member, its Machine is being deleted`);
      }
      const created = node.createdAt === undefined ? Number.NaN : Date.parse(node.createdAt);
      const ageMs = Number.isFinite(created) ? Math.max(0, now - created) : Number.POSITIVE_INFINITY;
      if (ageMs < thresholds.nodeMemberGraceMs) {
        return warn(`control-plane node ${node.name} runs no etcd member yet (created ${formatAge(ageMs)} ago, grace ${grace})`);
      }
      const age = Number.isFinite(ageMs) ? `created ${formatAge(ageMs)} ago` : 'creation time unknown';
      return fail(`control-plane node ${node.name} runs no etcd member (${age}, grace ${grace})`);
    });
  return concluded(findings, `every one of ${compared.length} control-plane nodes runs an etcd member`);
};

/** Every check, keyed by its name; the evaluation lists them in CHECK_NAMES order. */
const CHECKS: Record<CheckName, CheckFunction> = {
  'member-list': memberListCheck,
  'member-list-agreement': memberListAgreementCheck,
  'cluster-id': clusterIdCheck,
  reachable: reachableCheck,
  'tls-identity': tlsIdentityCheck,
  'linearizable-read': linearizableReadCheck,
  watch: watchCheck,
  leader: leaderCheck,
  quorum: quorumCheck,
  alarms: alarmsCheck,
  learners: learnersCheck,
  'db-size': dbSizeCheck,
  'raft-index': raftIndexCheck,
  version: versionCheck,
  latency: latencyCheck,
  'member-count': memberCountCheck,
  inventory: inventoryCheck,
  'node-members': nodeMembersCheck,
};

/** When a stored evaluation saw each learner first (member id → RFC 3339), to carry into the next. */
export function learnerSightings(previous: Pick<Evaluation, 'members'> | null): Record<string, string> {
  const sightings: Record<string, string> = {};
  for (const member of previous?.members ?? []) {
    if (member.learner && member.learnerSince !== undefined) sightings[member.id] = member.learnerSince;
  }
  return sightings;
}

function checkFrom(name: CheckName, result: CheckResult): Check {
  if (result.findings.length > 0) {
    const status: CheckStatus = result.findings.some((finding) => finding.status === 'fail') ? 'fail' : 'warn';
    return { name, status, message: result.findings.map((finding) => finding.message).join('; ') };
  }
  return { name, status: 'pass', message: result.passMessage };
}

function memberReport(member: JudgedMember, view: ClusterView): MemberReport {
  const status = statusOf(member);
  const error = firstError(member);
  const report: MemberReport = {
    id: member.id,
    name: member.name,
    endpoint: member.endpoint,
    healthy: isHealthy(member),
    leader: view.leader.id !== null && member.id === view.leader.id,
    learner: member.learner,
    version: status?.version ?? null,
    dbSizeBytes: status?.dbSizeBytes ?? null,
    dbSizeInUseBytes: status?.dbSizeInUseBytes ?? null,
    raftIndex: status?.raftIndex ?? null,
    raftTerm: status?.raftTerm ?? null,
    latencyMs: member.probe?.latencyMs ?? null,
    alarms: [...(view.alarmsByMember.get(member.id) ?? [])],
  };
  const join = view.joins.get(member.id);
  if (join !== undefined) report.learnerSince = join.since;
  if (error !== undefined) report.error = error;
  return report;
}

export function evaluateCluster(input: EvaluationInput): Evaluation {
  const view = clusterView(input);
  const results = CHECK_NAMES.flatMap((name) => {
    const result = CHECKS[name](view);
    return result === null ? [] : [{ name, result }];
  });
  const checks = results.map(({ name, result }) => checkFrom(name, result));
  const verdict = verdictFromChecks(checks);
  const findings = results.flatMap(({ result }) => result.findings);
  const reasons = [
    ...findings.filter((finding) => finding.status === 'fail'),
    ...findings.filter((finding) => finding.status === 'warn'),
  ].map((finding) => finding.message);
  return {
    schemaVersion: SCHEMA_VERSION,
    formatRevision: FORMAT_REVISION,
    target: input.target,
    evaluatedAt: input.evaluatedAt,
    durationMs: input.durationMs,
    verdict,
    passed: verdict !== 'Unhealthy',
    reasons,
    cluster: {
      leaderId: view.leader.id,
      votingMembers: view.voting.length,
      learners: view.learners.length,
      healthyVoting: view.healthyVoting.length,
      quorum: view.quorum,
      // Never negative: 0 once quorum is lost, which the quorum check reports as such.
      faultTolerance: Math.max(0, view.healthyVoting.length - view.quorum),
    },
    members: view.members.map((member) => memberReport(member, view)),
    checks,
  };
}

function nameOf(members: readonly JudgedMember[], id: string): string {
  const member = members.find((candidate) => candidate.id === id);
  return member && member.name !== '' ? member.name : `id ${id}`;
}
