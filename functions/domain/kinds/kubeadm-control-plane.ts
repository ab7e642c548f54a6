// Cluster API's KubeadmControlPlane (KCP) with stacked etcd. Facts, from cluster-api's sources:
// - It scales on spec.replicas and replaces outdated Machines one by one (spec.version,
//   machineTemplate, kubeadmConfigSpec, rollout fields); its rollout strategy decides surge or
//   remove-first (controlplane/kubeadm/internal/controllers/upgrade.go).
// - Scale-down removes one Machine per step, chosen by selectMachineForInPlaceUpdateOrScaleDown
//   (v1.14 controlplane/kubeadm/reconcilers/kubeadmcontrolplane/scale.go; selectMachineForScaleDown
//   before): annotated `cluster.x-k8s.io/delete-machine` first, then outdated, then by failure
//   domain and age. kubeadm names a stacked etcd member after its Node, and a Machine reaches its
//   Node through `status.nodeRef.name`: that is how Machines map to members.
// - Its etcd is reached as KCP reaches it: the Cluster's Secrets on the management cluster and a
//   port-forward to each member's static pod (the 'capi' reach, usecases/reach-target.ts).
// - Discovery resolves a KCP only through the Cluster that owns it by uid and names it back.
// Where KCP's rule leaves the choice open (a tie between failure domains, which Go breaks by map
// order) or the webhook cannot see what KCP will (outdatedness, component health when KCP picks,
// the Cluster's failure domains), every possible pick is projected. Pure.
import { printableExcerpt as clipped } from '../../shared/redact.js';
import type { MemberReport } from '../evaluation-document.js';
import { DELETE_MACHINE_ANNOTATION, type ControlPlaneMachine } from '../machines.js';
import { discoveredTargetName, type GuardedObject } from '../targets.js';
import { jsonEqual, valueAtPointer } from '../../shared/json-pointer.js';
import { management, provide, quantityBytes, targetDefaults, type DiscoveryDefaults } from './discovery-common.js';
import { at, record, text } from '../../shared/records.js';
import type {
  ControllerKind,
  KindMachines,
  MembershipChange,
  ProjectionOptions,
  ProviderResult,
  RemovalFacts,
  RemovedMember,
  RequestObjects,
  TargetMove,
} from './kind.js';
import { removedBy } from './ordinal-removal.js';

export const KUBEADM_CONTROL_PLANE = {
  group: 'controlplane.cluster.x-k8s.io',
  kind: 'KubeadmControlPlane',
  resource: 'kubeadmcontrolplanes',
} as const;

/** Cluster API's label naming the Cluster an object belongs to. */
export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
const CLUSTER_GROUP = 'cluster.x-k8s.io';
/** Newest first: a management cluster before Cluster API v1.11 serves only v1beta1 (404 on v1beta2). */
export const CAPI_VERSIONS = ['v1beta2', 'v1beta1'] as const;
/** etcd's own default --quota-backend-bytes (kubeadm sets none). */
const ETCD_DEFAULT_QUOTA = 2 * 1024 ** 3;

/**
 * Whether KCP removes an old member before adding its replacement: maxSurge 0 does; an absent
 * maxSurge is KCP's default 1 (adds first); a value the guard cannot read may be either, so both
 * orders are projected.
 */
export function surgeOf(object: unknown): boolean | 'unknown' {
  const surge =
    valueAtPointer(object, '/spec/rollout/strategy/rollingUpdate/maxSurge') ??
    valueAtPointer(object, '/spec/rolloutStrategy/rollingUpdate/maxSurge');
  if (surge === undefined || surge === null) return false;
  if (surge === 0 || surge === '0' || surge === '0%') return true;
  if (typeof surge === 'number' && Number.isInteger(surge) && surge > 0) return false;
  // KCP reads it with IntValue(), which makes "50%" a 0: only plain numbers are read here.
  if (typeof surge === 'string' && /^[1-9]\d*$/.test(surge)) return false;
  return 'unknown';
}

function hasExternalEtcd(object: unknown): boolean {
  const external = valueAtPointer(object, '/spec/kubeadmConfigSpec/clusterConfiguration/etcd/external');
  return external !== undefined && external !== null;
}

function annotateHint(namespace: string, machines: readonly string[]): string {
  const names = machines.length > 0 ? machines : ['<machine>'];
  const commands = names.map((name) => `kubectl -n ${namespace} annotate machine ${name} ${DELETE_MACHINE_ANNOTATION}=""`);
  return `to choose the Machine KCP removes: ${commands.join('; ')}`;
}

/** What KCP's removals look like as far as the listed Machines tell. */
export interface KcpRemovalPlan {
  /** Every removal in KCP's order (null: open, the worst case); undefined: every removal is the worst case. */
  order: (RemovedMember | null)[] | undefined;
  /** When KCP may take more than one order: each of them (`order` merges them step by step). */
  orders?: (RemovedMember | null)[][];
  determined: boolean;
  /** Why the listing cannot determine anything (it misses Machines), when that is so. */
  incomplete?: string;
  /** The Machine KCP deletes first when exactly one can be it: KCP's preflight ignores its member's alarms. */
  firstPick: ControlPlaneMachine | null;
}

/**
 * Why the listing may miss Machines KCP sees, or null when it accounts for everything: every voting
 * member needs exactly one Machine whose Node carries its name (a member with none, or with two, is
 * unknown), and at least as many live Machines as the current replicas. Without that, KCP may
 * delete a Machine the webhook never saw, so nothing about the removal is known (issue 17).
 */
export function listingGap(
  members: readonly MemberReport[],
  machines: readonly ControlPlaneMachine[],
  from: number,
): string | null {
  const voting = members.filter((member) => !member.learner);
  const unnamed = voting.filter((member) => member.name === '').length;
  if (unnamed > 0) return `${unnamed} voting member(s) report no name, so no Machine can be matched to them`;
  for (const member of voting) {
    const owners = machines.filter((machine) => machine.nodeName === member.name).length;
    if (owners !== 1) return `member ${member.name} has ${owners === 0 ? 'no Machine' : `${owners} Machines`} in the listing`;
  }
  const live = machines.filter((machine) => !machine.deleting).length;
  if (live < from) return `the listing has ${live} live Machine(s) for ${from} replicas`;
  return null;
}

/** What KCP's pick reads beyond the Machines' own fields; anything absent is unknown. */
export interface KcpPickFacts {
  /** Whether KCP counts the Machine as needing rollout (MachinesNeedingRollout); null: unknown, both are weighed. */
  outdated?: (machine: ControlPlaneMachine) => boolean | null;
  /** The Cluster's control-plane failure domains (status.failureDomains, controlPlane true); null or absent: unknown. */
  failureDomains?: readonly string[] | null;
  /**
   * KCP may create Machines between the removals (a rollout surges new ones), whose failure
   * domains the webhook cannot see: the tie-break on all Machines in a domain is then open.
   */
  machinesMayJoin?: boolean;
}

/** Past this many unknown bits (outdatedness, failure domain membership) the pick is left open. */
const MAX_UNKNOWN_BITS = 8;
/** Past this many possible remaining sets the later steps are left open. */
const MAX_STATES = 32;
const RFC3339_SECONDS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:Z|[+-]\d\d:\d\d)$/;

/** Creation time in ms; null when absent or finer than the seconds the apiserver writes (KCP compares exactly). */
function createdMs(machine: ControlPlaneMachine): number | null {
  if (machine.createdAt === null || !RFC3339_SECONDS.test(machine.createdAt)) return null;
  const parsed = Date.parse(machine.createdAt);
  return Number.isFinite(parsed) ? parsed : null;
}

/** Go's string order (bytes of UTF-8), which is code point order: how KCP breaks a creation-time tie. */
function goLess(a: string, b: string): boolean {
  const left = [...a];
  const right = [...b];
  for (let index = 0; index < Math.min(left.length, right.length); index += 1) {
    const x = left[index]?.codePointAt(0) ?? 0;
    const y = right[index]?.codePointAt(0) ?? 0;
    if (x !== y) return x < y;
  }
  return left.length < right.length;
}

/**
 * Who `Machines.Oldest()` may return (cluster-api util/collections machine_collection.go: creation
 * time, then name): the oldest dated Machine, and every undated one (it may be older).
 */
function oldestOf(machines: readonly ControlPlaneMachine[]): ControlPlaneMachine[] {
  const undated = machines.filter((machine) => createdMs(machine) === null);
  let oldest: ControlPlaneMachine | null = null;
  for (const machine of machines) {
    const created = createdMs(machine);
    if (created === null) continue;
    const best = oldest === null ? null : createdMs(oldest);
    if (oldest === null || best === null || created < best || (created === best && goLess(machine.name, oldest.name))) {
      oldest = machine;
    }
  }
  return oldest === null ? undated : [...undated, oldest];
}

/**
 * MachineInFailureDomainWithMostMachines (cluster-api controlplane/kubeadm/pkg/control_plane.go):
 * an eligible Machine outside the Cluster's failure domains goes first (the oldest such one names
 * the domain, "" included); else failuredomains.PickMost (util/failuredomains): the domain with
 * the most eligible Machines, then the most Machines, a remaining tie going by Go's map order
 * (open); then the oldest eligible Machine in that domain.
 */
function inDomainWithMost(
  eligible: readonly ControlPlaneMachine[],
  all: readonly ControlPlaneMachine[],
  domains: ReadonlySet<string>,
  allCountKnown: boolean,
): ControlPlaneMachine[] {
  const sameDomain = (domain: string | null) => eligible.filter((machine) => machine.failureDomain === domain);
  const outside = eligible.filter((machine) => machine.failureDomain === null || !domains.has(machine.failureDomain));
  if (outside.length > 0) return oldestOf(outside).flatMap((first) => oldestOf(sameDomain(first.failureDomain)));
  const counts = [...domains].map((domain) => ({
    domain,
    priority: sameDomain(domain).length,
    all: all.filter((machine) => machine.failureDomain === domain).length,
  }));
  const top = Math.max(0, ...counts.map((count) => count.priority));
  let best = counts.filter((count) => count.priority === top && top > 0);
  if (allCountKnown) {
    const most = Math.max(0, ...best.map((count) => count.all));
    best = best.filter((count) => count.all === most);
  }
  return best.flatMap((count) => oldestOf(sameDomain(count.domain)));
}

/**
 * selectMachineForInPlaceUpdateOrScaleDown (cluster-api
 * controlplane/kubeadm/reconcilers/kubeadmcontrolplane/scale.go) for one known set of outdated
 * Machines: annotated outdated ones, else annotated ones, else outdated ones with unhealthy
 * components, else outdated ones, else all; then inDomainWithMost. Component health moves
 * between admission and KCP's pick, so an outdated Machine not reporting every component True
 * may be the pick on its own.
 */
function picksFor(
  all: readonly ControlPlaneMachine[],
  outdated: ReadonlySet<ControlPlaneMachine>,
  domains: ReadonlySet<string>,
  allCountKnown: boolean,
): ControlPlaneMachine[] {
  const pick = (eligible: readonly ControlPlaneMachine[]) => inDomainWithMost(eligible, all, domains, allCountKnown);
  const annotated = all.filter((machine) => machine.deleteRequested);
  const annotatedOutdated = annotated.filter((machine) => outdated.has(machine));
  if (annotatedOutdated.length > 0) return pick(annotatedOutdated);
  if (annotated.length > 0) return pick(annotated);
  const stale = all.filter((machine) => outdated.has(machine));
  if (stale.length === 0) return pick(all);
  return [...stale.filter((machine) => !machine.componentsHealthy), ...pick(stale)];
}

/** Every subset of `items`, as sets (2^n of them: callers bound n). */
function subsets<T>(items: readonly T[]): Set<T>[] {
  return Array.from(
    { length: 2 ** items.length },
    (_unused, mask) => new Set(items.filter((_item, index) => (mask >> index) & 1)),
  );
}

/**
 * Every Machine KCP's pick may be, over what the webhook does not know: each unknown
 * outdatedness both ways, and, when the Cluster's failure domains are unknown, every subset of
 * the domains the Machines name. Too many unknowns: every Machine.
 */
export function possiblePicks(remaining: readonly ControlPlaneMachine[], facts: KcpPickFacts): ControlPlaneMachine[] {
  const outdatedness = remaining.map((machine) => facts.outdated?.(machine) ?? null);
  const unknown = remaining.filter((_machine, index) => outdatedness[index] === null);
  const known = remaining.filter((_machine, index) => outdatedness[index] === true);
  const named = [...new Set(remaining.flatMap((machine) => (machine.failureDomain === null ? [] : [machine.failureDomain])))];
  const domainSets = facts.failureDomains === undefined || facts.failureDomains === null ? null : [new Set(facts.failureDomains)];
  if (unknown.length + (domainSets === null ? named.length : 0) > MAX_UNKNOWN_BITS) return [...remaining];
  const found = new Set<ControlPlaneMachine>();
  for (const domains of domainSets ?? subsets(named)) {
    for (const maybe of subsets(unknown)) {
      const outdated = new Set([...known, ...maybe]);
      for (const machine of picksFor(remaining, outdated, domains, facts.machinesMayJoin !== true)) found.add(machine);
    }
  }
  return remaining.filter((machine) => found.has(machine));
}

/**
 * KCP's removals of members, in order. Machines already being deleted go first: KCP's preflight
 * waits for them (preflight.go). Then one pick per step among the Machines that hold a voting
 * member (possiblePicks); a step is determined when every pick possible on every path KCP may
 * have taken so far removes the same kind of member, else it is open (the projection's worst
 * case, which only a worse removal could make worse). Only a complete listing gets here
 * (listingGap), so every voting member sits on exactly one listed Machine. Machines holding no
 * member are left out: KCP's preflight deletes nothing while another Machine lacks a Node or a
 * healthy member (checkHealthiness), so when KCP picks a member's Machine no memberless one is
 * left to count in a domain, and deleting one removes no member but does not spare one either,
 * since the listing cannot show that no such Machine is missing: KCP is assumed to remove members
 * until it has taken max(from, voting) − to of them. Less information never allows more (issue
 * 17): every unknown only widens the picks.
 */
export function kcpRemovalOrder(
  members: readonly MemberReport[],
  machines: readonly ControlPlaneMachine[],
  to: number,
  from: number,
  facts: KcpPickFacts = {},
): KcpRemovalPlan {
  const incomplete = listingGap(members, machines, from);
  if (incomplete !== null) return { order: undefined, determined: false, incomplete, firstPick: null };
  const byName = new Map(members.map((member) => [member.name, member]));
  const kindOf = (machine: ControlPlaneMachine): RemovedMember => removedBy(byName.get(machine.nodeName ?? '')) ?? 'none';
  const voting = members.filter((member) => !member.learner).length;
  const memberRemovals = Math.max(from - to, voting - to, 0);
  const order: (RemovedMember | null)[] = machines
    .filter((machine) => machine.deleting && kindOf(machine) !== 'none')
    .map(kindOf)
    .slice(0, memberRemovals);
  // One path per set of Machines KCP may have left and the kinds it removed on the way there.
  let paths: { left: ControlPlaneMachine[]; kinds: (RemovedMember | null)[] }[] = [
    { left: machines.filter((machine) => !machine.deleting && kindOf(machine) !== 'none'), kinds: [...order] },
  ];
  let firstPick: ControlPlaneMachine | null = null;
  let capped = false;
  for (let step = order.length; step < memberRemovals && paths.some((path) => path.left.length > 0); step += 1) {
    if (paths.length > MAX_STATES) {
      // Too many ways to go on: the rest of every path is open.
      const left = Math.min(memberRemovals - step, Math.max(...paths.map((path) => path.left.length)));
      paths = [{ left: [], kinds: [...order, ...new Array<null>(step - order.length + left).fill(null)] }];
      capped = true;
      break;
    }
    const next = new Map<string, { left: ControlPlaneMachine[]; kinds: (RemovedMember | null)[] }>();
    for (const path of paths) {
      if (path.left.length === 0) {
        next.set(`|${path.kinds.join(',')}`, path);
        continue;
      }
      const candidates = possiblePicks(path.left, facts);
      if (step === 0 && candidates.length === 1) firstPick = candidates[0] ?? null;
      for (const candidate of candidates) {
        const left = path.left.filter((machine) => machine !== candidate);
        const kinds = [...path.kinds, kindOf(candidate)];
        next.set(`${left.map((machine) => machine.name).join('\n')}|${kinds.join(',')}`, { left, kinds });
      }
    }
    paths = [...next.values()];
  }
  const orders = [...new Map(paths.map((path) => [path.kinds.join(','), path.kinds])).values()];
  const longest = Math.max(0, ...orders.map((kinds) => kinds.length));
  // Step by step: determined where every path removes the same kind.
  const merged = Array.from({ length: longest }, (_unused, index) => {
    const kinds = new Set(orders.map((kinds) => kinds[index] ?? null));
    return kinds.size === 1 ? ([...kinds][0] ?? null) : null;
  });
  const determined = !capped && orders.length === 1 && merged.every((kind) => kind !== null);
  return {
    order: merged,
    ...(orders.length > 1 ? { orders } : {}),
    determined,
    firstPick,
  };
}

function deadMachineNames(members: readonly MemberReport[], machines: readonly ControlPlaneMachine[]): string[] {
  return machines
    .filter((machine) => {
      const member = members.find((candidate) => candidate.name === machine.nodeName);
      return member !== undefined && !member.healthy && !member.learner && !machine.deleting;
    })
    .map((machine) => machine.name);
}

/** The alarms KCP's scale-down preflight does not look at: those of the member it deletes (scale.go). */
function alarmsOf(members: readonly MemberReport[], machine: ControlPlaneMachine | null): number {
  const member = machine === null ? undefined : members.find((candidate) => candidate.name === machine.nodeName);
  return member === undefined ? 0 : member.alarms.length;
}

/** A KCP object's generation and status.observedGeneration agree: KCP has reconciled its spec. */
function generationObserved(object: unknown): boolean {
  const generation = valueAtPointer(object, '/metadata/generation');
  return typeof generation === 'number' && valueAtPointer(object, '/status/observedGeneration') === generation;
}

/**
 * Whether KCP will count a Machine as needing rollout (UpToDate in
 * controlplane/kubeadm/pkg/filters.go), as far as the KCP and Machine objects tell: a
 * spec.version other than the KCP's is outdated (KCP compares the strings); a spec.rollout.after
 * (v1beta1 spec.rolloutAfter) later than the Machine's creation, or any certificatesExpiryDays,
 * may outdate it by the time KCP picks (unknown); for the rest (KubeadmConfig, infrastructure
 * template) only KCP's own UpToDate condition tells, and only on a plain scale down of a spec
 * KCP has reconciled (on /scale the spec is not in the request and the condition is taken as
 * KCP left it). Everything else is unknown.
 */
function outdatedness(facts: RemovalFacts, plainScaleDown: boolean): (machine: ControlPlaneMachine) => boolean | null {
  const kcp = facts.object.viaScale ? undefined : facts.request.object;
  const version = kcp === undefined ? undefined : valueAtPointer(kcp, VERSION_POINTER);
  const rolloutAfter =
    kcp === undefined ? undefined : (valueAtPointer(kcp, '/spec/rollout/after') ?? valueAtPointer(kcp, '/spec/rolloutAfter'));
  const afterMs = typeof rolloutAfter === 'string' ? Date.parse(rolloutAfter) : Number.NaN;
  const expiryDays =
    kcp === undefined
      ? undefined
      : (valueAtPointer(kcp, '/spec/rollout/before/certificatesExpiryDays') ??
        valueAtPointer(kcp, '/spec/rolloutBefore/certificatesExpiryDays'));
  const conditionsHold = plainScaleDown && (kcp === undefined || generationObserved(facts.request.oldObject));
  return (machine) => {
    if (kcp !== undefined && typeof version !== 'string') return null;
    if (typeof version === 'string' && machine.version !== null && machine.version !== version) return true;
    if (machine.version === null && kcp !== undefined) return null;
    const created = createdMs(machine);
    if (rolloutAfter !== undefined && rolloutAfter !== null) {
      if (!Number.isFinite(afterMs) || created === null || created < afterMs) return null;
    }
    if (expiryDays !== undefined && expiryDays !== null && expiryDays !== 0) return null;
    if (!conditionsHold) return null;
    return machine.kcpOutdated;
  };
}

function kcpOptions(facts: RemovalFacts): ProjectionOptions {
  const { shrink } = facts;
  const { object, oldObject } = facts.request;
  const options: ProjectionOptions = {
    removeBeforeAdd: surgeOf(object),
    externalEtcd: hasExternalEtcd(object) || hasExternalEtcd(oldObject),
  };
  if (shrink === null || options.externalEtcd === true) return options;
  const namespace = facts.object.namespace;
  const machines = facts.machines;
  if (machines === undefined || !machines.ok) {
    const why = machines === undefined ? 'no Kubernetes client to read Machines' : machines.error;
    return {
      ...options,
      undeterminedHint: `the KCP's Machines could not be read (${why}), so a healthy member is assumed to leave; ${annotateHint(namespace, [])}`,
    };
  }
  const { members } = facts;
  const plainScaleDown = facts.change.kind === 'scale-down';
  const plan = kcpRemovalOrder(members, machines.machines, shrink.to, shrink.from, {
    outdated: outdatedness(facts, plainScaleDown),
    failureDomains: machines.failureDomains ?? null,
    machinesMayJoin: !plainScaleDown,
  });
  const hint = annotateHint(namespace, deadMachineNames(members, machines.machines));
  if (plan.order === undefined) {
    return {
      ...options,
      undeterminedHint: `the Machines listed do not account for the control plane (${plan.incomplete ?? 'incomplete'}), so KCP may remove any member and a healthy one is assumed to leave; ${hint}`,
    };
  }
  const excused = plainScaleDown ? alarmsOf(members, plan.firstPick) : 0;
  return {
    ...options,
    removalOrder: plan.order,
    ...(plan.orders === undefined ? {} : { removalOrders: plan.orders }),
    ...(excused > 0 ? { excusedAlarms: excused } : {}),
    ...(plan.determined
      ? {}
      : { undeterminedHint: `which Machine KCP removes is not determined, so a healthy member is assumed to leave; ${hint}` }),
  };
}

/** A KCP rollout path that is only the rollout strategy (v1beta1 rolloutStrategy, v1beta2 rollout.strategy). */
function strategyOnly(path: string, request: RequestObjects): boolean {
  if (path === '/spec/rolloutStrategy') return true;
  if (path !== '/spec/rollout') return false;
  const rest = (object: unknown): Record<string, unknown> => {
    const rollout = valueAtPointer(object, '/spec/rollout');
    if (rollout === null || typeof rollout !== 'object' || Array.isArray(rollout)) return {};
    const { strategy: _strategy, ...others } = rollout as Record<string, unknown>;
    return others;
  };
  return jsonEqual(rest(request.oldObject), rest(request.object));
}

/**
 * The membership change the controller really makes. KCP reads its rollout strategy only while it
 * replaces outdated Machines (cluster-api controlplane/kubeadm/internal/controllers/upgrade.go,
 * upgradeControlPlane); the strategy is not part of what makes a Machine outdated, so a change of
 * the strategy alone starts no rollout: with replicas it is a plain scale, alone it moves nothing (null).
 */
function effectiveChange(change: MembershipChange, request: RequestObjects): MembershipChange | TargetMove | null {
  if (change.kind !== 'rollout') return change;
  if (!change.changedPaths.every((path) => strategyOnly(path, request))) return change;
  const from = change.previousReplicas;
  if (from === undefined || from === change.replicas) return null;
  return { kind: from < change.replicas ? 'scale-up' : 'scale-down', from, to: change.replicas };
}

/** The group of an apiVersion ("group/version"), or of a bare apiGroup field; '' for the core group. */
function groupOf(reference: Record<string, unknown>): string | undefined {
  const apiGroup = text(reference.apiGroup);
  if (apiGroup !== undefined) return apiGroup;
  const apiVersion = text(reference.apiVersion);
  if (apiVersion === undefined) return undefined;
  return apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
}

/** The Cluster owner references of an object (kind Cluster in group cluster.x-k8s.io). */
function clusterOwners(object: unknown): Record<string, unknown>[] {
  const owners = at(object, 'metadata', 'ownerReferences');
  return (Array.isArray(owners) ? owners : [])
    .map(record)
    .filter((owner) => owner.kind === 'Cluster' && groupOf(owner) === CLUSTER_GROUP);
}

/**
 * Whether a Cluster's spec.controlPlaneRef names this KCP: kind and name, and the namespace and
 * group where the reference gives them (v1beta1: an ObjectReference with apiVersion and an
 * optional namespace; v1beta2: apiGroup, kind, name).
 */
function controlPlaneRefNames(cluster: unknown, kcp: GuardedObject): boolean {
  const ref = record(at(cluster, 'spec', 'controlPlaneRef'));
  if (ref.kind !== kcp.kind || text(ref.name) !== kcp.name) return false;
  const namespace = text(ref.namespace);
  if (namespace !== undefined && namespace !== kcp.namespace) return false;
  const group = groupOf(ref);
  return group === undefined || group === kcp.group;
}

/**
 * The Cluster a KCP belongs to, by identity both ways: its one Cluster owner reference carries
 * the uid of a listed Cluster of that name in its namespace, and that Cluster's controlPlaneRef
 * names this KCP. A name alone (an owner reference without uid, the cluster-name label) is
 * something any tenant can write, so it resolves nothing; the reason says what is missing.
 */
export function owningCluster(
  kcp: unknown,
  object: GuardedObject,
  clusters: readonly unknown[],
): { name: string } | { problem: string } {
  const owners = clusterOwners(kcp);
  if (owners.length === 0) return { problem: 'it has no Cluster owner reference (the Cluster controller sets it)' };
  if (owners.length > 1) return { problem: `it has ${owners.length} Cluster owner references; exactly one is expected` };
  const owner = owners[0] ?? {};
  const name = text(owner.name);
  const uid = text(owner.uid);
  if (name === undefined || uid === undefined) return { problem: 'its Cluster owner reference names no Cluster by name and uid' };
  const cluster = clusters.find(
    (item) => text(at(item, 'metadata', 'namespace')) === object.namespace && text(at(item, 'metadata', 'name')) === name,
  );
  if (cluster === undefined) return { problem: 'its Cluster owner reference names a Cluster not found in its namespace' };
  if (text(at(cluster, 'metadata', 'uid')) !== uid) {
    return { problem: 'its Cluster owner reference carries a uid other than that Cluster’s (a re-created or another Cluster)' };
  }
  if (!controlPlaneRefNames(cluster, object)) {
    return { problem: 'its owning Cluster’s spec.controlPlaneRef does not name this KubeadmControlPlane' };
  }
  const label = record(at(kcp, 'metadata', 'labels'))[CLUSTER_NAME_LABEL];
  if (label !== undefined && label !== name) {
    return { problem: `its ${CLUSTER_NAME_LABEL} label disagrees with its Cluster owner reference` };
  }
  return { name };
}

/** quota-backend-bytes from the local etcd's extraArgs: a map in v1beta1, a name/value list in v1beta2. */
function kcpQuotaBytes(etcdLocal: unknown): number {
  const extraArgs = at(etcdLocal, 'extraArgs');
  let value: unknown = record(extraArgs)['quota-backend-bytes'];
  if (Array.isArray(extraArgs)) {
    value = extraArgs.find((arg) => record(arg).name === 'quota-backend-bytes')?.value;
  }
  return quantityBytes(value) ?? ETCD_DEFAULT_QUOTA;
}

/**
 * A target per KubeadmControlPlane with stacked etcd. A KCP with external etcd is skipped with a
 * problem: its members are not the control-plane Machines and their endpoints and client
 * certificates live on the nodes, so give it a static target (match by namespace and name).
 */
export function capiTargets(kcps: readonly unknown[], clusters: readonly unknown[], defaults: DiscoveryDefaults): ProviderResult {
  return provide(kcps, { source: 'capi', id: KUBEADM_CONTROL_PLANE }, (kcp, object, problem) => {
    const etcd = at(kcp, 'spec', 'kubeadmConfigSpec', 'clusterConfiguration', 'etcd');
    if (at(etcd, 'external') !== undefined) {
      return problem('it uses external etcd: not discovered (add a static target that names it)', { staticMayJudge: true });
    }
    const cluster = owningCluster(kcp, object, clusters);
    if ('problem' in cluster) return problem(cluster.problem);
    const clusterName = cluster.name;
    return {
      name: discoveredTargetName('capi', object.namespace, clusterName),
      source: 'capi',
      guards: object,
      reach: { kind: 'capi', namespace: object.namespace, clusterName, ...management(defaults) },
      machines: { namespace: object.namespace, clusterName },
      endpoints: [],
      quotaBackendBytes: kcpQuotaBytes(at(etcd, 'local')),
      ...targetDefaults(defaults),
    };
  });
}

/** The KCP's cluster name label (absent on a /scale request, whose Scale carries no labels). */
function clusterNameOf(object: unknown): string | null {
  const label = record(at(object, 'metadata', 'labels'))[CLUSTER_NAME_LABEL];
  return typeof label === 'string' ? label : null;
}

/**
 * kubeadm's Kubernetes minor → default etcd image tag: kubernetes/kubernetes,
 * cmd/kubeadm/app/constants/constants.go, `SupportedEtcdVersion`, taken from the release
 * branches' tables (1.29–1.32: "3.5.24-0" on release-1.32; 1.33: "3.5.24-0" on release-1.33) and
 * master (34–36: "3.6.9-0"). Only the minor of etcd matters to the gate; the patches are kept as
 * kubeadm writes them so the table can be checked against the source. A Kubernetes minor outside
 * the table takes its nearest entry, as kubeadm's EtcdSupportedVersion does.
 */
export const KUBEADM_DEFAULT_ETCD: ReadonlyMap<number, string> = new Map([
  [29, '3.5.24-0'],
  [30, '3.5.24-0'],
  [31, '3.5.24-0'],
  [32, '3.5.24-0'],
  [33, '3.5.24-0'],
  [34, '3.6.9-0'],
  [35, '3.6.9-0'],
  [36, '3.6.9-0'],
]);

const IMAGE_TAG_POINTER = '/spec/kubeadmConfigSpec/clusterConfiguration/etcd/local/imageTag';
const VERSION_POINTER = '/spec/version';

/** kubeadm's default etcd for a KCP spec.version ("v1.34.2"), nearest table entry outside it; null when unparsable. */
export function kubeadmDefaultEtcd(kubernetesVersion: unknown): string | null {
  if (typeof kubernetesVersion !== 'string') return null;
  const match = /^v?1\.(\d{1,3})(?:\.\d{1,6})?(?:[-+].*)?$/.exec(kubernetesVersion.trim());
  if (!match) return null;
  const minor = Number(match[1]);
  const known = [...KUBEADM_DEFAULT_ETCD.keys()];
  const nearest = Math.min(Math.max(minor, Math.min(...known)), Math.max(...known));
  return KUBEADM_DEFAULT_ETCD.get(nearest) ?? null;
}

/**
 * The etcd a KCP object runs, as text: its explicit image tag, else kubeadm's default for its
 * Kubernetes version (null when neither tells); `source` says which, for the denial.
 */
function kubeadmEtcd(object: unknown): { version: string | null; source: string } {
  const tag = valueAtPointer(object, IMAGE_TAG_POINTER);
  if (typeof tag === 'string' && tag !== '') return { version: tag, source: `etcd imageTag ${clipped(tag)}` };
  const kubernetes = valueAtPointer(object, VERSION_POINTER);
  const etcd = kubeadmDefaultEtcd(kubernetes);
  const named = typeof kubernetes === 'string' ? clipped(kubernetes) : 'unset';
  return { version: etcd, source: `kubeadm's default etcd ${etcd ?? 'unknown'} for Kubernetes ${named}` };
}

/** KCP's Machines: owned by the KCP, each standing for the stacked etcd member named after its Node. */
export const KCP_MACHINES: KindMachines = { ownerKind: KUBEADM_CONTROL_PLANE.kind, clusterNameOf };

export const kubeadmControlPlane: ControllerKind = {
  rule: {
    ...KUBEADM_CONTROL_PLANE,
    versions: ['v1beta1', 'v1beta2'],
    guarded: [
      {
        pointer: '/spec',
        reason:
          'KCP scales on spec.replicas and marks Machines outdated (replaced one by one) when spec.version, ' +
          'spec.machineTemplate, spec.kubeadmConfigSpec differ from them, or on spec.rolloutAfter, ' +
          'spec.rolloutBefore.certificatesExpiryDays (v1beta1) / spec.rollout (v1beta2); spec.rolloutStrategy ' +
          'decides surge or remove-first',
        harmless: [
          {
            pointer: '/spec/remediationStrategy',
            reason: 'v1beta1: only tunes retries of remediation that MachineHealthChecks start; changing it replaces nothing',
          },
          {
            pointer: '/spec/remediation',
            reason: 'v1beta2: the same remediation tuning; changing it replaces nothing',
          },
          {
            pointer: '/spec/machineNamingStrategy',
            reason: 'v1beta1: names of Machines created later; existing Machines are not renamed or replaced',
          },
          {
            pointer: '/spec/machineNaming',
            reason: 'v1beta2: names of Machines created later; existing Machines are not renamed or replaced',
          },
        ],
      },
    ],
    replicasPointer: '/spec/replicas',
    defaultReplicas: 1,
    scope: 'all',
  },
  removal: { projectionOptions: kcpOptions, effectiveChange },
  machines: KCP_MACHINES,
  etcdVersion: kubeadmEtcd,
  discovery: {
    source: 'capi',
    lists: [
      { group: KUBEADM_CONTROL_PLANE.group, versions: CAPI_VERSIONS, plural: KUBEADM_CONTROL_PLANE.resource },
      // A KCP is resolved only through the Cluster its owner reference names, whatever its labels.
      { group: CLUSTER_GROUP, versions: CAPI_VERSIONS, plural: 'clusters' },
    ],
    toTargets: ([kcps = [], clusters = []], defaults) => capiTargets(kcps, clusters, defaults),
    identityLabels: [CLUSTER_NAME_LABEL],
    followsClusterOwner: true,
  },
  reach: 'capi',
};
