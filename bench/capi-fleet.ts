// CAPI fleet bench: 100 discovered Cluster API clusters (3 members each) reached the way KCP
// does (Secrets on the management stand-in, minted client certificates, WebSocket pod
// port-forward through a workload stand-in) against the same members reached directly with TLS
// files, in the same run. The 100 clusters map onto two real etcd clusters (one RSA CA, one
// ECDSA CA). Each mode runs in its own child, so wall time, sockets and RSS are its own; the capi
// child goes on to 1,000 evaluations to show sockets and RSS stay flat.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEtcdCluster, type EtcdTestCluster } from '../test/harness/etcd-cluster.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../test/harness/fake-kube-apiserver.js';
import { attachPortForward } from '../test/harness/fake-portforward.js';
import { putCapiSecrets, routeEtcdPods, startWorkloadApiServer } from '../test/harness/capi-workload.js';
import type { CapiFleetReport, CapiFleetSetup } from './capi-fleet-child.js';
import { firstMessage, killAndWait, spawnTsx, type ResultRow } from './lib.js';

export interface CapiFleetOptions {
  clusters: number;
  /** Rounds of the capi child (rounds × clusters evaluations); the direct child runs two. */
  rounds: number;
  log: (line: string) => void;
}

/**
 * V8 sizes its heap from the memory it sees: this 24 GiB host gives a 4 GiB heap limit, under
 * which V8 let the old generation grow to ~3.8× the live heap (58 MB) before a full collection.
 * Node sizes it from the cgroup limit in a pod (384Mi in manifests/), so a bound is closer to
 * what runs there. The capped run is the same child with V8's old space bounded.
 */
const OLD_SPACE_CAP_MIB = 256;

async function runChild(
  mode: 'capi' | 'direct',
  setupFile: string,
  rounds: number,
  extraNodeArgs: string[] = [],
): Promise<CapiFleetReport> {
  // The image's node flags (Dockerfile ENTRYPOINT): a small young generation keeps RSS down.
  const child = spawnTsx('capi-fleet-child.ts', [mode, setupFile, String(rounds)], {
    nodeArgs: ['--max-semi-space-size=2', ...extraNodeArgs],
  });
  try {
    return await firstMessage<CapiFleetReport>(child, 300_000, `capi fleet child (${mode})`);
  } finally {
    await killAndWait(child);
  }
}

/** A mode whose evaluations mostly failed measured failures, not reaching etcd: no figure from it. */
function check(mode: string, report: CapiFleetReport, log: (line: string) => void): void {
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
    options.log(`capi fleet: ${options.clusters} clusters directly (2 rounds)`);
    const direct = await runChild('direct', setupFile, 2);
    check('direct', direct, options.log);
    options.log(`capi fleet: ${options.clusters} clusters through port-forward (${options.rounds} rounds)`);
    const capi = await runChild('capi', setupFile, options.rounds);
    check('capi', capi, options.log);
    options.log(`capi fleet: ${options.rounds} rounds again with --max-old-space-size=${OLD_SPACE_CAP_MIB}`);
    const capped = await runChild('capi', setupFile, options.rounds, [`--max-old-space-size=${OLD_SPACE_CAP_MIB}`]);
    check('capi (old space capped)', capped, options.log);
    options.log(`capi fleet: ${relay.streamsOpened()} port-forward streams opened, ${relay.openStreams()} still open`);
    return [...rows(options, direct, capi), ...cappedRows(capped)];
  } finally {
    await Promise.all([management?.close(), workload?.close(), ...etcds.map((etcd) => etcd.destroy())]);
    await rm(dir, { recursive: true, force: true });
  }
}

function rows(options: CapiFleetOptions, direct: CapiFleetReport, capi: CapiFleetReport): ResultRow[] {
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
      figure: `capi fleet: peak RSS over ${capi.evaluations} evaluations (direct child: ${direct.peakRssMiB.toFixed(0)} MiB)`,
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

function cappedRows(capped: CapiFleetReport): ResultRow[] {
  const flag = `--max-old-space-size=${OLD_SPACE_CAP_MIB}`;
  return [
    {
      section: 'capi-fleet',
      figure: `capi fleet with ${flag}: peak RSS over ${capped.evaluations} evaluations (passed ${capped.passed})`,
      ours: capped.peakRssMiB,
      baseline: null,
      unit: 'MiB',
      target: { kind: 'value-max', max: 300, unit: 'MiB' },
    },
    {
      section: 'capi-fleet',
      figure: `capi fleet with ${flag}: RSS after ${capped.evaluations} evaluations vs after the first 100`,
      ours: capped.rssAfterAllMiB,
      baseline: capped.rssAfterFirstRoundMiB,
      unit: 'MiB',
      target: { kind: 'info' },
    },
  ];
}
