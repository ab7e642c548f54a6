// The cluster as the checks see it: members joined with their probes, quorum, the agreed leader,
// merged alarms and learner joins, computed once per evaluation.
import { quorumOf } from '../evaluation-document.js';
import { DEFAULT_THRESHOLDS, type EvaluationInput, type EvaluationThresholds } from './input.js';
import { hostOf, nameOf } from './wording.js';
import { compareNames } from '../../shared/names.js';
import { type AgreedView, agreedView } from '../member-view.js';
import { type ProbeFailureKind, showsMemberDown } from '../probe-failure.js';
import type { ControlPlaneNode, DiscoveredMember, EndpointProbe, MemberStatus, Outcome } from '../../ports/etcd-probe.js';

/** A member as judged: the list entry joined with the probe of its client URL. */
export interface JudgedMember {
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

export function judgedMembers(input: EvaluationInput, memberList: Outcome<DiscoveredMember[]>): JudgedMember[] {
  const probeByEndpoint = new Map(input.probes.map((probe) => [probe.endpoint, probe]));
  if (memberList.ok) {
    return [...memberList.value]
      .sort((a, b) => compareNames(a.name || a.id, b.name || b.id, input.namesCollateByCodeUnit === true))
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

export function statusOf(member: JudgedMember): MemberStatus | null {
  return member.probe?.status.ok ? member.probe.status.value : null;
}

/**
 * "quorum lost" only when enough members are known to be down that no majority can be healthy;
 * when the failures are ours to explain (credentials refused, an election in progress, errors we
 * cannot read), the cluster may well have quorum: "quorum unknown" (still a failure).
 */
export function quorumState(voting: readonly JudgedMember[], healthy: number, quorum: number): 'quorum lost' | 'quorum unknown' {
  const maybeHealthy = voting.filter((member) => !isHealthy(member) && !showsMemberDown(firstFailureKind(member))).length;
  return healthy + maybeHealthy >= quorum ? 'quorum unknown' : 'quorum lost';
}

/** Reachable = Status answered. Healthy voting = also a linearizable read and the alarm list. */
export function isHealthy(member: JudgedMember): boolean {
  const probe = member.probe;
  if (!probe || !probe.status.ok) return false;
  if (member.learner) return true;
  return probe.linearizableRead.ok && probe.alarms.ok;
}

/** The kind of the failure firstError words: what the quorum check judges by. */
export function firstFailureKind(member: JudgedMember): ProbeFailureKind {
  const probe = member.probe;
  if (member.missingReason !== undefined || !probe) return 'not-probed';
  if (!probe.status.ok) return probe.status.kind;
  if (member.learner) return 'other';
  if (!probe.linearizableRead.ok) return probe.linearizableRead.kind;
  if (!probe.alarms.ok) return probe.alarms.kind;
  return 'other';
}

export function firstError(member: JudgedMember): string | undefined {
  if (member.missingReason !== undefined) return member.missingReason;
  const probe = member.probe;
  if (!probe) return undefined;
  if (!probe.status.ok) return probe.status.error;
  if (member.learner) return undefined;
  if (!probe.linearizableRead.ok) return probe.linearizableRead.error;
  if (!probe.alarms.ok) return probe.alarms.error;
  return undefined;
}

/** The leader every reachable member agrees on, or why there is none. */
export type LeaderView = { id: string; agreedBy: number } | { id: null; problem: string };

/** Everything the checks read, derived once from the input; the checks never change it. */
export interface ClusterView {
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
export interface LearnerJoin {
  since: string;
  ageMs: number;
  overdue: boolean;
  /**
   * Whether a date says when it began (its Node's or Machine's creation, an earlier sighting);
   * false when this evaluation is the first to see it, so its age (0) says nothing.
   */
  dated: boolean;
}

// leader: every reachable member must name the same leader, and since Status answers without
// quorum (and keeps naming the old leader for a while after losing it) quorum must be proven too.
// The leader named must answer as well: right after it hangs, its followers go on naming it until
// they elect another, and their reads may already be served by the new one.
export function agreedLeader(members: JudgedMember[], voting: JudgedMember[], healthy: number, quorumHeld: boolean): LeaderView {
  const view = namedLeader(members, voting, healthy, quorumHeld);
  if (view.id === null) return view;
  const leader = members.find((member) => member.id === view.id);
  const probe = leader?.probe;
  if (leader === undefined || probe === undefined || (probe.status.ok && probe.linearizableRead.ok)) return view;
  const namedBy = view.agreedBy === 1 ? 'the 1 reachable member' : `all ${view.agreedBy} reachable members`;
  return {
    id: null,
    problem:
      `no leader: ${nameOf(members, view.id)}, named leader by ${namedBy}, does not answer ` +
      `(${firstError(leader) ?? 'no answer'}); an election may be under way`,
  };
}

/** The leader the reachable members name (agreedLeader then asks whether it answers). */
function namedLeader(members: JudgedMember[], voting: JudgedMember[], healthy: number, quorumHeld: boolean): LeaderView {
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
export function newestTermLeader(reachable: JudgedMember[]): string | null {
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

export function mergedAlarms(members: JudgedMember[]): { alarmsByMember: Map<string, Set<string>>; alarmAnswers: number } {
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

export function clusterView(input: EvaluationInput): ClusterView {
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
 * from when an earlier evaluation first saw it, else from now (first seen by this one: undated). Of a Node
 * date and a sighting the earlier counts: the learner existed when it was seen, and a Node date
 * comes from the workload API server, which must not make a learner younger than we saw it.
 */
export function learnerJoins(
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
      dated: stamps.length > 0,
    });
  }
  return joins;
}

/** The inventory entries members are compared with: provisioning Machines (no Node yet) are not. */
export function comparedInventory(inventory: readonly ControlPlaneNode[]): ControlPlaneNode[] {
  return inventory.filter((node) => node.provisioning !== true);
}

/** The inventory entry a member runs on: by name, or by a peer/client URL host. */
export function nodeOf(member: JudgedMember, inventory: readonly ControlPlaneNode[]): ControlPlaneNode | undefined {
  const hosts = [...member.peerUrls, ...member.clientUrls].map(hostOf).filter((host): host is string => host !== null);
  return inventory.find(
    (candidate) =>
      (member.name !== '' && candidate.name === member.name) || candidate.addresses.some((address) => hosts.includes(address)),
  );
}
