// Less information never allows more (issue 17): for generated inputs (an evaluation, the KCP's
// Machines as the apiserver lists them, a real AdmissionReview edited to the generated change),
// every degradation of what the projection reads — Machines missing from the listing, the listing
// failing, a nodeRef, creation time, spec.version or condition blanked, the Cluster's failure
// domains unread, a member name blanked, external
// etcd or StatefulSet ordinals removed, a maxSurge made unreadable — must never turn decide()'s
// deny into an allow. Issue 28 adds the DELETE doors: a control-plane Machine's and an etcd pod's
// DELETE, degraded by the deleted Machine's nodeRef blanked, its owner's read failing and member
// names blanked; and the ClusterClass door, a Cluster's topology change, degraded by its KCP's
// read failing or losing what the projection reads, and by what degrades a KCP shrink. Then the
// Runtime Extension's upgrade hooks (removing facts never turns a retry into a proceed) and the
// UPDATEs that strip what a member DELETE is keyed on; and for every door an evaluation that lost
// its member list. Seeded, so a failure names an input that reproduces.
import { describe, expect, it } from 'vitest';
import { guardConfigSchema } from '../../functions/domain/config.js';
import type { Evaluation, MemberReport } from '../../functions/domain/evaluation-document.js';
import { machineFromObject, type ControlPlaneMachine } from '../../functions/domain/machines.js';
import { classifyRequest } from './classify.js';
import type { AdmissionRequest, Classification, ParentLabels } from './contract.js';
import { decide } from './decide.js';
import type { MachinesRead } from './removal.js';
import { parseAdmissionReview } from './review.js';
import {
  hookAnswer,
  impliedControlPlaneUpdate,
  labelsFromRead,
  parseHookRequest,
  UPGRADE_HOOKS,
  type UpgradeHook,
} from './runtime-hooks.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';
import { admissionFixture } from '../../test/harness/reviews.js';

const NOW = new Date('2026-11-30T02:00:00.000Z');
const CONFIG = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [
    { name: 'etcd-sts', endpoints: ['https://127.0.0.1:2379'], match: { namespaces: ['etcd'], names: ['etcd'] } },
    { name: 'prod', endpoints: ['https://127.0.0.1:12379'], match: {} },
  ],
});
const INPUTS = 1500;
const SEEDS = [17, 20, 21];
const DOOR_INPUTS = 600;

type Json = Record<string, unknown>;

function loadRequest(name: string): Json {
  return admissionFixture(name).request;
}
const FIXTURES = {
  kcpScale: loadRequest('kcp-scale-down-3-to-2.json'),
  kcpSpec: loadRequest('kcp-v1beta2-replicas-3-to-2.json'),
  kcpVersion: loadRequest('kcp-v1beta2-edit-version.json'),
  stsScale: loadRequest('statefulset-scale-3-to-4.json'),
  stsSpec: loadRequest('statefulset-edit-ordinals.json'),
  machineDelete: loadRequest('machine-delete-control-plane.json'),
  podDelete: loadRequest('pod-delete-etcd-druid.json'),
  clusterTopology: loadRequest('cluster-v1beta2-topology-version.json'),
};
/** The hook requests as Cluster API sends them (test/fixtures/runtime-hooks). */
const HOOK_BODIES = Object.fromEntries(
  UPGRADE_HOOKS.map((hook) => [
    hook,
    JSON.parse(
      readFileSync(
        path.join(
          import.meta.dirname,
          '../../test/fixtures/runtime-hooks',
          `${hook.replace(/[A-Z]/g, (c, i: number) => (i ? '-' : '') + c.toLowerCase())}-request.json`,
        ),
        'utf8',
      ),
    ) as Json,
  ]),
) as Record<UpgradeHook, Json>;

/** A small deterministic generator (LCG), so every failing input can be replayed from its index. */
function rng(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  return {
    chance: (p: number) => next() < p,
    int: (min: number, max: number) => min + Math.floor(next() * (max - min + 1)),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T,
  };
}
type Rng = ReturnType<typeof rng>;

/** The raw inputs, kept as JSON so degradations edit what the apiserver and the store would hold. */
interface World {
  kind:
    | 'kcp-scale'
    | 'kcp-spec'
    | 'kcp-rollout'
    | 'sts-scale'
    | 'sts-spec'
    | 'machine-delete'
    | 'pod-delete'
    | 'cluster-topology'
    | 'upgrade-hook'
    | 'machine-strip'
    | 'pod-strip';
  members: MemberReport[];
  machines: Json[] | null;
  request: Json;
  /** The Cluster's control-plane failure domains as read with the Machines; null: not read. */
  failureDomains?: string[] | null;
  /** What the owner read of a DELETE door gave (the KCP, the StatefulSet); a Cluster's KCP read; a hook's control plane read. */
  parent?: ParentLabels;
  /** An upgrade hook world: which hook, and its request body (the world's `request` is unused). */
  hook?: { name: UpgradeHook; body: Json };
  /** The evaluation got no member list (every endpoint failed it): no members, Unhealthy. */
  memberListLost?: boolean;
}

function spec(request: Json, which: 'object' | 'oldObject'): Json {
  return (request[which] as { spec: Json }).spec;
}

function setReplicas(request: Json, from: number, to: number): void {
  spec(request, 'oldObject').replicas = from;
  if (to === 0 && (request.subResource as string | undefined) === 'scale') delete spec(request, 'object').replicas;
  else spec(request, 'object').replicas = to;
}

function genMembers(random: Rng, count: number): MemberReport[] {
  const members = Array.from({ length: count }, (_unused, index) =>
    makeMember(index, {
      healthy: random.chance(0.85),
      leader: false,
      alarms: random.chance(0.1) ? ['NOSPACE'] : [],
      ...(random.chance(0.05) ? { learner: true } : {}),
    }),
  );
  const leader = members.find((member) => member.healthy && !member.learner);
  if (leader && random.chance(0.95)) leader.leader = true;
  return members;
}

function machineJson(random: Rng, name: string, node: string | null, domains: readonly string[]): Json {
  const conditions = [
    ...(random.chance(0.8)
      ? [
          random.chance(0.85)
            ? { type: 'UpToDate', status: 'True' }
            : { type: 'UpToDate', status: 'False', reason: 'NotUpToDate' },
        ]
      : []),
    // KCP's component conditions, all True on a settled Machine, one False now and then.
    ...(node !== null && random.chance(0.9)
      ? ['APIServerPodHealthy', 'ControllerManagerPodHealthy', 'SchedulerPodHealthy', 'EtcdPodHealthy', 'EtcdMemberHealthy'].map(
          (type) => ({ type, status: random.chance(0.97) ? 'True' : 'False' }),
        )
      : []),
  ];
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Machine',
    metadata: {
      name,
      namespace: 'default',
      creationTimestamp: `2026-11-02T09:${String(random.int(0, 5) * 10).padStart(2, '0')}:00Z`,
      labels: { 'cluster.x-k8s.io/cluster-name': 'prod', 'cluster.x-k8s.io/control-plane': '' },
      ...(random.chance(0.25) ? { annotations: { 'cluster.x-k8s.io/delete-machine': '' } } : {}),
      ...(random.chance(0.08) ? { deletionTimestamp: '2026-11-30T01:59:00Z' } : {}),
    },
    spec: { clusterName: 'prod', version: 'v1.34.0', failureDomain: random.pick(domains) },
    status: { ...(node === null ? {} : { nodeRef: { name: node } }), conditions },
  };
}

function genMachines(random: Rng, members: readonly MemberReport[], domains: readonly string[]): Json[] {
  const machines = members
    .filter((member) => !member.learner || random.chance(0.5))
    .map((member, index) => machineJson(random, `cp-${index}`, member.name, domains));
  const extras = random.int(0, 2);
  for (let index = 0; index < extras; index += 1) {
    machines.push(machineJson(random, `cp-extra-${index}`, random.chance(0.5) ? null : `spare-${index}`, domains));
  }
  return machines;
}

function genKcpRequest(random: Rng, kind: World['kind'], voting: number): Json {
  const request = structuredClone(
    kind === 'kcp-scale' ? FIXTURES.kcpScale : kind === 'kcp-spec' ? FIXTURES.kcpSpec : FIXTURES.kcpVersion,
  );
  const from = Math.max(1, voting + random.int(-1, 1));
  const to = kind === 'kcp-rollout' ? random.int(1, from + 1) : random.int(0, from + 1);
  setReplicas(request, from, to === from && kind !== 'kcp-rollout' ? Math.max(0, from - 1) : to);
  if (kind !== 'kcp-scale') {
    const surge = random.pick([0, 1, undefined]);
    for (const which of ['object', 'oldObject'] as const) {
      const rollout = spec(request, which).rollout as { strategy: { rollingUpdate: Json } };
      if (surge === undefined) delete rollout.strategy.rollingUpdate.maxSurge;
      else rollout.strategy.rollingUpdate.maxSurge = surge;
      if (random.chance(0.15) || which === 'object') {
        const etcd = (spec(request, which).kubeadmConfigSpec as { clusterConfiguration: Json }).clusterConfiguration;
        if (which === 'object' ? random.chance(0.15) : false) etcd.etcd = { external: { endpoints: ['https://e:2379'] } };
      }
    }
  }
  return request;
}

function genStsRequest(random: Rng, kind: World['kind'], voting: number): Json {
  const request = structuredClone(kind === 'sts-scale' ? FIXTURES.stsScale : FIXTURES.stsSpec);
  if (kind === 'sts-spec') request.object = structuredClone(request.oldObject);
  const from = Math.max(1, voting + random.int(-1, 1));
  setReplicas(request, from, random.int(0, from - 1));
  if (kind === 'sts-spec' && random.chance(0.5)) {
    const start = random.int(0, 2);
    spec(request, 'object').ordinals = { start };
    spec(request, 'oldObject').ordinals = { start };
  }
  return request;
}

/** The DELETE of a control-plane Machine whose nodeRef names a member, a stranger, or nothing yet. */
function genMachineDelete(random: Rng, members: readonly MemberReport[]): World {
  const request = structuredClone(FIXTURES.machineDelete);
  const status = (request.oldObject as Json).status as Json;
  const node = random.chance(0.15) ? null : random.chance(0.1) ? 'cp-stranger' : random.pick(members).name;
  if (node === null) delete status.nodeRef;
  else status.nodeRef = { name: node };
  const kcp = { metadata: { labels: { 'cluster.x-k8s.io/cluster-name': 'prod' } }, spec: { replicas: members.length } };
  return {
    kind: 'machine-delete',
    members: [...members],
    machines: null,
    request,
    parent: { ok: true, labels: kcp.metadata.labels, object: kcp },
  };
}

/** The DELETE of pod etcd-<k> of StatefulSet etcd/etcd, whose members are named like its pods. */
function genPodDelete(random: Rng, members: MemberReport[]): World {
  const named = members.map((member, index) => ({ ...member, name: `etcd-${index}` }));
  const request = structuredClone(FIXTURES.podDelete);
  const pod = `etcd-${random.int(0, named.length)}`;
  const metadata = (request.oldObject as Json).metadata as Json;
  Object.assign(metadata, {
    name: pod,
    namespace: 'etcd',
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'etcd', uid: 'u' }],
  });
  Object.assign(request, { name: pod, namespace: 'etcd' });
  const statefulSet = { metadata: { labels: {} }, spec: { replicas: 9 } };
  return { kind: 'pod-delete', members: named, machines: null, request, parent: { ok: true, labels: {}, object: statefulSet } };
}

/** An UPDATE of the DELETE fixture's object: `edit` applied to a copy of oldObject. */
function updateFrom(request: Json, edit: (object: Json) => void): Json {
  const update = structuredClone(request);
  update.operation = 'UPDATE';
  update.object = structuredClone(update.oldObject);
  edit(update.object as Json);
  return update;
}
const metaOf = (object: Json) => object.metadata as Json;

/** A control-plane Machine's or an etcd pod's UPDATE that strips (or keeps) what its DELETE is keyed on. */
function genStripWorld(random: Rng): World {
  const members = genMembers(random, random.int(1, 5));
  const machine = random.chance(0.5);
  const door = machine ? genMachineDelete(random, members) : genPodDelete(random, members);
  const strips: Array<(object: Json) => void> = machine
    ? [
        (m) => delete (metaOf(m).labels as Json)['cluster.x-k8s.io/control-plane'],
        (m) => {
          delete metaOf(m).ownerReferences;
          delete (metaOf(m).labels as Json)['cluster.x-k8s.io/control-plane-name'];
        },
        (m) => ((metaOf(m).ownerReferences as Json[])[0]!.name = 'gone'),
        (m) => ((metaOf(m).ownerReferences as Json[])[0]!.kind = 'TalosControlPlane'),
        (m) => ((metaOf(m).labels as Json).team = 'infra'),
      ]
    : [
        (p) => delete metaOf(p).ownerReferences,
        (p) => ((metaOf(p).ownerReferences as Json[])[0]!.name = 'other'),
        (p) => ((metaOf(p).labels as Json).extra = 'x'),
      ];
  return { ...door, kind: machine ? 'machine-strip' : 'pod-strip', request: updateFrom(door.request, random.pick(strips)) };
}

/** An upgrade hook's request (either hook), its versions and control plane replicas generated, and the KCP's Machines. */
function genHookWorld(random: Rng): World {
  const members = genMembers(random, random.int(1, 5));
  const voting = members.filter((member) => !member.learner).length;
  const name = random.pick(UPGRADE_HOOKS);
  const body = structuredClone(HOOK_BODIES[name]);
  body.fromKubernetesVersion = random.pick(['v1.33.4', 'v1.34.1']);
  body.toKubernetesVersion = random.pick(['v1.34.1', 'v1.34.2', 'v1.35.0']);
  const topology = ((body.cluster as Json).spec as Json).topology as { controlPlane: Json };
  if (random.chance(0.2)) delete topology.controlPlane.replicas;
  else topology.controlPlane.replicas = Math.max(1, voting + random.int(-1, 1));
  const labels = { 'cluster.x-k8s.io/cluster-name': 'prod' };
  return {
    kind: 'upgrade-hook',
    members,
    machines: genMachines(random, members, random.pick([['fd-a'], ['fd-a', 'fd-b', 'fd-c']])),
    request: {},
    hook: { name, body },
    parent: { ok: true, labels, object: { metadata: { labels } } },
  };
}

/** A DELETE door's world (issue 28), from its own seed so the older worlds stay as they were. */
function genDoorWorld(random: Rng): World {
  const members = genMembers(random, random.int(1, 5));
  return random.chance(0.5) ? genMachineDelete(random, members) : genPodDelete(random, members);
}

/**
 * A ClusterClass Cluster's topology edit (issue 28): its version, its control plane replicas or
 * both change, judged against the KCP as read (its replicas, maxSurge, maybe external etcd) and
 * the KCP's Machines on a shrink.
 */
function genClusterWorld(random: Rng): World {
  const members = genMembers(random, random.int(1, 5));
  const voting = members.filter((member) => !member.learner).length;
  const request = structuredClone(FIXTURES.clusterTopology);
  const from = Math.max(1, voting + random.int(-1, 1));
  const topology = (which: 'object' | 'oldObject') => spec(request, which).topology as { version: string; controlPlane: Json };
  topology('oldObject').controlPlane.replicas = from;
  topology('object').controlPlane.replicas = random.chance(0.4) ? from : random.int(0, from + 1);
  if (random.chance(0.4)) topology('object').version = topology('oldObject').version;
  const rollout = { strategy: { rollingUpdate: { maxSurge: random.pick([0, 1]) } } };
  const etcd = random.chance(0.15) ? { external: { endpoints: ['https://e:2379'] } } : { local: {} };
  const kcp = {
    metadata: { labels: { 'cluster.x-k8s.io/cluster-name': 'prod' } },
    spec: {
      replicas: from,
      version: topology('oldObject').version,
      rollout,
      kubeadmConfigSpec: { clusterConfiguration: { etcd } },
    },
  };
  return {
    kind: 'cluster-topology',
    members,
    machines: genMachines(random, members, ['fd-a']),
    request,
    parent: { ok: true, labels: kcp.metadata.labels, object: kcp },
  };
}

/** The KCP a Cluster's topology is read against, as the parent read gave it (a cluster-topology world's). */
function readKcp(world: World): { spec: Json } | null {
  if (world.kind !== 'cluster-topology' || world.parent?.ok !== true) return null;
  return world.parent.object as { spec: Json };
}

function genWorld(random: Rng): World {
  const kind = random.pick(['kcp-scale', 'kcp-spec', 'kcp-rollout', 'sts-scale', 'sts-spec'] as const);
  const count = random.int(1, 5);
  let members = genMembers(random, count);
  if (kind.startsWith('sts')) {
    const offset = random.chance(0.8) ? 0 : random.int(1, 2);
    members = members.map((member, index) => ({ ...member, name: `etcd-${index + offset}` }));
  }
  const voting = members.filter((member) => !member.learner).length;
  const request = kind.startsWith('kcp') ? genKcpRequest(random, kind, voting) : genStsRequest(random, kind, voting);
  if (!kind.startsWith('kcp')) return { kind, members, machines: null, request };
  const domains = random.pick([['fd-a'], ['fd-a'], ['fd-a', 'fd-b'], ['fd-a', 'fd-b', 'fd-c']]);
  // The Cluster may list fewer domains than the Machines name (one was removed), or be unread.
  const listed = random.chance(0.2) ? domains.slice(1) : domains;
  const failureDomains = random.chance(0.7) ? [...listed] : null;
  return { kind, members, machines: genMachines(random, members, domains), request, failureDomains };
}

function evaluationOf(members: readonly MemberReport[], memberListLost = false): Evaluation {
  if (memberListLost) {
    return makeEvaluation({
      members: [],
      evaluatedAt: new Date(NOW.getTime() - 5_000).toISOString(),
      verdict: 'Unhealthy',
      reasons: ['member list unavailable from every endpoint: timed out'],
    });
  }
  const unhealthy = members.some((member) => !member.healthy && !member.learner);
  return makeEvaluation({
    members: [...members],
    evaluatedAt: new Date(NOW.getTime() - 5_000).toISOString(),
    verdict: unhealthy ? 'Unhealthy' : members.some((member) => member.learner) ? 'Degraded' : 'Healthy',
    reasons: unhealthy ? ['a member is unhealthy'] : [],
  });
}

/**
 * An upgrade hook's answer as the Runtime Extension gives it (runtime-extension.ts): a retry when
 * the control plane's read fails, else the admission decision on the KCP UPDATE the hook stands
 * for. true: proceed; false: retry (or Failure).
 */
function hookProceeds(world: World, hook: NonNullable<World['hook']>): boolean {
  const parsed = parseHookRequest(hook.name, hook.body);
  if (!parsed.ok) return false;
  const labels = labelsFromRead(parsed.request, world.parent);
  if ('failed' in labels) return false;
  const request = impliedControlPlaneUpdate(hook.name, parsed.request, 'u', labels.labels);
  const allowed = decided(world, request, classifyRequest(request, CONFIG)) ?? true;
  return hookAnswer(hook.name, allowed ? { allowed } : { allowed, message: 'denied' }, 30).outcome === 'proceed';
}

/** decide() on a world: allowed or not, or null when the request is not a guarded change at all. */
function allowedIn(world: World): boolean | null {
  if (world.hook !== undefined) return hookProceeds(world, world.hook);
  const parsed = parseAdmissionReview({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: world.request });
  if (!parsed.ok) throw new Error(parsed.message);
  const request: AdmissionRequest = parsed.review.request;
  const classification = classifyRequest(request, CONFIG, world.parent);
  // A strip is answered in full: a degradation that settles it as an allow without an evaluation counts too.
  if (world.kind === 'machine-strip' || world.kind === 'pod-strip') return decided(world, request, classification) ?? true;
  return decided(world, request, classification);
}

/** The decision on a classification: null for an allow without an evaluation, false for a deny. */
function decided(world: World, request: AdmissionRequest, classification: Classification): boolean | null {
  if (classification.kind === 'allow') return null;
  if (classification.kind === 'deny') return world.kind === 'upgrade-hook' || world.kind.endsWith('-strip') ? false : null;
  let machines: MachinesRead | undefined;
  if (world.machines !== null) {
    const parsedMachines = world.machines
      .map(machineFromObject)
      .filter((machine): machine is ControlPlaneMachine => machine !== null);
    machines = { ok: true, machines: parsedMachines, failureDomains: world.failureDomains ?? null };
  }
  if (world.machines !== null && (world as { listFails?: boolean }).listFails === true) {
    machines = { ok: false, error: 'timed out' };
  }
  return decide({
    request,
    config: CONFIG,
    classification,
    evaluation: evaluationOf(world.members, world.memberListLost),
    now: NOW,
    ...(machines === undefined ? {} : { machines }),
  }).response.allowed;
}

type Degradation = { name: string; apply: (world: World, random: Rng) => boolean };

function onRandomMachine(edit: (machine: Json) => boolean): Degradation['apply'] {
  return (world, random) => (world.machines === null || world.machines.length === 0 ? false : edit(random.pick(world.machines)));
}

const DEGRADATIONS: Degradation[] = [
  {
    name: 'the Machines listing fails',
    apply: (world) => {
      if (world.machines === null) return false;
      (world as { listFails?: boolean }).listFails = true;
      return true;
    },
  },
  {
    name: 'Machines missing from the listing (a random subset kept, maybe none)',
    apply: (world, random) => {
      if (world.machines === null || world.machines.length === 0) return false;
      world.machines = world.machines.filter(() => random.chance(0.5));
      return true;
    },
  },
  {
    name: 'only the dead members’ Machines listed',
    apply: (world) => {
      if (world.machines === null) return false;
      const dead = new Set(world.members.filter((member) => !member.healthy).map((member) => member.name));
      world.machines = world.machines.filter((machine) =>
        dead.has(((machine.status as Json).nodeRef as { name?: string } | undefined)?.name ?? ''),
      );
      return true;
    },
  },
  {
    name: 'a nodeRef blanked',
    apply: onRandomMachine((machine) => delete (machine.status as Json).nodeRef),
  },
  {
    name: 'a creationTimestamp blanked',
    apply: onRandomMachine((machine) => delete (machine.metadata as Json).creationTimestamp),
  },
  {
    name: 'an UpToDate condition blanked',
    apply: onRandomMachine((machine) => {
      (machine.status as Json).conditions = [];
      return true;
    }),
  },
  {
    name: 'a spec.version blanked',
    apply: onRandomMachine((machine) => delete (machine.spec as Json).version),
  },
  {
    name: 'the Cluster’s failure domains unread',
    apply: (world) => {
      if (world.failureDomains === undefined || world.failureDomains === null) return false;
      world.failureDomains = null;
      return true;
    },
  },
  {
    name: 'a member name blanked in the evaluation',
    apply: (world, random) => {
      const member = random.pick(world.members);
      member.name = '';
      return true;
    },
  },
  {
    name: 'external etcd removed from the KCP',
    apply: (world) => {
      if (world.parent !== undefined) return false;
      let changed = false;
      for (const which of ['object', 'oldObject'] as const) {
        const config = (spec(world.request, which).kubeadmConfigSpec as { clusterConfiguration?: Json } | undefined)
          ?.clusterConfiguration;
        if (config?.etcd !== undefined && (config.etcd as Json).external !== undefined) {
          config.etcd = { local: {} };
          changed = true;
        }
      }
      return changed;
    },
  },
  {
    // A spec.ordinals the guard cannot read is what it knows of a /scale request (a Scale carries none).
    name: 'StatefulSet ordinals made unreadable',
    apply: (world) => {
      if (world.kind !== 'sts-spec') return false;
      for (const which of ['object', 'oldObject'] as const) spec(world.request, which).ordinals = { start: 'unknown' };
      return true;
    },
  },
  {
    name: 'maxSurge made unreadable',
    apply: (world) => {
      if (world.parent !== undefined) return false;
      const rollout = spec(world.request, 'object').rollout as { strategy: { rollingUpdate: Json } } | undefined;
      if (rollout === undefined) return false;
      rollout.strategy.rollingUpdate.maxSurge = '50%';
      const old = spec(world.request, 'oldObject').rollout as { strategy: { rollingUpdate: Json } };
      old.strategy.rollingUpdate.maxSurge = '50%';
      return true;
    },
  },
];

/** Every door's evaluation may also have lost its member list (every endpoint failed to answer it). */
const MEMBER_LIST_LOST: Degradation = {
  name: 'the evaluation lost its member list',
  apply: (world) => {
    world.memberListLost = true;
    return true;
  },
};

/** What the DELETE doors (and the UPDATEs that strip their keys) read: the Machine, its owner, the members. */
const DOOR_DEGRADATIONS: Degradation[] = [
  {
    name: 'the deleted Machine’s nodeRef blanked',
    apply: (world) => {
      if (world.kind !== 'machine-delete' && world.kind !== 'machine-strip') return false;
      for (const which of ['oldObject', 'object'] as const) {
        const object = world.request[which] as Json | null | undefined;
        if (object) delete (object.status as Json).nodeRef;
      }
      return true;
    },
  },
  {
    name: 'the DELETE’s owner read fails',
    apply: (world) => {
      if (world.parent === undefined) return false;
      world.parent = { ok: false, message: 'timed out' };
      return true;
    },
  },
  ...DEGRADATIONS.filter((degradation) => degradation.name === 'a member name blanked in the evaluation'),
  MEMBER_LIST_LOST,
];

/** What an upgrade hook's answer reads: the control plane read, the topology's replicas, what a KCP rollout reads. */
const HOOK_DEGRADATIONS: Degradation[] = [
  ...DEGRADATIONS,
  MEMBER_LIST_LOST,
  {
    name: 'the control plane read fails',
    apply: (world) => {
      world.parent = { ok: false, message: 'timed out' };
      return true;
    },
  },
  {
    name: 'the control plane not found yet (the Cluster’s cluster-name label stands in)',
    apply: (world) => {
      world.parent = { ok: false, message: 'not found', notFound: true };
      return true;
    },
  },
  {
    name: 'the topology’s control plane replicas unset',
    apply: (world) => {
      const topology = (((world.hook?.body.cluster as Json | undefined)?.spec as Json | undefined)?.topology ?? {}) as {
        controlPlane?: Json;
      };
      if (topology.controlPlane?.replicas === undefined) return false;
      delete topology.controlPlane.replicas;
      return true;
    },
  },
];

/** What the Cluster door reads besides what a KCP edit reads: the KCP itself. */
const CLUSTER_DEGRADATIONS: Degradation[] = [
  // Those of a KCP edit that apply (the Machines on a shrink, member names) and the KCP read's own.
  ...DEGRADATIONS,
  MEMBER_LIST_LOST,
  {
    name: 'the KubeadmControlPlane read fails',
    apply: (world) => {
      if (readKcp(world) === null) return false;
      world.parent = { ok: false, message: 'timed out' };
      return true;
    },
  },
  {
    name: 'the KubeadmControlPlane’s maxSurge made unreadable',
    apply: (world) => {
      const kcp = readKcp(world);
      if (kcp === null) return false;
      kcp.spec.rollout = { strategy: { rollingUpdate: { maxSurge: '50%' } } };
      return true;
    },
  },
  {
    name: 'external etcd removed from the KubeadmControlPlane read',
    apply: (world) => {
      const kcp = readKcp(world);
      if (kcp === null) return false;
      kcp.spec.kubeadmConfigSpec = { clusterConfiguration: { etcd: { local: {} } } };
      return true;
    },
  },
];

interface PropertyRun {
  counts: { inputs: number; guarded: number; fullDenied: number; degradations: number; degradedStricter: number };
  byDegradation: Map<string, number>;
  violations: string[];
}

/** Every generated world, then each degradation alone and two at once: a deny must stay a deny. */
function runProperty(seed: number, inputs: number, gen: (random: Rng) => World, degradations: Degradation[]): PropertyRun {
  const random = rng(seed);
  const counts = { inputs: 0, guarded: 0, fullDenied: 0, degradations: 0, degradedStricter: 0 };
  const byDegradation = new Map(degradations.map((degradation) => [degradation.name, 0]));
  const violations: string[] = [];
  for (let index = 0; index < inputs; index += 1) {
    const world = gen(random);
    counts.inputs += 1;
    const full = allowedIn(structuredClone(world));
    if (full === null) continue;
    counts.guarded += 1;
    if (!full) counts.fullDenied += 1;
    const plans = [...degradations.map((degradation) => [degradation]), [random.pick(degradations), random.pick(degradations)]];
    for (const plan of plans) {
      const degraded = structuredClone(world);
      if (!plan.map((degradation) => degradation.apply(degraded, random)).some(Boolean)) continue;
      counts.degradations += 1;
      for (const degradation of plan) byDegradation.set(degradation.name, (byDegradation.get(degradation.name) ?? 0) + 1);
      const allowed = allowedIn(degraded);
      if (full && allowed === false) counts.degradedStricter += 1;
      if (!full && allowed === true && violations.length < 5) {
        violations.push(`input ${index} (${world.kind}): ${plan.map((degradation) => degradation.name).join(' + ')}`);
      }
    }
  }
  return { counts, byDegradation, violations };
}

describe('less information never allows more', () => {
  it(`issue 28: over ${DOOR_INPUTS} generated Machine and pod DELETEs, no degradation turns a deny into an allow`, () => {
    const { counts, byDegradation, violations } = runProperty(28, DOOR_INPUTS, genDoorWorld, DOOR_DEGRADATIONS);
    console.log(
      `less-information property, DELETE doors: ${JSON.stringify(counts)}; per degradation: ${JSON.stringify(Object.fromEntries(byDegradation))}`,
    );
    expect(violations).toEqual([]);
    expect(counts.guarded).toBe(DOOR_INPUTS);
    expect(counts.fullDenied).toBeGreaterThan(DOOR_INPUTS / 10);
    expect(counts.degradedStricter).toBeGreaterThan(DOOR_INPUTS / 20);
  });

  it(`issue 28: over ${DOOR_INPUTS} generated Cluster topology changes, no degradation turns a deny into an allow`, () => {
    const { counts, byDegradation, violations } = runProperty(2828, DOOR_INPUTS, genClusterWorld, CLUSTER_DEGRADATIONS);
    console.log(
      `less-information property, Cluster topology door: ${JSON.stringify(counts)}; per degradation: ${JSON.stringify(Object.fromEntries(byDegradation))}`,
    );
    expect(violations).toEqual([]);
    expect(counts.guarded).toBeGreaterThan(DOOR_INPUTS / 3);
    expect(counts.fullDenied).toBeGreaterThan(DOOR_INPUTS / 10);
    expect(counts.degradedStricter).toBeGreaterThan(DOOR_INPUTS / 20);
  });

  it(`issue 28: over ${DOOR_INPUTS} generated upgrade hook requests, no degradation turns a retry into a proceed`, () => {
    const { counts, byDegradation, violations } = runProperty(2829, DOOR_INPUTS, genHookWorld, HOOK_DEGRADATIONS);
    console.log(
      `less-information property, Runtime Extension hooks: ${JSON.stringify(counts)}; per degradation: ${JSON.stringify(Object.fromEntries(byDegradation))}`,
    );
    expect(violations).toEqual([]);
    expect(counts.guarded).toBe(DOOR_INPUTS);
    expect(counts.fullDenied).toBeGreaterThan(DOOR_INPUTS / 10);
    expect(counts.degradedStricter).toBeGreaterThan(DOOR_INPUTS / 20);
  });

  it(`issue 28: over ${DOOR_INPUTS} generated label and owner strips, no degradation turns a deny into an allow`, () => {
    const { counts, byDegradation, violations } = runProperty(2830, DOOR_INPUTS, genStripWorld, DOOR_DEGRADATIONS);
    console.log(
      `less-information property, label-strip door: ${JSON.stringify(counts)}; per degradation: ${JSON.stringify(Object.fromEntries(byDegradation))}`,
    );
    expect(violations).toEqual([]);
    expect(counts.guarded).toBe(DOOR_INPUTS);
    expect(counts.fullDenied).toBeGreaterThan(DOOR_INPUTS / 10);
    expect(counts.degradedStricter).toBeGreaterThan(DOOR_INPUTS / 20);
  });

  // Seeds 20 and 21 found a Machine missing from the listing turning a KCP deny into an allow
  // (removal.test.ts, "less information, seed 20 input 620"); 17 was the only seed before.
  it.each(SEEDS)(`seed %i: over ${INPUTS} generated inputs, no degradation turns a deny into an allow`, (seed) => {
    const { counts, byDegradation, violations } = runProperty(seed, INPUTS, genWorld, DEGRADATIONS);
    console.log(
      `less-information property, seed ${seed}: ${JSON.stringify(counts)}; per degradation: ${JSON.stringify(Object.fromEntries(byDegradation))}`,
    );
    expect(violations).toEqual([]);
    // The property is only worth something if the generator reaches denials and degradations bite.
    expect(counts.fullDenied).toBeGreaterThan(INPUTS / 10);
    expect(counts.degradedStricter).toBeGreaterThan(INPUTS / 20);
  });
});
