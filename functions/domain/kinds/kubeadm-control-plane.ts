// Cluster API's KubeadmControlPlane (KCP) with stacked etcd. Facts, from cluster-api's sources:
// - It scales on spec.replicas and replaces outdated Machines one by one (spec.version,
//   machineTemplate, kubeadmConfigSpec, rollout fields); its rollout strategy decides surge or
//   remove-first (controlplane/kubeadm/internal/controllers/upgrade.go).
// - Scale-down removes one Machine per step, chosen by selectMachineForScaleDown (scale.go):
//   annotated `cluster.x-k8s.io/delete-machine` first, then outdated, then by failure domain and
//   age. kubeadm names a stacked etcd member after its Node, and a Machine reaches its Node through
//   `status.nodeRef.name`: that is how Machines map to members.
// - Its etcd is reached as KCP reaches it: the Cluster's Secrets on the management cluster and a
//   port-forward to each member's static pod (the 'capi' reach, usecases/reach-target.ts).
// - Discovery resolves a KCP only through the Cluster that owns it by uid and names it back.
// Where the rules leave the choice open (which outdated Machine, which failure domain), the step
// is undetermined and the projection assumes the worst case: a healthy member leaves. Pure.
import { printableExcerpt as clipped } from '../../shared/redact.js';
import type { MemberReport } from '../evaluation-document.js';
import { DELETE_MACHINE_ANNOTATION, type ControlPlaneMachine } from '../machines.js';
import { discoveredTargetName, type GuardedObject } from '../targets.js';
import { jsonEqual, valueAtPointer } from '../../shared/json-pointer.js';
import {
  at,
  management,
  provide,
  quantityBytes,
  record,
  targetDefaults,
  text,
  type DiscoveryDefaults,
} from './discovery-common.js';
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

const WORST_FIRST: readonly RemovedMember[] = ['healthy', 'unhealthy', 'none'];

function annotateHint(namespace: string, machines: readonly string[]): string {
  const names = machines.length > 0 ? machines : ['<machine>'];
  const commands = names.map((name) => `kubectl -n ${namespace} annotate machine ${name} ${DELETE_MACHINE_ANNOTATION}=""`);
  return `to choose the Machine KCP removes: ${commands.join('; ')}`;
}

/** What KCP's removals look like as far as the listed Machines tell. */
export interface KcpRemovalPlan {
  /** Every removal in KCP's order (null: open, the worst case); undefined: every removal is the worst case. */
  order: (RemovedMember | null)[] | undefined;
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

function createdMs(machine: ControlPlaneMachine): number | null {
  const parsed = machine.createdAt === null ? Number.NaN : Date.parse(machine.createdAt);
  return Number.isFinite(parsed) ? parsed : null;
}

/**
 * The Machines KCP may delete next, following selectMachineForScaleDown (cluster-api
 * controlplane/kubeadm/internal/controllers/scale.go): annotated Machines (outdated ones first),
 * else outdated ones with unhealthy components, else outdated ones, else all; then, in the failure
 * domain with the most Machines, the oldest (MachineInFailureDomainWithMostMachines,
 * controlplane/kubeadm/internal/control_plane.go). Outdatedness is known only when every live
 * Machine reports UpToDate=True (then none is outdated); the failure domain only when every live
 * Machine is in the same one; age only from distinct creation times. Anything unknown widens the
 * answer to every Machine the tiers allow.
 */
function possiblePicks(remaining: readonly ControlPlaneMachine[], predictByAge: boolean): readonly ControlPlaneMachine[] {
  const annotated = remaining.filter((machine) => machine.deleteRequested);
  const eligible = annotated.length > 0 ? annotated : remaining;
  if (!predictByAge || eligible.length <= 1) return eligible;
  if (!remaining.every((machine) => machine.upToDate === true)) return eligible;
  const domain = remaining[0]?.failureDomain ?? null;
  if (!remaining.every((machine) => machine.failureDomain === domain)) return eligible;
  const ages = eligible.map(createdMs);
  if (ages.some((age) => age === null)) return eligible;
  const oldest = Math.min(...(ages as number[]));
  const picks = eligible.filter((_machine, index) => ages[index] === oldest);
  return picks.length === 1 ? picks : eligible;
}

/**
 * KCP's removals of members, in order. Machines already being deleted go first: KCP's preflight
 * waits for them (scale.go preflightChecks). Then one pick per step among the Machines that hold a
 * voting member; a step is determined when every possible pick removes the same kind of member.
 * Only a complete listing gets here (listingGap), so every voting member sits on exactly one listed
 * Machine. Machines holding no member are left out of the picks: deleting one removes none, but
 * it does not spare a member either, since the listing cannot show that no such Machine is missing
 * (one missing would add a step, and then a member goes): KCP is assumed to remove members until
 * it has taken max(from, voting) − to of them (KCP deletes a Machine only while every other
 * Machine has a Node and a healthy member, so it takes etcd no lower than `to`). Leaving them out
 * also keeps their tiers, domains and ages out of the prediction, which a Machine missing from the
 * listing would change: among the members' Machines KCP's order is the same whatever other
 * Machines it picks in between. Less information never allows more (issue 17).
 * `predictByAge`: the change is a plain scale down, so the request itself outdates no Machine and
 * KCP's age rule may be applied.
 */
export function kcpRemovalOrder(
  members: readonly MemberReport[],
  machines: readonly ControlPlaneMachine[],
  to: number,
  from: number,
  predictByAge = false,
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
  let remaining = machines.filter((machine) => !machine.deleting && kindOf(machine) !== 'none');
  let determined = true;
  let firstPick: ControlPlaneMachine | null = null;
  while (order.length < memberRemovals && remaining.length > 0) {
    const candidates = possiblePicks(remaining, predictByAge);
    if (order.length === 0 && candidates.length === 1) firstPick = candidates[0] ?? null;
    const kinds = new Set(candidates.map(kindOf));
    const chosenKind = kinds.size === 1 ? (candidates.map(kindOf)[0] ?? null) : null;
    if (chosenKind === null) determined = false;
    order.push(chosenKind);
    // Open: drop the candidate whose loss hurts most, as the worst case assumes.
    const dropped =
      WORST_FIRST.map((kind) => candidates.find((machine) => kindOf(machine) === kind)).find(
        (machine) => machine !== undefined,
      ) ?? candidates[0];
    remaining = remaining.filter((machine) => machine !== dropped);
  }
  return { order, determined, firstPick };
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
  const plan = kcpRemovalOrder(members, machines.machines, shrink.to, shrink.from, plainScaleDown);
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
