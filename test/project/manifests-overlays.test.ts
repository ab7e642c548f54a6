// The fleet overlays (capi, druid), checked on what `kubectl kustomize` builds from them: every
// overlay builds; the embedded config parses with the schema and discovers; the CronJob is an
// Indexed Job whose shard count matches its completions; RBAC reads the provider's objects
// cluster-wide but Secrets only with `get`, only in the namespaces discovery looks in, and the
// evaluation ConfigMaps only in the guard's namespace.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import type { GuardConfig } from '../../functions/domain/config.js';
import { parseGuardConfigText } from '../../functions/entrypoints/config-file.js';
import {
  at,
  commandExists,
  containerOf,
  guardNamespace,
  name,
  type Obj,
  objs,
  OVERLAYS_DIR,
  parseCliArgs,
  run,
  strings,
} from '../harness/manifests.js';

const hasKubectl = commandExists('kubectl');
const built = new Map<string, Obj[]>();

async function build(overlay: string): Promise<Obj[]> {
  const result = await run('kubectl', ['kustomize', path.join(OVERLAYS_DIR, overlay)]);
  expect(result.stderr, `kubectl kustomize ${overlay}`).toBe('');
  expect(result.code).toBe(0);
  return parseAllDocuments(result.stdout, { version: '1.1' }).map((document) => document.toJS() as Obj);
}

beforeAll(async () => {
  if (!hasKubectl) return;
  for (const overlay of readdirSync(OVERLAYS_DIR)) built.set(overlay, await build(overlay));
}, 120_000);

function docsOf(overlay: string, kind: string): Obj[] {
  return (built.get(overlay) ?? []).filter((doc) => doc.kind === kind);
}

function single(overlay: string, kind: string, docName: string): Obj {
  const found = docsOf(overlay, kind).filter((doc) => name(doc) === docName);
  expect(found, `${overlay}: ${kind}/${docName}`).toHaveLength(1);
  return found[0] as Obj;
}

function configOf(overlay: string): GuardConfig {
  const configMap = single(overlay, 'ConfigMap', 'etcd-guard-config');
  return parseGuardConfigText(String(at(configMap, 'data', 'config.yaml')), `${overlay}/etcd-guard-config`);
}

/** Every `group/resource:verb` a service account gets, and where (a namespace, or * for cluster-wide). */
function grants(overlay: string, serviceAccount: string): string[] {
  const roles = [...docsOf(overlay, 'Role'), ...docsOf(overlay, 'ClusterRole')];
  const bindings = [...docsOf(overlay, 'RoleBinding'), ...docsOf(overlay, 'ClusterRoleBinding')].filter((binding) =>
    objs(binding.subjects).some((subject) => subject.name === serviceAccount && subject.namespace === guardNamespace),
  );
  return bindings.flatMap((binding) => {
    const where = binding.kind === 'ClusterRoleBinding' ? '*' : String(at(binding, 'metadata', 'namespace'));
    const role = roles.find(
      (candidate) => candidate.kind === at(binding, 'roleRef', 'kind') && name(candidate) === at(binding, 'roleRef', 'name'),
    );
    expect(role, `${overlay}: ${name(binding)} binds an existing role`).toBeDefined();
    return objs(role?.rules).flatMap((rule) => {
      expect(rule.resourceNames, `${overlay}: ${name(role ?? {})} names no objects`).toBeUndefined();
      return strings(rule.apiGroups).flatMap((group) =>
        strings(rule.resources).flatMap((resource) => strings(rule.verbs).map((verb) => `${where} ${group}/${resource}:${verb}`)),
      );
    });
  });
}

const FLEETS = [
  {
    overlay: 'capi',
    provider: 'capi' as const,
    reads: ['cluster.x-k8s.io/clusters', 'cluster.x-k8s.io/machines', 'controlplane.cluster.x-k8s.io/kubeadmcontrolplanes'],
  },
  { overlay: 'druid', provider: 'druid' as const, reads: ['druid.gardener.cloud/etcds'] },
];

describe.skipIf(!hasKubectl)('every overlay', () => {
  it('builds with kubectl kustomize, and there are the three overlays', () => {
    expect([...built.keys()].sort()).toEqual(['capi', 'cert-manager', 'druid']);
    for (const [overlay, docs] of built) expect(docs.length, overlay).toBeGreaterThan(10);
  });
});

/**
 * Where the webhook container reads `file`: the Secret and key behind it, and whether that Secret
 * may be absent. Undefined when no mount holds the file.
 */
function secretBehind(podSpec: Obj, file: string): { secret: string; key: string; optional: boolean } | undefined {
  const container = containerOf(podSpec);
  for (const mount of objs(container.volumeMounts)) {
    const volume = objs(podSpec.volumes).find((candidate) => candidate.name === mount.name);
    for (const source of objs(at(volume, 'projected', 'sources'))) {
      for (const item of objs(at(source, 'secret', 'items'))) {
        if (path.posix.join(String(mount.mountPath), String(item.path)) !== file) continue;
        return {
          secret: String(at(source, 'secret', 'name')),
          key: String(item.key),
          optional: at(source, 'secret', 'optional') === true,
        };
      }
    }
  }
  return undefined;
}

// Anyone who reaches the Service could otherwise trigger evaluations (POST) and read every
// tenant's target (GET): each shipped install requires the token.
describe.skipIf(!hasKubectl)('the bearer token for /evaluations', () => {
  it.each(['base', 'capi', 'cert-manager', 'druid'])('%s: is required, from a Secret the webhook must mount', async (which) => {
    const docs = which === 'base' ? await build('../base') : (built.get(which) ?? []);
    const configMap = docs.find((doc) => doc.kind === 'ConfigMap' && name(doc) === 'etcd-guard-config');
    const config = parseGuardConfigText(String(at(configMap, 'data', 'config.yaml')), `${which}/etcd-guard-config`);
    expect(config.auth.tokenFile, `${which}: auth.tokenFile`).toBeDefined();
    const deployment = docs.find((doc) => doc.kind === 'Deployment' && name(doc) === 'etcd-guard-webhook');
    const podSpec = at(deployment, 'spec', 'template', 'spec') as Obj;
    expect(secretBehind(podSpec, String(config.auth.tokenFile))).toEqual({
      secret: 'etcd-guard-api-token',
      key: 'token',
      optional: false,
    });
    // No ETCD_GUARD_TOKEN in the environment to override it with something weaker.
    expect(objs(containerOf(podSpec).env).map((variable) => variable.name)).not.toContain('ETCD_GUARD_TOKEN');
  });
});

describe.skipIf(!hasKubectl)('the webhook in every fleet overlay', () => {
  it.each(['capi', 'druid'])('%s: may list Machines cluster-wide to tell which member a KCP change removes', (overlay) => {
    expect(grants(overlay, 'etcd-guard-webhook')).toContain('* cluster.x-k8s.io/machines:list');
  });
});

describe.skipIf(!hasKubectl).each(FLEETS)('the $overlay overlay', ({ overlay, provider, reads }) => {
  it('carries a config the schema accepts: no static target, discovery of its provider, stored in the guard namespace', () => {
    const config = configOf(overlay);
    expect(config.targets).toEqual([]);
    expect(config.discovery?.[provider]).toBeDefined();
    expect(config.store).toEqual({ kind: 'configmap', namespace: guardNamespace });
  });

  it('runs the CronJob as an Indexed Job: completions = parallelism = --shard-count, args the CLI accepts', () => {
    const cronJob = single(overlay, 'CronJob', 'etcd-guard-evaluate');
    const jobSpec = at(cronJob, 'spec', 'jobTemplate', 'spec');
    expect(at(jobSpec, 'completionMode')).toBe('Indexed');
    const { command, flags } = parseCliArgs(strings(containerOf((at(jobSpec, 'template', 'spec') ?? {}) as Obj).args));
    expect(command).toBe('evaluate');
    expect(flags.has('--shard')).toBe(false);
    const shardCount = Number(flags.get('--shard-count'));
    expect(shardCount).toBeGreaterThan(1);
    expect(at(jobSpec, 'completions')).toBe(shardCount);
    expect(at(jobSpec, 'parallelism')).toBe(shardCount);
    expect(at(cronJob, 'spec', 'concurrencyPolicy')).toBe('Forbid');
  });

  it("marks the static targets' client Secret optional in both workloads (discovered targets bring their own)", () => {
    const podSpecs = [
      at(single(overlay, 'Deployment', 'etcd-guard-webhook'), 'spec', 'template', 'spec'),
      at(single(overlay, 'CronJob', 'etcd-guard-evaluate'), 'spec', 'jobTemplate', 'spec', 'template', 'spec'),
    ];
    for (const podSpec of podSpecs) {
      const sources = objs(at(podSpec, 'volumes')).flatMap((volume) => objs(at(volume, 'projected', 'sources')));
      const secret = sources.find((source) => at(source, 'secret', 'name') === 'etcd-guard-etcd-client');
      expect(at(secret, 'secret', 'optional')).toBe(true);
    }
  });

  it.each(['etcd-guard-evaluator', 'etcd-guard-webhook'])(
    '%s may list the provider objects everywhere, get Secrets only where discovery looks, and ConfigMaps only at home',
    (serviceAccount) => {
      const granted = grants(overlay, serviceAccount);
      for (const resource of reads) {
        expect(granted).toContain(`* ${resource}:list`);
        expect(granted).toContain(`* ${resource}:get`);
      }
      const secretGrants = granted.filter((grant) => grant.includes(' /secrets:'));
      const namespaces = configOf(overlay).discovery?.[provider]?.namespaces ?? [];
      expect(namespaces.length).toBeGreaterThan(0);
      expect([...secretGrants].sort()).toEqual(namespaces.map((namespace) => `${namespace} /secrets:get`).sort());
      const configMapGrants = granted.filter((grant) => grant.includes(' /configmaps:'));
      expect(configMapGrants.length).toBeGreaterThan(0);
      for (const grant of configMapGrants)
        expect(grant).toMatch(new RegExp(`^${guardNamespace} /configmaps:(get|list|create|update|patch)$`));
      expect(configMapGrants).toContain(`${guardNamespace} /configmaps:get`);
      // Only the webhook's cache lists (one labelled LIST per poll brings in discovered targets).
      expect(configMapGrants.includes(`${guardNamespace} /configmaps:list`)).toBe(serviceAccount === 'etcd-guard-webhook');
      expect(granted.filter((grant) => grant.includes('*:') || grant.split(' ')[1]?.includes('*'))).toEqual([]);
    },
  );
});

// Cluster API calls the upgrade hooks (docs/runtime-extension.md) through this ExtensionConfig.
describe.skipIf(!hasKubectl)('the capi overlay’s ExtensionConfig', () => {
  it('points at the webhook Service’s HTTPS port, with its CA from the Secret the webhook serves, for opted-in namespaces', () => {
    const [extension, ...others] = docsOf('capi', 'ExtensionConfig');
    expect(others).toEqual([]);
    expect(at(extension, 'apiVersion')).toBe('runtime.cluster.x-k8s.io/v1beta2');
    const service = at(extension, 'spec', 'clientConfig', 'service') as Obj;
    const target = single('capi', 'Service', String(service.name));
    expect(at(target, 'metadata', 'namespace')).toBe(service.namespace);
    const port = objs(at(target, 'spec', 'ports')).find((candidate) => candidate.port === service.port);
    expect(port?.targetPort).toBe('https');
    // The same Secret the webhook's serving certificate comes from (cert-manager's carries ca.crt).
    const deployment = single('capi', 'Deployment', 'etcd-guard-webhook');
    const servingSecrets = objs(at(deployment, 'spec', 'template', 'spec', 'volumes')).map((volume) =>
      at(volume, 'secret', 'secretName'),
    );
    const injectFrom = String(at(extension, 'metadata', 'annotations', 'runtime.cluster.x-k8s.io/inject-ca-from-secret'));
    expect(injectFrom.split('/')[0]).toBe(service.namespace);
    expect(servingSecrets).toContain(injectFrom.split('/')[1]);
    expect(at(extension, 'spec', 'namespaceSelector', 'matchLabels')).toEqual({ 'etcd-guard.io/runtime-extension': 'enabled' });
    // The other overlays do not register it: only a Cluster API management cluster has the CRD.
    expect(docsOf('druid', 'ExtensionConfig')).toEqual([]);
    expect(docsOf('cert-manager', 'ExtensionConfig')).toEqual([]);
  });
});
