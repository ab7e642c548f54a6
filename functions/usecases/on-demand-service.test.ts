import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseGuardConfig, type GuardConfig, type TargetConfig } from '../domain/config.js';
import { evaluationSchema, type Evaluation } from '../domain/evaluation-document.js';
import { StoreError, type EvaluationStore, type StoreErrorKind } from '../domain/store.js';
import { createStore } from '../adapters/store-factory.js';
import { evaluateTarget } from './evaluate-target.js';
import { OnDemandEvaluations, UnknownTargetError, resolveBearerToken, type OnDemandOptions } from './on-demand-service.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { makeEvaluation } from '../../test/harness/evaluation-fixture.js';
import { waitFor } from '../../test/harness/wait.js';

const TOKEN = 'an-on-demand-test-token-7f3a';

function configFor(dir: string, targets: Array<Record<string, unknown>>): GuardConfig {
  return parseGuardConfig({ store: { kind: 'file', dir }, targets }, 'test');
}

/** A settable clock, so "within minIntervalMs" is decided by the test, not by how fast it ran. */
function manualClock(start = Date.parse('2026-03-01T00:00:00.000Z')) {
  let current = start;
  return {
    now: () => new Date(current),
    advance: (ms: number) => {
      current += ms;
    },
  };
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('OnDemandEvaluations with an injected evaluate and the real file store', () => {
  let dir: string;
  let config: GuardConfig;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-on-demand-'));
    config = configFor(dir, [
      { name: 'alpha', endpoints: ['https://127.0.0.1:2379'], timeout: '100ms' },
      { name: 'beta', endpoints: ['https://127.0.0.1:2389'], timeout: '100ms' },
    ]);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** On-demand evaluations of this block's config, stored in its real file store. */
  function overFileStore(options: Omit<OnDemandOptions, 'config' | 'store'>): OnDemandEvaluations {
    return new OnDemandEvaluations({ config, store: createStore(config.store), ...options });
  }

  function evaluationOf(target: TargetConfig, at: Date): Evaluation {
    return makeEvaluation({ target: target.name, evaluatedAt: at.toISOString() });
  }

  it.each([
    { case: 'no header', authorization: undefined, status: 401 },
    { case: 'empty header', authorization: '', status: 401 },
    { case: 'wrong token', authorization: 'Bearer not-the-token', status: 401 },
    { case: 'right token with a longer prefix', authorization: `Bearer ${TOKEN}x`, status: 401 },
    { case: 'right token without the Bearer scheme', authorization: TOKEN, status: 401 },
    { case: 'right token under Basic', authorization: `Basic ${TOKEN}`, status: 401 },
    { case: 'right token', authorization: `Bearer ${TOKEN}`, status: 200 },
    { case: 'right token, lower-case scheme', authorization: `bearer ${TOKEN}`, status: 200 },
  ])('answers $status for $case when a token is configured', async ({ authorization, status }) => {
    const clock = manualClock();
    const onDemand = overFileStore({
      evaluate: async (target) => evaluationOf(target, clock.now()),
      token: TOKEN,
      now: clock.now,
    });
    const response = await onDemand.handle({ method: 'POST', target: 'alpha', authorization });
    expect(response.status).toBe(status);
    if (status === 401) {
      expect(response.headers?.['www-authenticate']).toMatch(/^Bearer/);
    }
    expect(JSON.stringify(response)).not.toContain(TOKEN);
  });

  it('allows every request when no token is configured', async () => {
    const onDemand = overFileStore({
      evaluate: async (target) => evaluationOf(target, new Date()),
      token: null,
    });
    expect(onDemand.authorize(undefined)).toBe(true);
    expect(onDemand.authorize('Bearer anything')).toBe(true);
    expect((await onDemand.handle({ method: 'GET', target: 'beta' })).status).not.toBe(401);
  });

  it.each(['GET', 'POST'])(
    "%s of an unknown target is 404 naming it but not the targets (every tenant's names)",
    async (method) => {
      const onDemand = overFileStore({
        evaluate: async (target) => evaluationOf(target, new Date()),
        token: null,
      });
      const response = await onDemand.handle({ method, target: 'nope' });
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ error: expect.stringContaining('"nope"') });
      expect(JSON.stringify(response.body)).not.toMatch(/alpha|beta/);
      await expect(onDemand.refresh('nope')).rejects.toBeInstanceOf(UnknownTargetError);
    },
  );

  it.each(['DELETE', 'PUT', 'PATCH'])('%s is 405 with an Allow header', async (method) => {
    const onDemand = overFileStore({
      evaluate: async (target) => evaluationOf(target, new Date()),
      token: TOKEN,
    });
    const response = await onDemand.handle({ method, target: 'alpha', authorization: `Bearer ${TOKEN}` });
    expect(response.status).toBe(405);
    expect(response.headers?.allow).toBe('GET, POST');
  });

  it('GET is 404 before any evaluation is stored and the stored one after a POST', async () => {
    const clock = manualClock();
    const onDemand = overFileStore({
      evaluate: async (target) => evaluationOf(target, clock.now()),
      token: null,
      now: clock.now,
    });
    const before = await onDemand.handle({ method: 'GET', target: 'beta' });
    expect(before).toMatchObject({ status: 404, body: { error: 'no evaluation stored for target "beta"' } });
    const posted = await onDemand.handle({ method: 'POST', target: 'beta' });
    expect(posted.status).toBe(200);
    const after = await onDemand.handle({ method: 'GET', target: 'beta' });
    expect(after.status).toBe(200);
    expect(after.body).toEqual(posted.body);
  });

  it('shares one run among concurrent callers, reuses it within minIntervalMs and runs again after', async () => {
    const clock = manualClock();
    let runs = 0;
    const gate = deferred<void>();
    const fresh: Evaluation[] = [];
    const onDemand = overFileStore({
      evaluate: async (target) => {
        runs += 1;
        await gate.promise;
        return evaluationOf(target, clock.now());
      },
      token: null,
      now: clock.now,
      minIntervalMs: 5_000,
      onFresh: (evaluation) => fresh.push(evaluation),
    });
    const burst = Array.from({ length: 20 }, () => onDemand.refresh('alpha'));
    gate.resolve();
    const firstBurst = await Promise.all(burst);
    expect(runs).toBe(1);
    expect(new Set(firstBurst.map((evaluation) => evaluation.evaluatedAt)).size).toBe(1);

    clock.advance(4_999);
    const withinWindow = await onDemand.refresh('alpha');
    expect(runs).toBe(1);
    expect(withinWindow).toEqual(firstBurst[0]);

    clock.advance(2);
    const afterWindow = await onDemand.refresh('alpha');
    expect(runs).toBe(2);
    expect(Date.parse(afterWindow.evaluatedAt)).toBeGreaterThan(Date.parse(withinWindow.evaluatedAt));
    expect(fresh.map((evaluation) => evaluation.evaluatedAt)).toEqual([withinWindow.evaluatedAt, afterWindow.evaluatedAt]);
  });

  describe('evaluateForAdmission', () => {
    /** A store whose writes wait on `gate` (or fail), counting every write that reached it. */
    function gatedStore(gate: Promise<void>, failWith?: Error): EvaluationStore & { writes: Evaluation[] } {
      const writes: Evaluation[] = [];
      return {
        writes,
        read: async () => null,
        write: async (evaluation) => {
          writes.push(evaluation);
          await gate;
          if (failWith) throw failWith;
          return { written: true };
        },
        describe: () => 'gated-test-store',
      };
    }

    it('settle() waits for a store write the answer went out before, and for nothing once it is done', async () => {
      const gate = deferred<void>();
      const store = gatedStore(gate.promise);
      const onDemand = new OnDemandEvaluations({
        config,
        store,
        evaluate: async (target) => evaluationOf(target, new Date()),
        token: null,
      });
      const answered = await onDemand.evaluateForAdmission('alpha', { persist: true });
      expect(answered.target).toBe('alpha');
      await waitFor('the write to reach the store', 2_000, () => store.writes.length === 1);
      let settled = false;
      const settling = onDemand.settle().then(() => {
        settled = true;
      });
      // The write is held: settle() must not have resolved after the microtasks run out.
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(settled).toBe(false);
      gate.resolve();
      await settling;
      expect(settled).toBe(true);
      await onDemand.settle();
    });

    it('says what each run is for, and a run that does not hash never stands in for a scale-up that must', async () => {
      const hashing = configFor(dir, [
        { name: 'alpha', endpoints: ['https://127.0.0.1:2379'], timeout: '100ms', consistency: { scaleUps: true } },
      ]);
      const purposes: Array<string | undefined> = [];
      const gate = deferred<void>();
      const onDemand = new OnDemandEvaluations({
        config: hashing,
        store: gatedStore(Promise.resolve()),
        evaluate: async (target, context) => {
          purposes.push(context?.purpose);
          await gate.promise;
          return evaluationOf(target, new Date());
        },
        token: null,
      });
      // While a plain inline run is under way: another plain request shares it, a scale-up does not.
      const plain = onDemand.evaluateForAdmission('alpha', { persist: true });
      const shared = onDemand.evaluateForAdmission('alpha', { persist: true });
      const scaleUp = onDemand.evaluateForAdmission('alpha', { persist: true, addsMember: true });
      // And a request that needs no hash rides the hashing run now under way.
      const afterwards = onDemand.evaluateForAdmission('alpha', { persist: true });
      const unstoredScaleUp = onDemand.evaluateForAdmission('alpha', { persist: false, addsMember: true });
      await waitFor('both runs to start', 2_000, () => purposes.length === 2);
      gate.resolve();
      const [first, second, third, fourth, fifth] = await Promise.all([plain, shared, scaleUp, afterwards, unstoredScaleUp]);
      expect(purposes).toEqual(['admission', 'admission-add']);
      expect(second).toBe(first);
      expect(third).not.toBe(first);
      expect(fourth).toBe(third);
      expect(fifth).toBe(third);
      // POST /evaluations is an operator's run: hashed as the scheduled run is.
      const asked: Array<string | undefined> = [];
      await new OnDemandEvaluations({
        config: hashing,
        store: gatedStore(Promise.resolve()),
        evaluate: async (target, context) => {
          asked.push(context?.purpose);
          return evaluationOf(target, new Date());
        },
        token: null,
      }).refresh('alpha');
      expect(asked).toEqual(['scheduled']);
    });

    it('returns the fresh evaluation before the store write starts, and the write still lands', async () => {
      const gate = deferred<void>();
      const writing = deferred<void>();
      const inner = gatedStore(gate.promise);
      const store = {
        ...inner,
        write: (evaluation: Evaluation) => {
          writing.resolve();
          return inner.write(evaluation);
        },
      };
      const fresh: Evaluation[] = [];
      const onDemand = new OnDemandEvaluations({
        config,
        store,
        evaluate: async (target) => evaluationOf(target, new Date()),
        token: null,
        onFresh: (evaluation) => fresh.push(evaluation),
      });
      const evaluation = await onDemand.evaluateForAdmission('alpha', { persist: true });
      expect(evaluation.target).toBe('alpha');
      // The caller's turn (where the webhook builds and writes its answer) runs before the write.
      expect(inner.writes).toEqual([]);
      await writing.promise;
      expect(inner.writes).toEqual([evaluation]);
      expect(fresh).toEqual([]);
      gate.resolve();
      // refresh() within the window shares the same run and settles once the write has landed.
      expect(await onDemand.refresh('alpha')).toEqual(evaluation);
      expect(fresh).toEqual([evaluation]);
      expect(inner.writes).toHaveLength(1);
    });

    it('hands a failed background write to onBackgroundStoreError and still returns the evaluation', async () => {
      const failures: Array<{ target: string; message: string }> = [];
      const reported = deferred<void>();
      const onDemand = new OnDemandEvaluations({
        config,
        store: gatedStore(
          Promise.resolve(),
          new StoreError('forbidden', 'forbidden: cannot update configmaps "etcd-guard-alpha"'),
        ),
        evaluate: async (target) => evaluationOf(target, new Date()),
        token: null,
        onBackgroundStoreError: (target, error) => {
          failures.push({ target, message: error instanceof Error ? error.message : String(error) });
          reported.resolve();
        },
      });
      const evaluation = await onDemand.evaluateForAdmission('alpha', { persist: true });
      expect(evaluation.target).toBe('alpha');
      await reported.promise;
      expect(failures).toEqual([{ target: 'alpha', message: 'forbidden: cannot update configmaps "etcd-guard-alpha"' }]);
    });

    it('does not report a failed evaluation as a store error', async () => {
      let storeErrors = 0;
      const onDemand = new OnDemandEvaluations({
        config,
        store: gatedStore(Promise.resolve()),
        evaluate: async () => {
          throw new Error('etcd exploded');
        },
        token: null,
        onBackgroundStoreError: () => (storeErrors += 1),
      });
      await expect(onDemand.evaluateForAdmission('alpha', { persist: true })).rejects.toThrow('etcd exploded');
      // A store error would be reported after the run settles; refresh() waits for that.
      await expect(onDemand.refresh('alpha')).rejects.toThrow('etcd exploded');
      expect(storeErrors).toBe(0);
    });

    it('without persist (dryRun) evaluates but writes nothing, and concurrent dry runs share one run', async () => {
      let runs = 0;
      const store = gatedStore(Promise.resolve());
      const onDemand = new OnDemandEvaluations({
        config,
        store,
        evaluate: async (target) => {
          runs += 1;
          return evaluationOf(target, new Date());
        },
        token: null,
        minIntervalMs: 60_000,
      });
      const results = await Promise.all(
        Array.from({ length: 5 }, () => onDemand.evaluateForAdmission('alpha', { persist: false })),
      );
      expect(runs).toBe(1);
      expect(new Set(results.map((evaluation) => evaluation.evaluatedAt)).size).toBe(1);
      expect(store.writes).toEqual([]);
      // A later storing refresh is not served by the unstored dry run: it evaluates and stores.
      const stored = await onDemand.refresh('alpha');
      expect(runs).toBe(2);
      expect(store.writes).toEqual([stored]);
    });

    it('without persist shares a storing run already under way instead of probing etcd again', async () => {
      let runs = 0;
      const release = deferred<void>();
      const store = gatedStore(Promise.resolve());
      const onDemand = new OnDemandEvaluations({
        config,
        store,
        evaluate: async (target) => {
          runs += 1;
          await release.promise;
          return evaluationOf(target, new Date());
        },
        token: null,
      });
      const storing = onDemand.refresh('alpha');
      const dry = onDemand.evaluateForAdmission('alpha', { persist: false });
      release.resolve();
      const [stored, dryResult] = await Promise.all([storing, dry]);
      expect(runs).toBe(1);
      expect(dryResult).toEqual(stored);
      expect(store.writes).toEqual([stored]);
    });

    it('shares a run with a live bound only if it started within it, and never rides an older one (issue 27)', async () => {
      const clock = manualClock();
      const gates: Array<ReturnType<typeof deferred<void>>> = [];
      const store = gatedStore(Promise.resolve());
      const onDemand = new OnDemandEvaluations({
        config,
        store,
        evaluate: async (target) => {
          const startedAt = clock.now();
          const gate = deferred<void>();
          gates.push(gate);
          await gate.promise;
          return evaluationOf(target, startedAt);
        },
        token: null,
        now: clock.now,
        minIntervalMs: 60_000,
      });
      const startedMs = clock.now().getTime();
      const first = onDemand.evaluateForAdmission('alpha', { persist: true, notBeforeMs: startedMs - 1_000 });
      await waitFor('the first run to start', 2_000, () => gates.length === 1);
      // 900 ms later a request with a 1 s bound shares the run still in flight: it started within it.
      clock.advance(900);
      const shared = onDemand.evaluateForAdmission('alpha', { persist: true, notBeforeMs: clock.now().getTime() - 1_000 });
      // 1,200 ms after the start one more arrives: the run is older than its bound, so it starts its own.
      clock.advance(300);
      const own = onDemand.evaluateForAdmission('alpha', { persist: true, notBeforeMs: clock.now().getTime() - 1_000 });
      await waitFor('a second run to start', 2_000, () => gates.length === 2);
      // And a request right after shares that newer run, not the old one.
      const onNewer = onDemand.evaluateForAdmission('alpha', { persist: true, notBeforeMs: clock.now().getTime() - 1_000 });
      for (const gate of gates) gate.resolve();
      const [a, b, c, d] = await Promise.all([first, shared, own, onNewer]);
      expect(gates).toHaveLength(2);
      expect(b.evaluatedAt).toBe(a.evaluatedAt);
      expect(Date.parse(c.evaluatedAt) - startedMs).toBe(1_200);
      expect(d.evaluatedAt).toBe(c.evaluatedAt);
      // Settled runs within minIntervalMs are still bounded by their start: an HTTP refresh reuses, a late admission does not.
      clock.advance(5_000);
      expect((await onDemand.refresh('alpha')).evaluatedAt).toBe(c.evaluatedAt);
      const late = onDemand.evaluateForAdmission('alpha', { persist: true, notBeforeMs: clock.now().getTime() - 1_000 });
      await waitFor('a third run to start', 2_000, () => gates.length === 3);
      gates[2]?.resolve();
      expect(Date.parse((await late).evaluatedAt) - startedMs).toBe(6_200);
    });

    it('rejects an unknown target', async () => {
      const onDemand = new OnDemandEvaluations({
        config,
        store: gatedStore(Promise.resolve()),
        evaluate: async (target) => evaluationOf(target, new Date()),
        token: null,
      });
      await expect(onDemand.evaluateForAdmission('nope', { persist: false })).rejects.toBeInstanceOf(UnknownTargetError);
    });
  });

  it('keeps targets apart: a run for one does not serve another', async () => {
    let runs = 0;
    const onDemand = overFileStore({
      evaluate: async (target) => {
        runs += 1;
        return evaluationOf(target, new Date());
      },
      token: null,
      minIntervalMs: 60_000,
    });
    const [alpha, beta] = await Promise.all([onDemand.refresh('alpha'), onDemand.refresh('beta')]);
    expect(runs).toBe(2);
    expect([alpha.target, beta.target]).toEqual(['alpha', 'beta']);
  });

  it('a failed run is shared within the window (etcd is not hammered) and retried after it', async () => {
    const clock = manualClock();
    let runs = 0;
    const onDemand = overFileStore({
      evaluate: async (target) => {
        runs += 1;
        if (runs === 1) throw new Error('probe crashed');
        return evaluationOf(target, clock.now());
      },
      token: null,
      now: clock.now,
    });
    const failures = await Promise.all([1, 2, 3].map(() => onDemand.handle({ method: 'POST', target: 'alpha' })));
    expect(failures.map((response) => response.status)).toEqual([500, 500, 500]);
    expect(failures[0]?.body).toEqual({ error: 'evaluation failed: probe crashed' });
    expect(runs).toBe(1);
    clock.advance(1_000);
    expect((await onDemand.handle({ method: 'POST', target: 'alpha' })).status).toBe(200);
    expect(runs).toBe(2);
  });

  it('answers 504 when the evaluation hangs past its deadline (timeout + 2 s)', async () => {
    const onDemand = overFileStore({
      evaluate: () => new Promise<Evaluation>(() => undefined),
      token: null,
    });
    const started = performance.now();
    const response = await onDemand.handle({ method: 'POST', target: 'alpha' });
    expect(response.status).toBe(504);
    expect(response.body).toEqual({ error: expect.stringContaining('did not finish within 2100 ms') });
    expect(performance.now() - started).toBeLessThan(4_000);
  });

  it.each<{ kind: StoreErrorKind; status: number }>([
    { kind: 'corrupt', status: 500 },
    { kind: 'invalid', status: 500 },
    { kind: 'too-large', status: 500 },
    { kind: 'unavailable', status: 503 },
    { kind: 'forbidden', status: 503 },
    { kind: 'conflict', status: 503 },
  ])('a $kind store error is $status with its message on GET and POST', async ({ kind, status }) => {
    const failing: EvaluationStore = {
      read: async () => {
        throw new StoreError(kind, `store says ${kind}`);
      },
      write: async () => {
        throw new StoreError(kind, `store says ${kind}`);
      },
      describe: () => 'failing',
    };
    const onDemand = new OnDemandEvaluations({
      config,
      store: failing,
      evaluate: async (target) => evaluationOf(target, new Date()),
      token: null,
    });
    for (const method of ['GET', 'POST']) {
      const response = await onDemand.handle({ method, target: 'alpha' });
      expect(response).toMatchObject({ status, body: { error: `store says ${kind}`, storeError: kind } });
    }
  });

  it('a corrupt file in the real file store is 500 naming the file', async () => {
    const onDemand = overFileStore({
      evaluate: async (target) => evaluationOf(target, new Date()),
      token: null,
    });
    await writeFile(path.join(dir, 'beta.json'), '{"schemaVersion": "etcd-guard.io/v1", "target": ');
    const response = await onDemand.handle({ method: 'GET', target: 'beta' });
    expect(response.status).toBe(500);
    expect(response.body).toEqual({ error: expect.stringContaining('beta.json'), storeError: 'corrupt' });
  });
});

describe('resolveBearerToken', () => {
  const baseConfig = (tokenFile?: string) =>
    parseGuardConfig(
      { targets: [{ name: 'alpha', endpoints: ['https://127.0.0.1:2379'] }], ...(tokenFile ? { auth: { tokenFile } } : {}) },
      'test',
      '/etc/etcd-guard',
    );

  it.each([
    { case: 'neither set', tokenFile: undefined, env: {}, files: {}, expected: null },
    { case: 'env only', tokenFile: undefined, env: { ETCD_GUARD_TOKEN: ' from-env\n' }, files: {}, expected: 'from-env' },
    { case: 'file only', tokenFile: 'token', env: {}, files: { '/etc/etcd-guard/token': 'from-file\n' }, expected: 'from-file' },
    {
      case: 'env wins over the file',
      tokenFile: 'token',
      env: { ETCD_GUARD_TOKEN: 'from-env' },
      files: { '/etc/etcd-guard/token': 'from-file' },
      expected: 'from-env',
    },
  ])('$case → $expected', ({ tokenFile, env, files, expected }) => {
    const readFile = (file: string) => {
      const text = (files as Record<string, string>)[file];
      if (text === undefined) throw Object.assign(new Error('no such file'), { code: 'ENOENT' });
      return text;
    };
    expect(resolveBearerToken(baseConfig(tokenFile), env, readFile)).toBe(expected);
  });

  it.each([
    { case: 'a missing file', content: undefined, message: 'ENOENT' },
    { case: 'an empty file', content: '  \n', message: 'must hold one token' },
    { case: 'a file with two words', content: 'secret-one secret-two', message: 'must hold one token' },
  ])('rejects $case with a ConfigError that names the file but not its content', ({ content, message }) => {
    const readFile = () => {
      if (content === undefined) throw Object.assign(new Error('no such file'), { code: 'ENOENT' });
      return content;
    };
    let caught: unknown;
    try {
      resolveBearerToken(baseConfig('token'), {}, readFile);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as Error).message).toContain('/etc/etcd-guard/token');
    expect((caught as Error).message).toContain(message);
    expect((caught as Error).message).not.toContain('secret-one');
  });
});

describe('OnDemandEvaluations with the real evaluateTarget against a 3-member etcd', () => {
  let cluster: EtcdTestCluster;
  let dir: string;
  let config: GuardConfig;

  beforeAll(async () => {
    cluster = await startEtcdCluster({ name: 'ondemand' });
    dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-on-demand-etcd-'));
    config = configFor(dir, [
      {
        name: 'main',
        endpoints: cluster.endpoints,
        tls: cluster.clientTls,
        timeout: '3s',
      },
    ]);
  });
  afterAll(async () => {
    await cluster?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** On-demand evaluations over the real evaluateTarget, counting how often etcd is evaluated. */
  function countingOnDemand(options: { token: string | null; minIntervalMs?: number }) {
    let evaluations = 0;
    const onDemand = new OnDemandEvaluations({
      config,
      store: createStore(config.store),
      evaluate: (target) => {
        evaluations += 1;
        return evaluateTarget(target);
      },
      ...options,
    });
    return { onDemand, etcdEvaluations: () => evaluations };
  }

  it('50 concurrent POSTs cause one etcd evaluation, a second burst within the window reuses it, GET returns it', async () => {
    // Long enough that the second burst is inside it however slow the machine is.
    const { onDemand, etcdEvaluations } = countingOnDemand({ token: TOKEN, minIntervalMs: 60_000 });
    const authorization = `Bearer ${TOKEN}`;

    const before = await onDemand.handle({ method: 'GET', target: 'main', authorization });
    expect(before.status).toBe(404);

    const started = performance.now();
    const firstBurst = await Promise.all(
      Array.from({ length: 50 }, () => onDemand.handle({ method: 'POST', target: 'main', authorization })),
    );
    const burstMs = performance.now() - started;
    expect(firstBurst.map((response) => response.status)).toEqual(Array(50).fill(200));
    expect(etcdEvaluations()).toBe(1);
    const evaluation = evaluationSchema.parse(firstBurst[0]?.body);
    expect(evaluation).toMatchObject({ target: 'main', verdict: 'Healthy', passed: true });
    expect(evaluation.members).toHaveLength(3);
    expect(evaluation.members.every((member) => member.healthy)).toBe(true);
    expect(new Set(firstBurst.map((response) => JSON.stringify(response.body))).size).toBe(1);
    // One real evaluation of a healthy loopback cluster; far below the 3 s target timeout.
    expect(burstMs).toBeLessThan(3_000);

    const secondBurst = await Promise.all(
      Array.from({ length: 50 }, () => onDemand.handle({ method: 'POST', target: 'main', authorization })),
    );
    expect(etcdEvaluations()).toBe(1);
    expect(
      secondBurst.every((response) => response.status === 200 && JSON.stringify(response.body) === JSON.stringify(evaluation)),
    ).toBe(true);

    const after = await onDemand.handle({ method: 'GET', target: 'main', authorization });
    expect(after.status).toBe(200);
    expect(evaluationSchema.parse(after.body)).toEqual(evaluation);
  });

  it.each([
    { case: 'no token', authorization: undefined, status: 401 },
    { case: 'a wrong token', authorization: 'Bearer wrong', status: 401 },
    { case: 'the right token', authorization: `Bearer ${TOKEN}`, status: 200 },
  ])('POST with $case is $status and never echoes the token', async ({ authorization, status }) => {
    const { onDemand, etcdEvaluations } = countingOnDemand({ token: TOKEN });
    const response = await onDemand.handle({ method: 'POST', target: 'main', authorization });
    expect(response.status).toBe(status);
    expect(etcdEvaluations()).toBe(status === 200 ? 1 : 0);
    expect(JSON.stringify(response)).not.toContain(TOKEN);
  });

  it('an unknown target is 404 and causes no etcd evaluation', async () => {
    const { onDemand, etcdEvaluations } = countingOnDemand({ token: null });
    const response = await onDemand.handle({ method: 'POST', target: 'other' });
    expect(response).toMatchObject({ status: 404, body: { error: expect.stringContaining('"other"') } });
    expect(etcdEvaluations()).toBe(0);
  });
});
