import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listControlPlaneMachines } from './capi-machines.js';
import { createCustomObjectsApi } from './kube-discovery.js';
import { decisionMaxAgeMsOf, decisionModeOf, parseGuardConfig, type GuardConfig } from '../domain/config.js';
import { Deadline } from '../domain/deadline.js';
import { capiTargets, druidTargets, quantityBytes } from '../domain/discovery-mapping.js';
import { discoveredTargetName, mergeTargets, MAX_TARGET_NAME } from '../domain/targets.js';
import { resolveTargets } from '../usecases/resolve-targets.js';
import { runScheduledEvaluation } from '../usecases/scheduled-run.js';
import { createLogger } from '../shared/logger.js';
import { ConfigMapStore } from './configmap-store.js';
import { FileStore } from './file-store.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { makeEvaluation } from '../../test/harness/evaluation-fixture.js';
import { isDnsLabel } from '../shared/names.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../../test/harness/fake-kube-apiserver.js';

const fixture = (name: string): FakeObject =>
  JSON.parse(readFileSync(new URL(`../../test/fixtures/discovery/${name}.json`, import.meta.url), 'utf8')) as FakeObject;
const DEFAULTS = { timeout: 5000 };
/** The Clusters the KCP fixtures belong to (owner reference uid, controlPlaneRef back). */
const CLUSTERS = [fixture('cluster-prod'), fixture('cluster-staging-v1beta2')];

describe("a discovery scope's enforcement", () => {
  it.each(['warn', 'audit'] as const)('is copied onto every capi and druid target it finds (%s)', (mode) => {
    const defaults = { ...DEFAULTS, enforcement: mode };
    const capi = capiTargets([fixture('kcp-v1beta1'), fixture('kcp-v1beta2')], CLUSTERS, defaults).targets;
    const druid = druidTargets([fixture('etcd-druid')], defaults).targets;
    expect(capi.length + druid.length).toBe(3);
    for (const target of [...capi, ...druid]) expect(target.enforcement, target.name).toBe(mode);
  });

  it('is left to the config-wide default when the scope names none', () => {
    const targets = [
      ...capiTargets([fixture('kcp-v1beta1')], CLUSTERS, DEFAULTS).targets,
      ...druidTargets([fixture('etcd-druid')], DEFAULTS).targets,
    ];
    expect(targets.map((target) => target.enforcement)).toEqual([undefined, undefined]);
  });
});

describe("issue 27: a discovery scope's decision settings", () => {
  it('decisionMaxAgeMs and decision are copied onto every capi and druid target it finds, and the config resolves them', () => {
    const defaults = { ...DEFAULTS, decisionMaxAgeMs: 250, decision: 'cached' as const };
    const capi = capiTargets([fixture('kcp-v1beta1')], CLUSTERS, defaults).targets;
    const druid = druidTargets([fixture('etcd-druid')], defaults).targets;
    for (const target of [...capi, ...druid]) {
      expect(target, target.name).toMatchObject({ decisionMaxAgeMs: 250, decision: 'cached' });
      const config = parseGuardConfig({ targets: [], discovery: { capi: {} } }, 'test');
      expect(decisionModeOf(config, target)).toBe('cached');
      expect(decisionMaxAgeMsOf(config, target)).toBe(250);
    }
    const plain = capiTargets([fixture('kcp-v1beta1')], CLUSTERS, DEFAULTS).targets[0];
    expect(plain).not.toHaveProperty('decision');
    expect(plain).not.toHaveProperty('decisionMaxAgeMs');
  });

  it.each([
    ['the defaults', {}, undefined, 'live', 1_000],
    ['inlineRefresh: false means decision: cached', { inlineRefresh: false }, undefined, 'cached', 1_000],
    [
      'a top-level decision wins over inlineRefresh',
      { inlineRefresh: false, decision: 'live', decisionMaxAgeMs: 0 },
      undefined,
      'live',
      0,
    ],
    ["a target's own settings win", { decision: 'live' }, { decision: 'cached', decisionMaxAgeMs: 5_000 }, 'cached', 5_000],
  ] as const)('%s', (_name, top, target, mode, maxAgeMs) => {
    const config = parseGuardConfig({ ...top, targets: [], discovery: { capi: {} } }, 'test');
    expect(decisionModeOf(config, target)).toBe(mode);
    expect(decisionMaxAgeMsOf(config, target)).toBe(maxAgeMs);
  });

  it.each([
    [{ decisionMaxAgeMs: -1 }, 'decisionMaxAgeMs'],
    [{ decisionMaxAgeMs: 1.5 }, 'decisionMaxAgeMs'],
    [{ decision: 'sometimes' }, 'decision'],
    [{ discovery: { druid: { decision: 'never' } } }, 'discovery.druid.decision'],
  ])('refuses %j naming the field', (bad, field) => {
    expect(() => parseGuardConfig({ targets: [], discovery: { capi: {} }, ...bad }, 'test')).toThrow(field);
  });
});

describe('discovered target names', () => {
  it.each([
    ['capi', 'fleet', 'prod', 'capi-fleet-prod'],
    ['druid', 'garden', 'etcd-main', 'druid-garden-etcd-main'],
  ] as const)('%s %s/%s is the readable %s when unambiguous and short', (source, namespace, name, expected) => {
    expect(discoveredTargetName(source, namespace, name)).toBe(expected);
  });

  it.each([
    ['a namespace with "-" (the split would be ambiguous)', 'team-a', 'prod', /^capi-team-a-prod--[0-9a-f]{16}$/],
    ['a name with "."', 'fleet', 'staging.eu', /^capi-fleet-staging-eu--[0-9a-f]{16}$/],
    ['a name with "--"', 'fleet', 'a--b', /^capi-fleet-a-b--[0-9a-f]{16}$/],
    ['a name too long for 48 characters', 'fleet', 'x'.repeat(60), /^capi-fleet-x{19}--[0-9a-f]{16}$/],
    ['an owner name with "/"', 'fleet', 'a/b', /^capi-fleet-a-b--[0-9a-f]{16}$/],
    ['an owner name in uppercase', 'fleet', 'Prod', /^capi-fleet-prod--[0-9a-f]{16}$/],
    ['an owner name with a newline', 'fleet', 'prod\nx', /^capi-fleet-prod-x--[0-9a-f]{16}$/],
    ['an owner name of symbols only', 'fleet', '/..\n', /^capi-fleet--[0-9a-f]{16}$/],
  ])('%s gets a hash suffix after "--"', (_case, namespace, name, expected) => {
    const target = discoveredTargetName('capi', namespace, name);
    expect(target).toMatch(expected);
    expect(target.length).toBeLessThanOrEqual(MAX_TARGET_NAME);
    expect(isDnsLabel(target)).toBe(true);
    expect(discoveredTargetName('capi', namespace, name)).toBe(target);
  });

  it('objects whose namespace-name texts coincide across namespaces get different names', () => {
    const pairs = [
      ['a-b', 'c'],
      ['a', 'b-c'],
      ['a-b-c', 'x'.repeat(63)],
      ['a-b-c', `${'x'.repeat(63)}y`],
    ] as const;
    const names = pairs.map(([namespace, name]) => discoveredTargetName('capi', namespace, name));
    expect(new Set(names).size).toBe(pairs.length);
    expect(discoveredTargetName('capi', 'fleet', 'prod')).not.toBe(discoveredTargetName('druid', 'fleet', 'prod'));
  });

  it('a tenant in namespace "team" cannot take the hashed name of team-a/prod by its cluster name', () => {
    const victim = discoveredTargetName('capi', 'team-a', 'prod');
    const suffix = victim.slice('capi-team-'.length);
    // Both spellings a tenant could aim at: the name itself, and with the old single "-".
    for (const name of [suffix, suffix.replace('--', '-')]) {
      expect(discoveredTargetName('capi', 'team', name)).not.toBe(victim);
    }
  });

  it('exhaustively: every name is a DNS label a store accepts, readable and hashed names are disjoint, and no two objects share one', () => {
    // Every namespace and name up to 4 characters over an alphabet with the separators that made
    // names ambiguous, plus characters a store refuses; both sources.
    const alphabet = ['a', 'b', '-', '.', 'A', '/', '\n'];
    const words = (letters: readonly string[], maxLength: number) => {
      const all: string[] = [];
      for (let length = 1, layer = ['']; length <= maxLength; length += 1) {
        layer = layer.flatMap((text) => letters.map((letter) => text + letter));
        all.push(...layer);
      }
      return all;
    };
    const namespaces = words(alphabet, 2);
    const texts = [...words(alphabet, 3), ...words(['a', '-', '.', '/'], 4).filter((word) => word.length === 4)];
    const owners = new Map<string, string>();
    let readable = 0;
    let hashed = 0;
    const bad: string[] = [];
    for (const source of ['capi', 'druid'] as const) {
      for (const namespace of namespaces) {
        for (const name of texts) {
          const target = discoveredTargetName(source, namespace, name);
          const object = JSON.stringify([source, namespace, name]);
          if (!isDnsLabel(target, MAX_TARGET_NAME)) bad.push(`${object} -> ${JSON.stringify(target)} is not a store name`);
          const isHashed = /--[0-9a-f]{16}$/.test(target);
          if (isHashed) hashed += 1;
          else if (target.includes('--')) bad.push(`${object} -> ${target} is readable but holds "--"`);
          else readable += 1;
          const previous = owners.get(target);
          if (previous !== undefined) bad.push(`${object} and ${previous} share ${target}`);
          owners.set(target, object);
        }
      }
    }
    expect(bad).toEqual([]);
    expect(readable).toBeGreaterThan(100);
    expect(hashed).toBeGreaterThan(70_000);
  });
});

describe('capi provider (pure)', () => {
  it('makes a target per stacked-etcd KubeadmControlPlane of either version, named by its Cluster', () => {
    const { targets, problems } = capiTargets([fixture('kcp-v1beta1'), fixture('kcp-v1beta2')], CLUSTERS, DEFAULTS);
    expect(problems).toEqual([]);
    expect(targets.map((target) => [target.name, target.source, target.guards, target.reach, target.quotaBackendBytes])).toEqual([
      [
        'capi-fleet-prod',
        'capi',
        { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', namespace: 'fleet', name: 'prod-control-plane' },
        { kind: 'capi', namespace: 'fleet', clusterName: 'prod' },
        8589934592,
      ],
      [
        discoveredTargetName('capi', 'team-a', 'staging.eu'),
        'capi',
        { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', namespace: 'team-a', name: 'staging-cp' },
        { kind: 'capi', namespace: 'team-a', clusterName: 'staging.eu' },
        4294967296,
      ],
    ]);
    expect(targets[0]?.machines).toEqual({ namespace: 'fleet', clusterName: 'prod' });
    expect(targets[0]?.timeout).toBe(5000);
  });

  it('a cluster-name label that disagrees with the Cluster owner reference resolves nothing', () => {
    const kcp = fixture('kcp-v1beta1');
    kcp.metadata.labels = { 'cluster.x-k8s.io/cluster-name': 'relabelled' };
    const { targets, problems } = capiTargets([kcp], CLUSTERS, DEFAULTS);
    expect(targets).toEqual([]);
    expect(problems[0]?.message).toBe('its cluster.x-k8s.io/cluster-name label disagrees with its Cluster owner reference');
  });

  type Edit = (kcp: FakeObject, clusters: FakeObject[]) => void;
  const owner = (kcp: FakeObject) => (kcp.metadata.ownerReferences as Array<Record<string, unknown>>)[0] ?? {};
  const controlPlaneRef = (cluster: FakeObject | undefined) =>
    (cluster as unknown as { spec: { controlPlaneRef: Record<string, unknown> } }).spec.controlPlaneRef;
  it.each<[string, Edit, string]>([
    ['external etcd', () => undefined, 'uses external etcd'],
    [
      'no Cluster owner reference, only the cluster-name label',
      (kcp) => void (kcp.metadata.ownerReferences = []),
      'it has no Cluster owner reference',
    ],
    ['no namespace', (kcp) => void (kcp.metadata = { name: 'x' }), 'without namespace or name'],
    [
      'an owner reference without uid',
      (kcp) => void delete owner(kcp).uid,
      'its Cluster owner reference names no Cluster by name and uid',
    ],
    [
      'an owner reference whose uid is another Cluster’s (a fake Cluster re-created under the name)',
      (kcp) => void (owner(kcp).uid = '00000000-0000-4000-8000-000000000000'),
      'carries a uid other than that Cluster’s',
    ],
    [
      'an owner reference to a Cluster that does not exist',
      (kcp) => void (owner(kcp).name = 'fake'),
      'names a Cluster not found in its namespace',
    ],
    [
      'a Cluster in another namespace of the same name',
      (_kcp, clusters) =>
        void (clusters[0] = { ...clusters[0], metadata: { ...clusters[0]?.metadata, namespace: 'other' } } as FakeObject),
      'names a Cluster not found in its namespace',
    ],
    [
      'a Cluster whose controlPlaneRef names another KCP',
      (_kcp, clusters) => void (controlPlaneRef(clusters[0]).name = 'other-control-plane'),
      'spec.controlPlaneRef does not name this KubeadmControlPlane',
    ],
    [
      'a Cluster whose controlPlaneRef names another namespace',
      (_kcp, clusters) => void (controlPlaneRef(clusters[0]).namespace = 'team-b'),
      'spec.controlPlaneRef does not name this KubeadmControlPlane',
    ],
    [
      'a Cluster whose controlPlaneRef names another group',
      (_kcp, clusters) => void (controlPlaneRef(clusters[0]).apiVersion = 'controlplane.example.com/v1'),
      'spec.controlPlaneRef does not name this KubeadmControlPlane',
    ],
    [
      'two Cluster owner references',
      (kcp) => void (kcp.metadata.ownerReferences = [owner(kcp), { ...owner(kcp), name: 'fake' }]),
      'has 2 Cluster owner references',
    ],
  ])('%s: no target, a problem naming the object', (_case, edit, message) => {
    const kcp = _case === 'external etcd' ? fixture('kcp-external-etcd') : fixture('kcp-v1beta1');
    const clusters = structuredClone(CLUSTERS);
    edit(kcp, clusters);
    const { targets, problems } = capiTargets([kcp], clusters, DEFAULTS);
    expect(targets).toEqual([]);
    expect(problems).toHaveLength(1);
    expect(problems[0]?.message).toContain(message);
    expect(problems[0]?.staticMayJudge).toBe(_case === 'external etcd' ? true : undefined);
  });
});

describe('druid provider (pure)', () => {
  it('makes a target per Etcd with per-member pod DNS client URLs and its TLS Secrets', () => {
    const { targets, problems } = druidTargets([fixture('etcd-druid')], DEFAULTS);
    expect(problems).toEqual([]);
    const [target] = targets;
    expect(target?.name).toBe(discoveredTargetName('druid', 'shoot--dev--alpha', 'etcd-main'));
    expect(target?.endpoints).toEqual([0, 1, 2].map((i) => `https://etcd-main-${i}.etcd-main-peer.shoot--dev--alpha.svc:2379`));
    expect(target?.reach).toEqual({
      kind: 'druid',
      namespace: 'shoot--dev--alpha',
      tls: { caSecret: 'ca-etcd-bundle', caDataKey: 'bundle.crt', clientSecret: 'etcd-client-tls' },
    });
    expect(target?.quotaBackendBytes).toBe(8 * 1024 ** 3);
  });

  it('without clientUrlTls the members are plain http and the CA key defaults apply nowhere', () => {
    const etcd = fixture('etcd-druid');
    (etcd.spec as { etcd: Record<string, unknown> }).etcd = { clientPort: 2479 };
    const [target] = druidTargets([etcd], DEFAULTS).targets;
    expect(target?.endpoints[0]).toBe('http://etcd-main-0.etcd-main-peer.shoot--dev--alpha.svc:2479');
    expect(target?.reach).toEqual({ kind: 'druid', namespace: 'shoot--dev--alpha', tls: null });
  });

  it.each([
    ['hibernated (replicas 0)', { replicas: 0 }, 'nothing to evaluate'],
    ['absurd replicas', { replicas: 1e9 }, 'nothing to evaluate'],
    [
      'a CA Secret in another namespace',
      { etcd: { clientUrlTls: { tlsCASecretRef: { name: 'ca', namespace: 'kube-system' } } } },
      'another namespace',
    ],
  ])('%s: no target, a problem', (_case, specPatch, message) => {
    const etcd = fixture('etcd-druid');
    etcd.spec = { ...(etcd.spec as object), ...specPatch };
    const { targets, problems } = druidTargets([etcd], DEFAULTS);
    expect(targets).toEqual([]);
    expect(problems[0]?.message).toContain(message);
  });

  it.each([
    ['8Gi', 8 * 1024 ** 3],
    ['2G', 2e9],
    ['1024', 1024],
    ['1.5Mi', 1.5 * 1024 ** 2],
    ['lots', undefined],
    ['-1Gi', undefined],
  ])('quantity %s is %s bytes', (text, bytes) => {
    expect(quantityBytes(text)).toBe(bytes);
  });
});

describe('merging static and discovered targets', () => {
  it('a discovered name already taken (by a static target or another object) evaluates none of the claimants', () => {
    const config = parseGuardConfig({ targets: [{ name: 'capi-fleet-prod', endpoints: ['https://127.0.0.1:2379'] }] }, 'test');
    const kcp = capiTargets([fixture('kcp-v1beta1')], CLUSTERS, DEFAULTS).targets;
    const merged = mergeTargets(config.targets, kcp);
    expect(merged.targets.map((target) => `${target.source}:${target.name}`)).toEqual(['static:capi-fleet-prod']);
    expect(merged.problems[0]?.message).toBe(
      'target name capi-fleet-prod is claimed by static target capi-fleet-prod and KubeadmControlPlane fleet/prod-control-plane; none of the discovered ones is evaluated',
    );
  });
});

describe('config: discovery', () => {
  it('targets may be empty when discovery is set, and discovery needs a provider', () => {
    const config = parseGuardConfig({ discovery: { capi: {} } }, 'test');
    expect(config.targets).toEqual([]);
    expect(config.discovery).toEqual({ capi: {}, refreshSeconds: 60, timeout: 5000 });
    expect(() => parseGuardConfig({}, 'test')).toThrow(/targets: needs at least one target \(or discovery to find them\)/);
    expect(() => parseGuardConfig({ discovery: {} }, 'test')).toThrow(/discovery: names no provider/);
    expect(() => parseGuardConfig({ discovery: { capi: { namespaces: ['Bad_NS'] } } }, 'test')).toThrow(
      /discovery\.capi\.namespaces\.0: must be a namespace name .*got "Bad_NS"/,
    );
    expect(() => parseGuardConfig({ discovery: { druid: {}, refreshSeconds: 1 } }, 'test')).toThrow(/discovery\.refreshSeconds/);
  });
});

describe('owner names a store refuses (issue 16 item 11), through discovery, the scheduled run and both stores', () => {
  let fake: FakeKubeApiServer;
  let dir: string;
  beforeEach(async () => {
    fake = await startFakeKubeApiServer();
    dir = mkdtempSync(path.join(tmpdir(), 'discovery-names-'));
  });
  afterEach(async () => {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('an owner named "a/b", "Prod" or with a newline gives a name every store accepts, and no run fails for the others', async () => {
    const owners = ['a/b', 'Prod', 'prod\nx', 'ok'];
    for (const [index, name] of owners.entries()) {
      const uid = `uid-${index}`;
      const kcp = fixture('kcp-v1beta1');
      Object.assign(kcp.metadata, {
        name: `cp-${index}`,
        labels: {},
        ownerReferences: [{ apiVersion: 'cluster.x-k8s.io/v1beta1', kind: 'Cluster', name, uid }],
      });
      fake.putObject('kubeadmcontrolplanes', kcp);
      fake.putObject('clusters', {
        apiVersion: 'cluster.x-k8s.io/v1beta1',
        kind: 'Cluster',
        metadata: { name, namespace: 'fleet', uid },
        spec: {
          controlPlaneRef: {
            apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
            kind: 'KubeadmControlPlane',
            name: `cp-${index}`,
          },
        },
      });
    }
    const config = parseGuardConfig({ targets: [], discovery: { capi: {}, kubeconfigFile: fake.kubeconfigFile } }, 'test');
    const resolved = await resolveTargets(config);
    expect(resolved.problems).toEqual([]);
    expect(resolved.targets.map((target) => target.name)).toEqual(
      owners.map((name) => discoveredTargetName('capi', 'fleet', name)).sort(),
    );
    const stores = [
      new FileStore(dir),
      new ConfigMapStore({ namespace: 'etcd-guard', kubeconfigFile: fake.kubeconfigFile, callTimeoutMs: 2_000 }),
    ];
    for (const store of stores) {
      const results = await runScheduledEvaluation({
        config,
        store,
        evaluate: (target) => Promise.resolve(makeEvaluation({ target: target.name, evaluatedAt: new Date().toISOString() })),
        resolveTargets: (timeoutMs) => resolveTargets(config, { timeoutMs }),
        logger: createLogger({ env: { LOG_LEVEL: 'silent' } }),
      });
      expect(results.map((result) => [result.target, result.ok])).toEqual(resolved.targets.map((target) => [target.name, true]));
      for (const target of resolved.targets) expect((await store.read(target.name))?.target).toBe(target.name);
    }
  });
});

describe('discovery against the stand-in apiserver', () => {
  let fake: FakeKubeApiServer;
  const configWith = (discovery: object, targets: object[] = []): GuardConfig =>
    parseGuardConfig({ targets, discovery: { kubeconfigFile: fake.kubeconfigFile, ...discovery } }, 'test');

  beforeEach(async () => {
    fake = await startFakeKubeApiServer();
    fake.putObject('kubeadmcontrolplanes', fixture('kcp-v1beta1'));
    fake.putObject('kubeadmcontrolplanes', fixture('kcp-v1beta2'));
    fake.putObject('kubeadmcontrolplanes', fixture('kcp-external-etcd'));
    fake.putObject('etcds', fixture('etcd-druid'));
    for (const cluster of CLUSTERS) fake.putObject('clusters', cluster);
  });

  afterEach(async () => {
    await fake.close();
  });

  it('finds every KCP and Etcd beside the static targets, external etcd reported', async () => {
    const config = configWith({ capi: {}, druid: {} }, [{ name: 'local', endpoints: ['https://127.0.0.1:2379'] }]);
    const resolved = await resolveTargets(config);
    expect(resolved.failures).toEqual([]);
    expect(resolved.targets.map((target) => `${target.source}:${target.name}`)).toEqual([
      'static:local',
      'capi:capi-fleet-prod',
      `capi:${discoveredTargetName('capi', 'team-a', 'staging.eu')}`,
      `druid:${discoveredTargetName('druid', 'shoot--dev--alpha', 'etcd-main')}`,
    ]);
    expect(resolved.problems.map((problem) => `${problem.object?.name}: ${problem.message}`)).toEqual([
      'legacy-control-plane: it uses external etcd: not discovered (add a static target that names it)',
    ]);
    expect(fake.requests.map((request) => `${request.verb} ${request.path}`)).toEqual(
      expect.arrayContaining([
        'list /apis/controlplane.cluster.x-k8s.io/v1beta2/kubeadmcontrolplanes',
        'list /apis/druid.gardener.cloud/v1alpha1/etcds',
      ]),
    );
  });

  it('namespaces and labelSelector limit what is listed', async () => {
    const resolved = await resolveTargets(
      configWith({ capi: { namespaces: ['fleet'], labelSelector: { 'cluster.x-k8s.io/cluster-name': 'prod' } } }),
    );
    expect(resolved.targets.map((target) => target.name)).toEqual(['capi-fleet-prod']);
    const list = fake.requests.find((request) => request.resource === 'kubeadmcontrolplanes');
    expect(list?.path).toBe('/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/fleet/kubeadmcontrolplanes');
    expect(list?.query.get('labelSelector')).toBe('cluster.x-k8s.io/cluster-name=prod');
  });

  it('a management cluster serving only v1beta1 is listed at v1beta1', async () => {
    fake.serveVersions('controlplane.cluster.x-k8s.io', ['v1beta1']);
    const resolved = await resolveTargets(configWith({ capi: { namespaces: ['fleet'] } }));
    expect(resolved.failures).toEqual([]);
    expect(resolved.targets.map((target) => target.name)).toEqual(['capi-fleet-prod']);
    const statuses = (resource: string) =>
      fake.requests.filter((request) => request.path.endsWith(`/${resource}`)).map((request) => request.status);
    expect(statuses('kubeadmcontrolplanes')).toEqual([404, 200]);
    expect(statuses('clusters')).toEqual([200]);
  });

  it('a provider that cannot list is a failure naming it; the other provider and static targets stay', async () => {
    fake.forbid('list', 'kubeadmcontrolplanes');
    const config = configWith({ capi: {}, druid: {} }, [{ name: 'local', endpoints: ['https://127.0.0.1:2379'] }]);
    const resolved = await resolveTargets(config);
    expect(resolved.failures).toHaveLength(1);
    expect(resolved.failures[0]?.source).toBe('capi');
    expect(resolved.failures[0]?.message).toMatch(
      /^forbidden: cannot list kubeadmcontrolplanes\.controlplane\.cluster\.x-k8s\.io\/v1beta2: .*cannot list resource "kubeadmcontrolplanes"/,
    );
    expect(resolved.targets.map((target) => target.source)).toEqual(['static', 'druid']);
  });

  it('a hung apiserver fails the round within its deadline', async () => {
    fake.hang('/apis/druid.gardener.cloud');
    const started = performance.now();
    const resolved = await resolveTargets(configWith({ druid: {} }), { timeoutMs: 300 });
    expect(performance.now() - started).toBeLessThan(300 + 250);
    expect(resolved.failures[0]?.source).toBe('druid');
    expect(resolved.failures[0]?.message).toMatch(
      /^timed out: list etcds\.druid\.gardener\.cloud\/v1alpha1 got no answer within 300ms/,
    );
  });

  it("lists a cluster's control-plane Machines by their Node name, else their own as provisioning, marking deleting ones", async () => {
    const machine = (name: string, cluster: string, status: object, controlPlane = true, metadata: object = {}): FakeObject => ({
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Machine',
      metadata: {
        name,
        namespace: 'fleet',
        labels: { 'cluster.x-k8s.io/cluster-name': cluster, ...(controlPlane ? { 'cluster.x-k8s.io/control-plane': '' } : {}) },
        ...metadata,
      },
      status,
    });
    fake.putObject(
      'machines',
      machine('prod-cp-a', 'prod', { nodeRef: { name: 'node-a' } }, true, {
        creationTimestamp: '2026-11-01T10:00:00Z',
        deletionTimestamp: '2026-12-01T15:00:00Z',
      }),
    );
    fake.putObject(
      'machines',
      machine('prod-cp-b', 'prod', { nodeRef: { name: 'node-b' }, addresses: [{ type: 'InternalIP', address: '10.0.0.2' }] }),
    );
    fake.putObject('machines', machine('prod-cp-new', 'prod', {}));
    fake.putObject('machines', machine('prod-md-1', 'prod', { nodeRef: { name: 'worker' } }, false));
    fake.putObject('machines', machine('other-cp', 'other', { nodeRef: { name: 'node-x' } }));
    const entries = await listControlPlaneMachines(
      createCustomObjectsApi(fake.kubeconfigFile),
      { namespace: 'fleet', clusterName: 'prod' },
      Deadline.after(2000),
    );
    expect(entries).toEqual([
      { name: 'node-a', addresses: [], createdAt: '2026-11-01T10:00:00Z', deleting: true },
      { name: 'node-b', addresses: ['10.0.0.2'] },
      { name: 'prod-cp-new', addresses: [], provisioning: true },
    ]);
  });
});
