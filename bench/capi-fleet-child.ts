// Child process for the CAPI fleet bench: evaluates every cluster of the setup file ROUNDS times
// (16 at a time, as the scheduled run does), either through KCP's way in (Secrets, minted client
// certificate, pod port-forward: MODE capi) or directly at the same etcd members with TLS files
// (MODE direct). Timeout 5 s: the bench measures cost, and this shared machine runs at load 15+. Reports wall time of the first and second round, open sockets and RSS over IPC.
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { createCoreV1Api } from '../functions/adapters/kube.js';
import { openCapiEtcdAccess } from '../functions/adapters/capi-etcd-access.js';
import { targetSchema, type TargetConfig } from '../functions/domain/config.js';
import type { Evaluation } from '../functions/domain/evaluation-document.js';
import { evaluateTarget, evaluateThroughAccess } from '../functions/usecases/evaluate-target.js';
import { peakRssMiB } from './lib.js';
import { openSockets } from '../test/harness/sockets.js';

export interface CapiFleetSetup {
  managementKubeconfig: string;
  clusters: {
    namespace: string;
    clusterName: string;
    nodeNames: string[];
    endpoints: string[];
    tls: { caFile: string; certFile: string; keyFile: string };
  }[];
}

export interface CapiFleetReport {
  firstRoundMs: number;
  secondRoundMs: number;
  /** CPU (user + system, every thread) this process spent in the round: the stand-ins run in the parent. */
  firstRoundCpuMs: number;
  secondRoundCpuMs: number;
  evaluations: number;
  passed: number;
  errors: string[];
  socketsBefore: number;
  socketsAfterFirstRound: number;
  socketsAfterAll: number;
  rssAfterFirstRoundMiB: number;
  rssAfterAllMiB: number;
  peakRssMiB: number;
  /** Where the resident memory is at the end: V8's heap (total and used), off-heap buffers, and
   * the anonymous vs file-backed (node binary, mapped code) split of RSS, in MiB. */
  breakdown: { heapTotal: number; heapUsed: number; external: number; rssAnon: number; rssFile: number; heapLimit: number };
}

const [mode, setupFile, roundsText] = process.argv.slice(2);
const rounds = Number(roundsText);
if ((mode !== 'capi' && mode !== 'direct') || !setupFile || !(rounds >= 2)) {
  process.stderr.write('usage: capi-fleet-child.ts capi|direct SETUP_JSON ROUNDS(>=2)\n');
  process.exit(2);
}
const setup = JSON.parse(readFileSync(setupFile, 'utf8')) as CapiFleetSetup;
const management = createCoreV1Api(setup.managementKubeconfig);
const CONCURRENCY = 16;

const MIB = 1024 * 1024;
const rssMiB = () => process.memoryUsage().rss / MIB;

const jobs = setup.clusters.map((cluster) => {
  const target: TargetConfig = targetSchema.parse({
    name: cluster.clusterName,
    endpoints: cluster.endpoints,
    tls: cluster.tls,
    timeout: '5s',
  });
  const evaluate = (): Promise<Evaluation> =>
    mode === 'capi'
      ? evaluateThroughAccess(target, (deadline) => openCapiEtcdAccess(management, cluster, cluster.nodeNames, deadline))
      : evaluateTarget(target);
  return evaluate;
});

let passed = 0;
let evaluations = 0;
const errors = new Set<string>();

async function round(): Promise<{ wallMs: number; cpuMs: number }> {
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const job = jobs[next];
      next += 1;
      const evaluation = await job?.();
      evaluations += 1;
      if (evaluation?.passed) passed += 1;
      else if (evaluation) errors.add(evaluation.reasons.slice(0, 2).join(' | '));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const cpu = process.cpuUsage(cpuBefore);
  return { wallMs: performance.now() - started, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/** Sockets closed by a finished evaluation may take a few event-loop turns to go. */
async function settledSockets(floor: number): Promise<number> {
  const deadline = Date.now() + 3000;
  while (openSockets() > floor && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return openSockets();
}

function breakdown(): CapiFleetReport['breakdown'] {
  const usage = process.memoryUsage();
  const status = readFileSync('/proc/self/status', 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) / 1024;
  return {
    heapTotal: usage.heapTotal / MIB,
    heapUsed: usage.heapUsed / MIB,
    external: usage.external / MIB,
    rssAnon: field('RssAnon'),
    rssFile: field('RssFile'),
    heapLimit: getHeapStatistics().heap_size_limit / MIB,
  };
}

/**
 * CAPI_FLEET_CPU_PROFILE=<dir>: a CPU profile of each of the first two rounds, written there as
 * <mode>-<pid>-round<N>.cpuprofile before the report (the bench SIGKILLs its children, so
 * --cpu-prof would write nothing).
 */
const profileDir = process.env.CAPI_FLEET_CPU_PROFILE;
async function profiled<T>(name: string, run: () => Promise<T>): Promise<T> {
  if (profileDir === undefined || profileDir === '') return run();
  const inspector = new Session();
  inspector.connect();
  await inspector.post('Profiler.enable');
  await inspector.post('Profiler.start');
  const result = await run();
  const { profile } = await inspector.post('Profiler.stop');
  writeFileSync(path.join(profileDir, `${mode}-${process.pid}-${name}.cpuprofile`), JSON.stringify(profile));
  inspector.disconnect();
  return result;
}

const socketsBefore = openSockets();
const first = await profiled('round1', round);
const socketsAfterFirstRound = await settledSockets(socketsBefore);
const rssAfterFirstRoundMiB = rssMiB();
const second = await profiled('round2', round);
for (let index = 2; index < rounds; index += 1) await round();
const socketsAfterAll = await settledSockets(socketsBefore);
const report: CapiFleetReport = {
  firstRoundMs: first.wallMs,
  secondRoundMs: second.wallMs,
  firstRoundCpuMs: first.cpuMs,
  secondRoundCpuMs: second.cpuMs,
  evaluations,
  passed,
  errors: [...errors].slice(0, 3),
  socketsBefore,
  socketsAfterFirstRound,
  socketsAfterAll,
  rssAfterFirstRoundMiB,
  rssAfterAllMiB: rssMiB(),
  peakRssMiB: peakRssMiB('self'),
  breakdown: breakdown(),
};
process.send?.(report);
process.disconnect?.();
