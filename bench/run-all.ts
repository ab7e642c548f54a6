// `npm run bench`: the four benches in one run on this machine, each figure next to its baseline
// and the ratio, as one table. A report, not a test: it exits 0 when a target is missed (and says
// MISSED), non-zero only when a bench could not run at all.
//   --write   also replace the measured block of BENCHMARKS.md with this run's table
//   --quick   shorter runs, for trying the harness out (numbers are noisier)
//   --cli     only the CLI process figures (start-up, evaluate vs etcdctl, hung member), e.g. on
//             a shared machine; not with --write, which replaces the whole table
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEtcdCluster, type EtcdTestCluster } from '../test/harness/etcd-cluster.js';
import { runAdmissionBench } from './admission.js';
import { runCapiFleetBench } from './capi-fleet.js';
import { runCliProcessBench, runEvaluationBench, runHungBench, runStartupBench } from './evaluation.js';
import { runFleetBench } from './fleet.js';
import { markdownTable, messageOf, REPO_DIR, targetMet, type ResultRow } from './lib.js';

const args = new Set(process.argv.slice(2));
const quick = args.has('--quick');
const write = args.has('--write');
const cliOnly = args.has('--cli');
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

async function main(): Promise<number> {
  const startedAt = new Date();
  const loadBefore = loadAverage();
  const rows: ResultRow[] = [];
  const failures: string[] = [];
  log(`machine: ${machine()}; load average (1/5/15 min) ${loadBefore}`);

  if (cliOnly && write) throw new Error('--cli measures only the CLI rows; --write would replace the whole table with them');
  if (!cliOnly) {
    await section('admission', rows, failures, () =>
      runAdmissionBench({ latencySeconds: quick ? 3 : 10, throughputSeconds: quick ? 4 : 10, warmupSeconds: quick ? 1 : 3, log }),
    );
  }

  await section('startup', rows, failures, async () => (await runStartupBench(quick ? 3 : 10, log)).rows);

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
    const processRuns = quick ? 3 : 10;
    await section('evaluation', rows, failures, () =>
      cliOnly
        ? runCliProcessBench(running, { processRuns, log })
        : runEvaluationBench(running, { runs: quick ? 50 : 200, processRuns, log }),
    );
    if (!cliOnly) {
      await section('fleet', rows, failures, () => runFleetBench(running, { sizes: [10, 100, 300], concurrency: 16, log }));
    }
    // Last: it pauses a member; the cluster is destroyed right after.
    await section('hung', rows, failures, () => runHungBench(running, { runs: quick ? 2 : 5, timeoutMs: 1_000, log }));
  } catch (error) {
    failures.push(`etcd cluster: ${messageOf(error)}`);
  } finally {
    await cluster?.destroy();
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }

  // Its own etcd clusters (RSA and ECDSA CA) behind the stand-ins' pod port-forward.
  if (!cliOnly) {
    await section('capi-fleet', rows, failures, () => runCapiFleetBench({ clusters: 100, rounds: quick ? 3 : 10, log }));
  }

  const table = markdownTable(rows);
  const missed = rows.filter((row) => targetMet(row) === false);
  const judged = rows.filter((row) => targetMet(row) !== null);
  const loadAfter = loadAverage();
  const durationS = ((Date.now() - startedAt.getTime()) / 1000).toFixed(0);
  const header = [
    `Run: ${startedAt.toISOString()} (${durationS} s${quick ? ', --quick' : ''}${cliOnly ? ', --cli' : ''})`,
    `Machine: ${machine()}`,
    `Load average (1/5/15 min): ${loadBefore} before, ${loadAfter} after`,
  ];
  const verdict =
    missed.length === 0
      ? `All ${judged.length} judged targets met.`
      : `MISSED ${missed.length} of ${judged.length} judged targets: ${missed.map((row) => row.figure).join('; ')}`;

  process.stdout.write(`\n${header.join('\n')}\n\n${table}\n\n${verdict}\n`);
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
