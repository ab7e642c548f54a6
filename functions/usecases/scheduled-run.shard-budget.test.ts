// The scheduled run as a fleet job: `evaluate --config --shard INDEX/COUNT` (or an Indexed Job's
// JOB_COMPLETION_INDEX with --shard-count) evaluates each target in exactly one shard, and the
// run's time budget returns on time with a hung target (a SIGSTOPped etcd member) reported as not
// finished, never dropped. Real 3-member etcd; the CLI runs in-process.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { staticTarget } from '../domain/targets.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../entrypoints/cli.js';
import { loadGuardConfigFile } from '../entrypoints/config-file.js';
import { evaluationSchema } from '../domain/evaluation-document.js';
import { buildScheduledDeps, runScheduledEvaluation } from './scheduled-run.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';

const TARGET_NAMES = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf'];
/** Index of the member the budget test pauses. */
const HUNG_MEMBER = 2;

let cluster: EtcdTestCluster;
let dir: string;
let fleetConfig: string;

async function runCli(args: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const code = await main(
    args,
    { LOG_LEVEL: 'silent', ...env },
    { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) },
  );
  return { code, stdout, stderr };
}

function targetYaml(name: string, endpoints: string[], timeout: string): string[] {
  const tls = `{ caFile: ${cluster.tls.caFile}, certFile: ${cluster.tls.certFile}, keyFile: ${cluster.tls.keyFile} }`;
  return [`  - name: ${name}`, `    endpoints: [${endpoints.join(', ')}]`, `    tls: ${tls}`, `    timeout: ${timeout}`];
}

beforeAll(async () => {
  cluster = await startEtcdCluster({ name: 'fleetjob' });
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-fleetjob-'));
  fleetConfig = path.join(dir, 'fleet.yaml');
  await writeFile(
    fleetConfig,
    [
      `store: { kind: file, dir: ${path.join(dir, 'store')} }`,
      'targets:',
      ...TARGET_NAMES.flatMap((name) => targetYaml(name, cluster.endpoints, '2s')),
    ].join('\n'),
  );
});

afterAll(async () => {
  await cluster?.destroy();
  // The hung target's evaluation goes on in the background after its run returned (by design,
  // bounded by its own 8 s deadline) and stores its result once the member resumes: a write can
  // land while the directory is being removed (ENOTEMPTY), so rm retries.
  if (dir) await rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
});

async function evaluatedTargets(args: string[], env: Record<string, string> = {}): Promise<string[]> {
  const run = await runCli(['evaluate', '--config', fleetConfig, '--output', 'json', ...args], env);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return evaluationSchema
    .array()
    .parse(JSON.parse(run.stdout))
    .map((evaluation) => evaluation.target);
}

describe('evaluate --config --shard', () => {
  it('3 shards evaluate every target exactly once, and each shard only its own', async () => {
    const shards = [];
    for (let index = 0; index < 3; index += 1) shards.push(await evaluatedTargets(['--shard', `${index}/3`]));
    const all = shards.flat();
    expect([...all].sort()).toEqual([...TARGET_NAMES].sort());
    expect(new Set(all).size).toBe(all.length);
  });

  it("--shard-count takes INDEX from an Indexed Job's JOB_COMPLETION_INDEX, the same split as --shard", async () => {
    for (let index = 0; index < 2; index += 1) {
      const fromJob = await evaluatedTargets(['--shard-count', '2'], { JOB_COMPLETION_INDEX: String(index) });
      expect(fromJob).toEqual(await evaluatedTargets(['--shard', `${index}/2`]));
    }
  });

  it.each([
    [['--shard', '0/0'], '--shard: want INDEX/COUNT', {}],
    [['--shard', '3/3'], '--shard: want INDEX/COUNT', {}],
    [['--shard=-1/2'], '--shard: want INDEX/COUNT', {}],
    [['--shard', '-1/2'], '--shard', {}],
    [['--shard', 'abc'], '--shard: want INDEX/COUNT', {}],
    [['--shard', '0/3', '--shard-count', '3'], '--shard and --shard-count cannot be combined', {}],
    [['--shard-count', '3'], '--shard-count needs JOB_COMPLETION_INDEX', {}],
    [['--shard-count', '3'], '--shard-count with JOB_COMPLETION_INDEX: want INDEX/COUNT', { JOB_COMPLETION_INDEX: '3' }],
    [['--budget', 'soon'], '--budget: want a duration', {}],
  ])('%j exits 2 naming the flag', async (args, message, env: Record<string, string>) => {
    const run = await runCli(['evaluate', '--config', fleetConfig, ...args], env);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(message);
    expect(run.stdout).toBe('');
  });

  it('shards the targets the caller resolved (discovered ones), not only the configured ones', async () => {
    const config = loadGuardConfigFile(fleetConfig);
    const template = config.targets[0];
    if (template === undefined) throw new Error('fleet config has no target');
    const resolved = ['capi-a', 'capi-b', 'druid-c', 'druid-d', 'capi-e'].map((name) => staticTarget({ ...template, name }));
    const deps = { ...buildScheduledDeps(config, { LOG_LEVEL: 'silent' }), targets: resolved };
    const evaluated: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const results = await runScheduledEvaluation({ ...deps, shard: { index, count: 3 } });
      expect(results.every((result) => result.ok)).toBe(true);
      evaluated.push(...results.map((result) => result.target));
    }
    expect([...evaluated].sort()).toEqual(resolved.map((target) => target.name).sort());
  });

  it('--shard without --config exits 2', async () => {
    const run = await runCli(['evaluate', '--endpoints', cluster.endpoints[0] ?? '', '--shard', '0/2']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--shard needs --config');
  });
});

describe('the run budget', () => {
  it('returns at the budget with a hung target reported as not finished; the others are stored', async () => {
    const hungConfig = path.join(dir, 'hung.yaml');
    const hungEndpoint = cluster.endpoints[HUNG_MEMBER] ?? '';
    await writeFile(
      hungConfig,
      [
        `store: { kind: file, dir: ${path.join(dir, 'hung-store')} }`,
        'runBudget: 1500ms',
        'targets:',
        // Its own timeout (8 s) is far longer than the budget: only the budget can end the run early.
        ...targetYaml('hung', [hungEndpoint], '8s'),
        ...targetYaml('whole', cluster.endpoints, '1s'),
      ].join('\n'),
    );
    cluster.pause(HUNG_MEMBER);
    try {
      const config = loadGuardConfigFile(hungConfig);
      expect(config.runBudget).toBe(1500);
      const deps = buildScheduledDeps(config, { LOG_LEVEL: 'silent' });
      const lines: object[] = [];
      const startedAt = performance.now();
      const results = await runScheduledEvaluation({ ...deps, logger: { info: () => {}, error: (line) => lines.push(line) } });
      const wallMs = performance.now() - startedAt;
      console.log(`budget 1500 ms, hung target timeout 8000 ms: run returned after ${Math.round(wallMs)} ms`);
      // What each target came to first, so that a run ending at the wrong time says why.
      const outcome = JSON.stringify(results);
      expect(results.map((result) => result.target)).toEqual(['hung', 'whole']);
      const [hung, whole] = results;
      expect(hung, outcome).toMatchObject({ ok: false, stage: 'budget', target: 'hung' });
      // Node starts a timer from the event loop's cached clock, so it can fire a millisecond or two
      // before 1500 ms of performance.now() have passed.
      expect(wallMs, outcome).toBeGreaterThanOrEqual(1500 - 5);
      expect(wallMs, outcome).toBeLessThan(1500 + 250);
      expect(hung?.ok === false && hung.error).toMatch(/not finished within the run's time budget of 1500 ms/);
      expect(lines).toContainEqual(expect.objectContaining({ target: 'hung', stage: 'budget' }));
      // The member is hung, so the whole cluster is Unhealthy, but it was evaluated and stored in time.
      expect(whole).toMatchObject({ ok: true, verdict: 'Unhealthy', written: true });

      const run = await runCli(['evaluate', '--config', hungConfig, '--budget', '3s', '--output', 'json']);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('1 target(s) not finished within the run budget: hung');
      expect(
        evaluationSchema
          .array()
          .parse(JSON.parse(run.stdout))
          .map((evaluation) => evaluation.target),
      ).toEqual(['whole']);
    } finally {
      cluster.resume(HUNG_MEMBER);
    }
  });
});
