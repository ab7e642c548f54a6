// Issue 16, the tenant suite: a tenant with namespace-admin rights in `team` (KCPs, Clusters,
// Machines, Secrets, labels, owner references) tries every path we could think of to make its own
// Unhealthy cluster (team/own) or another tenant's (team-a/prod) pass, or to deny another tenant's
// changes (team-b/web, Healthy). Real processes: the webhook over HTTPS with capi discovery against
// the management stand-in, three real 3-member etcd clusters reached through their workload
// stand-ins' pod port-forward, evaluations made by the real scheduled run into a file store. A
// static catch-all target (`match: {}`) with a Healthy evaluation is configured on purpose: before
// issue 16 every object discovery could not resolve fell to it and was allowed.
//
// The tenant's admission requests are applied to the management stand-in only when the webhook
// allows them, as the API server would. Each path then re-runs discovery and the scheduled run and
// probes: team/own and team-a/prod scale-ups must be denied, team-b/web's allowed.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig, type GuardConfig } from '../../functions/domain/config.js';
import { discoveredTargetName } from '../../functions/domain/targets.js';
import type { EvaluationStore } from '../../functions/domain/store.js';
import { resolveTargets } from '../../functions/usecases/resolve-targets.js';
import { evaluateResolvedTarget } from '../../functions/usecases/reach-target.js';
import { runScheduledEvaluation } from '../../functions/usecases/scheduled-run.js';
import { createLogger } from '../../functions/shared/logger.js';
import { TargetRegistry } from '../../functions/usecases/live-target-set.js';
import {
  controlPlaneMachine,
  putCapiSecrets,
  secretObject,
  startCapiWorkload,
  type CapiWorkload,
} from '../harness/capi-workload.js';
import { generateTestCerts } from '../harness/certs.js';
import { makeEvaluation } from '../harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../harness/fake-kube-apiserver.js';
import { fixtureReview } from '../harness/reviews.js';
import { startTestWebhook, type TestWebhook } from '../harness/webhook.js';

const TOKEN = 'tenant-suite-token-0123456789abcdef';
const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });
const KCP_VERSION = 'controlplane.cluster.x-k8s.io/v1beta1';
const STATIC_CATCH_ALL = 'legacy';

interface Tenant {
  namespace: string;
  cluster: string;
  workload: CapiWorkload;
}
let workDir: string;
let management: FakeKubeApiServer;
let own: Tenant; // the attacker's own cluster, Unhealthy
let victimA: Tenant; // another tenant's Unhealthy cluster
let victimB: Tenant; // another tenant's Healthy cluster
let config: GuardConfig;
let store: EvaluationStore;
let registry: TargetRegistry;
let webhook: TestWebhook;
const tally = { paths: 0, tenantRequests: 0, tenantAllowed: [] as string[], probes: 0, wrongAllows: [] as string[] };
const crossTenantDenials: string[] = [];
const runTimes: number[] = [];

const kcpName = (tenant: Pick<Tenant, 'cluster'>) => `${tenant.cluster}-control-plane`;
const clusterUid = (namespace: string, cluster: string, generation = 1) => `${namespace}-${cluster}-uid-${generation}`;

function kcpObject(namespace: string, name: string, cluster: string, uidOfCluster: string): FakeObject {
  const kcp = JSON.parse(readFileSync(new URL('../fixtures/discovery/kcp-v1beta1.json', import.meta.url), 'utf8')) as FakeObject;
  Object.assign(kcp.metadata, {
    name,
    namespace,
    uid: `${namespace}-${name}-kcp-uid`,
    labels: { 'cluster.x-k8s.io/cluster-name': cluster },
    ownerReferences: [{ apiVersion: 'cluster.x-k8s.io/v1beta1', kind: 'Cluster', name: cluster, uid: uidOfCluster }],
  });
  return kcp;
}

function clusterObject(namespace: string, name: string, uidOfCluster: string, controlPlane: string): FakeObject {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta1',
    kind: 'Cluster',
    metadata: { name, namespace, uid: uidOfCluster },
    spec: { controlPlaneRef: { apiVersion: KCP_VERSION, kind: 'KubeadmControlPlane', name: controlPlane, namespace } },
  };
}

const machine = (namespace: string, clusterName: string, node: string) => controlPlaneMachine({ namespace, clusterName }, node);

/** The KCP, Cluster and Machines of a tenant's cluster, linked as Cluster API links them. */
function putControlPlane(tenant: Tenant): void {
  const uidOfCluster = clusterUid(tenant.namespace, tenant.cluster);
  management.putObject('kubeadmcontrolplanes', kcpObject(tenant.namespace, kcpName(tenant), tenant.cluster, uidOfCluster));
  management.putObject('clusters', clusterObject(tenant.namespace, tenant.cluster, uidOfCluster, kcpName(tenant)));
  for (const node of tenant.workload.nodeNames) management.putObject('machines', machine(tenant.namespace, tenant.cluster, node));
}

/** What the management stand-in holds for a KCP now (the oldObject of the next UPDATE). */
const kcps = new Map<string, FakeObject>();
function currentKcp(namespace: string, name: string): FakeObject {
  const kcp = kcps.get(`${namespace}/${name}`);
  if (kcp === undefined) throw new Error(`no KCP ${namespace}/${name} in the test's record`);
  return structuredClone(kcp);
}
function storeKcp(kcp: FakeObject): void {
  management.putObject('kubeadmcontrolplanes', kcp);
  kcps.set(`${kcp.metadata.namespace}/${kcp.metadata.name}`, structuredClone(kcp));
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-tenant-'));
  management = await startFakeKubeApiServer();
  const [certs, wOwn, wA, wB] = await Promise.all([
    generateTestCerts(workDir),
    startCapiWorkload(management, { namespace: 'team', clusterName: 'own' }),
    startCapiWorkload(management, { namespace: 'team-a', clusterName: 'prod' }),
    startCapiWorkload(management, { namespace: 'team-b', clusterName: 'web' }),
  ]);
  own = { namespace: 'team', cluster: 'own', workload: wOwn };
  victimA = { namespace: 'team-a', cluster: 'prod', workload: wA };
  victimB = { namespace: 'team-b', cluster: 'web', workload: wB };
  for (const tenant of [own, victimA, victimB]) {
    putControlPlane(tenant);
    kcps.set(
      `${tenant.namespace}/${kcpName(tenant)}`,
      kcpObject(tenant.namespace, kcpName(tenant), tenant.cluster, clusterUid(tenant.namespace, tenant.cluster)),
    );
  }
  // Two Unhealthy clusters: one member down each.
  await Promise.all([wOwn.etcd.kill(2), wA.etcd.kill(2)]);
  // The tenant also runs a healthy etcd of its own (here: team-b's, reached with copies of its
  // credentials under the tenant's "decoy" cluster name).
  await putCapiSecrets(management, { namespace: 'team', clusterName: 'decoy' }, wB);
  config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 120,
      inlineRefresh: false,
      targets: [{ name: STATIC_CATCH_ALL, endpoints: ['https://127.0.0.1:2379'], match: {} }],
      discovery: {
        capi: { namespaces: ['team', 'team-a', 'team-b'] },
        kubeconfigFile: management.kubeconfigFile,
        timeout: '5s',
      },
    },
    'tenant suite config',
  );
  store = createStore(config.store);
  let follow: (names: string[]) => void = () => undefined;
  registry = new TargetRegistry(config, { onChange: (targets) => follow(targets.map((target) => target.name)) });
  webhook = await startTestWebhook({
    config,
    certs,
    token: TOKEN,
    logger: silent,
    store,
    registry,
    pollIntervalMs: 100,
    kubeconfigFile: management.kubeconfigFile,
  });
  follow = (names) => webhook.server.cache.setTargets(names);
  webhook.server.cache.setTargets(registry.names());
}, 120_000);

afterAll(async () => {
  await webhook?.close();
  await Promise.all([own?.workload.destroy(), victimA?.workload.destroy(), victimB?.workload.destroy(), management?.close()]);
  if (workDir) await rm(workDir, { recursive: true, force: true });
  process.stdout.write(
    `tenant suite: ${tally.paths} attack paths, ${tally.tenantRequests} tenant requests (${tally.tenantAllowed.length} allowed: ${tally.tenantAllowed.join('; ') || 'none'}), ` +
      `${tally.probes} probes, ${tally.wrongAllows.length} wrong allows, ${crossTenantDenials.length} cross-tenant denials, ` +
      `scheduled runs ${runTimes.map((ms) => Math.round(ms)).join('/')} ms\n`,
  );
});

/** A discovery round in the webhook, a scheduled run, the static catch-all stored Healthy, and the cache caught up. */
async function refreshAndEvaluate(): Promise<void> {
  await registry.refresh();
  const started = performance.now();
  await runScheduledEvaluation({
    config: { ...config, targets: [] },
    store,
    // As the CronJob does: the stored evaluation is read back (learner ages, the pinned cluster ID).
    evaluate: (target, context) => evaluateResolvedTarget(target, { ...context }),
    resolveTargets: (timeoutMs) => resolveTargets({ ...config, targets: [] }, { timeoutMs }),
    logger: silent,
  });
  runTimes.push(performance.now() - started);
  await store.write(makeEvaluation({ target: STATIC_CATCH_ALL, evaluatedAt: new Date().toISOString() }));
  for (const target of registry.names()) {
    const stored = await store.read(target);
    if (stored === null) continue;
    await webhook.waitCached(stored, 10_000);
  }
}

/** An AdmissionReview (the envelope of a real one) for an UPDATE of a KCP from `oldObject` to `object`. */
function updateReview(oldObject: FakeObject, object: FakeObject, subResource?: 'scale') {
  const fixture = subResource ? 'kcp-scale-up-3-to-5.json' : 'kcp-v1beta1-edit-version.json';
  const review = fixtureReview(fixture, { namespace: object.metadata.namespace, name: object.metadata.name });
  review.request.userInfo = { username: 'tenant-admin', groups: ['team:admins', 'system:authenticated'] };
  if (!subResource) Object.assign(review.request, { object, oldObject });
  return review;
}

async function validate(review: ReturnType<typeof updateReview>): Promise<{ allowed: boolean; message: string }> {
  const response = await webhook.postReview(review);
  return { allowed: response.allowed, message: response.status?.message ?? '' };
}

/** The tenant's UPDATE of one of its KCPs; applied to the stand-in only when the webhook allows it. */
async function tenantUpdate(path: string, edit: (kcp: FakeObject) => void, namespace = 'team', name = kcpName(own)) {
  const oldObject = currentKcp(namespace, name);
  const object = structuredClone(oldObject);
  edit(object);
  const answer = await validate(updateReview(oldObject, object));
  tally.tenantRequests += 1;
  if (answer.allowed) {
    tally.tenantAllowed.push(path);
    storeKcp(object);
  }
  return answer;
}

/** Scale-ups of the three clusters: own and team-a/prod must be denied, team-b/web allowed. */
async function probe(path: string, extra: Array<{ namespace: string; name: string }> = []): Promise<void> {
  for (const { namespace, name } of [
    { namespace: own.namespace, name: kcpName(own) },
    { namespace: victimA.namespace, name: kcpName(victimA) },
    ...extra,
  ]) {
    const kcp = currentKcp(namespace, name);
    const scale = await validate(updateReview(kcp, kcp, 'scale'));
    const bump = structuredClone(kcp) as FakeObject & { spec: { replicas: number } };
    bump.spec.replicas = 5;
    const edit = await validate(updateReview(kcp, bump));
    tally.probes += 2;
    if (scale.allowed) tally.wrongAllows.push(`${path}: /scale of ${namespace}/${name}`);
    if (edit.allowed) tally.wrongAllows.push(`${path}: replicas edit of ${namespace}/${name}`);
  }
  const b = currentKcp(victimB.namespace, kcpName(victimB));
  const scaleB = await validate(updateReview(b, b, 'scale'));
  tally.probes += 1;
  if (!scaleB.allowed) crossTenantDenials.push(`${path}: ${scaleB.message}`);
  const health = await webhook.request('GET', '/healthz', { timeoutMs: 5_000 });
  expect(health.status).toBe(200);
}

describe('a tenant with namespace-admin rights in "team"', () => {
  it('baseline: its own and team-a’s Unhealthy clusters are denied, team-b’s Healthy one allowed', async () => {
    await refreshAndEvaluate();
    expect(registry.names()).toEqual(
      expect.arrayContaining([
        discoveredTargetName('capi', 'team', 'own'),
        discoveredTargetName('capi', 'team-a', 'prod'),
        discoveredTargetName('capi', 'team-b', 'web'),
      ]),
    );
    expect((await store.read(discoveredTargetName('capi', 'team', 'own')))?.verdict).toBe('Unhealthy');
    expect((await store.read(discoveredTargetName('capi', 'team-b', 'web')))?.passed).toBe(true);
    await probe('baseline');
    expect(tally.wrongAllows).toEqual([]);
    expect(crossTenantDenials).toEqual([]);
  }, 60_000);

  type Attack = [string, () => Promise<void>];
  const decoyUid = clusterUid('team', 'decoy');
  const ATTACKS: Attack[] = [
    [
      're-points its KCP’s owner reference to a fake Cluster that names the KCP back (metadata only)',
      async () => {
        management.putObject('clusters', clusterObject('team', 'decoy', decoyUid, kcpName(own)));
        const answer = await tenantUpdate('re-point owner', (kcp) => {
          kcp.metadata.ownerReferences = [
            { apiVersion: 'cluster.x-k8s.io/v1beta1', kind: 'Cluster', name: 'decoy', uid: decoyUid },
          ];
          kcp.metadata.labels = { 'cluster.x-k8s.io/cluster-name': 'decoy' };
        });
        expect(answer.message).toMatch(/change of what decides its target.*verdict Unhealthy/s);
      },
    ],
    [
      'relabels its KCP’s cluster-name only',
      async () => {
        await tenantUpdate(
          'relabel cluster-name',
          (kcp) => void (kcp.metadata.labels = { 'cluster.x-k8s.io/cluster-name': 'decoy' }),
        );
      },
    ],
    [
      'labels its KCP into another tenant’s cluster-name (prod)',
      async () => {
        await tenantUpdate('label into prod', (kcp) => void (kcp.metadata.labels = { 'cluster.x-k8s.io/cluster-name': 'prod' }));
      },
    ],
    [
      'drops every owner reference of its KCP',
      async () => {
        await tenantUpdate('drop owners', (kcp) => void (kcp.metadata.ownerReferences = []));
      },
    ],
    [
      're-points the owner reference and scales in the same request',
      async () => {
        const answer = await tenantUpdate('re-point and scale', (kcp) => {
          kcp.metadata.ownerReferences = [
            { apiVersion: 'cluster.x-k8s.io/v1beta1', kind: 'Cluster', name: 'decoy', uid: decoyUid },
          ];
          (kcp as FakeObject & { spec: { replicas: number } }).spec.replicas = 5;
        });
        expect(answer.message).toContain('moves');
      },
    ],
    [
      'adds a second Cluster owner reference (to the decoy)',
      async () => {
        await tenantUpdate('second owner', (kcp) => {
          const owners = kcp.metadata.ownerReferences as object[];
          kcp.metadata.ownerReferences = [
            ...owners,
            { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', name: 'decoy', uid: decoyUid },
          ];
        });
      },
    ],
    [
      'creates a fake Cluster whose controlPlaneRef claims its KCP, without touching the KCP',
      async () => {
        management.putObject('clusters', clusterObject('team', 'decoy', decoyUid, kcpName(own)));
      },
    ],
    [
      'forges its own <cluster>-kubeconfig and <cluster>-etcd Secrets with a healthy etcd’s credentials',
      async () => {
        await putCapiSecrets(management, { namespace: 'team', clusterName: 'own' }, victimB.workload);
      },
    ],
    [
      'puts Secrets named after the other tenants’ clusters in its namespace',
      async () => {
        await putCapiSecrets(management, { namespace: 'team', clusterName: 'prod' }, victimB.workload);
        management.putObject('secrets', secretObject('team', 'web-kubeconfig', { value: 'apiVersion: v1\nkind: Config\n' }));
        management.putObject('secrets', secretObject('team', 'web-etcd', { 'tls.crt': 'x', 'tls.key': 'y' }));
      },
    ],
    [
      'creates Machines claiming the other tenants’ nodes (labelled with their cluster names)',
      async () => {
        for (const node of victimA.workload.nodeNames) management.putObject('machines', machine('team', 'prod', node));
        for (const node of victimB.workload.nodeNames) management.putObject('machines', machine('team', 'web', `${node}-x`));
      },
    ],
  ];
  const LATER_ATTACKS: Attack[] = [
    [
      'points its real Cluster’s controlPlaneRef elsewhere',
      async () => {
        management.putObject('clusters', clusterObject('team', 'own', clusterUid('team', 'own'), 'elsewhere'));
      },
    ],
    [
      're-creates its Cluster under the same name (a new uid) naming its KCP',
      async () => {
        management.putObject('clusters', clusterObject('team', 'own', clusterUid('team', 'own', 2), kcpName(own)));
      },
    ],
    [
      'creates a KCP and Cluster in its namespace whose name collides with team-b/web’s hashed target name',
      async () => {
        const victimName = discoveredTargetName('capi', 'team-b', 'web');
        for (const [index, cluster] of [
          victimName.slice('capi-team-'.length),
          victimName.slice('capi-team-'.length).replace('--', '-'),
        ].entries()) {
          const uidOfCluster = clusterUid('team', `collide-${index}`);
          const kcp = kcpObject('team', `collide-${index}-cp`, cluster, uidOfCluster);
          kcp.metadata.labels = {};
          storeKcp(kcp);
          management.putObject('clusters', clusterObject('team', cluster, uidOfCluster, `collide-${index}-cp`));
        }
        await registry.refresh();
        expect(registry.get(victimName)?.guards).toMatchObject({ namespace: 'team-b', name: kcpName(victimB) });
      },
    ],
    [
      'creates a KCP owned by team-a’s Cluster (its name and uid) in its own namespace',
      async () => {
        storeKcp(kcpObject('team', 'steal-cp', 'prod', clusterUid('team-a', 'prod')));
      },
    ],
    [
      'creates a new KCP and Cluster and scales them before discovery has listed them',
      async () => {
        const uidOfCluster = clusterUid('team', 'fresh');
        storeKcp(kcpObject('team', 'fresh-control-plane', 'fresh', uidOfCluster));
        management.putObject('clusters', clusterObject('team', 'fresh', uidOfCluster, 'fresh-control-plane'));
        await putCapiSecrets(management, { namespace: 'team', clusterName: 'fresh' }, victimB.workload);
        const kcp = currentKcp('team', 'fresh-control-plane');
        const answer = await validate(updateReview(kcp, kcp, 'scale'));
        tally.tenantRequests += 1;
        if (answer.allowed) tally.tenantAllowed.push('scale before discovery listed');
        expect(answer.message).toContain('not there when discovery last listed');
      },
    ],
  ];

  const runAttack = async (name: string, attack: () => Promise<void>) => {
    tally.paths += 1;
    const before = { allowed: tally.tenantAllowed.length, wrong: tally.wrongAllows.length, cross: crossTenantDenials.length };
    await attack();
    await refreshAndEvaluate();
    await probe(name);
    expect(tally.tenantAllowed.slice(before.allowed)).toEqual([]);
    expect(tally.wrongAllows.slice(before.wrong)).toEqual([]);
    expect(crossTenantDenials.slice(before.cross)).toEqual([]);
  };
  it.each(ATTACKS)('%s: 0 allows, 0 cross-tenant denials, 0 crashes', runAttack, 60_000);

  // Issue 30 item 10, "a tenant lying about its own cluster": its Secrets reach a healthy etcd
  // (forged above) AND its Machines name that etcd's members, so every other check passes. Its
  // target's first evaluation pinned its real etcd's cluster ID; the healthy etcd answers as
  // another cluster, so the cluster-id check fails naming both IDs and its changes stay denied.
  it('rewrites its own Machines to name the healthy etcd’s members, after forging its Secrets: denied by the pinned cluster ID', async () => {
    for (const node of own.workload.nodeNames)
      management.removeObject('machines', 'cluster.x-k8s.io/v1beta1', 'team', `${node}-machine`);
    for (const node of victimB.workload.nodeNames) management.putObject('machines', machine('team', 'own', node));
    try {
      await refreshAndEvaluate();
      const before = tally.wrongAllows.length;
      await probe('self-lie');
      const selfLie = tally.wrongAllows.splice(before);
      expect(selfLie).toEqual([]);
      const stored = await store.read(discoveredTargetName('capi', 'team', 'own'));
      expect(stored?.verdict).toBe('Unhealthy');
      expect(stored?.reasons.join('\n')).toMatch(
        /etcd cluster ID changed: this target was pinned to cluster \S+ .* now answers as cluster \S+/,
      );
    } finally {
      for (const node of victimB.workload.nodeNames)
        management.removeObject('machines', 'cluster.x-k8s.io/v1beta1', 'team', `${node}-machine`);
      for (const node of own.workload.nodeNames) management.putObject('machines', machine('team', 'own', node));
    }
  }, 60_000);

  it.each(LATER_ATTACKS)('%s: 0 allows, 0 cross-tenant denials, 0 crashes', runAttack, 60_000);
});

describe('a webhook that starts while the management API is unreachable', () => {
  it('denies a discovered-scope KCP naming why, never judging it by the static catch-all', async () => {
    const unreachable = await startFakeKubeApiServer();
    const kubeconfigFile = path.join(workDir, 'unreachable-kubeconfig');
    await import('node:fs/promises').then((fs) => fs.copyFile(unreachable.kubeconfigFile, kubeconfigFile));
    await unreachable.close();
    const staleConfig = parseGuardConfig(
      {
        store: { kind: 'file', dir: path.join(workDir, 'store') },
        maxAgeSeconds: 120,
        inlineRefresh: false,
        targets: [{ name: STATIC_CATCH_ALL, endpoints: ['https://127.0.0.1:2379'], match: {} }],
        discovery: { capi: { namespaces: ['team', 'team-a', 'team-b'] }, kubeconfigFile },
      },
      'stale discovery config',
    );
    // Plain HTTP: what it decides is the point, not how it is reached.
    const stale = await startTestWebhook({ config: staleConfig, token: TOKEN, logger: silent, store, pollIntervalMs: 100 });
    try {
      await expect.poll(() => stale.server.cache.get(STATIC_CATCH_ALL)?.verdict, { timeout: 10_000 }).toBe('Healthy');
      const kcp = currentKcp('team-a', kcpName(victimA));
      const answer = await stale.postReview(updateReview(kcp, kcp, 'scale'), { query: '' });
      expect(answer.allowed).toBe(false);
      expect(answer.status?.message).toContain('discovery has not listed the management cluster yet');
    } finally {
      await stale.close();
    }
  }, 60_000);
});
