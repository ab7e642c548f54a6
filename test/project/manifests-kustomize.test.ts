// The kustomizations: every file listed, every document named and namespaced, the cert-manager
// overlay injecting its CA, and `kubectl kustomize` building them.
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  at,
  base,
  BASE_DIR,
  baseManifests,
  commandExists,
  deployment,
  guardNamespace,
  name,
  type Obj,
  objs,
  only,
  overlay,
  OVERLAY_DIR,
  OVERLAYS_DIR,
  COMPONENTS_DIR,
  containerOf,
  labelsMatch,
  readKustomization,
  ownManifests,
  readDocuments,
  ROOT,
  run,
  service,
  strings,
  text,
  webhookConfiguration,
  workloads,
} from '../harness/manifests.js';

describe('kustomizations', () => {
  const everyKustomization = [
    ['base', base] as const,
    ...readdirSync(OVERLAYS_DIR).map((dir) => [`overlay ${dir}`, readKustomization(path.join(OVERLAYS_DIR, dir))] as const),
    ...readdirSync(COMPONENTS_DIR).map((dir) => [`component ${dir}`, readKustomization(path.join(COMPONENTS_DIR, dir))] as const),
  ];

  it.each(everyKustomization)('%s lists every file in its directory, and every listed file exists', (_label, kustomization) => {
    const entries = [
      ...kustomization.resources,
      ...kustomization.patches,
      ...kustomization.components,
      ...kustomization.generatorFiles,
    ];
    const listed = new Set(entries.filter((entry) => !entry.startsWith('..')));
    const present = readdirSync(kustomization.dir).filter((file) => file !== 'kustomization.yaml');
    expect(
      present.filter((file) => !listed.has(file)),
      'files not listed in kustomization.yaml',
    ).toEqual([]);
    for (const entry of entries) {
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

describe('the observability and network-policies components', () => {
  const tempDirs: string[] = [];
  afterAll(() => {
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });

  /** Builds `resources` plus both components from a throwaway overlay, as a user's overlay would. */
  async function buildWithComponents(resource: string): Promise<Obj[]> {
    const dir = mkdtempSync(path.join(tmpdir(), 'etcd-guard-components-'));
    tempDirs.push(dir);
    const relative = (target: string) => path.relative(dir, target);
    writeFileSync(
      path.join(dir, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        'resources:',
        `  - ${relative(resource)}`,
        'components:',
        `  - ${relative(path.join(COMPONENTS_DIR, 'observability'))}`,
        `  - ${relative(path.join(COMPONENTS_DIR, 'network-policies'))}`,
        '',
      ].join('\n'),
    );
    const built = await run('kubectl', ['kustomize', dir]);
    expect(built.code, built.stderr).toBe(0);
    return parseAllDocuments(built.stdout).map((document) => document.toJS() as Obj);
  }

  const kinds = (docs: Obj[], kind: string) => docs.filter((doc) => doc.kind === kind);

  it.skipIf(!commandExists('kubectl'))('build with the base and with the cert-manager overlay', async () => {
    for (const resource of [BASE_DIR, OVERLAY_DIR]) {
      const docs = await buildWithComponents(resource);
      expect(kinds(docs, 'ServiceMonitor'), resource).toHaveLength(1);
      expect(kinds(docs, 'PrometheusRule'), resource).toHaveLength(1);
      expect(kinds(docs, 'NetworkPolicy').map(name).sort(), resource).toEqual(['etcd-guard-evaluator', 'etcd-guard-webhook']);
      const dashboard = kinds(docs, 'ConfigMap').find((doc) => name(doc) === 'etcd-guard-dashboard');
      expect(at(dashboard, 'metadata', 'labels', 'grafana_dashboard')).toBe('1');
      const json = JSON.parse(text(at(dashboard, 'data', 'etcd-guard-dashboard.json')) ?? 'null') as Obj;
      expect(json.uid).toBe('etcd-guard');
    }
  });

  it.skipIf(!commandExists('kubectl'))('the ServiceMonitor scrapes the named metrics port of the webhook Service', async () => {
    const docs = await buildWithComponents(BASE_DIR);
    const monitor = kinds(docs, 'ServiceMonitor')[0];
    expect(labelsMatch(at(monitor, 'spec', 'selector'), (at(service, 'metadata', 'labels') ?? {}) as Obj)).toBe(true);
    const [endpoint] = objs(at(monitor, 'spec', 'endpoints'));
    expect(objs(at(service, 'spec', 'ports')).map((port) => port.name)).toContain(at(endpoint, 'port'));
    expect(at(endpoint, 'scheme')).toBe('http');
    expect(strings(at(monitor, 'spec', 'namespaceSelector', 'matchNames'))).toEqual([guardNamespace]);
  });

  it.skipIf(!commandExists('kubectl'))(
    'NetworkPolicies: the admission port from anywhere, metrics from monitoring only, egress to DNS, API servers and etcd',
    async () => {
      const docs = await buildWithComponents(BASE_DIR);
      const policies = new Map(kinds(docs, 'NetworkPolicy').map((doc) => [name(doc), doc]));
      const [webhookPods, evaluatorPods] = workloads;
      const webhook = policies.get('etcd-guard-webhook');
      const evaluator = policies.get('etcd-guard-evaluator');
      expect(labelsMatch(at(webhook, 'spec', 'podSelector'), webhookPods?.podLabels ?? {})).toBe(true);
      expect(labelsMatch(at(evaluator, 'spec', 'podSelector'), evaluatorPods?.podLabels ?? {})).toBe(true);
      expect(labelsMatch(at(webhook, 'spec', 'podSelector'), evaluatorPods?.podLabels ?? {})).toBe(false);
      for (const policy of [webhook, evaluator])
        expect(strings(at(policy, 'spec', 'policyTypes')).sort()).toEqual(['Egress', 'Ingress']);

      const containerPorts = objs(containerOf(webhookPods?.podSpec ?? {}).ports).map((port) => port.name);
      const ingress = objs(at(webhook, 'spec', 'ingress'));
      const rulePorts = ingress.map((rule) => objs(rule.ports).map((port) => port.port));
      expect(rulePorts).toEqual([['https'], ['metrics']]);
      for (const [port] of rulePorts) expect(containerPorts).toContain(port);
      const metricsPeers = objs(ingress[1]?.from);
      expect(metricsPeers.every((peer) => peer.ipBlock === undefined && peer.namespaceSelector !== undefined)).toBe(true);
      expect(objs(at(evaluator, 'spec', 'ingress'))).toEqual([]);

      for (const policy of [webhook, evaluator]) {
        const egress = objs(at(policy, 'spec', 'egress')).flatMap((rule) =>
          objs(rule.ports).map((port) => `${String(port.protocol)}/${String(port.port)}`),
        );
        expect(egress.sort(), name(policy ?? {})).toEqual(['TCP/2379', 'TCP/443', 'TCP/53', 'TCP/6443', 'UDP/53']);
      }
    },
  );
});
