// Child process for the CAPI fleet bench: evaluates every cluster of the setup file ROUNDS times
// (16 at a time, as the scheduled run does), either through KCP's way in (Secrets, minted client
// certificate, pod port-forward: MODE capi) or directly at the same etcd members with TLS files
// (MODE direct). Timeout 5 s: the bench measures cost, and this shared machine runs at load 15+. Reports wall time of the first and second round, open sockets and RSS over IPC.
import { readFileSync } from 'node:fs';
import { createCoreV1Api } from '../functions/adapters/kube.js';
import { openCapiEtcdAccess } from '../functions/adapters/capi-etcd-access.js';
import { targetSchema, type TargetConfig } from '../functions/entrypoints/config.js';
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
  evaluations: number;
  passed: number;
  errors: string[];
  socketsBefore: number;
  socketsAfterFirstRound: number;
  socketsAfterAll: number;
  rssAfterFirstRoundMiB: number;
  rssAfterAllMiB: number;
  peakRssMiB: number;
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

const rssMiB = () => process.memoryUsage().rss / (1024 * 1024);

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

async function round(): Promise<number> {
  const started = performance.now();
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
  return performance.now() - started;
}

/** Sockets closed by a finished evaluation may take a few event-loop turns to go. */
async function settledSockets(floor: number): Promise<number> {
  const deadline = Date.now() + 3000;
  while (openSockets() > floor && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return openSockets();
}

const socketsBefore = openSockets();
const firstRoundMs = await round();
const socketsAfterFirstRound = await settledSockets(socketsBefore);
const rssAfterFirstRoundMiB = rssMiB();
const secondRoundMs = await round();
for (let index = 2; index < rounds; index += 1) await round();
const socketsAfterAll = await settledSockets(socketsBefore);
const report: CapiFleetReport = {
  firstRoundMs,
  secondRoundMs,
  evaluations,
  passed,
  errors: [...errors].slice(0, 3),
  socketsBefore,
  socketsAfterFirstRound,
  socketsAfterAll,
  rssAfterFirstRoundMiB,
  rssAfterAllMiB: rssMiB(),
  peakRssMiB: peakRssMiB('self'),
};
process.send?.(report);
process.disconnect?.();
