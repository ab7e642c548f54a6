// `npm run bench`: the four benches in one run on this machine, each figure next to its baseline
// and the ratio, as one table. A report, not a test: it exits 0 when a target is missed (and says
// MISSED), non-zero only when a bench could not run at all.
//   --write   also replace the measured block of BENCHMARKS.md with this run's table
//   --quick   shorter runs, for trying the harness out (numbers are noisier)
//   --smoke   every bench once, briefly (.ci/run): fails only when a bench cannot run
//   --cli     only the CLI process figures (start-up, evaluate vs etcdctl, hung member), e.g. on
//             a shared machine; not with --write, which replaces the whole table
//   --only=a,b  only the named sections (admission, startup, evaluation, fleet, hung, capi-fleet, live,
//             metrics-scrapers, admission-paths, consistency, profile-admission, profile-evaluation, profile-cli, profile-core); not with --write
//   --profile also the profiling drivers (bench/profile-*.ts: CPU per request/evaluation and the
//             CLI process, the core's CPU and allocation per request above its JSON floor, each
//             against its own baseline in the same run, with the load average),
//             each in its own process after the table; their output is printed, not written
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEtcdCluster, type EtcdTestCluster } from '../test/harness/etcd-cluster.js';
import { runAdmissionBench } from './admission.js';
import { runCapiFleetBench } from './capi-fleet.js';
import { runCliProcessBench, runEvaluationBench, runHungBench, runStartupBench } from './evaluation.js';
import { runFleetBench } from './fleet.js';
import { runLiveBench } from './live.js';
import { markdownTable, messageOf, REPO_DIR, spawnTsx, targetMet, type ResultRow } from './lib.js';

const args = new Set(process.argv.slice(2));
const smoke = args.has('--smoke');
const quick = args.has('--quick');
const write = args.has('--write');
const cliOnly = args.has('--cli');
const profile = args.has('--profile');
const SECTIONS = [
  'admission',
  'startup',
  'evaluation',
  'fleet',
  'hung',
  'capi-fleet',
  'live',
  'metrics-scrapers',
  'admission-paths',
  'consistency',
] as const;
const PROFILES = ['profile-admission', 'profile-evaluation', 'profile-cli', 'profile-core'] as const;
const onlyArg = process.argv.slice(2).find((arg) => arg.startsWith('--only='));
const only = onlyArg === undefined ? null : new Set(onlyArg.slice('--only='.length).split(',').filter(Boolean));
for (const arg of process.argv.slice(2)) {
  if (!['--quick', '--smoke', '--write', '--cli', '--profile'].includes(arg) && arg !== onlyArg)
    throw new Error(`unknown argument ${JSON.stringify(arg)} (--quick, --smoke, --write, --cli, --profile, --only=a,b)`);
}
for (const name of only ?? []) {
  if (![...SECTIONS, ...PROFILES].includes(name as never))
    throw new Error(`--only: no section ${JSON.stringify(name)} (${[...SECTIONS, ...PROFILES].join(', ')})`);
}
/**
 * How long each bench runs. --smoke is for .ci/run: every bench once, as briefly as it can still
 * measure something, so a bench that no longer runs (a moved file, a broken image layout) fails CI
 * while its numbers, far too short to judge, are printed but not judged.
 */
const SIZES = {
  full: {
    latencyS: 10,
    throughputS: 10,
    warmupS: 3,
    startupRuns: 10,
    evaluationRuns: 200,
    processRuns: 10,
    fleet: [10, 100, 300],
    hungRuns: 5,
    capiClusters: 100,
    capiRounds: 10,
    liveDecisions: 1000,
    liveCapiRuns: 200,
  },
  quick: {
    latencyS: 3,
    throughputS: 4,
    warmupS: 1,
    startupRuns: 3,
    evaluationRuns: 50,
    processRuns: 3,
    fleet: [10, 100, 300],
    hungRuns: 2,
    capiClusters: 100,
    capiRounds: 3,
    liveDecisions: 1000,
    liveCapiRuns: 50,
  },
  smoke: {
    latencyS: 1,
    throughputS: 1,
    warmupS: 1,
    startupRuns: 2,
    evaluationRuns: 10,
    processRuns: 2,
    fleet: [10],
    hungRuns: 1,
    capiClusters: 10,
    // The capi child reports its first and its second round, so it needs two.
    capiRounds: 2,
    liveDecisions: 100,
    liveCapiRuns: 5,
  },
};
const size = SIZES[smoke ? 'smoke' : quick ? 'quick' : 'full'];

/** Whether a section runs: --only names it, or (without --only) it is in this mode's set. */
function runs(name: string): boolean {
  if (only !== null) return only.has(name);
  if (PROFILES.includes(name as never)) return profile;
  return !cliOnly || ['startup', 'evaluation', 'hung'].includes(name);
}
const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

const BEGIN = '<!-- bench:begin (written by `npm run bench -- --write`) -->';
const END = '<!-- bench:end -->';

function machine(): string {
  const cpus = os.cpus();
  return `${os.type()} ${os.release()}, ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}`;
}

function loadAverage(): string {
  return os
    .loadavg()
    .map((value) => value.toFixed(2))
    .join(' / ');
}

async function section(name: string, rows: ResultRow[], failures: string[], run: () => Promise<ResultRow[]>): Promise<void> {
  const started = performance.now();
  try {
    rows.push(...(await run()));
    log(`${name}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  } catch (error) {
    failures.push(`${name}: ${messageOf(error)}`);
    log(`${name}: FAILED: ${messageOf(error)}`);
  }
}

/** The sections that share one 3-member TLS etcd cluster on loopback. */
async function clusterSections(rows: ResultRow[], failures: string[]): Promise<void> {
  let cluster: EtcdTestCluster | undefined;
  const stop = () => {
    // The harness SIGKILLs its members on exit too; this makes Ctrl-C leave nothing behind.
    void cluster?.destroy().finally(() => process.exit(130));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    log('starting a 3-member TLS etcd cluster on loopback');
    cluster = await startEtcdCluster({ name: 'bench' });
    const running = cluster;
    const { processRuns } = size;
    if (runs('evaluation'))
      await section('evaluation', rows, failures, () =>
        cliOnly
          ? runCliProcessBench(running, { processRuns, log })
          : runEvaluationBench(running, { runs: size.evaluationRuns, processRuns, log }),
      );
    if (runs('fleet'))
      await section('fleet', rows, failures, () => runFleetBench(running, { sizes: size.fleet, concurrency: 16, log }));
    // Last: it pauses a member; the cluster is destroyed right after.
    if (runs('hung'))
      await section('hung', rows, failures, () => runHungBench(running, { runs: size.hungRuns, timeoutMs: 1_000, log }));
  } catch (error) {
    failures.push(`etcd cluster: ${messageOf(error)}`);
  } finally {
    await cluster?.destroy();
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

/**
 * A profiling driver (bench/profile-*.ts) in its own process: it starts its own servers or etcd
 * and prints its own table of ratios against a baseline measured in the same run, with the load
 * average before and after. --quick shortens it through the environment variables it reads.
 */
async function profileSection(
  name: (typeof PROFILES)[number] | 'metrics-scrapers' | 'admission-paths' | 'consistency',
  outputs: string[],
  failures: string[],
  args: string[] = [],
): Promise<void> {
  const started = performance.now();
  const env = {
    ...process.env,
    ...(smoke
      ? { RUNS: '2', ROUNDS: '1', SECONDS_EACH: '1', REQUESTS: '2000' }
      : quick
        ? { RUNS: '5', ROUNDS: '1', SECONDS_EACH: '3', REQUESTS: '10000' }
        : {}),
  };
  const child = spawnTsx(`${name}.ts`, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
  if (code === 0) {
    outputs.push(`### ${name}\n\n${output.trim()}`);
    log(`${name}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  } else {
    failures.push(`${name}: exited ${String(code)}`);
    log(`${name}: FAILED (exit ${String(code)})`);
  }
}

async function main(): Promise<number> {
  const startedAt = new Date();
  const loadBefore = loadAverage();
  const rows: ResultRow[] = [];
  const failures: string[] = [];
  log(`machine: ${machine()}; load average (1/5/15 min) ${loadBefore}`);

  if ((cliOnly || only !== null) && write)
    throw new Error('--cli and --only measure only some rows; --write would replace the whole table with them');
  if (smoke && (write || quick)) throw new Error('--smoke runs too briefly to --write its table, and is shorter than --quick');
  if (runs('admission')) {
    await section('admission', rows, failures, () =>
      runAdmissionBench({ latencySeconds: size.latencyS, throughputSeconds: size.throughputS, warmupSeconds: size.warmupS, log }),
    );
  }

  if (runs('startup')) await section('startup', rows, failures, async () => (await runStartupBench(size.startupRuns, log)).rows);

  if (['evaluation', 'fleet', 'hung'].some(runs)) await clusterSections(rows, failures);

  // Its own etcd clusters (RSA and ECDSA CA) behind the stand-ins' pod port-forward.
  if (runs('capi-fleet')) {
    await section('capi-fleet', rows, failures, () =>
      runCapiFleetBench({ clusters: size.capiClusters, rounds: size.capiRounds, log }),
    );
  }
  // Live decisions on kept connections (issue 27): its own etcd, webhooks in child processes.
  if (runs('live')) {
    await section('live', rows, failures, () =>
      runLiveBench({
        latencySeconds: size.latencyS,
        throughputSeconds: size.throughputS,
        decisions: size.liveDecisions,
        capiRuns: size.liveCapiRuns,
        log,
      }),
    );
  }
  const profiles: string[] = [];
  // Admission p99 while 32 scrapers loop over 1,000 targets' metrics (issue 30 item 6): its own
  // webhooks in child processes, its own table of ratios against the run without scrapers.
  if (runs('metrics-scrapers')) await profileSection('metrics-scrapers', profiles, failures, smoke ? ['--smoke'] : []);
  // The admission path with and without fast-validate.ts, and zod's parse of a review (issue 31).
  if (runs('admission-paths')) {
    const paths = smoke ? ['--seconds=1', '--rounds=1'] : quick ? ['--seconds=2', '--rounds=1'] : [];
    await profileSection('admission-paths', profiles, failures, paths);
  }
  // HashKV's cost by DB size on its own 1-member etcd (issue 32); the full run fills 100 MiB and 1 GiB.
  if (runs('consistency')) {
    const sizes = smoke ? ['--mib=4', '--runs=1'] : quick ? ['--mib=100', '--runs=2'] : [];
    await profileSection('consistency', profiles, failures, sizes);
  }
  for (const name of PROFILES) if (runs(name)) await profileSection(name, profiles, failures);

  // A smoke run's figures are shown without their targets: seconds-long runs judge nothing.
  const table = markdownTable(smoke ? rows.map((row) => ({ ...row, target: { kind: 'info' as const } })) : rows);
  const missed = rows.filter((row) => targetMet(row) === false);
  const judged = rows.filter((row) => targetMet(row) !== null);
  const loadAfter = loadAverage();
  const durationS = ((Date.now() - startedAt.getTime()) / 1000).toFixed(0);
  const header = [
    `Run: ${startedAt.toISOString()} (${durationS} s${quick ? ', --quick' : ''}${smoke ? ', --smoke' : ''}${cliOnly ? ', --cli' : ''}${onlyArg === undefined ? '' : `, ${onlyArg}`})`,
    `Machine: ${machine()}`,
    `Load average (1/5/15 min): ${loadBefore} before, ${loadAfter} after`,
  ];
  const verdict = smoke
    ? `--smoke: every bench ran; its runs are too short to judge ${judged.length} targets by.`
    : missed.length === 0
      ? `All ${judged.length} judged targets met.`
      : `MISSED ${missed.length} of ${judged.length} judged targets: ${missed.map((row) => row.figure).join('; ')}`;

  process.stdout.write(`\n${header.join('\n')}\n${rows.length > 0 ? `\n${table}\n\n${verdict}\n` : ''}`);
  if (profiles.length > 0) process.stdout.write(`\n${profiles.join('\n\n')}\n`);
  if (failures.length > 0)
    process.stdout.write(`\nBenches that could not run:\n${failures.map((line) => `- ${line}`).join('\n')}\n`);

  if (write) {
    const file = path.join(REPO_DIR, 'BENCHMARKS.md');
    const text = await readFile(file, 'utf8').catch(() => `# Benchmarks\n\n${BEGIN}\n${END}\n`);
    const begin = text.indexOf(BEGIN);
    const end = text.indexOf(END);
    if (begin < 0 || end < begin) throw new Error(`${file} has no ${BEGIN} … ${END} block to replace`);
    const block = `${BEGIN}\n${header.map((line) => `${line}  `).join('\n')}\n\n${table}\n\n${verdict}\n${END}`;
    await writeFile(file, `${text.slice(0, begin)}${block}${text.slice(end + END.length)}`);
    log(`wrote the measured table into ${file}`);
  }
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = await main();
