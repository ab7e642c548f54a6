// CAPI fleet bench: 100 discovered Cluster API clusters (3 members each) reached the way KCP
// does (Secrets on the management stand-in, minted client certificates, WebSocket pod
// port-forward through a workload stand-in) against the same members reached directly with TLS
// files, in the same run. The 100 clusters map onto two real etcd clusters (one RSA CA, one
// ECDSA CA). Each mode runs in its own child, so wall time, sockets and RSS are its own; the capi
// child goes on to 1,000 evaluations to show sockets and RSS stay flat.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEtcdCluster, type EtcdTestCluster } from '../test/harness/etcd-cluster.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../test/harness/fake-kube-apiserver.js';
import { attachPortForward } from '../test/harness/fake-portforward.js';
import { putCapiSecrets, routeEtcdPods, startWorkloadApiServer } from '../test/harness/capi-workload.js';
import type { CapiFleetReport, CapiFleetSetup } from './capi-fleet-child.js';
import { parse } from 'yaml';
import { imageNodeFlags, memoryQuantityBytes, nodeFlagsUnderLimit } from '../test/harness/image-node-flags.js';
import { firstMessage, killAndWait, onceMoreIfKilled, REPO_DIR, spawnTsx, type ResultRow } from './lib.js';

export interface CapiFleetOptions {
  clusters: number;
  /** Rounds of the capi child (rounds × clusters evaluations); the direct child runs two. */
  rounds: number;
  log: (line: string) => void;
}

/**
 * The node flags the fleet's evaluations run with in a pod: the image ENTRYPOINT's, its heap
 * percentage turned into the cap node derives from the CronJob's memory limit in manifests/base
 * (read from there, so the row follows the manifests; this host has no such cgroup). The "no
 * limit" run is the same child without the percentage, as `evaluate` starts on a host: V8 then
 * sizes its heap from this host's memory.
 */
export function podNodeFlags(): { flags: string[]; limit: string } {
  const cronJob = parse(readFileSync(path.join(REPO_DIR, 'manifests/base/cronjob.yaml'), 'utf8')) as {
    spec?: {
      jobTemplate?: { spec?: { template?: { spec?: { containers?: { resources?: { limits?: { memory?: unknown } } }[] } } } };
    };
  };
  const limit = String(cronJob.spec?.jobTemplate?.spec?.template?.spec?.containers?.[0]?.resources?.limits?.memory ?? '');
  const image = imageNodeFlags(readFileSync(path.join(REPO_DIR, 'Dockerfile'), 'utf8'));
  return { flags: nodeFlagsUnderLimit(image, memoryQuantityBytes(limit)), limit };
}

async function runChild(
  mode: 'capi' | 'direct',
  setupFile: string,
  rounds: number,
  nodeArgs: string[],
  log: (line: string) => void,
): Promise<CapiFleetReport> {
  const once = async () => {
    const child = spawnTsx('capi-fleet-child.ts', [mode, setupFile, String(rounds)], { nodeArgs });
    try {
      return await firstMessage<CapiFleetReport>(child, 300_000, `capi fleet child (${mode})`);
    } finally {
      await killAndWait(child);
    }
  };
  const run = await onceMoreIfKilled(once, (line) => log(`capi fleet: ${line}`));
  if (run.crashed !== null) log(`capi fleet: ${mode}: the figures are the second child's (the first died with ${run.crashed})`);
  return run.value;
}

/** A mode whose evaluations mostly failed measured failures, not reaching etcd: no figure from it. */
function check(mode: string, report: CapiFleetReport, log: (line: string) => void): void {
  const b = report.breakdown;
  log(
    `capi fleet: ${mode}: at the end RSS ${report.rssAfterAllMiB.toFixed(0)} MiB = anon ${b.rssAnon.toFixed(0)} + file ${b.rssFile.toFixed(0)}; V8 heap ${b.heapUsed.toFixed(0)} used of ${b.heapTotal.toFixed(0)} (limit ${b.heapLimit.toFixed(0)}), external ${b.external.toFixed(1)} MiB; peak ${report.peakRssMiB.toFixed(0)} MiB`,
  );
  log(
    `capi fleet: ${mode}: ${report.passed} of ${report.evaluations} evaluations passed${report.errors.length > 0 ? `; e.g. ${report.errors.join(' | ')}` : ''}`,
  );
  if (report.passed < report.evaluations * 0.95)
    throw new Error(`${mode}: only ${report.passed} of ${report.evaluations} evaluations passed`);
}

export async function runCapiFleetBench(options: CapiFleetOptions): Promise<ResultRow[]> {
  const etcds: EtcdTestCluster[] = [];
  let management: FakeKubeApiServer | undefined;
  let workload: FakeKubeApiServer | undefined;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-bench-capi-'));
  try {
    options.log('capi fleet: starting two etcd clusters (RSA and ECDSA CA) and the stand-ins');
    etcds.push(await startEtcdCluster({ name: 'cfa', caKeyType: 'rsa' }), await startEtcdCluster({ name: 'cfb' }));
    management = await startFakeKubeApiServer();
    workload = await startWorkloadApiServer();
    const relay = attachPortForward(workload);
    for (const etcd of etcds) routeEtcdPods(relay, etcd);
    const setup: CapiFleetSetup = { managementKubeconfig: management.kubeconfigFile, clusters: [] };
    for (let index = 0; index < options.clusters; index += 1) {
      const etcd = etcds[index % etcds.length] as EtcdTestCluster;
      const cluster = { namespace: 'fleet', clusterName: `fleet-${String(index).padStart(3, '0')}` };
      await putCapiSecrets(management, cluster, { apiServer: workload, etcd });
      setup.clusters.push({
        ...cluster,
        nodeNames: etcd.members.map((member) => member.name),
        endpoints: etcd.endpoints,
        tls: etcd.clientTls,
      });
    }
    const setupFile = path.join(dir, 'setup.json');
    await writeFile(setupFile, JSON.stringify(setup));
    const pod = podNodeFlags();
    const hostFlags = nodeFlagsUnderLimit(imageNodeFlags(readFileSync(path.join(REPO_DIR, 'Dockerfile'), 'utf8')), null);
    options.log(`capi fleet: node flags in the CronJob's pod (limit ${pod.limit}): ${pod.flags.join(' ')}`);
    options.log(`capi fleet: ${options.clusters} clusters directly (2 rounds)`);
    const direct = await runChild('direct', setupFile, 2, pod.flags, options.log);
    check('direct', direct, options.log);
    options.log(`capi fleet: ${options.clusters} clusters through port-forward (${options.rounds} rounds)`);
    const capi = await runChild('capi', setupFile, options.rounds, pod.flags, options.log);
    check('capi', capi, options.log);
    options.log(`capi fleet: ${options.rounds} rounds again without a memory limit (${hostFlags.join(' ')})`);
    const unlimited = await runChild('capi', setupFile, options.rounds, hostFlags, options.log);
    check('capi (no memory limit)', unlimited, options.log);
    options.log(`capi fleet: ${relay.streamsOpened()} port-forward streams opened, ${relay.openStreams()} still open`);
    return [...rows(options, direct, capi, pod), ...unlimitedRows(unlimited, options.clusters)];
  } finally {
    await Promise.all([management?.close(), workload?.close(), ...etcds.map((etcd) => etcd.destroy())]);
    await rm(dir, { recursive: true, force: true });
  }
}

function rows(
  options: CapiFleetOptions,
  direct: CapiFleetReport,
  capi: CapiFleetReport,
  pod: { flags: string[]; limit: string },
): ResultRow[] {
  const n = options.clusters;
  const info = { kind: 'info' } as const;
  return [
    {
      section: 'capi-fleet',
      figure: `capi fleet ${n} clusters × 3 members via port-forward vs direct, first run (mints ${n} certs; passed ${capi.passed}/${capi.evaluations} capi, ${direct.passed}/${direct.evaluations} direct)`,
      ours: capi.firstRoundMs,
      baseline: direct.firstRoundMs,
      unit: 'ms',
      target: { kind: 'ratio-max', max: 2 },
    },
    {
      section: 'capi-fleet',
      figure: `capi fleet ${n} clusters: CPU of the evaluating process, first run, via port-forward vs direct (stand-ins excluded; second run: ${capi.secondRoundCpuMs.toFixed(0)} vs ${direct.secondRoundCpuMs.toFixed(0)} ms)`,
      ours: capi.firstRoundCpuMs,
      baseline: direct.firstRoundCpuMs,
      unit: 'ms',
      target: info,
    },
    {
      section: 'capi-fleet',
      figure: `capi fleet ${n} clusters: total wall time, first run`,
      ours: capi.firstRoundMs,
      baseline: null,
      unit: 'ms',
      target: { kind: 'value-max', max: 30_000, unit: 'ms' },
    },
    {
      section: 'capi-fleet',
      figure: `capi fleet ${n} clusters vs direct, second run (certificates reused)`,
      ours: capi.secondRoundMs,
      baseline: direct.secondRoundMs,
      unit: 'ms',
      target: info,
    },
    {
      section: 'capi-fleet',
      figure: `capi fleet: peak RSS over ${capi.evaluations} evaluations, node flags as in the CronJob's pod (limit ${pod.limit}: ${pod.flags.join(' ')}; direct child: ${direct.peakRssMiB.toFixed(0)} MiB)`,
      ours: capi.peakRssMiB,
      baseline: null,
      unit: 'MiB',
      target: { kind: 'value-max', max: 300, unit: 'MiB' },
    },
    {
      section: 'capi-fleet',
      figure: `capi fleet: RSS after ${capi.evaluations} evaluations vs after the first ${n}`,
      ours: capi.rssAfterAllMiB,
      baseline: capi.rssAfterFirstRoundMiB,
      unit: 'MiB',
      target: info,
    },
    {
      section: 'capi-fleet',
      figure: `capi fleet: open sockets after the first ${n} evaluations vs before (direct: ${direct.socketsBefore} → ${direct.socketsAfterFirstRound})`,
      ours: capi.socketsAfterFirstRound,
      baseline: capi.socketsBefore,
      unit: '',
      target: info,
    },
    {
      section: 'capi-fleet',
      figure: `capi fleet: open sockets after ${capi.evaluations} evaluations vs before`,
      ours: capi.socketsAfterAll,
      baseline: capi.socketsBefore,
      unit: '',
      target: info,
    },
  ];
}

function unlimitedRows(unlimited: CapiFleetReport, clusters: number): ResultRow[] {
  return [
    {
      section: 'capi-fleet',
      figure: `capi fleet without a memory limit (no derived cap, as \`evaluate\` starts on a host): peak RSS over ${unlimited.evaluations} evaluations (passed ${unlimited.passed})`,
      ours: unlimited.peakRssMiB,
      baseline: null,
      unit: 'MiB',
      target: { kind: 'info' },
    },
    {
      section: 'capi-fleet',
      figure: `capi fleet without a memory limit: RSS after ${unlimited.evaluations} evaluations vs after the first ${clusters}`,
      ours: unlimited.rssAfterAllMiB,
      baseline: unlimited.rssAfterFirstRoundMiB,
      unit: 'MiB',
      target: { kind: 'info' },
    },
  ];
}
