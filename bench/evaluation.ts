// Evaluation benches against a real 3-member TLS etcd on loopback:
//  - in process: evaluateTarget, 200 runs, next to one raw etcd Status call to one member (a new
//    client per call, as an evaluation connects afresh; a warm-channel figure is shown too);
//  - the whole CLI process (the bundle, as installed) next to etcdctl endpoint health/status
//    --cluster + alarm list, and `--help` next to `node -e 0`;
//  - one member hung (SIGSTOP): wall time against the configured timeout and etcdctl.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { noop } from 'cockatiel';
import { Etcd3, type IOptions } from 'etcd3';
import { readFileSync } from 'node:fs';
import { parseGuardConfig, type TargetConfig } from '../functions/domain/config.js';
import { evaluateTarget } from '../functions/usecases/evaluate-target.js';
import type { EtcdTestCluster } from '../test/harness/etcd-cluster.js';
import { freePort } from '../test/harness/free-port.js';
import { median, percentile, REPO_DIR, type ResultRow } from './lib.js';

export function targetFor(cluster: EtcdTestCluster, name: string, timeout: string): TargetConfig {
  const config = parseGuardConfig(
    {
      targets: [
        {
          name,
          endpoints: cluster.endpoints,
          tls: { caFile: cluster.tls.caFile, certFile: cluster.tls.certFile, keyFile: cluster.tls.keyFile },
          timeout,
        },
      ],
    },
    'bench',
  );
  const target = config.targets[0];
  if (!target) throw new Error('bench config has no target');
  return target;
}

/** A raw etcd3 client to one member with the test client credentials, its retries off. */
export function rawClient(cluster: EtcdTestCluster, endpoint: string): Etcd3 {
  const options: IOptions = {
    hosts: endpoint,
    credentials: {
      rootCertificate: readFileSync(cluster.tls.caFile),
      certChain: readFileSync(cluster.tls.certFile),
      privateKey: readFileSync(cluster.tls.keyFile),
    },
    faultHandling: { host: () => noop, global: noop },
  };
  return new Etcd3(options);
}

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

interface ProcessRun {
  code: number;
  wallMs: number;
  stdout: string;
  stderr: string;
}

function runProcess(file: string, args: string[], timeoutMs: number): Promise<ProcessRun> {
  return new Promise((resolve) => {
    const started = performance.now();
    execFile(
      file,
      args,
      { cwd: REPO_DIR, timeout: timeoutMs, killSignal: 'SIGKILL', env: { ...process.env, ETCDCTL_API: '3' } },
      (error, stdout, stderr) => {
        const raw = (error as { code?: unknown } | null)?.code;
        resolve({ code: error ? (typeof raw === 'number' ? raw : 1) : 0, wallMs: performance.now() - started, stdout, stderr });
      },
    );
  });
}

function etcdctlArgs(cluster: EtcdTestCluster, endpoints: string[], args: string[]): string[] {
  return [
    `--endpoints=${endpoints.join(',')}`,
    '--cacert',
    cluster.tls.caFile,
    '--cert',
    cluster.tls.certFile,
    '--key',
    cluster.tls.keyFile,
    ...args,
  ];
}

function cliArgs(cluster: EtcdTestCluster, timeout: string): string[] {
  return [
    path.join(REPO_DIR, 'bin/etcd-guard.mjs'),
    'evaluate',
    '--endpoints',
    cluster.endpoints.join(','),
    '--cacert',
    cluster.tls.caFile,
    '--cert',
    cluster.tls.certFile,
    '--key',
    cluster.tls.keyFile,
    '--timeout',
    timeout,
    '--output',
    'json',
    '--store',
    'none',
  ];
}

export function cliAvailable(): boolean {
  return existsSync(path.join(REPO_DIR, 'functions/entrypoints/cli.ts'));
}

/**
 * Builds the CLI bundle (`npm run build`) so bin/etcd-guard.mjs runs it, as an installed CLI and
 * the image do, and checks that the bin takes it: a stale bundle would make it run tsx instead.
 */
async function buildInstalledCli(): Promise<void> {
  const build = await runProcess(process.execPath, [path.join(REPO_DIR, 'scripts/build.mjs')], 120_000);
  if (build.code !== 0) throw new Error(`npm run build failed: ${build.stderr.trim().slice(0, 300)}`);
  if (!existsSync(path.join(REPO_DIR, 'dist/cli/BUILD'))) throw new Error('npm run build wrote no dist/cli/BUILD');
}

/** The wall time of one run that must exit 0. */
async function successfulWall(run: () => Promise<ProcessRun>, what: string): Promise<number> {
  const result = await run();
  if (result.code !== 0) throw new Error(`${what} exited ${result.code}: ${result.stderr.trim().slice(0, 300)}`);
  return result.wallMs;
}

/** Start-up: `etcd-guard --help` (the bundle, no etcd client loaded) next to `node -e 0`. */
export async function runStartupBench(runs: number, log: (line: string) => void): Promise<{ rows: ResultRow[]; helpMs: number }> {
  await buildInstalledCli();
  log(`startup: etcd-guard --help vs node -e 0, ${runs} runs each`);
  const bin = path.join(REPO_DIR, 'bin/etcd-guard.mjs');
  const helpMs: number[] = [];
  const nodeMs: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    helpMs.push(await successfulWall(() => runProcess(process.execPath, [bin, '--help'], 30_000), 'etcd-guard --help'));
    nodeMs.push(await successfulWall(() => runProcess(process.execPath, ['-e', '0'], 30_000), 'node -e 0'));
  }
  const help = median(helpMs);
  return {
    helpMs: help,
    rows: [
      {
        section: 'startup',
        figure: `\`etcd-guard --help\` (bundle) vs \`node -e 0\`, median of ${runs}`,
        ours: help,
        baseline: median(nodeMs),
        unit: 'ms',
        target: { kind: 'info' },
      },
    ],
  };
}

export interface EvaluationOptions {
  runs: number;
  processRuns: number;
  log: (line: string) => void;
}

export async function runEvaluationBench(cluster: EtcdTestCluster, options: EvaluationOptions): Promise<ResultRow[]> {
  const target = targetFor(cluster, 'bench', '2s');
  const firstEndpoint = cluster.endpoints[0];
  if (!firstEndpoint) throw new Error('cluster has no endpoints');

  // Warm-up: JIT, module loading and etcd's own caches, for both sides.
  for (let run = 0; run < 10; run += 1) {
    await evaluateTarget(target);
    const client = rawClient(cluster, firstEndpoint);
    await client.maintenance.status({ deadline: new Date(Date.now() + 2_000) });
    client.close();
  }

  options.log(`evaluation: ${options.runs} in-process evaluations and raw Status calls, interleaved`);
  const evaluationMs: number[] = [];
  const rawColdMs: number[] = [];
  let notHealthy = 0;
  for (let run = 0; run < options.runs; run += 1) {
    evaluationMs.push(
      await timed(async () => {
        const evaluation = await evaluateTarget(target);
        if (evaluation.verdict !== 'Healthy') notHealthy += 1;
      }),
    );
    rawColdMs.push(
      await timed(async () => {
        const client = rawClient(cluster, firstEndpoint);
        try {
          await client.maintenance.status({ deadline: new Date(Date.now() + 2_000) });
        } finally {
          client.close();
        }
      }),
    );
  }
  if (notHealthy > 0) throw new Error(`${notHealthy} of ${options.runs} evaluations of a healthy cluster were not Healthy`);

  const warm = rawClient(cluster, firstEndpoint);
  const rawWarmMs: number[] = [];
  try {
    for (let run = 0; run < options.runs; run += 1) {
      rawWarmMs.push(await timed(() => warm.maintenance.status({ deadline: new Date(Date.now() + 2_000) })));
    }
  } finally {
    warm.close();
  }

  const rows: ResultRow[] = [
    {
      section: 'evaluation',
      figure: `evaluateTarget p50 (${options.runs} runs) vs raw Status, new client`,
      ours: percentile(evaluationMs, 50),
      baseline: percentile(rawColdMs, 50),
      unit: 'ms',
      target: { kind: 'ratio-max', max: 2.5 },
    },
    {
      section: 'evaluation',
      figure: 'evaluateTarget p99 vs raw Status, new client',
      ours: percentile(evaluationMs, 99),
      baseline: percentile(rawColdMs, 99),
      unit: 'ms',
      target: { kind: 'info' },
    },
    {
      section: 'evaluation',
      figure: 'evaluateTarget p50 vs raw Status, warm channel',
      ours: percentile(evaluationMs, 50),
      baseline: percentile(rawWarmMs, 50),
      unit: 'ms',
      target: { kind: 'info' },
    },
  ];

  rows.push(...(await runCliProcessBench(cluster, options)));
  return rows;
}

/** The whole `evaluate` process (the bundle, as installed) next to etcdctl's three commands. */
export async function runCliProcessBench(
  cluster: EtcdTestCluster,
  options: Pick<EvaluationOptions, 'processRuns' | 'log'>,
): Promise<ResultRow[]> {
  const firstEndpoint = cluster.endpoints[0];
  if (!firstEndpoint) throw new Error('cluster has no endpoints');
  if (!cliAvailable()) {
    options.log('evaluation: functions/entrypoints/cli.ts missing, CLI figures skipped');
    return [];
  }
  await buildInstalledCli();
  options.log(`evaluation: CLI process (bundle) vs etcdctl health+status+alarm, ${options.processRuns} runs each, interleaved`);
  const cliMs: number[] = [];
  const etcdctlMs: number[] = [];
  for (let run = 0; run < options.processRuns; run += 1) {
    cliMs.push(await successfulWall(() => runProcess(process.execPath, cliArgs(cluster, '2s'), 30_000), 'etcd-guard evaluate'));
    let trioMs = 0;
    for (const args of [
      ['endpoint', 'health', '--cluster'],
      ['endpoint', 'status', '--cluster'],
      ['alarm', 'list'],
    ]) {
      trioMs += await successfulWall(
        () => runProcess('etcdctl', etcdctlArgs(cluster, [firstEndpoint], args), 30_000),
        `etcdctl ${args.join(' ')}`,
      );
    }
    etcdctlMs.push(trioMs);
  }
  return [
    {
      section: 'evaluation',
      figure: `\`etcd-guard evaluate\` process, bundle (median of ${options.processRuns}) vs etcdctl endpoint health + endpoint status + alarm list`,
      ours: median(cliMs),
      baseline: median(etcdctlMs),
      unit: 'ms',
      target: { kind: 'ratio-max', max: 2 },
    },
  ];
}

/**
 * `evaluate`'s start-up as the contract's bound counts it: everything outside talking to etcd
 * (node, the CLI, the etcd client it loads, output, exit). The median over `runs` of the process
 * wall against a loopback port nobody listens on, less that evaluation's durationMs.
 */
async function measureEvaluateStartup(cluster: EtcdTestCluster, runs: number): Promise<number> {
  const startupMs: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    const refusing = `https://127.0.0.1:${await freePort()}`;
    const args = cliArgs(cluster, '1s');
    args[args.indexOf('--endpoints') + 1] = refusing;
    const result = await runProcess(process.execPath, args, 30_000);
    if (result.code !== 1) throw new Error(`etcd-guard evaluate against ${refusing} exited ${result.code}, expected 1`);
    const evaluation = JSON.parse(result.stdout) as { durationMs?: unknown };
    if (typeof evaluation.durationMs !== 'number') throw new Error('etcd-guard evaluate printed no durationMs');
    startupMs.push(result.wallMs - evaluation.durationMs);
  }
  return median(startupMs);
}

export interface HungOptions {
  runs: number;
  timeoutMs: number;
  log: (line: string) => void;
}

/** Pauses one follower (SIGSTOP) for the duration; resumes it before returning. */
export async function runHungBench(cluster: EtcdTestCluster, options: HungOptions): Promise<ResultRow[]> {
  const leader = await cluster.leaderIndex();
  const hungIndex = leader === cluster.members.length - 1 ? 0 : cluster.members.length - 1;
  const timeout = `${options.timeoutMs}ms`;
  const target = targetFor(cluster, 'bench-hung', timeout);
  const startupMs = cliAvailable() ? await measureEvaluateStartup(cluster, 5) : 0;
  options.log(`hung: SIGSTOP member ${hungIndex}, ${options.runs} evaluations with timeout ${timeout}`);
  cluster.pause(hungIndex);
  try {
    const wallMs: number[] = [];
    for (let run = 0; run < options.runs; run += 1) {
      let verdict = '';
      wallMs.push(
        await timed(async () => {
          verdict = (await evaluateTarget(target)).verdict;
        }),
      );
      if (verdict !== 'Unhealthy') throw new Error(`evaluation with a hung member said ${verdict}, expected Unhealthy`);
    }
    const etcdctl = await runProcess('etcdctl', etcdctlArgs(cluster, cluster.endpoints, ['endpoint', 'health']), 60_000);
    if (etcdctl.code === 0) throw new Error('etcdctl endpoint health passed with a hung member');
    const rows: ResultRow[] = [
      {
        section: 'hung',
        figure: `evaluateTarget, 1 of 3 hung, max of ${options.runs} (timeout ${options.timeoutMs} ms)`,
        ours: Math.max(...wallMs),
        baseline: options.timeoutMs,
        unit: 'ms',
        target: { kind: 'value-max', max: options.timeoutMs + 250, unit: 'ms' },
      },
      {
        section: 'hung',
        figure: 'evaluateTarget, hung member (median) vs `etcdctl endpoint health` (defaults)',
        ours: median(wallMs),
        baseline: etcdctl.wallMs,
        unit: 'ms',
        target: { kind: 'info' },
      },
    ];
    if (cliAvailable()) {
      const cliMs: number[] = [];
      for (let run = 0; run < 3; run += 1) {
        const cli = await runProcess(process.execPath, cliArgs(cluster, timeout), 30_000);
        if (cli.code !== 1)
          throw new Error(
            `etcd-guard evaluate with a hung member exited ${cli.code}, expected 1: ${cli.stderr.trim().slice(0, 300)}`,
          );
        cliMs.push(cli.wallMs);
      }
      rows.push({
        section: 'hung',
        figure: `CLI process, hung member, max of 3 vs the bound start-up (evaluate against a refusing port less its etcd time, median of 5: ${Math.round(startupMs)} ms) + --timeout ${timeout} + 250 ms`,
        ours: Math.max(...cliMs),
        baseline: options.timeoutMs,
        unit: 'ms',
        target: { kind: 'value-max', max: Math.round(startupMs) + options.timeoutMs + 250, unit: 'ms' },
      });
    }
    return rows;
  } finally {
    cluster.resume(hungIndex);
  }
}
