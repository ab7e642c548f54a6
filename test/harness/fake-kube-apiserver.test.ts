// Issue 29: the stand-in (test/harness/fake-kube-apiserver.ts) agrees with the real
// kube-apiserver on everything both serve. One list of requests runs in order against both, each
// with a bearer token of the same user; the status code and the body fields the product reads
// (Status reason, message, details; kind, apiVersion, names, data, allowed) must be equal.
// A difference found here was fixed in the stand-in; the real server is the reference.
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startFakeKubeApiServer, type FakeKubeApiServer } from './fake-kube-apiserver.js';
import { startKubeApiserver, type KubeApiserver } from './kube-apiserver.js';
import { goModuleDir, pinnedVersion } from './versions.js';

const NS = 'agree';
const SA = 'client';
const USER = `system:serviceaccount:${NS}:${SA}`;
const KCP_CRD = 'controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml';
const DRUID_CRD = 'core/v1alpha1/crds/druid.gardener.cloud_etcds.yaml';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

interface Server {
  call(method: string, urlPath: string, body?: unknown, token?: string): Promise<Answer>;
  token: string;
}

function request(
  base: string,
  ca: Buffer | undefined,
  token: string,
  method: string,
  urlPath: string,
  body?: unknown,
): Promise<Answer> {
  const payload = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const options = {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/json',
        ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}),
      },
      timeout: 15_000,
      ...(ca ? { ca } : {}),
    };
    const onResponse = (response: http.IncomingMessage) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: Record<string, unknown> = {};
        try {
          parsed = JSON.parse(text) as Record<string, unknown>;
        } catch {
          parsed = { text };
        }
        resolve({ status: response.statusCode ?? 0, body: parsed });
      });
    };
    const url = `${base}${urlPath}`;
    const req = ca ? https.request(url, options, onResponse) : http.request(url, options, onResponse);
    req.on('timeout', () => req.destroy(new Error(`${method} ${urlPath} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** What the product reads of an answer; everything else (uids, timestamps, managedFields) differs by nature. */
function relevant(answer: Answer): Record<string, unknown> {
  const body = answer.body;
  const metadata = (body.metadata ?? {}) as Record<string, unknown>;
  if (body.kind === 'Status') {
    const details = (body.details ?? undefined) as Record<string, unknown> | undefined;
    return {
      status: answer.status,
      kind: body.kind,
      reason: body.reason,
      // Go's JSON decoder words its own error; the stand-in's parser cannot say the same.
      message: typeof body.message === 'string' ? body.message.replace(/(json parse error: ).*$/s, '$1…') : body.message,
      code: body.code,
      details: details && { name: details.name, group: details.group, kind: details.kind },
    };
  }
  const status = (body.status ?? undefined) as Record<string, unknown> | undefined;
  return {
    status: answer.status,
    kind: body.kind,
    apiVersion: body.apiVersion,
    name: metadata.name,
    namespace: metadata.namespace,
    resourceVersionIsText: typeof metadata.resourceVersion === 'string',
    data: body.data,
    items: Array.isArray(body.items) ? body.items.length : undefined,
    allowed: status?.allowed,
    note: body.note,
    text: body.text,
  };
}

interface Memory {
  resourceVersion?: string;
}

const configMap = (name: string, data: Record<string, string>, resourceVersion?: string) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: NS, ...(resourceVersion === undefined ? {} : { resourceVersion }) },
  data,
});
const cmPath = (name?: string) => `/api/v1/namespaces/${NS}/configmaps${name === undefined ? '' : `/${name}`}`;
const remember = (memory: Memory, answer: Answer) => {
  const rv = (answer.body.metadata as Record<string, unknown> | undefined)?.resourceVersion;
  if (typeof rv === 'string') memory.resourceVersion = rv;
  return answer;
};

/** The shared requests, in order; each runs against one server with that server's memory. */
const CASES: Array<[string, (server: Server, memory: Memory) => Promise<Answer>]> = [
  ['GET of a ConfigMap that does not exist', (s) => s.call('GET', cmPath('evaluation'))],
  ['POST of a ConfigMap', async (s, m) => remember(m, await s.call('POST', cmPath(), configMap('evaluation', { a: '1' })))],
  ['POST of the same name again', (s) => s.call('POST', cmPath(), configMap('evaluation', { a: '2' }))],
  ['GET of it', (s) => s.call('GET', cmPath('evaluation'))],
  [
    'PUT with its current resourceVersion',
    async (s, m) => {
      const stale = m.resourceVersion;
      const answer = remember(
        m,
        await s.call('PUT', cmPath('evaluation'), configMap('evaluation', { a: '3' }, m.resourceVersion)),
      );
      (m as Memory & { stale?: string }).stale = stale;
      return answer;
    },
  ],
  [
    'PUT with the resourceVersion before that (another writer won)',
    (s, m) => s.call('PUT', cmPath('evaluation'), configMap('evaluation', { a: '4' }, (m as Memory & { stale?: string }).stale)),
  ],
  ['PUT of a ConfigMap that does not exist', (s) => s.call('PUT', cmPath('absent'), configMap('absent', { a: '1' }, '1'))],
  ['PUT whose body names another ConfigMap', (s) => s.call('PUT', cmPath('evaluation'), configMap('other', { a: '1' }))],
  ['POST of a ConfigMap over 1 MiB', (s) => s.call('POST', cmPath(), configMap('huge', { big: 'x'.repeat(1_048_577) }))],
  ['POST of a ConfigMap without a name', (s) => s.call('POST', cmPath(), { apiVersion: 'v1', kind: 'ConfigMap', metadata: {} })],
  ['POST of a body that is not JSON', (s) => s.call('POST', cmPath(), '{not json')],
  ['GET of the ConfigMap list', (s) => s.call('GET', cmPath())],
  ['GET of a Secret that does not exist', (s) => s.call('GET', `/api/v1/namespaces/${NS}/secrets/prod-etcd`)],
  [
    'GET of a KubeadmControlPlane that does not exist',
    (s) => s.call('GET', `/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/${NS}/kubeadmcontrolplanes/prod`),
  ],
  [
    'GET of the KubeadmControlPlane list',
    (s) => s.call('GET', `/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/${NS}/kubeadmcontrolplanes`),
  ],
  [
    'GET of a version the group does not serve',
    (s) => s.call('GET', `/apis/controlplane.cluster.x-k8s.io/v1alpha1/namespaces/${NS}/kubeadmcontrolplanes/prod`),
  ],
  [
    'GET of an etcd-druid Etcd that does not exist (druid discovery, the backup check)',
    (s) => s.call('GET', `/apis/druid.gardener.cloud/v1alpha1/namespaces/${NS}/etcds/prod`),
  ],
  ['GET of the Etcd list', (s) => s.call('GET', `/apis/druid.gardener.cloud/v1alpha1/namespaces/${NS}/etcds`)],
  [
    'GET of a snapshot Lease that does not exist (the backup check)',
    (s) => s.call('GET', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/prod-full-snap`),
  ],
  ['GET of the Node list', (s) => s.call('GET', '/api/v1/nodes')],
  ['GET of a ConfigMap in a namespace RBAC does not grant', (s) => s.call('GET', '/api/v1/namespaces/kube-system/configmaps/x')],
  ['GET with a token the server does not know', (s) => s.call('GET', cmPath('evaluation'), undefined, 'not-a-token')],
  [
    'POST of a SubjectAccessReview nothing grants',
    (s) =>
      s.call('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: 'dev-bob',
          groups: ['developers'],
          resourceAttributes: { group: 'etcd-guard.io', resource: 'targets', verb: 'override', name: 'prod' },
        },
      }),
  ],
  [
    'POST of an events.k8s.io/v1 Event',
    (s) =>
      s.call('POST', `/apis/events.k8s.io/v1/namespaces/${NS}/events`, {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        metadata: { name: 'prod.denied', namespace: NS },
        eventTime: '2026-01-01T00:00:00.000000Z',
        reportingController: 'etcd-guard.io/webhook',
        reportingInstance: 'etcd-guard-webhook-0',
        action: 'Admit',
        reason: 'Denied',
        type: 'Warning',
        note: 'change denied',
        regarding: { apiVersion: 'apps/v1', kind: 'StatefulSet', namespace: NS, name: 'prod' },
      }),
  ],
];

let kube: KubeApiserver;
let fake: FakeKubeApiServer;
let real: Server;
let standIn: Server;

beforeAll(async () => {
  const [started, capi, druid] = await Promise.all([
    startKubeApiserver({ name: 'agree' }),
    goModuleDir('sigs.k8s.io/cluster-api', pinnedVersion('CAPI_VERSION')),
    goModuleDir('github.com/gardener/etcd-druid/api', pinnedVersion('DRUID_API_VERSION')),
  ]);
  kube = started;
  const crd = path.join(capi, KCP_CRD);
  const druidCrd = path.join(druid, DRUID_CRD);
  const applied = await kube.kubectl(['apply', '--server-side', '-f', crd, '-f', druidCrd]);
  expect(applied.code, applied.stderr).toBe(0);
  // What the product's ServiceAccounts are granted in the manifests, for this namespace only.
  const rbac = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: SA, namespace: NS } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'agree-client' },
      rules: [
        { apiGroups: [''], resources: ['configmaps', 'secrets'], verbs: ['get', 'list', 'create', 'update', 'patch'] },
        { apiGroups: ['controlplane.cluster.x-k8s.io'], resources: ['kubeadmcontrolplanes'], verbs: ['get', 'list'] },
        { apiGroups: ['druid.gardener.cloud'], resources: ['etcds'], verbs: ['get', 'list'] },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get'] },
        { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch', 'list'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'agree-node-reader' },
      rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['list'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'agree-node-reader' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'agree-node-reader' },
      subjects: [{ kind: 'ServiceAccount', name: SA, namespace: NS }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'agree-client', namespace: NS },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'agree-client' },
      subjects: [{ kind: 'ServiceAccount', name: SA, namespace: NS }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'agree-access-reviewer' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'agree-access-reviewer' },
      subjects: [{ kind: 'ServiceAccount', name: SA, namespace: NS }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'agree-access-reviewer' },
      rules: [{ apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] }],
    },
  ];
  const rbacApplied = await kube.kubectl(['apply', '--server-side', '-f', '-'], {
    stdin: rbac.map((doc) => stringify(doc)).join('---\n'),
  });
  expect(rbacApplied.code, rbacApplied.stderr).toBe(0);
  const wait = await kube.kubectl(['wait', '--for=condition=Established', '--timeout=60s', '-f', crd, '-f', druidCrd]);
  expect(wait.code, wait.stderr).toBe(0);
  const token = await kube.kubectl(['create', 'token', SA, '-n', NS]);
  expect(token.code, token.stderr).toBe(0);
  const ca = await readFile(kube.caFile);
  real = {
    token: token.stdout.trim(),
    call: (method, urlPath, body, other) => request(kube.url, ca, other ?? real.token, method, urlPath, body),
  };
  fake = await startFakeKubeApiServer({ user: USER });
  fake.forbid('get', 'configmaps', 'kube-system');
  standIn = {
    token: fake.token,
    call: (method, urlPath, body, other) => request(fake.url, undefined, other ?? fake.token, method, urlPath, body),
  };
}, 180_000);

afterAll(async () => {
  await fake?.close();
  await kube?.destroy();
});

describe('issue 29: the stand-in answers as the real kube-apiserver does', () => {
  const realMemory: Memory = {};
  const fakeMemory: Memory = {};
  it.each(CASES)('%s', async (_what, run) => {
    const fromReal = relevant(await run(real, realMemory));
    const fromStandIn = relevant(await run(standIn, fakeMemory));
    expect(fromStandIn).toEqual(fromReal);
  });
});
