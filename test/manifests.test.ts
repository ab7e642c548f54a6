// Invariants of what we install into a cluster: the kustomize manifests, the serving-cert script,
// the Dockerfile and the generated configuration reference. A manifest that drifts from the code
// (a flag the CLI does not take, a config key the schema rejects, a target RBAC does not name, a
// guarded resource without its /scale twin) fails here instead of in someone's cluster.
import { X509Certificate, createPublicKey } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { parseGuardConfigText, type GuardConfig } from '../functions/config.js';
import { GUARD_RULES } from '../webhook/core/rules.js';
import { GENERIC_DESCRIPTION, configReferenceRows, renderConfigReference } from '../scripts/config-reference.js';
import { runProcess, type ProcessRun } from './harness/process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BASE_DIR = path.join(ROOT, 'manifests/base');
const OVERLAY_DIR = path.join(ROOT, 'manifests/overlays/cert-manager');
const CERT_SCRIPT = path.join(ROOT, 'scripts/make-webhook-cert.sh');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');

// ---------------------------------------------------------------------------------------------
// Small helpers: YAML values are unknown until narrowed.

type Obj = Record<string, unknown>;

function isObj(value: unknown): value is Obj {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Reads a nested field; undefined when any step is missing. */
function at(value: unknown, ...keys: (string | number)[]): unknown {
  let current = value;
  for (const key of keys) {
    if (typeof key === 'number') {
      if (!Array.isArray(current)) return undefined;
      current = current[key];
    } else {
      if (!isObj(current)) return undefined;
      current = current[key];
    }
  }
  return current;
}

function objs(value: unknown): Obj[] {
  return Array.isArray(value) ? value.filter(isObj) : [];
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

interface Manifest {
  file: string;
  doc: Obj;
}

/** Kubernetes reads YAML 1.1 (0440 is octal), so parse the way it does. */
function readDocuments(file: string): Obj[] {
  const documents = parseAllDocuments(readFileSync(file, 'utf8'), { version: '1.1' });
  const list = Array.isArray(documents) ? documents : [documents];
  return list.flatMap((document) => {
    if (document.errors.length > 0) {
      throw new Error(`${file}: ${document.errors.map((error) => error.message).join('; ')}`);
    }
    const value: unknown = document.toJS();
    return value === null || value === undefined ? [] : [value as Obj];
  });
}

interface Kustomization {
  dir: string;
  resources: string[];
  patches: string[];
}

function readKustomization(dir: string): Kustomization {
  const [doc] = readDocuments(path.join(dir, 'kustomization.yaml'));
  return {
    dir,
    resources: strings(at(doc, 'resources')),
    patches: objs(at(doc, 'patches')).flatMap((patch) => (typeof patch.path === 'string' ? [patch.path] : [])),
  };
}

function isDirectory(file: string): boolean {
  return existsSync(file) && statSync(file).isDirectory();
}

/** The resource documents a kustomization contributes itself (bases are loaded separately). */
function ownManifests(kustomization: Kustomization): Manifest[] {
  return kustomization.resources
    .map((resource) => path.join(kustomization.dir, resource))
    .filter((file) => !isDirectory(file))
    .flatMap((file) => readDocuments(file).map((doc) => ({ file, doc })));
}

const base = readKustomization(BASE_DIR);
const overlay = readKustomization(OVERLAY_DIR);
const baseManifests = ownManifests(base);

function ofKind(kind: string, manifests: Manifest[] = baseManifests): Obj[] {
  return manifests.filter((manifest) => manifest.doc.kind === kind).map((manifest) => manifest.doc);
}

function only(kind: string, manifests: Manifest[] = baseManifests): Obj {
  const found = ofKind(kind, manifests);
  expect(found, `exactly one ${kind}`).toHaveLength(1);
  return found[0] as Obj;
}

function name(doc: Obj): string {
  return text(at(doc, 'metadata', 'name')) ?? '';
}

const namespace = only('Namespace');
const guardNamespace = name(namespace);
const deployment = only('Deployment');
const cronJob = only('CronJob');
const service = only('Service');
const webhookConfiguration = only('ValidatingWebhookConfiguration');
const configMap = ofKind('ConfigMap').find((doc) => name(doc) === 'etcd-guard-config') ?? {};

const workloads: Array<{ what: string; podSpec: Obj; podLabels: Obj }> = [
  {
    what: 'webhook Deployment',
    podSpec: (at(deployment, 'spec', 'template', 'spec') ?? {}) as Obj,
    podLabels: (at(deployment, 'spec', 'template', 'metadata', 'labels') ?? {}) as Obj,
  },
  {
    what: 'evaluate CronJob',
    podSpec: (at(cronJob, 'spec', 'jobTemplate', 'spec', 'template', 'spec') ?? {}) as Obj,
    podLabels: (at(cronJob, 'spec', 'jobTemplate', 'spec', 'template', 'metadata', 'labels') ?? {}) as Obj,
  },
];

function labelsMatch(selector: unknown, labels: Obj): boolean {
  const wanted = at(selector, 'matchLabels');
  if (!isObj(wanted) || Object.keys(wanted).length === 0) return false;
  return Object.entries(wanted).every(([key, value]) => labels[key] === value);
}

// ---------------------------------------------------------------------------------------------
// Processes

/** Runs a command in the repo root, SIGKILLed if it overruns (30 s unless told). */
function run(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<ProcessRun> {
  return runProcess(command, args, { cwd: ROOT, ...options });
}

const tempDirs: string[] = [];
function makeTempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'etcd-guard-manifests-'));
  tempDirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function commandExists(command: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir !== '' && existsSync(path.join(dir, command)));
}

// ---------------------------------------------------------------------------------------------

describe('kustomizations', () => {
  it.each([
    ['base', base],
    ['cert-manager overlay', overlay],
  ])('%s lists every file in its directory, and every listed file exists', (_label, kustomization) => {
    const listed = new Set([...kustomization.resources, ...kustomization.patches].filter((entry) => !entry.startsWith('..')));
    const present = readdirSync(kustomization.dir).filter((file) => file !== 'kustomization.yaml');
    expect(
      present.filter((file) => !listed.has(file)),
      'files not listed in kustomization.yaml',
    ).toEqual([]);
    for (const entry of [...kustomization.resources, ...kustomization.patches]) {
      expect(existsSync(path.join(kustomization.dir, entry)), `${entry} exists`).toBe(true);
    }
  });

  it('every document has apiVersion, kind and a name, and namespaced ones live in the guard namespace', () => {
    const clusterScoped = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'ValidatingWebhookConfiguration']);
    const all = [...baseManifests, ...ownManifests(overlay)];
    expect(all.length).toBeGreaterThan(10);
    for (const { file, doc } of all) {
      const where = `${path.relative(ROOT, file)} ${String(doc.kind)}/${name(doc)}`;
      expect(text(doc.apiVersion), where).toBeTruthy();
      expect(text(doc.kind), where).toBeTruthy();
      expect(name(doc), where).not.toBe('');
      const docNamespace = at(doc, 'metadata', 'namespace');
      if (clusterScoped.has(String(doc.kind))) expect(docNamespace, where).toBeUndefined();
      else expect(docNamespace, where).toBe(guardNamespace);
    }
  });

  it('the overlay builds on the base and injects the CA of its own Certificate into the webhook configuration', () => {
    expect(overlay.resources).toContain('../../base');
    const certificate = only('Certificate', ownManifests(overlay));
    const patchDocs = overlay.patches.flatMap((patch) => readDocuments(path.join(OVERLAY_DIR, patch)));
    const injection = patchDocs.find((doc) => doc.kind === 'ValidatingWebhookConfiguration');
    expect(name(injection ?? {})).toBe(name(webhookConfiguration));
    expect(at(injection, 'metadata', 'annotations', 'cert-manager.io/inject-ca-from')).toBe(
      `${String(at(certificate, 'metadata', 'namespace'))}/${name(certificate)}`,
    );
    const serviceHost = `${name(service)}.${guardNamespace}.svc`;
    expect(strings(at(certificate, 'spec', 'dnsNames'))).toContain(serviceHost);
    const webhookTlsSecret = objs(at(deployment, 'spec', 'template', 'spec', 'volumes'))
      .map((volume) => text(at(volume, 'secret', 'secretName')))
      .find((secret) => secret === 'etcd-guard-webhook-tls');
    expect(at(certificate, 'spec', 'secretName')).toBe(webhookTlsSecret);
    const issuer = only('Issuer', ownManifests(overlay));
    expect(at(certificate, 'spec', 'issuerRef', 'name')).toBe(name(issuer));
  });

  it.skipIf(!commandExists('kubectl'))(
    'kubectl kustomize builds both, and the built overlay carries the CA injection',
    async () => {
      const builtBase = await run('kubectl', ['kustomize', BASE_DIR]);
      expect(builtBase.stderr).toBe('');
      expect(builtBase.code).toBe(0);
      const builtOverlay = await run('kubectl', ['kustomize', OVERLAY_DIR]);
      expect(builtOverlay.code, builtOverlay.stderr).toBe(0);
      const docs = parseAllDocuments(builtOverlay.stdout).map((document) => document.toJS() as Obj);
      expect(docs.length).toBe(baseManifests.length + ownManifests(overlay).length);
      const built = docs.find((doc) => doc.kind === 'ValidatingWebhookConfiguration');
      expect(at(built, 'metadata', 'annotations', 'cert-manager.io/inject-ca-from')).toBe('etcd-guard/etcd-guard-webhook');
      // The patch must add the annotation, not replace the webhooks.
      expect(objs(at(built, 'webhooks'))).toHaveLength(objs(at(webhookConfiguration, 'webhooks')).length);
    },
  );
});

describe('ValidatingWebhookConfiguration', () => {
  const webhooks = objs(at(webhookConfiguration, 'webhooks'));

  it('has at least one webhook, each failing closed within 10 s with no side effects', () => {
    expect(webhooks.length).toBeGreaterThan(0);
    for (const webhook of webhooks) {
      expect(webhook.failurePolicy).toBe('Fail');
      expect(webhook.timeoutSeconds).toBe(10);
      expect(webhook.sideEffects).toBe('None');
      expect(webhook.admissionReviewVersions).toEqual(['v1']);
      expect(webhook.matchPolicy).toBe('Equivalent');
    }
  });

  it('calls /validate on the webhook Service port', () => {
    const servicePort = objs(at(service, 'spec', 'ports'))[0];
    for (const webhook of webhooks) {
      expect(at(webhook, 'clientConfig', 'service')).toEqual({
        name: name(service),
        namespace: guardNamespace,
        path: '/validate',
        port: at(servicePort, 'port'),
      });
    }
  });

  it.each(GUARD_RULES.map((rule) => [`${rule.group}/${rule.resource}`, rule] as const))(
    'guards %s and its /scale subresource on UPDATE in the same webhook, for every version the rule knows',
    (_label, guardRule) => {
      const covering = webhooks.filter((webhook) =>
        objs(webhook.rules).some(
          (rule) => strings(rule.apiGroups).includes(guardRule.group) && strings(rule.resources).includes(guardRule.resource),
        ),
      );
      expect(covering.length, `a webhook rule for ${guardRule.group}/${guardRule.resource}`).toBeGreaterThan(0);
      for (const webhook of covering) {
        for (const resource of [guardRule.resource, `${guardRule.resource}/scale`]) {
          const rule = objs(webhook.rules).find(
            (candidate) =>
              strings(candidate.apiGroups).includes(guardRule.group) && strings(candidate.resources).includes(resource),
          );
          expect(rule, `${resource} in webhook ${String(webhook.name)}`).toBeDefined();
          expect(strings(at(rule, 'operations'))).toContain('UPDATE');
          for (const version of guardRule.versions) expect(strings(at(rule, 'apiVersions'))).toContain(version);
        }
      }
    },
  );

  it('every guarded resource rule has its /scale twin with the same apiGroup and UPDATE', () => {
    for (const webhook of webhooks) {
      const rules = objs(webhook.rules);
      for (const rule of rules) {
        expect(strings(rule.operations), `operations of ${JSON.stringify(rule.resources)}`).toEqual(['UPDATE']);
        for (const resource of strings(rule.resources).filter((entry) => !entry.includes('/'))) {
          const twin = rules.find(
            (candidate) =>
              strings(candidate.resources).includes(`${resource}/scale`) &&
              JSON.stringify(strings(candidate.apiGroups)) === JSON.stringify(strings(rule.apiGroups)) &&
              strings(candidate.operations).includes('UPDATE'),
          );
          expect(twin, `${resource}/scale next to ${resource}`).toBeDefined();
        }
      }
    }
  });

  it('has no objectSelector where /scale requests are matched (a Scale carries no labels)', () => {
    for (const webhook of webhooks) {
      const matchesScale = objs(webhook.rules).some((rule) =>
        strings(rule.resources).some((resource) => resource.endsWith('/scale')),
      );
      if (matchesScale) expect(webhook.objectSelector, String(webhook.name)).toBeUndefined();
    }
  });

  it('never guards its own namespace', () => {
    for (const webhook of webhooks) {
      const expressions = objs(at(webhook, 'namespaceSelector', 'matchExpressions'));
      const exclusion = expressions.find(
        (expression) => expression.key === 'kubernetes.io/metadata.name' && expression.operator === 'NotIn',
      );
      expect(strings(at(exclusion, 'values'))).toContain(guardNamespace);
    }
  });
});

// ---------------------------------------------------------------------------------------------

const roles = [...ofKind('Role'), ...ofKind('ClusterRole')];
const allRules = roles.flatMap((role) => objs(role.rules).map((rule) => ({ role: `${String(role.kind)}/${name(role)}`, rule })));

function rolesBoundTo(serviceAccount: string): Obj[] {
  return ofKind('RoleBinding')
    .filter((binding) =>
      objs(binding.subjects).some((subject) => subject.kind === 'ServiceAccount' && subject.name === serviceAccount),
    )
    .map((binding) =>
      ofKind(String(at(binding, 'roleRef', 'kind'))).find((role) => name(role) === at(binding, 'roleRef', 'name')),
    )
    .filter(isObj);
}

/** The configmap names a Role lets its subject get and update. */
function readableAndWritableConfigMaps(role: Obj): { get: string[]; update: string[] } {
  const rules = objs(role.rules).filter((rule) => strings(rule.resources).includes('configmaps'));
  const namesFor = (verb: string) =>
    rules.filter((rule) => strings(rule.verbs).includes(verb)).flatMap((rule) => strings(rule.resourceNames));
  return { get: namesFor('get'), update: namesFor('update') };
}

// Parsed lazily so a config the schema rejects fails the tests that need it, with the schema's message.
let parsedConfig: GuardConfig | undefined;
function guardConfig(): GuardConfig {
  parsedConfig ??= parseGuardConfigText(String(at(configMap, 'data', 'config.yaml') ?? ''), 'etcd-guard-config/config.yaml');
  return parsedConfig;
}

describe('RBAC', () => {
  it('grants no wildcard verb, resource, apiGroup or name anywhere', () => {
    expect(allRules.length).toBeGreaterThan(0);
    for (const { role, rule } of allRules) {
      for (const field of ['verbs', 'resources', 'apiGroups', 'resourceNames', 'nonResourceURLs']) {
        expect(
          strings(rule[field]).filter((entry) => entry.includes('*')),
          `${role} ${field}`,
        ).toEqual([]);
      }
    }
  });

  it('lets get/update/patch/delete on configmaps touch only etcd-guard-* names, and never reads secrets', () => {
    for (const { role, rule } of allRules) {
      expect(strings(rule.resources), role).not.toContain('secrets');
      if (!strings(rule.resources).includes('configmaps')) continue;
      const byName = strings(rule.verbs).filter((verb) => ['get', 'update', 'patch', 'delete'].includes(verb));
      if (byName.length === 0) continue;
      const names = strings(rule.resourceNames);
      expect(names.length, `${role} ${byName.join('/')} needs resourceNames`).toBeGreaterThan(0);
      for (const configMapName of names) expect(configMapName.startsWith('etcd-guard-'), `${role}: ${configMapName}`).toBe(true);
    }
  });

  it('grants on configmaps only the verbs the stores use (get, create, update, patch), and on nothing else namespaced', () => {
    for (const role of ofKind('Role')) {
      for (const rule of objs(role.rules)) {
        expect(strings(rule.apiGroups), name(role)).toEqual(['']);
        expect(strings(rule.resources), name(role)).toEqual(['configmaps']);
        expect(
          strings(rule.verbs).filter((verb) => !['get', 'create', 'update', 'patch'].includes(verb)),
          name(role),
        ).toEqual([]);
      }
    }
  });

  it('has exactly one cluster-scoped permission: list on nodes', () => {
    const clusterRoles = ofKind('ClusterRole');
    for (const clusterRole of clusterRoles) {
      expect(clusterRole.rules, name(clusterRole)).toEqual([{ apiGroups: [''], resources: ['nodes'], verbs: ['list'] }]);
    }
    for (const binding of ofKind('ClusterRoleBinding')) {
      expect(at(binding, 'roleRef', 'kind')).toBe('ClusterRole');
      expect(clusterRoles.map(name)).toContain(at(binding, 'roleRef', 'name'));
    }
    for (const binding of ofKind('RoleBinding')) expect(at(binding, 'roleRef', 'kind'), name(binding)).toBe('Role');
  });

  it('binds only service accounts that exist, in the guard namespace', () => {
    const serviceAccounts = ofKind('ServiceAccount').map(name);
    for (const binding of [...ofKind('RoleBinding'), ...ofKind('ClusterRoleBinding')]) {
      for (const subject of objs(binding.subjects)) {
        expect(subject.kind, name(binding)).toBe('ServiceAccount');
        expect(serviceAccounts).toContain(subject.name);
        expect(subject.namespace).toBe(guardNamespace);
      }
    }
  });

  it.each(workloads.map((workload) => [workload.what, workload] as const))(
    'the %s service account may get and update the ConfigMap of every configured target',
    (_label, workload) => {
      const serviceAccount = text(workload.podSpec.serviceAccountName) ?? '';
      expect(ofKind('ServiceAccount').map(name)).toContain(serviceAccount);
      const granted = rolesBoundTo(serviceAccount).map(readableAndWritableConfigMaps);
      const get = granted.flatMap((grant) => grant.get);
      const update = granted.flatMap((grant) => grant.update);
      expect(guardConfig().targets.length).toBeGreaterThan(0);
      for (const target of guardConfig().targets) {
        expect(get, `get etcd-guard-${target.name}`).toContain(`etcd-guard-${target.name}`);
        expect(update, `update etcd-guard-${target.name}`).toContain(`etcd-guard-${target.name}`);
      }
      const creates = rolesBoundTo(serviceAccount).some((role) =>
        objs(role.rules).some((rule) => strings(rule.resources).includes('configmaps') && strings(rule.verbs).includes('create')),
      );
      expect(creates, 'create configmaps (first evaluation of a target)').toBe(true);
    },
  );
});

// ---------------------------------------------------------------------------------------------

/** Flags the CLI accepts (functions/cli.ts, SPEC.md); `true` = takes a value. */
const CLI_FLAGS: Record<string, Record<string, boolean>> = {
  webhook: { '--config': true, '--listen': true, '--tls-cert': true, '--tls-key': true, '--insecure-http': false },
  evaluate: {
    '--config': true,
    '--endpoints': true,
    '--cacert': true,
    '--cert': true,
    '--key': true,
    '--timeout': true,
    '--target': true,
    '--output': true,
    '--store': true,
    '--quota-backend-bytes': true,
  },
};

/** Parses container args like the CLI would: a command, then flags (`--flag value` or `--flag=value`). */
function parseCliArgs(args: string[]): { command: string; flags: Map<string, string | true> } {
  const [command, ...rest] = args;
  const known = CLI_FLAGS[command ?? ''];
  if (known === undefined) throw new Error(`unknown command ${JSON.stringify(command)}`);
  const flags = new Map<string, string | true>();
  for (let index = 0; index < rest.length; index += 1) {
    const argument = rest[index] ?? '';
    const [flag = '', inlineValue] = argument.split(/=(.*)/s, 2);
    const takesValue = known[flag];
    if (takesValue === undefined) throw new Error(`${command}: unknown flag ${JSON.stringify(argument)}`);
    if (flags.has(flag)) throw new Error(`${command}: ${flag} given twice`);
    if (!takesValue) {
      flags.set(flag, true);
      continue;
    }
    const value = inlineValue ?? rest[(index += 1)];
    if (value === undefined || value.startsWith('--')) throw new Error(`${command}: ${flag} needs a value`);
    flags.set(flag, value);
  }
  return { command: command ?? '', flags };
}

function containerOf(podSpec: Obj): Obj {
  const containers = objs(podSpec.containers);
  expect(containers).toHaveLength(1);
  return containers[0] as Obj;
}

/** Where each file of the pod's volumes appears in the container: mount path + item path. */
function mountedFiles(podSpec: Obj, container: Obj): Map<string, { configMap?: string; secret?: string; key: string }> {
  const files = new Map<string, { configMap?: string; secret?: string; key: string }>();
  const volumes = objs(podSpec.volumes);
  for (const mount of objs(container.volumeMounts)) {
    const volume = volumes.find((candidate) => candidate.name === mount.name);
    const mountPath = String(mount.mountPath);
    const sources = [
      ...objs(at(volume, 'projected', 'sources')),
      ...(isObj(at(volume, 'configMap')) ? [{ configMap: at(volume, 'configMap') }] : []),
      ...(isObj(at(volume, 'secret'))
        ? [{ secret: { ...(at(volume, 'secret') as Obj), name: at(volume, 'secret', 'secretName') } }]
        : []),
    ];
    for (const source of sources) {
      const kind = isObj(source.configMap) ? 'configMap' : isObj(source.secret) ? 'secret' : undefined;
      if (kind === undefined) continue;
      const sourceName = String(at(source, kind, 'name'));
      const items = objs(at(source, kind, 'items'));
      // Without items every key of the object appears under its own name; tls Secrets have these.
      const entries =
        items.length > 0
          ? items.map((item) => ({ key: String(item.key), path: String(item.path) }))
          : ['tls.crt', 'tls.key', 'ca.crt'].map((key) => ({ key, path: key }));
      for (const entry of entries) files.set(path.posix.join(mountPath, entry.path), { [kind]: sourceName, key: entry.key });
    }
  }
  return files;
}

describe('workloads', () => {
  it.each(workloads.map((workload) => [workload.what, workload] as const))(
    '%s runs non-root, read-only, without privileges or capabilities',
    (_label, workload) => {
      const { podSpec } = workload;
      expect(at(podSpec, 'securityContext', 'runAsNonRoot')).toBe(true);
      expect(at(podSpec, 'securityContext', 'runAsUser')).toBe(10001);
      expect(at(podSpec, 'securityContext', 'seccompProfile', 'type')).toBe('RuntimeDefault');
      expect(podSpec.hostNetwork ?? false).toBe(false);
      expect(podSpec.hostPID ?? false).toBe(false);
      expect(objs(podSpec.volumes).filter((volume) => volume.hostPath !== undefined)).toEqual([]);
      const container = containerOf(podSpec);
      expect(at(container, 'securityContext', 'runAsNonRoot')).toBe(true);
      expect(at(container, 'securityContext', 'runAsUser')).toBe(10001);
      expect(at(container, 'securityContext', 'readOnlyRootFilesystem')).toBe(true);
      expect(at(container, 'securityContext', 'allowPrivilegeEscalation')).toBe(false);
      expect(strings(at(container, 'securityContext', 'capabilities', 'drop'))).toContain('ALL');
      expect(at(container, 'securityContext', 'capabilities', 'add')).toBeUndefined();
      expect(at(container, 'securityContext', 'privileged') ?? false).toBe(false);
      expect(at(container, 'securityContext', 'seccompProfile', 'type')).toBe('RuntimeDefault');
      for (const kind of ['requests', 'limits']) {
        for (const resource of ['cpu', 'memory'])
          expect(at(container, 'resources', kind, resource), `${kind}.${resource}`).toBeDefined();
      }
      expect(String(container.image)).toMatch(/^ghcr\.io\/etcd-guard\/etcd-guard:\d+\.\d+\.\d+$/);
    },
  );

  it.each(workloads.map((workload) => [workload.what, workload] as const))(
    '%s has a writable /tmp (TMPDIR) under a read-only root',
    (_label, workload) => {
      const container = containerOf(workload.podSpec);
      const tmpMount = objs(container.volumeMounts).find((mount) => mount.mountPath === '/tmp');
      const volume = objs(workload.podSpec.volumes).find((candidate) => candidate.name === tmpMount?.name);
      expect(volume?.emptyDir, 'an emptyDir at /tmp').toBeDefined();
      expect(tmpMount?.readOnly ?? false).toBe(false);
    },
  );

  it.each(workloads.map((workload) => [workload.what, workload] as const))(
    '%s is started with a CLI command and flags the CLI accepts, and its config file and every TLS file it names are mounted',
    (_label, workload) => {
      const container = containerOf(workload.podSpec);
      expect(container.command, 'the image ENTRYPOINT runs the CLI').toBeUndefined();
      const { flags } = parseCliArgs(strings(container.args));
      const files = mountedFiles(workload.podSpec, container);
      const configFile = flags.get('--config');
      expect(typeof configFile).toBe('string');
      expect(files.get(String(configFile))).toEqual({ configMap: name(configMap), key: 'config.yaml' });
      for (const target of guardConfig().targets) {
        for (const file of [target.tls?.caFile, target.tls?.certFile, target.tls?.keyFile]) {
          expect(file, `${target.name} tls file`).toBeDefined();
          expect(files.get(String(file))?.secret, `${String(file)} comes from the etcd client Secret`).toBe(
            'etcd-guard-etcd-client',
          );
        }
      }
    },
  );

  it('the webhook serves HTTPS on 8443 with the mounted serving cert', () => {
    const { podSpec } = workloads[0] as (typeof workloads)[number];
    const container = containerOf(podSpec);
    const { command, flags } = parseCliArgs(strings(container.args));
    expect(command).toBe('webhook');
    expect(flags.has('--insecure-http')).toBe(false);
    expect(flags.get('--listen')).toBe('0.0.0.0:8443');
    const files = mountedFiles(podSpec, container);
    expect(files.get(String(flags.get('--tls-cert')))).toEqual({ secret: 'etcd-guard-webhook-tls', key: 'tls.crt' });
    expect(files.get(String(flags.get('--tls-key')))).toEqual({ secret: 'etcd-guard-webhook-tls', key: 'tls.key' });
    expect(objs(container.ports).map((port) => port.containerPort)).toContain(8443);
  });

  it('the webhook Deployment probes /healthz and /readyz over HTTPS on the serving port', () => {
    const container = containerOf(workloads[0]?.podSpec ?? {});
    const resolvePort = (port: unknown) =>
      typeof port === 'number' ? port : objs(container.ports).find((candidate) => candidate.name === port)?.containerPort;
    for (const [probe, probePath] of [
      ['livenessProbe', '/healthz'],
      ['readinessProbe', '/readyz'],
    ] as const) {
      expect(at(container, probe, 'httpGet', 'path'), probe).toBe(probePath);
      expect(at(container, probe, 'httpGet', 'scheme'), probe).toBe('HTTPS');
      expect(resolvePort(at(container, probe, 'httpGet', 'port')), probe).toBe(8443);
    }
  });

  it('the webhook runs two replicas spread over nodes, kept at one by a PodDisruptionBudget', () => {
    const podLabels = workloads[0]?.podLabels ?? {};
    expect(at(deployment, 'spec', 'replicas')).toBe(2);
    expect(labelsMatch(at(deployment, 'spec', 'selector'), podLabels)).toBe(true);
    const antiAffinity = at(deployment, 'spec', 'template', 'spec', 'affinity', 'podAntiAffinity');
    const terms = [
      ...objs(at(antiAffinity, 'requiredDuringSchedulingIgnoredDuringExecution')),
      ...objs(at(antiAffinity, 'preferredDuringSchedulingIgnoredDuringExecution')).map(
        (term) => (at(term, 'podAffinityTerm') ?? {}) as Obj,
      ),
    ];
    expect(
      terms.some((term) => term.topologyKey === 'kubernetes.io/hostname' && labelsMatch(term.labelSelector, podLabels)),
    ).toBe(true);
    const budget = only('PodDisruptionBudget');
    expect(at(budget, 'spec', 'minAvailable')).toBe(1);
    expect(labelsMatch(at(budget, 'spec', 'selector'), podLabels)).toBe(true);
  });

  it('the Service sends 443 to the webhook pods on 8443', () => {
    const container = containerOf(workloads[0]?.podSpec ?? {});
    const [port] = objs(at(service, 'spec', 'ports'));
    expect(at(port, 'port')).toBe(443);
    const target = at(port, 'targetPort');
    const resolved =
      typeof target === 'number' ? target : objs(container.ports).find((candidate) => candidate.name === target)?.containerPort;
    expect(resolved).toBe(8443);
    const selector = at(service, 'spec', 'selector');
    expect(labelsMatch({ matchLabels: selector }, workloads[0]?.podLabels ?? {})).toBe(true);
  });

  it('the CronJob evaluates every minute, one run at a time, each killed before the next is due', () => {
    expect(at(cronJob, 'spec', 'schedule')).toBe('* * * * *');
    expect(at(cronJob, 'spec', 'concurrencyPolicy')).toBe('Forbid');
    expect(at(cronJob, 'spec', 'startingDeadlineSeconds')).toEqual(expect.any(Number));
    const activeDeadline = at(cronJob, 'spec', 'jobTemplate', 'spec', 'activeDeadlineSeconds');
    expect(activeDeadline).toBe(50);
    expect(at(cronJob, 'spec', 'jobTemplate', 'spec', 'backoffLimit')).toBe(0);
    for (const limit of ['successfulJobsHistoryLimit', 'failedJobsHistoryLimit']) {
      const value = at(cronJob, 'spec', limit);
      expect(typeof value === 'number' && value >= 0 && value <= 3, limit).toBe(true);
    }
    const { command } = parseCliArgs(strings(containerOf(workloads[1]?.podSpec ?? {}).args));
    expect(command).toBe('evaluate');
  });

  it('rejects args the CLI would reject (the arg parser of this test is not a rubber stamp)', () => {
    const cases: Array<[string[], RegExp]> = [
      [['serve', '--config', 'x'], /unknown command/],
      [['webhook', '--port', '8443'], /unknown flag "--port"/],
      [['webhook', '--config'], /--config needs a value/],
      [['evaluate', '--config', 'a', '--config', 'b'], /given twice/],
    ];
    for (const [args, message] of cases) expect(() => parseCliArgs(args), args.join(' ')).toThrow(message);
    expect(parseCliArgs(['evaluate', '--config=/x.yaml']).flags.get('--config')).toBe('/x.yaml');
  });
});

describe('the embedded config', () => {
  it('parses with the guard config schema and stores evaluations in the guard namespace', () => {
    expect(guardConfig().store).toEqual({ kind: 'configmap', namespace: guardNamespace });
    expect(guardConfig().maxAgeSeconds).toBe(120);
    expect(guardConfig().inlineRefresh).toBe(true);
  });

  it('every key it uses is in the configuration reference', () => {
    const documented = new Set(configReferenceRows().map((row) => row.path));
    const used: string[] = [];
    const collect = (value: unknown, prefix: string): void => {
      if (Array.isArray(value)) {
        for (const item of value) if (isObj(item)) collect(item, `${prefix}[]`);
      } else if (isObj(value)) {
        for (const [key, child] of Object.entries(value)) {
          const keyPath = prefix === '' ? key : `${prefix}.${key}`;
          used.push(keyPath);
          if (!keyPath.endsWith('labelSelector')) collect(child, keyPath);
        }
      }
    };
    collect(parseYaml(String(at(configMap, 'data', 'config.yaml'))), '');
    expect(used.length).toBeGreaterThan(5);
    expect(used.filter((key) => !documented.has(key))).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('scripts/make-webhook-cert.sh', () => {
  it('--out writes a serving cert for the Service DNS names, signed by the CA it writes, and prints no key', async () => {
    const out = path.join(makeTempDir(), 'certs');
    const result = await run('bash', [CERT_SCRIPT, '--out', out]);
    expect(result.code, result.stderr).toBe(0);
    expect(`${result.stdout}${result.stderr}`).not.toMatch(/PRIVATE KEY/);
    const certText = await run('openssl', ['x509', '-noout', '-text', '-in', path.join(out, 'tls.crt')]);
    expect(certText.code).toBe(0);
    const serviceHost = `${name(service)}.${guardNamespace}.svc`;
    expect(certText.stdout).toContain(`DNS:${serviceHost}`);
    expect(certText.stdout).toContain(`DNS:${serviceHost}.cluster.local`);
    expect(certText.stdout).toMatch(/TLS Web Server Authentication/);
    const verify = await run('openssl', ['verify', '-CAfile', path.join(out, 'ca.crt'), path.join(out, 'tls.crt')]);
    expect(verify.code, verify.stderr).toBe(0);
    // The key belongs to the cert: a TLS context accepts the pair.
    const key = readFileSync(path.join(out, 'tls.key'));
    const cert = readFileSync(path.join(out, 'tls.crt'));
    expect(() => createSecureContext({ key, cert })).not.toThrow();
    expect(new X509Certificate(cert).publicKey.export({ format: 'jwk' })).toEqual(createPublicKey(key).export({ format: 'jwk' }));
  });

  it('names the cert after --namespace and --service', async () => {
    const out = path.join(makeTempDir(), 'certs');
    const result = await run('bash', [CERT_SCRIPT, '--out', out, '--namespace', 'guard-test', '--service', 'hook']);
    expect(result.code, result.stderr).toBe(0);
    const san = new X509Certificate(readFileSync(path.join(out, 'tls.crt'))).subjectAltName ?? '';
    expect(san).toContain('DNS:hook.guard-test.svc');
    expect(san).not.toContain('etcd-guard-webhook');
  });

  it.each([
    [['--bogus'], /unknown argument "--bogus"/],
    [['--days'], /--days needs a value/],
    [['--days', 'soon', '--out', 'x'], /invalid --days "soon"/],
    [['--namespace', 'Bad_NS', '--out', 'x'], /invalid --namespace "Bad_NS"/],
  ])('refuses %j with exit 2 and a message naming it', async (args, message) => {
    const result = await run('bash', [CERT_SCRIPT, ...args]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
  });

  it('--help describes what it does and exits 0', async () => {
    const result = await run('bash', [CERT_SCRIPT, '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/caBundle/);
    expect(result.stdout).toMatch(/--out DIR/);
  });

  it('against a cluster: applies the TLS Secret and patches the CA into every webhook of the configuration', async () => {
    // No cluster here: a stand-in kubectl (via the script's KUBECTL variable) records each call and
    // answers `get` with two webhook names, so the script's cluster path runs for real.
    const dir = makeTempDir();
    const log = path.join(dir, 'calls.jsonl');
    const fakeKubectl = path.join(dir, 'kubectl');
    writeFileSync(
      fakeKubectl,
      `#!/usr/bin/env node
const fs = require('node:fs');
const args = process.argv.slice(2);
const record = { args, stdin: args[0] === 'apply' ? fs.readFileSync(0, 'utf8') : undefined };
if (args[0] === 'create') {
  const file = (flag) => fs.readFileSync(args.find((a) => a.startsWith(flag + '=')).slice(flag.length + 1));
  record.cert = file('--cert').toString('utf8');
  process.stdout.write('kind: Secret\\ntype: kubernetes.io/tls\\ndata:\\n  tls.crt: ' + file('--cert').toString('base64') + '\\n  tls.key: ' + file('--key').toString('base64') + '\\n');
}
if (args[0] === 'get') process.stdout.write('etcd-guard.etcd-guard.io\\nsecond.etcd-guard.io\\n');
fs.appendFileSync(${JSON.stringify(log)}, JSON.stringify(record) + '\\n');
`,
    );
    chmodSync(fakeKubectl, 0o755);
    const result = await run('bash', [CERT_SCRIPT], { env: { ...process.env, KUBECTL: fakeKubectl } });
    expect(result.code, result.stderr).toBe(0);
    expect(`${result.stdout}${result.stderr}`).not.toMatch(/PRIVATE KEY/);
    const calls = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { args: string[]; stdin?: string; cert?: string });
    expect(calls.map((call) => call.args[0])).toEqual(['create', 'apply', 'get', 'patch']);
    const [create, apply, , patch] = calls;
    expect(create?.args.slice(0, 6)).toEqual([
      'create',
      'secret',
      'tls',
      'etcd-guard-webhook-tls',
      '--namespace',
      guardNamespace,
    ]);
    expect(create?.args).toEqual(expect.arrayContaining(['--dry-run=client', '-o', 'yaml']));
    expect(apply?.args).toEqual(['apply', '-f', '-']);
    expect(apply?.stdin).toMatch(/kind: Secret/);
    expect(patch?.args.slice(0, 4)).toEqual([
      'patch',
      'validatingwebhookconfiguration',
      name(webhookConfiguration),
      '--type=json',
    ]);
    const operations = JSON.parse(patch?.args[5] ?? '[]') as Array<{ op: string; path: string; value: string }>;
    expect(operations.map((operation) => [operation.op, operation.path])).toEqual([
      ['add', '/webhooks/0/clientConfig/caBundle'],
      ['add', '/webhooks/1/clientConfig/caBundle'],
    ]);
    // The caBundle is the CA that signed the cert stored in the Secret.
    const ca = new X509Certificate(Buffer.from(operations[0]?.value ?? '', 'base64'));
    const served = new X509Certificate(create?.cert ?? '');
    expect(served.verify(ca.publicKey)).toBe(true);
    expect(served.subjectAltName).toContain(`DNS:${name(service)}.${guardNamespace}.svc`);
    expect(operations[1]?.value).toBe(operations[0]?.value);
  });
});

// ---------------------------------------------------------------------------------------------

describe('Dockerfile', () => {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const instructions = dockerfile
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const stages = instructions.reduce<string[][]>((list, line) => {
    if (/^FROM\s/i.test(line)) list.push([line]);
    else list[list.length - 1]?.push(line);
    return list;
  }, []);
  const finalStage = stages[stages.length - 1] ?? [];

  it('builds every stage from node:20-bookworm-slim', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage[0]).toMatch(/^FROM node:20-bookworm-slim(\s+AS\s+\S+)?$/i);
  });

  it('ships production dependencies only, runs as 10001 and starts the CLI', () => {
    const copiedModules = finalStage.find((line) => /^COPY --from=(\S+) \/app\/node_modules/.test(line));
    const sourceStage = /--from=(\S+)/.exec(copiedModules ?? '')?.[1];
    const depsStage = stages.find((stage) => new RegExp(`AS ${sourceStage ?? '-'}$`, 'i').test(stage[0] ?? ''));
    expect(depsStage?.some((line) => /npm ci .*--omit=dev/.test(line))).toBe(true);
    expect(finalStage.filter((line) => /^USER /.test(line)).at(-1)).toMatch(/^USER 10001(:10001)?$/);
    expect(finalStage.filter((line) => /^ENTRYPOINT /.test(line)).at(-1)).toMatch(
      /^ENTRYPOINT \["node", (.*, )?"bin\/etcd-guard\.mjs"\]$/,
    );
    // tsx runs the TypeScript CLI in a source checkout (`npx etcd-guard` right after `npm ci`).
    const packageJson = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    expect(packageJson.dependencies?.tsx).toBeDefined();
  });

  it('compiles in the build stage and ships dist/ without sources, so the image runs plain JavaScript', () => {
    const copiedDist = finalStage.find((line) => /^COPY --from=(\S+) \/app\/dist /.test(line));
    const buildStageName = /--from=(\S+)/.exec(copiedDist ?? '')?.[1];
    const buildStage = stages.find((stage) => new RegExp(`AS ${buildStageName ?? '-'}$`, 'i').test(stage[0] ?? ''));
    const compile = buildStage?.find((line) => /tsc -p tsconfig\.build\.json/.test(line));
    expect(compile).toBeDefined();
    expect(compile).not.toMatch(/--noEmit/);
    expect(finalStage.some((line) => line.startsWith('COPY') && line.includes('/app/bin'))).toBe(true);
    // bin/etcd-guard.mjs takes dist/ only where functions/cli.ts is absent: shipping sources would
    // make the image run tsx again.
    for (const directory of ['functions', 'webhook'])
      expect(finalStage.filter((line) => line.startsWith('COPY') && line.includes(`/app/${directory}`))).toEqual([]);
  });

  it('starts node with the memory flags the benchmark measured (small young generation)', () => {
    const entrypoint = finalStage.filter((line) => /^ENTRYPOINT /.test(line)).at(-1) ?? '';
    const words = JSON.parse(entrypoint.replace(/^ENTRYPOINT\s+/, '')) as string[];
    const flags = words.slice(1, -1);
    const semiSpace = flags.map((flag) => /^--max-semi-space-size=(\d+)$/.exec(flag)?.[1]).find(Boolean);
    expect(semiSpace, `ENTRYPOINT flags ${JSON.stringify(flags)}`).toBeDefined();
    expect(Number(semiSpace)).toBeGreaterThanOrEqual(1);
    expect(Number(semiSpace)).toBeLessThanOrEqual(8);
    // The Deployment passes only args, so the image's ENTRYPOINT (and its flags) stays in force;
    // NODE_OPTIONS there must not override the flag either.
    const container = containerOf(workloads[0]?.podSpec ?? {});
    expect(container.command).toBeUndefined();
    const nodeOptions = objs(container.env).find((variable) => variable.name === 'NODE_OPTIONS');
    expect(String(nodeOptions?.value ?? '')).not.toMatch(/max-semi-space-size/);
  });

  it('puts no secret into the image and keeps keys out of the build context', () => {
    expect(instructions.filter((line) => /^(ARG|ENV)\s.*(TOKEN|PASSWORD|SECRET|KEY)/i.test(line))).toEqual([]);
    const ignored = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim());
    for (const pattern of ['.git', 'node_modules', '*.key', '*.pem', '.env']) expect(ignored).toContain(pattern);
  });
});

describe('configuration reference', () => {
  it('README.md is current: `tsx scripts/config-reference.ts --check README.md` exits 0', async () => {
    const result = await run(TSX, ['scripts/config-reference.ts', '--check', 'README.md']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('--check exits 1 on a stale copy, naming the file and the fix, and 2 without the markers', async () => {
    const dir = makeTempDir();
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const stale = path.join(dir, 'stale.md');
    writeFileSync(stale, readme.replace('| `maxAgeSeconds` |', '| `maxAgeSecondz` |'));
    expect(readFileSync(stale, 'utf8')).not.toBe(readme);
    const staleResult = await run(TSX, ['scripts/config-reference.ts', '--check', stale]);
    expect(staleResult.code).toBe(1);
    expect(staleResult.stderr).toContain(stale);
    expect(staleResult.stderr).toContain('--write');
    const unmarked = path.join(dir, 'unmarked.md');
    writeFileSync(unmarked, '# nothing here\n');
    const unmarkedResult = await run(TSX, ['scripts/config-reference.ts', '--check', unmarked]);
    expect(unmarkedResult.code).toBe(2);
    expect(unmarkedResult.stderr).toContain('config-reference:start');
  });

  it('--write brings a stale section up to date and keeps the rest of the document', async () => {
    const dir = makeTempDir();
    const file = path.join(dir, 'doc.md');
    writeFileSync(file, '# Title\n\nbefore\n<!-- config-reference:start -->\nold\n<!-- config-reference:end -->\nafter\n');
    const result = await run(TSX, ['scripts/config-reference.ts', '--write', file]);
    expect(result.code, result.stderr).toBe(0);
    const written = readFileSync(file, 'utf8');
    expect(written).toContain(renderConfigReference());
    expect(written.startsWith('# Title\n\nbefore\n')).toBe(true);
    expect(written.endsWith('<!-- config-reference:end -->\nafter\n')).toBe(true);
    expect((await run(TSX, ['scripts/config-reference.ts', '--check', file])).code).toBe(0);
  });

  it('lists every schema key with a real description and a default or required/optional', () => {
    const rows = configReferenceRows();
    expect(rows.length).toBeGreaterThan(10);
    expect(rows.filter((row) => row.description === GENERIC_DESCRIPTION).map((row) => row.path)).toEqual([]);
    expect(new Set(rows.map((row) => row.path)).size).toBe(rows.length);
    for (const row of rows) expect(row.default, row.path).toMatch(/^(required|optional|`.*`)$/);
    const timeout = rows.find((row) => row.path === 'targets[].timeout');
    expect(timeout?.type).toMatch(/^duration/);
    expect(timeout?.default).toBe('`"2s"`');
  });
});
