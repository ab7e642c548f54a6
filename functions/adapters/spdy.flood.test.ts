// Issue 30, item 4: "SPDY peer floods memory". A tenant's `<cluster>-kubeconfig` points at a
// workload API server that refuses the WebSocket upgrade (403), accepts SPDY, then floods server
// PINGs or SYN_STREAMs and never reads: every answer of ours was queued, and the CronJob's
// `evaluate --config` grew past 1 GB. Here the fleet run is the real process, with a healthy
// tenant (real etcd through port-forward) beside the flooding one; its peak RSS is measured from
// /proc against the same run while the hostile server does not flood.
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluationSchema, type Evaluation } from '../domain/evaluation-document.js';
import { discoveredTargetName } from '../domain/targets.js';
import {
  putCapiSecrets,
  putControlPlaneObjects,
  startCapiWorkload,
  startWorkloadApiServer,
  type CapiWorkload,
} from '../../test/harness/capi-workload.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';
import { attachPortForward, type PortForwardRelay, type SpdyFlood } from '../../test/harness/fake-portforward.js';
import { freePort } from '../../test/harness/free-port.js';
import { runProcess, type ProcessRun } from '../../test/harness/process.js';
import { BOUND_SLACK_MS } from '../../test/harness/timing.js';

const BIN = path.resolve(import.meta.dirname, '../../bin/etcd-guard.mjs');
const TIMEOUT_MS = 2_000;
/** The bound: the flood may cost the run at most this much over the same run without it. */
const PEAK_RSS_OVER_BASELINE_MIB = 64;
const FLOODED = { namespace: 'team-flood', clusterName: 'wf' };
const FLOODED_NODES = ['wf-1', 'wf-2', 'wf-3'];

let workDir: string;
let management: FakeKubeApiServer;
let healthy: CapiWorkload;
let hostile: FakeKubeApiServer;
let relay: PortForwardRelay;
let configFile: string;
let storeDir: string;

const targetOf = (cluster: { namespace: string; clusterName: string }) =>
  discoveredTargetName('capi', cluster.namespace, cluster.clusterName);

async function stored(target: string): Promise<Evaluation | null> {
  const file = path.join(storeDir, `${target}.json`);
  if (!existsSync(file)) return null;
  return evaluationSchema.parse(JSON.parse(await readFile(file, 'utf8')));
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-spdy-flood-'));
  management = await startFakeKubeApiServer();
  [healthy, hostile] = await Promise.all([
    startCapiWorkload(management, { namespace: 'team-a', clusterName: 'wa' }),
    startWorkloadApiServer(),
  ]);
  putControlPlaneObjects(management, healthy.cluster, healthy.nodeNames);
  relay = attachPortForward(hostile);
  relay.refuseWebSocket(403);
  // Without the flood the hostile server forwards to a closed port: its members are unreachable.
  const closedPort = await freePort();
  for (const node of FLOODED_NODES) relay.setPod('kube-system', `etcd-${node}`, { host: '127.0.0.1', port: closedPort });
  await putCapiSecrets(management, FLOODED, { apiServer: hostile, etcd: healthy.etcd });
  putControlPlaneObjects(management, FLOODED, FLOODED_NODES);
  storeDir = path.join(workDir, 'store');
  configFile = path.join(workDir, 'guard.json');
  await writeFile(
    configFile,
    JSON.stringify({
      store: { kind: 'file', dir: storeDir },
      targets: [],
      discovery: {
        capi: { namespaces: [healthy.cluster.namespace, FLOODED.namespace] },
        kubeconfigFile: management.kubeconfigFile,
        timeout: `${TIMEOUT_MS}ms`,
      },
    }),
  );
}, 120_000);

afterAll(async () => {
  await Promise.all([healthy?.destroy(), hostile?.close(), management?.close()]);
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** evaluate --config as a process, its peak RSS (VmHWM) sampled from /proc until it exits. */
async function fleetRun(): Promise<{ run: ProcessRun; peakMiB: number }> {
  let peakKiB = 0;
  let sampler: NodeJS.Timeout | undefined;
  const run = await runProcess('node', [BIN, 'evaluate', '--config', configFile], {
    timeoutMs: 60_000,
    onSpawn: (pid) => {
      sampler = setInterval(() => {
        try {
          const status = readFileSync(`/proc/${pid}/status`, 'utf8');
          peakKiB = Math.max(peakKiB, Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0));
        } catch {
          // The process has exited.
        }
      }, 20);
    },
  });
  clearInterval(sampler);
  return { run, peakMiB: peakKiB / 1024 };
}

/** The healthy tenant's evaluation of this run: passed, and within its timeout. */
async function expectHealthyOnTime(runStarted: Date): Promise<Evaluation> {
  const evaluation = await stored(targetOf(healthy.cluster));
  expect(evaluation, 'the healthy tenant was stored').not.toBeNull();
  if (evaluation === null) throw new Error('unreachable');
  expect(Date.parse(evaluation.evaluatedAt)).toBeGreaterThanOrEqual(runStarted.getTime() - 1_000);
  // A "slow" status reason alone is this shared machine, not the flood.
  expect(evaluation.reasons.filter((reason) => !/\) slow: /.test(reason))).toEqual([]);
  expect(evaluation.passed).toBe(true);
  expect(evaluation.durationMs).toBeLessThanOrEqual(TIMEOUT_MS + BOUND_SLACK_MS);
  return evaluation;
}

describe('issue 30 item 4: a SPDY peer that floods and never reads', () => {
  let baselineMiB = 0;

  beforeAll(async () => {
    relay.spdyFlood(null);
    const started = new Date();
    const { run, peakMiB } = await fleetRun();
    expect(run.uncaught).toBeNull();
    expect(run.code, run.stderr).toBe(0);
    await expectHealthyOnTime(started);
    expect((await stored(targetOf(FLOODED)))?.verdict).toBe('Unhealthy');
    baselineMiB = peakMiB;
  }, 90_000);

  it.each<{ flood: SpdyFlood }>([{ flood: 'ping' }, { flood: 'syn-stream' }])(
    `a $flood flood keeps evaluate --config within baseline + ${PEAK_RSS_OVER_BASELINE_MIB} MiB and the other tenant on time`,
    async ({ flood }) => {
      relay.spdyFlood(flood);
      const floodBefore = relay.spdyFloodBytes();
      try {
        const started = new Date();
        const { run, peakMiB } = await fleetRun();
        const other = await expectHealthyOnTime(started);
        const flooded = await stored(targetOf(FLOODED));
        const floodMiB = (relay.spdyFloodBytes() - floodBefore) / 1024 ** 2;
        console.log(
          `SPDY ${flood} flood: evaluate --config peak RSS ${peakMiB.toFixed(0)} MiB vs ${baselineMiB.toFixed(0)} MiB ` +
            `without it (+${(peakMiB - baselineMiB).toFixed(0)}); ${floodMiB.toFixed(1)} MiB of frames sent; run ` +
            `${run.wallMs.toFixed(0)} ms, exit ${run.code}; other tenant ${other.verdict} in ${other.durationMs} ms; ` +
            `flooded tenant ${flooded?.verdict ?? 'not stored'}: ${flooded?.reasons[0] ?? ''}`,
        );
        expect(run.uncaught).toBeNull();
        expect(run.code, run.stderr).toBe(0);
        expect(floodMiB).toBeGreaterThan(0);
        expect(flooded?.verdict).toBe('Unhealthy');
        expect(peakMiB - baselineMiB).toBeLessThanOrEqual(PEAK_RSS_OVER_BASELINE_MIB);
      } finally {
        relay.spdyFlood(null);
      }
    },
    90_000,
  );
});
