import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigMapStore, CONFIGMAP_DATA_KEY, MAX_DOCUMENT_BYTES, type ConfigMapStoreOptions } from './configmap-store.js';
import { KubeApiError } from './kube.js';
import { createStore } from './store-factory.js';
import { parseEvaluationJson, type Evaluation } from '../domain/evaluation-document.js';
import { makeEvaluation, makeEvaluationAt, makeMember } from '../../test/harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';
import { captureStoreError } from '../../test/harness/store-error.js';

const NAMESPACE = 'etcd-guard';
const CM_NAME = 'etcd-guard-prod';

let fake: FakeKubeApiServer;

beforeEach(async () => {
  fake = await startFakeKubeApiServer();
});

afterEach(async () => {
  await fake.close();
});

function storeFor(options: Partial<ConfigMapStoreOptions> = {}): ConfigMapStore {
  return new ConfigMapStore({ namespace: NAMESPACE, kubeconfigFile: fake.kubeconfigFile, ...options });
}

function storedEvaluation(): Evaluation | null {
  const text = fake.getConfigMap(NAMESPACE, CM_NAME)?.data?.[CONFIGMAP_DATA_KEY];
  return text === undefined ? null : parseEvaluationJson(text, 'fake apiserver');
}

describe('ConfigMapStore against a fake kube-apiserver over HTTP', () => {
  it('creates the ConfigMap on first write with exactly the specified labels, annotations and data', async () => {
    const store = storeFor();
    const evaluation = makeEvaluationAt(10, { verdict: 'Degraded', reasons: ['etcd-2: slow (420ms)'] });
    expect(await store.write(evaluation)).toEqual({ written: true });

    const stored = fake.getConfigMap(NAMESPACE, CM_NAME);
    expect(stored?.metadata.labels).toEqual({ 'app.kubernetes.io/name': 'etcd-guard', 'etcd-guard.io/target': 'prod' });
    expect(stored?.metadata.annotations).toEqual({
      'etcd-guard.io/verdict': 'Degraded',
      'etcd-guard.io/evaluated-at': evaluation.evaluatedAt,
      'etcd-guard.io/sequence': '1',
    });
    expect(Object.keys(stored?.data ?? {})).toEqual([CONFIGMAP_DATA_KEY]);
    expect(storedEvaluation()).toEqual(evaluation);
    expect(fake.requests.map((request) => `${request.verb} ${request.status}`)).toEqual(['get 404', 'create 201']);
    expect(await store.read('prod')).toEqual(evaluation);
  });

  it('replaces on later writes, sending the resourceVersion it read, and keeps foreign labels', async () => {
    const store = storeFor();
    await store.write(makeEvaluationAt(10));
    const afterCreate = fake.getConfigMap(NAMESPACE, CM_NAME);
    fake.putRaw(NAMESPACE, CM_NAME, afterCreate?.data ?? {}, { ...afterCreate?.metadata.labels, team: 'platform' });
    const versionBeforeReplace = fake.getConfigMap(NAMESPACE, CM_NAME)?.metadata.resourceVersion;
    fake.requests.length = 0;

    const newer = makeEvaluationAt(20, { verdict: 'Unhealthy', reasons: ['etcd-1: unreachable'] });
    expect(await store.write(newer)).toEqual({ written: true });

    expect(fake.requests.map((request) => `${request.verb} ${request.status}`)).toEqual(['get 200', 'update 200']);
    const stored = fake.getConfigMap(NAMESPACE, CM_NAME);
    expect(Number(stored?.metadata.resourceVersion)).toBeGreaterThan(Number(versionBeforeReplace));
    expect(stored?.metadata.labels).toEqual({
      'app.kubernetes.io/name': 'etcd-guard',
      'etcd-guard.io/target': 'prod',
      team: 'platform',
    });
    expect(stored?.metadata.annotations?.['etcd-guard.io/verdict']).toBe('Unhealthy');
    expect(storedEvaluation()).toEqual(newer);
  });

  it.each([
    { name: 'older', stored: 20, incoming: 10 },
    { name: 'equally old', stored: 20, incoming: 20 },
  ])('an $name write is kept out (written:false) and nothing is sent', async ({ stored, incoming }) => {
    const store = storeFor();
    await store.write(makeEvaluationAt(stored, { durationMs: 1 }));
    fake.requests.length = 0;
    const outcome = await store.write(makeEvaluationAt(incoming, { durationMs: 2 }));
    expect(outcome).toEqual({ written: false, keptEvaluatedAt: makeEvaluationAt(stored).evaluatedAt });
    expect(fake.requests.map((request) => request.verb)).toEqual(['get']);
    expect(storedEvaluation()?.durationMs).toBe(1);
  });

  it('two store instances writing 20 interleaved evaluations lose no update: the newest wins', async () => {
    const first = storeFor();
    const second = storeFor();
    // Shuffled timestamps, alternating writers, all in flight at once.
    const seconds = Array.from({ length: 20 }, (_unused, index) => index + 1).sort(() => Math.random() - 0.5);
    const outcomes = await Promise.all(
      seconds.map((second_, index) =>
        (index % 2 === 0 ? first : second).write(makeEvaluationAt(second_, { durationMs: second_ })),
      ),
    );
    expect(storedEvaluation()?.evaluatedAt).toBe(makeEvaluationAt(20).evaluatedAt);
    const writeOf20 = outcomes[seconds.indexOf(20)];
    expect(writeOf20).toEqual({ written: true });
    // Every write either landed or saw something at least as new.
    for (const [index, outcome] of outcomes.entries()) {
      if (!outcome.written)
        expect(Date.parse(outcome.keptEvaluatedAt)).toBeGreaterThanOrEqual(
          Date.parse(makeEvaluationAt(seconds[index] ?? 0).evaluatedAt),
        );
    }
    const conflicts = fake.requests.filter((request) => request.status === 409).length;
    expect(conflicts).toBeGreaterThan(0); // they really raced
  });

  it('retries a replace that hits 409 because another writer got in between GET and PUT', async () => {
    const store = storeFor();
    await store.write(makeEvaluationAt(10));
    let injected = 0;
    fake.onRequest((request) => {
      if (request.verb === 'update' && injected === 0) {
        injected += 1;
        // Another writer's (older but different) write bumps the resourceVersion under us.
        fake.putRaw(NAMESPACE, CM_NAME, { [CONFIGMAP_DATA_KEY]: JSON.stringify(makeEvaluationAt(15)) });
      }
    });
    fake.requests.length = 0;
    expect(await store.write(makeEvaluationAt(30))).toEqual({ written: true });
    expect(fake.requests.map((request) => `${request.verb} ${request.status}`)).toEqual([
      'get 200',
      'update 409',
      'get 200',
      'update 200',
    ]);
    expect(storedEvaluation()?.evaluatedAt).toBe(makeEvaluationAt(30).evaluatedAt);
  });

  it('after a 409 re-reads and keeps out its write when the other writer stored something newer', async () => {
    const store = storeFor();
    await store.write(makeEvaluationAt(10));
    fake.onRequest((request) => {
      if (request.verb === 'update') {
        fake.onRequest(null);
        fake.putRaw(NAMESPACE, CM_NAME, { [CONFIGMAP_DATA_KEY]: JSON.stringify(makeEvaluationAt(50)) });
      }
    });
    expect(await store.write(makeEvaluationAt(30))).toEqual({
      written: false,
      keptEvaluatedAt: makeEvaluationAt(50).evaluatedAt,
    });
    expect(storedEvaluation()?.evaluatedAt).toBe(makeEvaluationAt(50).evaluatedAt);
  });

  it('retries a create that hits 409 AlreadyExists and then compares', async () => {
    const store = storeFor();
    fake.onRequest((request) => {
      if (request.verb === 'create') {
        fake.onRequest(null);
        fake.putRaw(NAMESPACE, CM_NAME, { [CONFIGMAP_DATA_KEY]: JSON.stringify(makeEvaluationAt(5)) });
      }
    });
    expect(await store.write(makeEvaluationAt(30))).toEqual({ written: true });
    expect(fake.requests.map((request) => `${request.verb} ${request.status}`)).toEqual([
      'get 404',
      'create 409',
      'get 200',
      'update 200',
    ]);
    expect(storedEvaluation()?.evaluatedAt).toBe(makeEvaluationAt(30).evaluatedAt);
  });

  it('gives up with a conflict error after bounded attempts when every replace conflicts', async () => {
    const store = storeFor({ maxAttempts: 3 });
    await store.write(makeEvaluationAt(10));
    fake.onRequest((request) => {
      if (request.verb === 'update')
        fake.putRaw(NAMESPACE, CM_NAME, { [CONFIGMAP_DATA_KEY]: JSON.stringify(makeEvaluationAt(10)) });
    });
    const error = await captureStoreError(store.write(makeEvaluationAt(30)));
    expect(error.kind).toBe('conflict');
    expect(error.message).toContain(`"${CM_NAME}"`);
    expect(error.message).toContain('3 attempts');
    expect(fake.requests.filter((request) => request.verb === 'update' && request.status === 409)).toHaveLength(3);
  });

  it.each([
    { verb: 'update' as const, operation: 'write', prime: true },
    { verb: 'create' as const, operation: 'write', prime: false },
    { verb: 'get' as const, operation: 'read', prime: false },
  ])('403 on $verb gives a forbidden error naming the verb, resource, name and namespace', async ({ verb, operation, prime }) => {
    const store = storeFor();
    if (prime) await store.write(makeEvaluationAt(1));
    fake.forbid(verb, 'configmaps', NAMESPACE);
    const error = await captureStoreError(operation === 'read' ? store.read('prod') : store.write(makeEvaluationAt(2)));
    expect(error.kind).toBe('forbidden');
    expect(error.message).toMatch(
      new RegExp(`^forbidden: cannot ${verb} configmaps( "${CM_NAME}")? in namespace "${NAMESPACE}": `),
    );
    // The apiserver's own explanation (who was refused) is kept for the operator.
    expect(error.message).toContain(`User "system:serviceaccount:etcd-guard:evaluator" cannot ${verb} resource "configmaps"`);
    expect(error.message).not.toContain(fake.token);
  });

  it('refuses an oversized document before sending, naming target and size; nothing is written', async () => {
    const store = storeFor();
    const huge = makeEvaluation({ reasons: ['x'.repeat(MAX_DOCUMENT_BYTES)] });
    const error = await captureStoreError(store.write(huge));
    expect(error.kind).toBe('too-large');
    expect(error.message).toContain('"prod"');
    expect(error.message).toMatch(/is \d{7} bytes/);
    expect(fake.requests).toEqual([]);
    expect(fake.getConfigMap(NAMESPACE, CM_NAME)).toBeUndefined();
  });

  it("maps the apiserver's 422 Too long to too-large; nothing is written", async () => {
    // Lift our own limit so the document reaches the apiserver's check.
    const store = storeFor({ maxDocumentBytes: Number.POSITIVE_INFINITY });
    const error = await captureStoreError(store.write(makeEvaluation({ reasons: ['x'.repeat(1_100_000)] })));
    expect(error.kind).toBe('too-large');
    expect(error.message).toContain(`cannot create configmaps "${CM_NAME}" in namespace "${NAMESPACE}"`);
    expect(error.message).toContain('Too long: may not be more than 1048576 bytes');
    expect(fake.requests.map((request) => `${request.verb} ${request.status}`)).toEqual(['get 404', 'create 422']);
    expect(fake.getConfigMap(NAMESPACE, CM_NAME)).toBeUndefined();
  });

  it.each<{ name: string; data: Record<string, string>; expectInMessage: string }>([
    { name: 'non-JSON', data: { [CONFIGMAP_DATA_KEY]: '{"schemaVersion":' }, expectInMessage: 'not JSON' },
    {
      name: 'JSON failing the schema',
      data: { [CONFIGMAP_DATA_KEY]: JSON.stringify({ ...makeEvaluation(), members: [{ id: 1 }] }) },
      expectInMessage: 'members.0',
    },
    { name: 'missing key', data: { other: 'x' }, expectInMessage: `no "${CONFIGMAP_DATA_KEY}" key` },
    {
      name: 'another target',
      data: { [CONFIGMAP_DATA_KEY]: JSON.stringify(makeEvaluation({ target: 'staging' })) },
      expectInMessage: '"staging"',
    },
  ])(
    '$name data is reported as corrupt naming the ConfigMap, and a later write replaces it',
    async ({ data, expectInMessage }) => {
      fake.putRaw(NAMESPACE, CM_NAME, data);
      const store = storeFor();
      const error = await captureStoreError(store.read('prod'));
      expect(error.kind).toBe('corrupt');
      expect(error.message).toContain(`ConfigMap "${CM_NAME}" in namespace "${NAMESPACE}"`);
      expect(error.message).toContain(expectInMessage);

      const fresh = makeEvaluationAt(1);
      expect(await store.write(fresh)).toEqual({ written: true });
      expect(await store.read('prod')).toEqual(fresh);
    },
  );

  it('a hung apiserver makes read and write fail within their deadline with a timeout error', async () => {
    fake.hang('/api/v1/namespaces/etcd-guard/configmaps');
    const store = storeFor({ callTimeoutMs: 300 });
    for (const call of [() => store.read('prod'), () => store.write(makeEvaluationAt(1))]) {
      const started = performance.now();
      const error = await captureStoreError(call());
      const elapsed = performance.now() - started;
      expect(error.kind).toBe('unavailable');
      expect(error.message).toContain(`timed out: get configmaps "${CM_NAME}" in namespace "${NAMESPACE}"`);
      expect(error instanceof KubeApiError && error.timedOut).toBe(true);
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(elapsed).toBeLessThan(300 + 250);
    }
  });

  it('a whole write, retries included, stays within writeTimeoutMs even when each call may take longer', async () => {
    const store = storeFor({ callTimeoutMs: 5_000, writeTimeoutMs: 400 });
    await store.write(makeEvaluationAt(1));
    // GETs answer, PUTs never do: only the write's overall deadline can end it.
    fake.onRequest((request) => (request.verb === 'update' ? new Promise<void>(() => undefined) : undefined));
    const started = performance.now();
    const error = await captureStoreError(store.write(makeEvaluationAt(2)));
    const elapsed = performance.now() - started;
    expect(error.kind).toBe('unavailable');
    expect(error.message).toMatch(
      new RegExp(`^timed out: update configmaps "${CM_NAME}" in namespace "${NAMESPACE}" got no answer within \\d+ms$`),
    );
    expect(elapsed).toBeLessThan(400 + 250);
  });

  it('returns null when no ConfigMap exists, and refuses a target that cannot name a ConfigMap', async () => {
    const store = storeFor();
    expect(await store.read('prod')).toBeNull();
    const error = await captureStoreError(store.read('../Prod'));
    expect(error.kind).toBe('invalid');
    expect(error.message).toContain('"../Prod"');
  });

  it('an unreachable apiserver is an unavailable error naming the operation', async () => {
    // Keep a copy of the kubeconfig: close() removes the fake's temp directory.
    const kubeconfigFile = path.join(mkdtempSync(path.join(tmpdir(), 'kubeconfig-')), 'config');
    copyFileSync(fake.kubeconfigFile, kubeconfigFile);
    const store = storeFor({ callTimeoutMs: 2000, kubeconfigFile });
    await fake.close();
    const error = await captureStoreError(store.read('prod'));
    expect(error.kind).toBe('unavailable');
    expect(error.message).toContain(`cannot get configmaps "${CM_NAME}" in namespace "${NAMESPACE}"`);
    expect(error.message).toContain('ECONNREFUSED');
    rmSync(path.dirname(kubeconfigFile), { recursive: true, force: true });
    fake = await startFakeKubeApiServer(); // afterEach closes it
  });

  it('a wrong token is reported as unauthorized', async () => {
    const kubeconfig = readFileSync(fake.kubeconfigFile, 'utf8').replace(fake.token, 'wrong-token');
    writeFileSync(fake.kubeconfigFile, kubeconfig);
    const error = await captureStoreError(storeFor().read('prod'));
    expect(error.kind).toBe('forbidden');
    expect(error.message).toMatch(/^unauthorized: cannot get configmaps/);
    expect(error.message).not.toContain('wrong-token');
  });

  it('createStore builds a ConfigMapStore for { kind: configmap } using the given kubeconfig', async () => {
    const store = createStore({ kind: 'configmap', namespace: 'other-ns' }, { kubeconfigFile: fake.kubeconfigFile });
    expect(store.describe()).toBe('configmap:other-ns');
    await store.write(makeEvaluationAt(3, { members: [makeMember(0)] }));
    expect(fake.getConfigMap('other-ns', CM_NAME)).toBeDefined();
    expect((await store.read('prod'))?.evaluatedAt).toBe(makeEvaluationAt(3).evaluatedAt);
  });

  it('a missing kubeconfig file is a clear invalid-configuration StoreError on first use', async () => {
    const store = storeFor({ kubeconfigFile: '/nonexistent/kubeconfig' });
    const error = await captureStoreError(store.read('prod'));
    expect(error.kind).toBe('invalid');
    expect(error.message).toContain('/nonexistent/kubeconfig');
  });
});
