// The webhook's cache fed by one labelled LIST per poll (ConfigMapStore.readAll) against the
// loopback API server stand-in: evaluations of targets nobody configured (discovered ones) come in
// with the configured ones; ConfigMaps that are not evaluations, or whose name does not match their
// target label, are skipped; where RBAC refuses the list the cache reads each configured target by
// name; a hung list costs one read deadline and the held data simply ages.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CONFIGMAP_DATA_KEY, ConfigMapStore } from '../../functions/adapters/configmap-store.js';
import { createLogger } from '../../functions/shared/logger.js';
import { EvaluationCache } from './cache.js';
import { makeEvaluation } from '../../test/harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';

const NAMESPACE = 'etcd-guard';
const LIST_PATH = `/api/v1/namespaces/${NAMESPACE}/configmaps`;
const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });

let fake: FakeKubeApiServer;
let store: ConfigMapStore;

beforeEach(async () => {
  fake = await startFakeKubeApiServer();
  store = new ConfigMapStore({ namespace: NAMESPACE, kubeconfigFile: fake.kubeconfigFile, callTimeoutMs: 1_000 });
  await store.write(makeEvaluation({ target: 'static' }));
  await store.write(makeEvaluation({ target: 'capi-default-prod', verdict: 'Unhealthy', passed: false }));
  // Not evaluations: the guard's own config, a relabelled copy, and a corrupt document.
  fake.putRaw(NAMESPACE, 'etcd-guard-config', { 'config.yaml': 'targets: []' }, { 'app.kubernetes.io/name': 'etcd-guard' });
  const relabelled = JSON.stringify(makeEvaluation({ target: 'static', verdict: 'Healthy' }));
  fake.putRaw(
    NAMESPACE,
    'etcd-guard-impostor',
    { [CONFIGMAP_DATA_KEY]: relabelled },
    { 'app.kubernetes.io/name': 'etcd-guard', 'etcd-guard.io/target': 'static' },
  );
  fake.putRaw(
    NAMESPACE,
    'etcd-guard-broken',
    { [CONFIGMAP_DATA_KEY]: '{"not": "an evaluation"' },
    { 'app.kubernetes.io/name': 'etcd-guard', 'etcd-guard.io/target': 'broken' },
  );
});

afterEach(async () => {
  await fake.close();
});

function requestsTo(verb: string): number {
  return fake.requests.filter((request) => request.verb === verb && request.resource === 'configmaps').length;
}

describe('EvaluationCache over ConfigMapStore.readAll', () => {
  it('reads every evaluation in one LIST, the discovered target included, and skips what is not one', async () => {
    const problems: string[] = [];
    const logger = {
      ...silent,
      warn: (obj: { err?: string }) => void problems.push(String(obj.err)),
    } as unknown as typeof silent;
    const cache = new EvaluationCache({ store, targets: ['static'], logger });
    const [lists, gets] = [requestsTo('list'), requestsTo('get')];
    await cache.pollOnce();
    expect(requestsTo('list') - lists).toBe(1);
    expect(requestsTo('get') - gets).toBe(0);
    expect(cache.ready).toBe(true);
    expect(cache.get('capi-default-prod')?.verdict).toBe('Unhealthy');
    expect(cache.get('static')?.target).toBe('static');
    expect(cache.get('broken')).toBeNull();
    expect([...cache.targets()].sort()).toEqual(['capi-default-prod', 'static']);
    expect(problems.join('\n')).toContain('"etcd-guard-broken"');
  });

  it('falls back to a GET per configured target when RBAC refuses the list, and stops asking', async () => {
    fake.forbid('list', 'configmaps');
    const cache = new EvaluationCache({ store, targets: ['static'], logger: silent });
    await cache.pollOnce();
    expect(cache.get('static')?.target).toBe('static');
    expect(cache.ready).toBe(true);
    const lists = requestsTo('list');
    await cache.pollOnce();
    expect(requestsTo('list')).toBe(lists);
    expect(cache.get('capi-default-prod')).toBeNull();
  });

  it('a hung list costs one read deadline, counts as a feed error and leaves the held data to age', async () => {
    const errors: string[] = [];
    const cache = new EvaluationCache({
      store,
      targets: ['static'],
      logger: silent,
      readTimeoutMs: 300,
      onFeedError: (target, error) => errors.push(`${target}: ${error.message}`),
    });
    await cache.pollOnce();
    const held = cache.get('capi-default-prod')?.evaluatedAt;
    expect(held).toBeDefined();
    // A newer evaluation is stored, but the hung list never brings it in (the path prefix hangs every read).
    await store.write(makeEvaluation({ target: 'capi-default-prod', evaluatedAt: new Date(Date.now() + 1_000).toISOString() }));
    fake.hang(LIST_PATH);
    const startedAt = performance.now();
    await cache.pollOnce();
    const elapsedMs = performance.now() - startedAt;
    // Node starts a timer from the event loop's cached clock, read when this tick began, so it can
    // fire up to the time this tick already ran (a millisecond or two) before 300 ms of performance.now.
    expect(elapsedMs).toBeGreaterThanOrEqual(300 - 5);
    expect(elapsedMs).toBeLessThan(300 + 250);
    expect(errors).toEqual(['static: reading the stored evaluation of every target took longer than 300 ms']);
    expect(cache.get('capi-default-prod')?.evaluatedAt).toBe(held);
  });
});
