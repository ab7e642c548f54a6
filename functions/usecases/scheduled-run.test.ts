import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, it, expect } from 'vitest';
import { parseGuardConfig, type GuardConfig, type TargetConfig } from '../domain/config.js';
import { parseEvaluationJson, type Evaluation } from '../domain/evaluation-document.js';
import { StoreError, type EvaluationStore, type WriteOutcome } from '../domain/store.js';
import {
  buildScheduledDeps,
  mapWithConcurrency,
  runScheduledEvaluation,
  runScheduledLoop,
  type ScheduledLogger,
  type ScheduledResult,
} from './scheduled-run.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { makeEvaluation, makeMember, makeMembers } from '../../test/harness/evaluation-fixture.js';
import { freePort } from '../../test/harness/free-port.js';

function configWithTargets(names: readonly string[], extra: Record<string, unknown> = {}): GuardConfig {
  return parseGuardConfig(
    {
      store: { kind: 'file', dir: '/nonexistent-unused' },
      targets: names.map((name) => ({ name, endpoints: ['https://127.0.0.1:2379'], timeout: '200ms' })),
      ...extra,
    },
    'test',
  );
}

/** A store that keeps evaluations in memory and can be told to fail for some targets. */
class MemoryStore implements EvaluationStore {
  readonly documents = new Map<string, Evaluation>();
  constructor(private readonly failingTargets: ReadonlySet<string> = new Set()) {}
  async read(target: string): Promise<Evaluation | null> {
    return this.documents.get(target) ?? null;
  }
  async write(evaluation: Evaluation): Promise<WriteOutcome> {
    if (this.failingTargets.has(evaluation.target)) {
      throw new StoreError('unavailable', `store down for ${evaluation.target}`);
    }
    const kept = this.documents.get(evaluation.target);
    if (kept !== undefined && Date.parse(kept.evaluatedAt) >= Date.parse(evaluation.evaluatedAt)) {
      return { written: false, keptEvaluatedAt: kept.evaluatedAt };
    }
    this.documents.set(evaluation.target, evaluation);
    return { written: true };
  }
  describe(): string {
    return 'memory';
  }
}

interface LogLine {
  level: 'info' | 'error';
  obj: Record<string, unknown>;
  msg: string | undefined;
}

function recordingLogger(): ScheduledLogger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return {
    lines,
    info: (obj, msg) => lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
    error: (obj, msg) => lines.push({ level: 'error', obj: obj as Record<string, unknown>, msg }),
  };
}

/** Yields to the event loop a few times so any other started work gets to run meanwhile. */
async function yieldTurns(turns: number): Promise<void> {
  for (let turn = 0; turn < turns; turn += 1) await new Promise((resolve) => setImmediate(resolve));
}

function healthyEvaluationOf(target: TargetConfig): Evaluation {
  return makeEvaluation({ target: target.name, evaluatedAt: new Date().toISOString() });
}

describe('mapWithConcurrency', () => {
  it.each([0, -1, 1.5, Number.NaN])('rejects concurrency %s with a message naming it', async (limit) => {
    await expect(mapWithConcurrency([1], limit, async (item) => item)).rejects.toThrow(String(limit));
  });

  it('keeps results in input order even when later items finish first', async () => {
    const results = await mapWithConcurrency([3, 2, 1, 0], 4, async (turns) => {
      await yieldTurns(turns);
      return turns * 10;
    });
    expect(results).toEqual([30, 20, 10, 0]);
  });
});

describe('runScheduledEvaluation', () => {
  it.each([
    { targets: 10, configConcurrency: 3, override: undefined, expectedMax: 3 },
    { targets: 10, configConcurrency: 16, override: 1, expectedMax: 1 },
    { targets: 10, configConcurrency: 16, override: undefined, expectedMax: 10 },
    { targets: 5, configConcurrency: 2, override: 4, expectedMax: 4 },
  ])(
    'never runs more than the concurrency limit at once ($targets targets, config $configConcurrency, override $override)',
    async ({ targets, configConcurrency, override, expectedMax }) => {
      const config = configWithTargets(
        Array.from({ length: targets }, (_unused, index) => `t${index}`),
        { concurrency: configConcurrency },
      );
      let inFlight = 0;
      let maxInFlight = 0;
      const evaluate = async (target: TargetConfig) => {
        inFlight += 1;
        maxInFlight = Math.max(maxInFlight, inFlight);
        // While this one is "probing", an unbounded runner would start every other target.
        await yieldTurns(5);
        inFlight -= 1;
        return healthyEvaluationOf(target);
      };
      const store = new MemoryStore();
      const results = await runScheduledEvaluation({
        config,
        store,
        evaluate,
        logger: recordingLogger(),
        ...(override === undefined ? {} : { concurrency: override }),
      });
      expect(maxInFlight).toBe(expectedMax);
      expect(results.map((result) => result.target)).toEqual(config.targets.map((target) => target.name));
      expect(store.documents.size).toBe(targets);
    },
  );

  it('logs exactly one structured line per target with verdict, passed, duration, written and reasons count', async () => {
    const config = configWithTargets(['alpha', 'beta', 'gamma']);
    const verdicts: Record<string, Evaluation> = {
      alpha: makeEvaluation({ target: 'alpha', evaluatedAt: new Date().toISOString() }),
      beta: makeEvaluation({
        target: 'beta',
        evaluatedAt: new Date().toISOString(),
        verdict: 'Degraded',
        reasons: ['etcd-1: slow (300 ms)'],
        checks: [{ name: 'latency', status: 'warn', message: 'etcd-1: slow (300 ms)' }],
      }),
      gamma: makeEvaluation({
        target: 'gamma',
        evaluatedAt: new Date().toISOString(),
        verdict: 'Unhealthy',
        members: [...makeMembers(2), makeMember(2, { healthy: false, error: 'connection refused' })],
        reasons: ['etcd-2: unreachable', 'quorum at risk'],
        checks: [{ name: 'reachable', status: 'fail', message: 'etcd-2: unreachable' }],
      }),
    };
    const logger = recordingLogger();
    await runScheduledEvaluation({
      config,
      store: new MemoryStore(),
      evaluate: async (target) => verdicts[target.name] as Evaluation,
      logger,
    });
    expect(logger.lines).toHaveLength(3);
    for (const name of ['alpha', 'beta', 'gamma']) {
      const expected = verdicts[name] as Evaluation;
      const lines = logger.lines.filter((line) => line.obj.target === name);
      expect(lines).toHaveLength(1);
      expect(lines[0]?.level).toBe('info');
      expect(lines[0]?.obj).toMatchObject({
        target: name,
        verdict: expected.verdict,
        passed: expected.passed,
        written: true,
        reasons: expected.reasons.length,
      });
      expect(lines[0]?.obj.durationMs).toEqual(expect.any(Number));
    }
  });

  it('reports a target whose store already held a newer evaluation as not written', async () => {
    const config = configWithTargets(['alpha']);
    const store = new MemoryStore();
    const newer = makeEvaluation({ target: 'alpha', evaluatedAt: '2030-01-01T00:00:00.000Z' });
    await store.write(newer);
    const [result] = await runScheduledEvaluation({
      config,
      store,
      evaluate: async (target) => healthyEvaluationOf(target),
      logger: recordingLogger(),
    });
    expect(result).toMatchObject({ target: 'alpha', ok: true, written: false });
    expect(store.documents.get('alpha')).toEqual(newer);
  });

  it('keeps going when one target throws, one cannot be stored and one hangs, and reports each', async () => {
    const config = configWithTargets(['good', 'throws', 'unstorable', 'hangs', 'also-good'], { concurrency: 2 });
    const store = new MemoryStore(new Set(['unstorable']));
    const logger = recordingLogger();
    const started = performance.now();
    const results = await runScheduledEvaluation({
      config,
      store,
      evaluate: async (target) => {
        if (target.name === 'throws') throw new Error('probe exploded for throws');
        if (target.name === 'hangs') return new Promise<Evaluation>(() => undefined);
        return healthyEvaluationOf(target);
      },
      logger,
    });
    const elapsedMs = performance.now() - started;
    const byName = new Map<string, ScheduledResult>(results.map((result) => [result.target, result]));

    expect(byName.get('good')).toMatchObject({ ok: true, written: true });
    expect(byName.get('also-good')).toMatchObject({ ok: true, written: true });
    expect(byName.get('throws')).toMatchObject({ ok: false, stage: 'evaluate', error: 'probe exploded for throws' });
    expect(byName.get('unstorable')).toMatchObject({
      ok: false,
      stage: 'store',
      verdict: 'Healthy',
      error: 'store down for unstorable',
    });
    const hung = byName.get('hangs');
    expect(hung).toMatchObject({ ok: false, stage: 'evaluate' });
    expect(hung?.ok === false && hung.error).toContain('did not finish within');
    expect([...store.documents.keys()].sort()).toEqual(['also-good', 'good']);
    expect(
      logger.lines
        .filter((line) => line.level === 'error')
        .map((line) => line.obj.target)
        .sort(),
    ).toEqual(['hangs', 'throws', 'unstorable']);
    expect(logger.lines).toHaveLength(5);
    // The hung target is cut off at its deadline (200 ms timeout + 2 s margin), not waited on forever.
    expect(elapsedMs).toBeLessThan(5_000);
  });
});

describe('runScheduledLoop', () => {
  it('repeats rounds until the signal aborts, and an abort cuts the wait short', async () => {
    const config = configWithTargets(['alpha']);
    const controller = new AbortController();
    const rounds: ScheduledResult[][] = [];
    const started = performance.now();
    const count = await runScheduledLoop({
      config,
      store: new MemoryStore(),
      evaluate: async (target) => healthyEvaluationOf(target),
      logger: recordingLogger(),
      intervalMs: 1,
      signal: controller.signal,
      onRound: (results) => {
        rounds.push(results);
        if (rounds.length === 3) controller.abort();
      },
    });
    expect(count).toBe(3);
    expect(rounds.every((round) => round.length === 1 && round[0]?.ok === true)).toBe(true);

    const longWait = new AbortController();
    const loop = runScheduledLoop({
      config,
      store: new MemoryStore(),
      evaluate: async (target) => healthyEvaluationOf(target),
      logger: recordingLogger(),
      intervalMs: 60_000,
      signal: longWait.signal,
      onRound: () => longWait.abort(),
    });
    await expect(loop).resolves.toBe(1);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('rejects a non-positive interval naming it', async () => {
    await expect(
      runScheduledLoop({
        config: configWithTargets(['alpha']),
        store: new MemoryStore(),
        evaluate: async (target) => healthyEvaluationOf(target),
        logger: recordingLogger(),
        intervalMs: 0,
        signal: new AbortController().signal,
      }),
    ).rejects.toThrow('got 0');
  });
});

describe('runScheduledEvaluation end to end: real etcd, real evaluateTarget, file store', () => {
  let cluster: EtcdTestCluster;
  let dir: string;

  beforeAll(async () => {
    cluster = await startEtcdCluster({ name: 'scheduled' });
    dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-scheduled-'));
  });
  afterAll(async () => {
    await cluster?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('stores a Healthy evaluation for the live cluster and an Unhealthy one for a dead endpoint, one line each', async () => {
    const deadPort = await freePort();
    const tls = cluster.clientTls;
    const config = parseGuardConfig(
      {
        store: { kind: 'file', dir },
        targets: [
          { name: 'live', endpoints: cluster.endpoints, tls, timeout: '3s' },
          { name: 'dead', endpoints: [`https://127.0.0.1:${deadPort}`], tls, timeout: '1s' },
        ],
      },
      'test',
    );
    const logger = recordingLogger();
    const deps = { ...buildScheduledDeps(config, { LOG_LEVEL: 'silent' }), logger };
    const started = performance.now();
    const results = await runScheduledEvaluation(deps);
    const elapsedMs = performance.now() - started;

    // A loaded machine can make a status call outlast the 500 ms slow-member limit: Degraded, and
    // still passing, with that as its only reason.
    expect(results).toMatchObject([
      { target: 'live', ok: true, verdict: expect.stringMatching(/^(Healthy|Degraded)$/), passed: true, written: true },
      { target: 'dead', ok: true, verdict: 'Unhealthy', passed: false, written: true },
    ]);
    const live = parseEvaluationJson(await readFile(path.join(dir, 'live.json'), 'utf8'), 'live.json');
    expect(live.reasons.filter((reason) => !/\) slow: status took \d+ ms/.test(reason))).toEqual([]);
    expect(live.members).toHaveLength(3);
    expect(live.cluster).toMatchObject({ votingMembers: 3, healthyVoting: 3, quorum: 2 });
    const dead = parseEvaluationJson(await readFile(path.join(dir, 'dead.json'), 'utf8'), 'dead.json');
    expect(dead.reasons.length).toBeGreaterThan(0);
    // Lines come in completion order; one info line per target either way.
    expect(logger.lines.map((line) => `${line.level}:${String(line.obj.target)}`).sort()).toEqual(['info:dead', 'info:live']);
    // Both targets ran at once: the whole round is bounded by the slower target's timeout.
    expect(elapsedMs).toBeLessThan(3_000 + 1_000);
  });
});
