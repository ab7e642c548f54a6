// Evaluates one etcd target: opens its access (static: reads its TLS files), discovers the
// members, probes every member under ONE deadline (target.timeout, counted from the moment the
// evaluation starts reaching etcd, never from process start) and lets the pure core judge.
import { consistencyHashes, type EvaluationPurpose, type InventoryConfig, type TargetConfig } from '../domain/config.js';
import { EtcdProbeSession, type EtcdChannelPool } from '../adapters/etcd-member-probe.js';
import { openStaticEtcdAccess, type TlsFileReuse } from './etcd-access.js';
import { EtcdAccessError, type EtcdAccess, type EtcdAccessFactory } from '../ports/etcd-access.js';
import { consistencyOf, evaluateCluster, leaderTermOf, learnerSightings } from '../domain/judgement/evaluate-cluster.js';
import {
  type ControlPlaneInventory,
  type ControlPlaneNode,
  type DiscoveredMember,
  type EndpointProbe,
  type MemberStatus,
  type Outcome,
  type WatchOutcome,
} from '../ports/etcd-probe.js';
import { Deadline, withDeadline } from '../domain/deadline.js';
import type { EndpointMemberList, MemberListAnswer } from '../domain/member-view.js';
import type { ProbeFailureKind } from '../domain/probe-failure.js';
import type { Evaluation } from '../domain/evaluation-document.js';
import type { DruidBackupFacts } from '../domain/judgement/input.js';
import { plainNamesCollateByCodeUnit } from '../shared/names.js';

export { readTargetCredentials } from './etcd-access.js';

/** What an evaluation needs of a target once an access says how to reach its etcd. */
export type EvaluatedTarget = Pick<
  TargetConfig,
  | 'name'
  | 'timeout'
  | 'quotaBackendBytes'
  | 'inventory'
  | 'watchProbe'
  | 'tlsVerify'
  | 'learnerGrace'
  | 'fragmentation'
  | 'consistency'
>;

/** Where the watch probe writes: one key per member, deleted after each round trip. */
export function watchProbeKey(target: string, memberId: string): string {
  return `/etcd-guard/watch-probe/${target}/${memberId}`;
}

export interface EvaluateTargetOptions {
  now?: () => Date;
  /** Lists the control-plane Nodes when target.inventory is set; the Kubernetes adapter by default. */
  listControlPlaneNodes?: (inventory: InventoryConfig, timeoutMs: number) => Promise<ControlPlaneNode[]>;
  /** Another inventory than target.inventory's Nodes (a Cluster's control-plane Machines); wins when given. */
  controlPlaneInventory?: (timeoutMs: number) => Promise<ControlPlaneNode[]>;
  /**
   * The target's stored evaluation, read alongside the probes: when it saw each learner first, so
   * a learner no inventory dates keeps its age across runs. A failure or a miss counts as none.
   */
  previous?: () => Promise<Evaluation | null>;
  /**
   * Member channels kept open between evaluations (the webhook's; warm-connections.ts). Without
   * it every evaluation dials its members and closes the channels when it ends (the CLI, the
   * scheduled run).
   */
  channels?: EtcdChannelPool;
  /** A static target's TLS files, read again only after a while (the webhook's, beside `channels`); absent: read every time. */
  tlsFiles?: TlsFileReuse;
  /** Pin the target's etcd cluster ID in the stored evaluation and refuse another (discovered targets). */
  pinClusterId?: boolean;
  /** A druid target's backup facts (the backup check), read alongside the probes; a failure is an unknown backup. */
  backupFacts?: (deadline: Deadline) => Promise<DruidBackupFacts>;
  /** What the evaluation is for, which says whether it hashes (consistencyHashes); 'scheduled' when absent. */
  purpose?: EvaluationPurpose;
}

/** What the caller of an evaluation knows beside the target: its stored evaluation, and what it is for. */
export type EvaluationContext = Pick<EvaluateTargetOptions, 'previous' | 'purpose'>;

async function listInventory(
  deadline: Deadline,
  list: (timeoutMs: number) => Promise<ControlPlaneNode[]>,
): Promise<ControlPlaneInventory> {
  const budgetMs = Math.max(1, Math.round(deadline.remainingMs()));
  return withDeadline(
    list(budgetMs),
    deadline,
    () => new Error(`listing control-plane nodes timed out after ${budgetMs} ms`),
  ).catch((error: unknown): ControlPlaneInventory => ({ error: error instanceof Error ? error.message : String(error) }));
}

/** The stored evaluation, null when there is none (or no reader), 'unreadable' when it cannot be read before `deadline`. */
function readPrevious(
  read: (() => Promise<Evaluation | null>) | undefined,
  deadline: Deadline,
): Promise<Evaluation | null | 'unreadable'> {
  if (read === undefined) return Promise.resolve(null);
  return withDeadline(Promise.resolve().then(read), deadline, () => new Error('reading the stored evaluation timed out')).catch(
    () => 'unreadable' as const,
  );
}

/**
 * How long after the deadline the guard around opening the access fires: the steps inside that
 * are bounded by the same deadline (management API reads, port-forward listeners) fail first, in
 * their own words, and a NotEvaluatedError among them is not turned into a verdict by the guard.
 */
const OPEN_GUARD_GRACE_MS = 5;

/**
 * Opens the access before `deadline`; an access that opens too late is closed when it does. An
 * EtcdAccessError is the cluster's (an error to judge); a NotEvaluatedError is rethrown.
 */
async function openBefore(openAccess: EtcdAccessFactory, deadline: Deadline): Promise<EtcdAccess | { error: string }> {
  const budgetMs = Math.max(1, Math.round(deadline.remainingMs()));
  let timedOut = false;
  const opening = openAccess(deadline).then((access) => {
    if (timedOut) void access.close();
    return access;
  });
  try {
    return await withDeadline(opening, deadline.extendedBy(OPEN_GUARD_GRACE_MS), () => {
      timedOut = true;
      return new EtcdAccessError(`opening access to etcd timed out after ${budgetMs} ms`);
    });
  } catch (error) {
    if (error instanceof EtcdAccessError) return { error: error.message };
    throw error;
  }
}

/** Replaces every mention of a dialled endpoint with the access's description of it. */
function relabel(text: string, access: EtcdAccess, endpoints: Iterable<string>): string {
  let result = text;
  for (const endpoint of endpoints) {
    const described = access.describe(endpoint);
    if (described !== endpoint) result = result.split(endpoint).join(described);
  }
  return result;
}

function relabelOutcome<T>(outcome: Outcome<T>, access: EtcdAccess, endpoints: Iterable<string>): Outcome<T> {
  if (outcome.ok) return outcome;
  for (const endpoint of endpoints) {
    const unreachable = access.unreachable?.(endpoint);
    if (unreachable !== undefined) return { ok: false, kind: 'access', error: `${access.describe(endpoint)}: ${unreachable}` };
  }
  const details = [...endpoints].map((endpoint) => access.failureDetail?.(endpoint)).filter((detail) => detail !== undefined);
  const error = relabel(outcome.error, access, endpoints);
  return { ...outcome, error: details.length > 0 ? `${error} (${details.join('; ')})` : error };
}

/** A probe as the core sees it: described endpoint, errors relabelled, tagged with the member it was dialled for. */
function presentProbe(probe: EndpointProbe, access: EtcdAccess, memberIdByEndpoint: Map<string, string>): EndpointProbe {
  const dialled = [probe.endpoint];
  const presented: EndpointProbe = {
    ...probe,
    endpoint: access.describe(probe.endpoint),
    status: relabelOutcome(probe.status, access, dialled),
    alarms: relabelOutcome(probe.alarms, access, dialled),
    linearizableRead: relabelOutcome(probe.linearizableRead, access, dialled),
  };
  if (probe.hashKV !== undefined) presented.hashKV = relabelOutcome(probe.hashKV, access, dialled);
  if (probe.watch !== undefined) {
    const watch = relabelOutcome(probe.watch, access, dialled);
    presented.watch = !watch.ok && !probe.watch.ok && probe.watch.writeFailed === true ? { ...watch, writeFailed: true } : watch;
  }
  const memberId = memberIdByEndpoint.get(probe.endpoint);
  if (memberId !== undefined) presented.forMemberId = memberId;
  return presented;
}

/** A second look must leave time to answer; below this the first answers stand. */
const RE_PROBE_MIN_MS = 100;

/**
 * Leadership in motion: the members that answered Status name different leaders, or all name
 * none (between a transfer's step-down and the new leader's first heartbeat).
 */
function leadershipUnsettled(probes: readonly EndpointProbe[]): boolean {
  const named = new Set(probes.flatMap((probe) => (probe.status.ok ? [probe.status.value.leaderId] : [])));
  return named.size > 1 || named.has('0');
}

interface Reached {
  memberList: Outcome<DiscoveredMember[]>;
  memberLists: EndpointMemberList[];
  /** Probed endpoints whose list was not asked (MemberLists), as described. */
  listsVouchedByRead?: string[];
  linearizableMemberList?: MemberListAnswer & { endpoint: string };
  probes: EndpointProbe[];
  /** The consistency check's common revision (null: no voting member reported one); absent when it is off. */
  consistencyRevision?: number | null;
}

/**
 * HashKV of every voting member whose Status answered, all at one revision: the lowest current
 * revision among them, which each has applied (a higher one a lagging member could not hash yet).
 * Only after the probes: the revision needs every Status. Null when no voting member reported one.
 */
async function hashEveryVotingMember(
  session: EtcdProbeSession,
  probes: readonly EndpointProbe[],
  deadline: Deadline,
): Promise<number | null> {
  const voting = probes.flatMap((probe) =>
    probe.status.ok && !probe.status.value.isLearner && probe.status.value.revision !== undefined
      ? [{ probe, revision: probe.status.value.revision }]
      : [],
  );
  if (voting.length === 0) return null;
  const revision = Math.min(...voting.map((entry) => entry.revision));
  const hashes = await Promise.all(voting.map(({ probe }) => session.hashKV(probe.endpoint, revision, deadline)));
  voting.forEach(({ probe }, index) => {
    const hash = hashes[index];
    if (hash !== undefined) probe.hashKV = hash;
  });
  return revision;
}

/** The first of `endpoints` whose probe's Status answers, or null when none does. */
function firstAnswering(endpoints: readonly string[], probes: Map<string, Promise<EndpointProbe>>): Promise<string | null> {
  return new Promise((resolve) => {
    let pending = endpoints.length;
    if (pending === 0) resolve(null);
    for (const endpoint of endpoints) {
      void probes.get(endpoint)?.then((probe) => {
        pending -= 1;
        if (probe.status.ok) resolve(endpoint);
        else if (pending === 0) resolve(null);
      });
    }
  });
}

/**
 * The watch round trip of every member, alongside its probe: a watch on the member, a write
 * through the first other member whose Status answers. Keyed by the probed endpoint.
 */
function watchRoundTrips(
  session: EtcdProbeSession,
  target: string,
  memberIdByEndpoint: Map<string, string>,
  probes: Map<string, Promise<EndpointProbe>>,
  deadline: Deadline,
): Map<string, Promise<WatchOutcome>> {
  const watched = [...memberIdByEndpoint].filter(([endpoint]) => probes.has(endpoint));
  return new Map(
    watched.map(([endpoint, memberId]) => {
      const others = watched.map(([other]) => other).filter((other) => other !== endpoint);
      const key = watchProbeKey(target, memberId);
      return [endpoint, session.watchRoundTrip(endpoint, firstAnswering(others, probes), key, deadline)];
    }),
  );
}

/** etcd 3.5 or later: answers a linearizable MemberList with the committed list (3.4 ignores the field). */
function servesCommittedList(status: Outcome<MemberStatus> | undefined): boolean {
  if (!status?.ok) return false;
  const [major, minor] = status.value.version.split('.').map(Number);
  return major !== undefined && minor !== undefined && (major > 3 || (major === 3 && minor >= 5));
}

/**
 * The first committed member list, in seed order, from a member whose own Status says it runs etcd
 * 3.5 or later (3.4 ignores `linearizable` and would pass off its local list) and is the member
 * that answered.
 */
async function linearizableList(
  seeds: readonly string[],
  committed: ReadonlyMap<string, Promise<Outcome<MemberListAnswer>>>,
  probes: readonly EndpointProbe[],
): Promise<(MemberListAnswer & { endpoint: string }) | undefined> {
  for (const endpoint of seeds) {
    const answer = await committed.get(endpoint);
    const status = probes.find((probe) => probe.endpoint === endpoint)?.status;
    if (answer === undefined || !answer.ok || !status?.ok || status.value.memberId !== answer.value.memberId) continue;
    if (servesCommittedList(status)) return { ...answer.value, endpoint };
  }
  return undefined;
}

/** The share of the budget after which a member whose read has not answered is treated as a sign (MemberLists). */
const LISTS_BY_SHARE = 0.5;

/**
 * Which endpoints are asked for their own member list. While everything looks healthy, only the
 * first member whose Status answers: its list finds the members and is the view. Every other
 * member's list would say the same: its Status names the same cluster, raft term and leader, and
 * its linearizable read answers only once it has applied everything committed before the read,
 * membership changes included (listsVouchedByRead). At the first sign of anything else (a call
 * that failed, a Status that disagrees, no leader, a member the list does not name, a read still
 * unanswered at LISTS_BY_SHARE of the budget) every probed endpoint is asked, as the core needs to
 * compare split views, and so is every one probed later. On etcd 3.5+ the committed list is asked
 * the same way: of the first member, then of every seed.
 */
class MemberLists {
  readonly lists = new Map<string, Promise<Outcome<MemberListAnswer>>>();
  readonly committed = new Map<string, Promise<Outcome<MemberListAnswer>>>();
  private readonly statuses = new Map<string, MemberStatus>();
  private first: { endpoint: string; status: MemberStatus } | undefined;
  private firstList: MemberListAnswer | undefined;
  private everyList = false;
  private readonly pendingReads = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private resolveFirst: (outcome: Outcome<DiscoveredMember[]>) => void = () => undefined;
  /** The first member list that answers; all errors joined when every endpoint asked failed. */
  readonly memberList: Promise<Outcome<DiscoveredMember[]>>;
  private readonly errors: string[] = [];
  private errorKind: ProbeFailureKind | undefined;
  private settled = 0;

  constructor(
    private readonly session: EtcdProbeSession,
    private readonly access: EtcdAccess,
    private readonly seeds: readonly string[],
    private readonly probed: () => Iterable<string>,
    private readonly deadline: Deadline,
  ) {
    this.memberList = new Promise((resolve) => {
      this.resolveFirst = resolve;
    });
    if (seeds.length === 0) this.resolveFirst({ ok: false, kind: 'not-probed', error: 'no endpoint to ask' });
    this.timer = setTimeout(() => {
      if (this.pendingReads.size > 0) this.askEvery();
    }, deadline.remainingMs() * LISTS_BY_SHARE);
  }

  /** Endpoints probed whose list was never asked: each vouched for by its Status and read. */
  vouched(): string[] {
    return this.everyList ? [] : [...this.probed()].filter((endpoint) => !this.lists.has(endpoint));
  }

  /** `endpoint`'s probe started; `read` settles with whether its linearizable read answered. */
  probing(endpoint: string, read: Promise<boolean>): void {
    if (this.everyList) this.ask(endpoint);
    this.pendingReads.add(endpoint);
    void read.then((answered) => {
      this.pendingReads.delete(endpoint);
      if (!answered) this.askEvery();
    });
  }

  /** `endpoint`'s Status outcome, as soon as it is known. */
  status(endpoint: string, outcome: Outcome<MemberStatus>): void {
    if (!outcome.ok) {
      this.askEvery();
      return;
    }
    const status = outcome.value;
    this.statuses.set(endpoint, status);
    if (this.first === undefined) {
      this.first = { endpoint, status };
      this.ask(endpoint);
      if (servesCommittedList(outcome)) this.askCommitted(endpoint);
    } else if (this.everyList && servesCommittedList(outcome) && this.seeds.includes(endpoint)) {
      this.askCommitted(endpoint);
    }
    const reference = this.first.status;
    if (
      status.leaderId === '0' ||
      status.clusterId !== reference.clusterId ||
      status.raftTerm !== reference.raftTerm ||
      status.leaderId !== reference.leaderId ||
      !this.listed(status)
    ) {
      this.askEvery();
    }
  }

  /** Whether the first list (once it answered) names the member that gave `status`. */
  private listed(status: MemberStatus): boolean {
    return this.firstList === undefined || this.firstList.members.some((member) => member.id === status.memberId);
  }

  private ask(endpoint: string): void {
    if (this.lists.has(endpoint)) return;
    const list = this.session
      .listMembers(endpoint, this.deadline)
      .then((outcome) => relabelOutcome(outcome, this.access, [endpoint]));
    this.lists.set(endpoint, list);
    void list.then((outcome) => {
      this.settled += 1;
      if (outcome.ok) {
        if (this.first?.endpoint === endpoint && this.everyList === false) {
          this.firstList = outcome.value;
          if ([...this.statuses.values()].some((status) => !this.listed(status))) this.askEvery();
        }
        this.resolveFirst({ ok: true, value: outcome.value.members });
        return;
      }
      this.errors.push(outcome.error);
      this.errorKind ??= outcome.kind;
      this.askEvery();
      if (this.settled === this.lists.size) {
        this.resolveFirst({ ok: false, kind: this.errorKind ?? 'other', error: this.errors.join('; ') });
      }
    });
  }

  private askCommitted(endpoint: string): void {
    if (this.committed.has(endpoint)) return;
    const list = this.session.listMembers(endpoint, this.deadline, true);
    this.committed.set(endpoint, list);
    void list.then((outcome) => {
      if (!outcome.ok) this.askEvery();
    });
  }

  private askEvery(): void {
    if (this.everyList) return;
    this.everyList = true;
    for (const endpoint of this.seeds) this.ask(endpoint);
    for (const endpoint of this.probed()) this.ask(endpoint);
    for (const [endpoint, status] of this.statuses) {
      if (this.seeds.includes(endpoint) && servesCommittedList({ ok: true, value: status })) this.askCommitted(endpoint);
    }
  }

  close(): void {
    clearTimeout(this.timer);
  }
}

interface ProbeOptions {
  watchTarget?: string;
  tlsVerify?: 'full' | 'chain-only';
  pool?: { channels: EtcdChannelPool; target: string };
  /** HashKV every voting member after the probes (the consistency check). */
  consistency?: boolean;
}

/** Probes the seeds while the member list is fetched (saving a round trip), then every listed member not yet probed. */
async function probeThroughAccess(access: EtcdAccess, deadline: Deadline, options: ProbeOptions = {}): Promise<Reached> {
  const { watchTarget } = options;
  const session = new EtcdProbeSession(access.credentials, {
    serverNameFor: (endpoint) => access.serverNameFor?.(endpoint),
    ...(options.tlsVerify === undefined ? {} : { tlsVerify: options.tlsVerify }),
    ...(options.pool === undefined ? {} : { pool: options.pool }),
  });
  const probes = new Map<string, Promise<EndpointProbe>>();
  const lists = new MemberLists(session, access, access.seedEndpoints, () => probes.keys(), deadline);
  try {
    const reach = (endpoint: string) => {
      const probe = session.probe(endpoint, deadline, (status) => lists.status(endpoint, status));
      probes.set(endpoint, probe);
      lists.probing(
        endpoint,
        probe.then((answer) => answer.linearizableRead.ok),
      );
    };
    for (const endpoint of access.seedEndpoints) reach(endpoint);
    const memberList = await lists.memberList;
    const memberIdByEndpoint = new Map<string, string>();
    if (memberList.ok) {
      for (const member of memberList.value) {
        const endpoint = access.endpointFor(member);
        if (endpoint === undefined) continue;
        const probed = probes.has(endpoint) ? endpoint : member.clientUrls.find((url) => probes.has(url));
        if (probed === undefined) reach(endpoint);
        memberIdByEndpoint.set(probed ?? endpoint, member.id);
      }
    }
    const watches =
      watchTarget === undefined ? new Map() : watchRoundTrips(session, watchTarget, memberIdByEndpoint, probes, deadline);
    let results = await Promise.all(probes.values());
    // While leadership moves, members asked a few milliseconds apart name different leaders (or
    // none). Ask once more inside the same deadline; a disagreement that persists is reported.
    if (leadershipUnsettled(results) && deadline.remainingMs() > RE_PROBE_MIN_MS) {
      const again = await Promise.all([...probes.keys()].map((endpoint) => session.probe(endpoint, deadline)));
      if (
        !leadershipUnsettled(again) ||
        again.filter((probe) => probe.status.ok).length >= results.filter((probe) => probe.status.ok).length
      ) {
        results = again;
      }
    }
    for (const probe of results) {
      const watch = watches.get(probe.endpoint);
      if (watch !== undefined) probe.watch = await watch;
    }
    const answers = await Promise.all(
      [...lists.lists.entries()].map(async ([endpoint, list]) => ({ endpoint: access.describe(endpoint), answer: await list })),
    );
    const linearizable = await linearizableList(access.seedEndpoints, lists.committed, results);
    const vouched = lists.vouched().map((endpoint) => access.describe(endpoint));
    const consistencyRevision =
      options.consistency === true ? await hashEveryVotingMember(session, results, deadline) : undefined;
    return {
      ...(consistencyRevision === undefined ? {} : { consistencyRevision }),
      memberList,
      memberLists: answers,
      ...(vouched.length === 0 ? {} : { listsVouchedByRead: vouched }),
      ...(linearizable === undefined
        ? {}
        : { linearizableMemberList: { ...linearizable, endpoint: access.describe(linearizable.endpoint) } }),
      probes: results.map((probe) => presentProbe(probe, access, memberIdByEndpoint)),
    };
  } finally {
    lists.close();
    session.close();
  }
}

/** Evaluates a static target: its configured endpoints and TLS files (a ConfigError when one is unreadable). */
export function evaluateTarget(target: TargetConfig, options: EvaluateTargetOptions = {}): Promise<Evaluation> {
  return evaluateThroughAccess(target, () => openStaticEtcdAccess(target, options.tlsFiles), options);
}

/**
 * Evaluates a target reached through `openAccess`. Opening the access counts against the
 * target's timeout; an access that cannot be opened (EtcdAccessError, or the deadline) is an
 * Unhealthy evaluation saying why, and the access is always closed. A NotEvaluatedError (our
 * own way in failed) is thrown: there is no evaluation.
 */
export async function evaluateThroughAccess(
  target: EvaluatedTarget,
  openAccess: EtcdAccessFactory,
  options: EvaluateTargetOptions = {},
): Promise<Evaluation> {
  const now = options.now ?? (() => new Date());
  const evaluatedAt = now();
  const started = performance.now();
  // One deadline for everything, opening the access (reading TLS files, minting) included. It
  // starts here, not at process start: start-up never eats the budget for talking to etcd.
  const deadline = Deadline.after(target.timeout);
  let inventoryRun: Promise<ControlPlaneInventory> | undefined;
  const inventory = target.inventory;
  if (options.controlPlaneInventory !== undefined) {
    inventoryRun = listInventory(deadline, options.controlPlaneInventory);
  } else if (inventory !== undefined) {
    const lister = options.listControlPlaneNodes ?? (await import('../adapters/kube-nodes.js')).listControlPlaneNodes;
    inventoryRun = listInventory(deadline, (timeoutMs) => lister(inventory, timeoutMs));
  }
  const previous = readPrevious(options.previous, deadline);
  const backup = options.backupFacts?.(deadline);
  backup?.catch(() => undefined);
  const hashes = consistencyHashes(target.consistency, options.purpose);
  const access = await openBefore(openAccess, deadline);
  let reached: Reached;
  if ('error' in access) {
    reached = { memberList: { ok: false, kind: 'access', error: access.error }, memberLists: [], probes: [] };
  } else {
    try {
      reached = await probeThroughAccess(access, deadline, {
        ...(target.watchProbe === true ? { watchTarget: target.name } : {}),
        ...(target.tlsVerify === undefined ? {} : { tlsVerify: target.tlsVerify }),
        ...(options.channels === undefined ? {} : { pool: { channels: options.channels, target: target.name } }),
        ...(hashes ? { consistency: true } : {}),
      });
    } finally {
      await access.close();
    }
  }
  const read = await previous;
  const stored = read === 'unreadable' ? null : read;
  const leaderTerm = leaderTermOf(stored ?? null);
  const input: Parameters<typeof evaluateCluster>[0] = {
    target: target.name,
    endpoints: 'error' in access ? [] : access.seedEndpoints.map((endpoint) => access.describe(endpoint)),
    memberList: reached.memberList,
    memberLists: reached.memberLists,
    ...(reached.listsVouchedByRead === undefined ? {} : { listsVouchedByRead: reached.listsVouchedByRead }),
    ...(reached.linearizableMemberList === undefined ? {} : { linearizableMemberList: reached.linearizableMemberList }),
    probes: reached.probes,
    quotaBackendBytes: target.quotaBackendBytes,
    evaluatedAt: evaluatedAt.toISOString(),
    durationMs: 0,
    learnersFirstSeen: learnerSightings(stored),
    ...(leaderTerm === null ? {} : { previousLeaderTerm: leaderTerm }),
    ...(stored?.lastMembership === undefined ? {} : { lastMembership: stored.lastMembership }),
    ...(options.pinClusterId === true
      ? { clusterIdPin: { pinned: read === 'unreadable' ? ('unreadable' as const) : (stored?.clusterIdPin ?? null) } }
      : {}),
    namesCollateByCodeUnit: plainNamesCollateByCodeUnit(process.env),
  };
  // On but never reached (no access): judged as not judged, not left out. Configured but not for
  // this evaluation: the stored result, so an inline run does not erase what the scheduled one found.
  if (hashes) input.consistency = { revision: reached.consistencyRevision ?? null };
  else if (target.consistency !== undefined) {
    input.consistency = { carried: consistencyOf(stored ?? null), maxAgeMs: target.consistency.maxAge };
  }
  input.thresholds = {
    ...(target.learnerGrace !== undefined && { learnerGraceMs: target.learnerGrace }),
    ...(target.fragmentation !== undefined && {
      fragmentationWarnRatio: target.fragmentation.warnRatio,
      fragmentationMinFreeBytes: target.fragmentation.minFreeBytes,
    }),
  };
  if (backup !== undefined) input.backup = await backup;
  const controlPlaneNodes = await inventoryRun;
  if (controlPlaneNodes !== undefined) input.controlPlaneNodes = controlPlaneNodes;
  input.durationMs = Math.round(performance.now() - started);
  return evaluateCluster(input);
}
