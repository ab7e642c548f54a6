// Discovered targets in the webhook: a KCP or Etcd belongs to its own target by identity (also
// through /scale, which carries no labels), static targets keep their match, and GET /evaluations
// lists every target with the object it guards. Evaluations are injected here; the end-to-end
// fleet test reaches real etcd.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseGuardConfig } from '../../functions/domain/config.js';
import { capiTargets, druidTargets } from '../../functions/domain/discovery-mapping.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { staticTarget, type Target } from '../../functions/domain/targets.js';
import { classifyRequest } from '../../webhook/domain/classify.js';
import type { AdmissionRequest } from '../../webhook/domain/contract.js';
import { makeEvaluation } from '../harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../harness/fake-kube-apiserver.js';
import { fixtureReview, parsedRequest, type TestReview } from '../harness/reviews.js';
import { startTestWebhook, type TestWebhook } from '../harness/webhook.js';

const json = (file: string): unknown => JSON.parse(readFileSync(new URL(file, import.meta.url), 'utf8'));
const object = (name: string) => json(`../fixtures/discovery/${name}.json`) as FakeObject;

/** An AdmissionReview fixture aimed at another object (namespace/name), as the apiserver would send it for that one. */
function review(fixture: string, namespace: string, name: string): { raw: TestReview; request: AdmissionRequest } {
  const raw = fixtureReview(fixture, { namespace, name });
  return { raw, request: parsedRequest(raw) };
}

const config = parseGuardConfig(
  {
    targets: [{ name: 'catch-all', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'legacy' } }],
    discovery: { capi: {}, druid: {} },
  },
  'test',
);
const discovered: Target[] = [
  ...capiTargets([object('kcp-v1beta1')], [object('cluster-prod')], { timeout: 5000 }).targets,
  ...druidTargets([object('etcd-druid')], { timeout: 5000 }).targets,
];
const targets = [...config.targets.map(staticTarget), ...discovered];

describe('matching by identity', () => {
  it.each([
    [
      'a KCP /scale (no labels) goes to its own capi target',
      'kcp-scale-up-3-to-5.json',
      'fleet',
      'prod-control-plane',
      'capi-fleet-prod',
    ],
    [
      'a KCP spec edit goes to its own capi target',
      'kcp-v1beta1-edit-version.json',
      'fleet',
      'prod-control-plane',
      'capi-fleet-prod',
    ],
    [
      'an Etcd spec edit goes to its own druid target',
      'etcd-druid-replicas-3-to-5.json',
      'shoot--dev--alpha',
      'etcd-main',
      discovered[1]?.name,
    ],
  ])('%s', (_case, fixture, namespace, name, expected) => {
    const classification = classifyRequest(review(fixture, namespace, name).request, config, undefined, targets);
    expect(classification.kind).toBe('needs-evaluation');
    expect(classification.kind === 'needs-evaluation' && classification.target.name).toBe(expected);
  });

  it('an object in discovery’s scope no discovered target guards is denied as unresolved, never judged by another target', () => {
    const fleet = { listed: new Set(['capi', 'druid'] as const), problems: [] };
    const other = classifyRequest(
      review('kcp-v1beta1-edit-version.json', 'fleet', 'other-cp').request,
      config,
      undefined,
      targets,
      fleet,
    );
    expect(other).toMatchObject({ kind: 'deny', reason: 'unresolved' });
    expect(other.kind === 'deny' && other.message).toContain('was not there when discovery last listed');
    // The same Etcd name in another namespace is another object.
    const elsewhere = classifyRequest(
      review('etcd-druid-replicas-3-to-5.json', 'other', 'etcd-main').request,
      config,
      undefined,
      targets,
      fleet,
    );
    expect(elsewhere).toMatchObject({ kind: 'deny', reason: 'unresolved' });
    // Before discovery has listed at all, the reason says so.
    const early = classifyRequest(
      review('kcp-v1beta1-edit-version.json', 'fleet', 'other-cp').request,
      config,
      undefined,
      targets,
    );
    expect(early.kind === 'deny' && early.message).toContain('discovery has not listed the management cluster yet');
  });

  // Issue 30 item 11: the message once read "cannot resolve its etcd cluster: it its Cluster owner
  // reference …". Each problem is a clause of its own, so it follows the colon as it is.
  const withKcp = (edit: (kcp: FakeObject, cluster: FakeObject) => void) => {
    const kcp = structuredClone(object('kcp-v1beta1'));
    const cluster = structuredClone(object('cluster-prod'));
    edit(kcp, cluster);
    return capiTargets([kcp], [cluster], { timeout: 5000 }).problems;
  };
  const ownerOf = (kcp: FakeObject) => (kcp.metadata.ownerReferences as Array<Record<string, unknown>>)[0] ?? {};
  it.each<[string, (kcp: FakeObject, cluster: FakeObject) => void, string]>([
    ['no Cluster owner reference', (kcp) => void (kcp.metadata.ownerReferences = []), 'it has no Cluster owner reference'],
    [
      'two Cluster owner references',
      (kcp) => void (kcp.metadata.ownerReferences = [ownerOf(kcp), { ...ownerOf(kcp), name: 'x' }]),
      'it has 2 Cluster owner references',
    ],
    ['an owner reference without uid', (kcp) => void delete ownerOf(kcp).uid, 'its Cluster owner reference names no Cluster'],
    [
      'an owner reference to another uid',
      (kcp) => void (ownerOf(kcp).uid = '00000000-0000-4000-8000-000000000000'),
      'its Cluster owner reference carries a uid other than',
    ],
  ])('the unresolved message for %s reads as one sentence', (_case, edit, clause) => {
    const problems = withKcp(edit);
    expect(problems).toHaveLength(1);
    const fleet = { listed: new Set(['capi', 'druid'] as const), problems };
    const denied = classifyRequest(
      review('kcp-v1beta1-edit-version.json', 'fleet', 'prod-control-plane').request,
      config,
      undefined,
      targets.filter((target) => target.name !== 'capi-fleet-prod'),
      fleet,
    );
    expect(denied).toMatchObject({ kind: 'deny', reason: 'unresolved' });
    const message = denied.kind === 'deny' ? denied.message : '';
    expect(message).toContain(`cannot resolve its etcd cluster: ${clause}`);
    expect(message).not.toMatch(/\bit (its|it)\b/);
  });

  it('an unguarded edit of a discovered KCP (labels only) is allowed: identity does not move with labels', () => {
    const classification = classifyRequest(
      review('kcp-label-only.json', 'fleet', 'prod-control-plane').request,
      config,
      undefined,
      targets,
    );
    expect(classification).toEqual({ kind: 'allow', reason: 'no-guarded-change' });
  });
});

describe('the webhook with discovery against the stand-in apiserver', () => {
  let fake: FakeKubeApiServer;
  let running: TestWebhook | undefined;
  let workDir: string;
  const evaluated: string[] = [];
  const TOKEN = 'overview-token-0123456789';

  beforeEach(async () => {
    workDir = mkdtempSync(path.join(tmpdir(), 'fleet-webhook-'));
    fake = await startFakeKubeApiServer();
    fake.putObject('kubeadmcontrolplanes', object('kcp-v1beta1'));
    fake.putObject('clusters', object('cluster-prod'));
    fake.putObject('clusters', object('cluster-prod'));
    fake.putObject('kubeadmcontrolplanes', object('kcp-external-etcd'));
    fake.putObject('etcds', object('etcd-druid'));
    const guardConfig = parseGuardConfig(
      {
        store: { kind: 'file', dir: path.join(workDir, 'store') },
        targets: [{ name: 'local', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'legacy' } }],
        discovery: { capi: {}, druid: {}, kubeconfigFile: fake.kubeconfigFile },
      },
      'test',
    );
    evaluated.length = 0;
    running = await startTestWebhook({
      config: guardConfig,
      token: TOKEN,
      evaluate: (target) => {
        evaluated.push(target.name);
        return Promise.resolve(makeEvaluation({ target: target.name, evaluatedAt: new Date().toISOString() }) as Evaluation);
      },
    });
  });

  afterEach(async () => {
    await running?.close();
    running = undefined;
    await fake.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  it('GET /evaluations needs the token and lists every target with its source, guarded object and verdict', async () => {
    const url = `${running?.url}/evaluations`;
    expect((await fetch(url)).status).toBe(401);
    await fetch(`${url}/capi-fleet-prod`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    const response = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      targets: { name: string; source: string; guards: unknown; verdict: string | null; evaluatedAt: string | null }[];
    };
    expect(body.targets.map((row) => [row.name, row.source, row.verdict])).toEqual([
      ['local', 'static', null],
      ['capi-fleet-prod', 'capi', 'Healthy'],
      [discovered[1]?.name, 'druid', null],
    ]);
    expect(body.targets[1]?.guards).toEqual({
      group: 'controlplane.cluster.x-k8s.io',
      kind: 'KubeadmControlPlane',
      namespace: 'fleet',
      name: 'prod-control-plane',
    });
    expect(body.targets[1]?.evaluatedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('a /scale of a discovered KCP is judged against its own target (evaluated inline) and allowed when Healthy', async () => {
    const { raw } = review('kcp-scale-up-3-to-5.json', 'fleet', 'prod-control-plane');
    if (!running) throw new Error('the webhook did not start');
    const answer = await running.postReview(raw);
    expect(answer.allowed, answer.status?.message).toBe(true);
    expect(evaluated).toEqual(['capi-fleet-prod']);
  });
});
