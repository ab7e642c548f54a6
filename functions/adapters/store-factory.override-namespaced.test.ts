// Issue 30 item 9, "override is namespaced": the SubjectAccessReview asked in the object's
// namespace, so a tenant Role with `*` on `*` there granted `override` of the gate. Through the
// HTTPS webhook and the API stand-in's SubjectAccessReviews (a RoleBinding's grant answers only a
// review in its namespace, as RBAC does): by default the review is cluster-scoped and only a
// ClusterRoleBinding grants override; `override.namespaced: true` makes it a tenant's own again.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from './store-factory.js';
import { parseGuardConfig } from '../domain/config.js';
import type { EvaluationStore } from '../domain/store.js';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeAccessGrant, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';
import { fixtureReview } from '../../test/harness/reviews.js';
import { startTestWebhook, type TestWebhook } from '../../test/harness/webhook.js';

let workDir: string;
let fake: FakeKubeApiServer;
let store: EvaluationStore;
const webhooks: TestWebhook[] = [];

/** The tenant's namespace-admin Role: `*` on `*`, bound in `default` only (where its KCP lives). */
const TENANT_ROLE: FakeAccessGrant = { group: 'team:admins', verb: '*', apiGroup: '*', resource: '*', namespace: 'default' };
/** The shipped ClusterRole etcd-guard-override, bound cluster-wide to on-call. */
const ONCALL_CLUSTER_ROLE: FakeAccessGrant = {
  group: 'oncall',
  verb: 'override',
  apiGroup: 'etcd-guard.io',
  resource: 'targets',
};
/** A Role naming the target, bound in the object's namespace (the per-tenant grant of the namespaced mode). */
const TEAM_ROLE: FakeAccessGrant = {
  group: 'team:oncall',
  verb: 'override',
  apiGroup: 'etcd-guard.io',
  resource: 'targets',
  name: 'prod',
  namespace: 'default',
};

async function webhookWith(override: Record<string, unknown>): Promise<TestWebhook> {
  const config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 600,
      inlineRefresh: false,
      targets: [{ name: 'prod', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'prod' } }],
      // A loaded test machine must not time the review out (then only override.groups would count).
      override: { reviewTimeout: '5s', ...override },
    },
    'override scope config',
  );
  const webhook = await startTestWebhook({
    config,
    store,
    kubeconfigFile: fake.kubeconfigFile,
    evaluate: () => Promise.reject(new Error('inline refresh is off')),
    ready: true,
  });
  webhooks.push(webhook);
  return webhook;
}

let platform: TestWebhook;
let tenantOwned: TestWebhook;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-override-scope-'));
  fake = await startFakeKubeApiServer({ user: 'system:serviceaccount:etcd-guard:etcd-guard-webhook' });
  fake.setAccessGrants([TENANT_ROLE, ONCALL_CLUSTER_ROLE, TEAM_ROLE]);
  store = createStore({ kind: 'file', dir: path.join(workDir, 'store') });
  await store.write(
    makeEvaluation({
      target: 'prod',
      evaluatedAt: new Date().toISOString(),
      verdict: 'Unhealthy',
      members: [makeMember(0), makeMember(1), makeMember(2, { healthy: false, error: 'connection refused' })],
      reasons: ['member etcd-2 unreachable: connection refused'],
    }),
  );
  platform = await webhookWith({});
  tenantOwned = await webhookWith({ namespaced: true });
});

afterAll(async () => {
  await Promise.all(webhooks.map((webhook) => webhook.close()));
  await fake?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** A KCP rollout in namespace default (denied: etcd is Unhealthy) with the override annotation, by `user` in `groups`. */
function overrideBy(user: string, groups: string[]) {
  const review = fixtureReview('kcp-v1beta1-edit-version.json');
  const object = review.request.object as { metadata: { annotations?: Record<string, string> } };
  object.metadata.annotations = { ...object.metadata.annotations, 'etcd-guard.io/override': 'tenant says so' };
  review.request.userInfo = { username: user, groups: [...groups, 'system:authenticated'] };
  return review;
}

describe('override is namespaced (issue 30 item 9)', () => {
  it.each<[string, () => TestWebhook, string, string[], boolean]>([
    [
      'default: a tenant Role with * on * in the object’s namespace grants no override',
      () => platform,
      'carol',
      ['team:admins'],
      false,
    ],
    [
      'default: a team Role naming the target in that namespace grants none either',
      () => platform,
      'erin',
      ['team:oncall'],
      false,
    ],
    ['default: the ClusterRole etcd-guard-override bound cluster-wide grants it', () => platform, 'dana', ['oncall'], true],
    ['override.namespaced: the tenant Role (* on *) grants it, as documented', () => tenantOwned, 'carol', ['team:admins'], true],
    ['override.namespaced: the team Role naming the target grants it', () => tenantOwned, 'erin', ['team:oncall'], true],
    ['override.namespaced: the cluster-wide binding still grants it', () => tenantOwned, 'dana', ['oncall'], true],
  ])('%s', async (_name, webhook, user, groups, allowed) => {
    const answer = await webhook().postReview(overrideBy(user, groups));
    const text = answer.allowed ? (answer.warnings ?? []).join(' ') : (answer.status?.message ?? '');
    expect(answer.allowed, text).toBe(allowed);
    if (allowed) expect(answer.auditAnnotations).toMatchObject({ 'override-user': user });
    else expect(text).toContain(`user ${user} is not allowed to override`);
  });

  it('asks cluster-scoped by default and in the object’s namespace when configured', async () => {
    const asked = (webhook: TestWebhook) => async () => {
      await webhook.postReview(overrideBy('carol', ['team:admins']));
      return fake.accessReviews.at(-1)?.resourceAttributes as Record<string, unknown>;
    };
    expect(await asked(platform)()).toEqual({ verb: 'override', group: 'etcd-guard.io', resource: 'targets', name: 'prod' });
    expect(await asked(tenantOwned)()).toMatchObject({ name: 'prod', namespace: 'default' });
  });
});
