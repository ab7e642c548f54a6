// The kustomizations: every file listed, every document named and namespaced, the cert-manager
// overlay injecting its CA, and `kubectl kustomize` building them.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
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
  readKustomization,
  ownManifests,
  readDocuments,
  ROOT,
  run,
  service,
  strings,
  text,
  webhookConfiguration,
} from './harness/manifests.js';

describe('kustomizations', () => {
  const everyKustomization = [
    ['base', base] as const,
    ...readdirSync(OVERLAYS_DIR).map((dir) => [`overlay ${dir}`, readKustomization(path.join(OVERLAYS_DIR, dir))] as const),
    ...readdirSync(COMPONENTS_DIR).map((dir) => [`component ${dir}`, readKustomization(path.join(COMPONENTS_DIR, dir))] as const),
  ];

  it.each(everyKustomization)('%s lists every file in its directory, and every listed file exists', (_label, kustomization) => {
    const entries = [...kustomization.resources, ...kustomization.patches, ...kustomization.components];
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
