// Live-decision bench (issue 27): a guarded change is judged on a live evaluation, on member
// channels the webhook keeps warm. Each figure against a baseline of the same run:
// - a guarded allow with a live evaluation per request (decisionMaxAgeMs 0), 1 connection, p50
//   and p99 against a warm raw etcd Status round trip to one of the same members, and against the
//   evidence floor: the calls a healthy evaluation makes, raw and all at once, no product code;
// - 32 connections of guarded requests to one target (decisionMaxAgeMs 0 and the default 1000):
//   requests/s beside the cached-only path (decision: cached), and how many evaluations ran;
// - the same live evaluation through a Cluster API target's pod port-forward (kept access and
//   channels; the API server stand-ins and the relay in a child process) against the direct one
//   on the same etcd: p50;
// - a non-guarded UPDATE (a label edit of a guarded kind) against the bare server: requests/s;
// - the webhook's open sockets after 1,000 guarded decisions and after the idle timeout.
import autocannon from 'autocannon';
import type { Etcd3 } from 'etcd3';
import type { ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { PROBE_KEY } from '../functions/adapters/etcd-member-probe.js';
import { FileStore } from '../functions/adapters/file-store.js';
import type { Target } from '../functions/domain/targets.js';
import { guardConfigSchema, targetSchema } from '../functions/domain/config.js';
import { evaluateTarget } from '../functions/usecases/evaluate-target.js';
import { createWarmConnections, evaluateResolvedTarget } from '../functions/usecases/reach-target.js';
import { generateTestCerts } from '../test/harness/certs.js';
import { startEtcdCluster, type EtcdTestCluster } from '../test/harness/etcd-cluster.js';
import type { CapiLiveSetup } from './capi-live-child.js';
import { rawClient } from './evaluation.js';
import { firstMessage, killAndWait, percentile, REPO_DIR, spawnTsx, validateLoad, waitFor, type ResultRow } from './lib.js';

const GUARDED = path.join(REPO_DIR, 'test/fixtures/admission/kcp-scale-up-3-to-5.json');
const UNGUARDED = path.join(REPO_DIR, 'test/fixtures/admission/kcp-label-only.json');
const TARGET = 'live';
const IDLE_TIMEOUT_MS = 3_000;

export interface LiveOptions {
  latencySeconds: number;
  throughputSeconds: number;
  decisions: number;
  capiRuns: number;
  log: (line: string) => void;
}

interface Stats {
  evaluations: number;
  connections: { channels: number; idleChannels: number; capiAccesses: number } | null;
  sockets: number;
}

function stats(child: ChildProcess): Promise<Stats> {
  const answer = firstMessage<Stats>(child, 5_000, 'live child stats');
  child.send('stats');
  return answer;
}

/** Sequential requests on one keep-alive connection for `seconds`: each one's latency in ms. */
async function oneConnection(url: string, body: string, seconds: number, expectAllowed: boolean): Promise<number[]> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
  const latencies: number[] = [];
  const until = performance.now() + seconds * 1000;
  try {
    while (performance.now() < until) {
      const started = performance.now();
      const text = await new Promise<string>((resolve, reject) => {
        const request = https.request(
          `${url}/validate?timeout=10s`,
          { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
          (response) => {
            const chunks: Buffer[] = [];
            response.on('data', (chunk: Buffer) => chunks.push(chunk));
            response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
          },
        );
        request.on('error', reject);
        request.end(body);
      });
      latencies.push(performance.now() - started);
      if (latencies.length === 1 && (JSON.parse(text) as { response: { allowed: boolean } }).response.allowed !== expectAllowed) {
        throw new Error(`${url}: the first answer is not allowed=${String(expectAllowed)}: ${text.slice(0, 300)}`);
      }
    }
  } finally {
    agent.destroy();
  }
  return latencies;
}

async function manyConnections(
  url: string,
  body: string,
  seconds: number,
  amount?: number,
): Promise<{ rps: number; requests: number }> {
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    autocannon(
      { ...validateLoad(url, body, 32, seconds), ...(amount === undefined ? {} : { amount, duration: 120 }), timeout: 10 },
      (error, finished) => (error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(finished)),
    );
  });
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  return { rps: result.requests.total / Math.max(result.duration, 0.001), requests: result.requests.total };
}

/** `round` 50 times to warm up, then again and again for `seconds`: each timed one's latency in ms. */
async function warmRounds(round: () => Promise<unknown>, seconds: number): Promise<number[]> {
  for (let warm = 0; warm < 50; warm += 1) await round();
  const latencies: number[] = [];
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) {
    const started = performance.now();
    await round();
    latencies.push(performance.now() - started);
  }
  return latencies;
}

/** Warm raw etcd Status round trips to one member on one client: each one's latency in ms. */
function rawStatus(client: Etcd3, seconds: number): Promise<number[]> {
  return warmRounds(() => client.maintenance.status(), seconds);
}

/**
 * The evidence floor: what a healthy evaluation asks etcd (each member's Status and linearizable
 * count-only read of the probe key, one member list), raw on one warm client per member, all at
 * once, with nothing of ours around it. Each round's latency in ms.
 */
function rawEvidence(clients: readonly Etcd3[], seconds: number): Promise<number[]> {
  const round = () =>
    Promise.all([
      ...clients.flatMap((client) => [client.maintenance.status(), client.kv.range({ key: PROBE_KEY, count_only: true })]),
      clients[0]?.cluster.memberList({}),
    ]);
  return warmRounds(round, seconds);
}

interface Children {
  live0: { child: ChildProcess; url: string };
  live1000: { child: ChildProcess; url: string };
  cached: { child: ChildProcess; url: string };
  bare: { child: ChildProcess; url: string };
}

async function startChildren(dir: string, cluster: EtcdTestCluster, all: ChildProcess[]): Promise<Children> {
  const certs = await generateTestCerts(dir);
  const storeDir = path.join(dir, 'store');
  await mkdir(storeDir);
  const target = targetSchema.parse({ name: TARGET, endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: '2s' });
  await new FileStore(storeDir).write(await evaluateTarget(target));
  const spawnLive = async (name: string, extra: Record<string, unknown>) => {
    const file = path.join(dir, `${name}.json`);
    const config = {
      store: { kind: 'file', dir: storeDir },
      maxAgeSeconds: 600,
      events: false,
      connections: { idleTimeout: `${IDLE_TIMEOUT_MS}ms` },
      targets: [{ name: TARGET, endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: '2s', match: {} }],
      ...extra,
    };
    await writeFile(file, JSON.stringify(config));
    const child = spawnTsx('live-child.ts', [file, certs.serverCertFile, certs.serverKeyFile]);
    all.push(child);
    const { url } = await firstMessage<{ url: string }>(child, 30_000, `${name} child`);
    return { child, url };
  };
  const uid = (JSON.parse(await readFile(UNGUARDED, 'utf8')) as { request: { uid: string } }).request.uid;
  const bareChild = spawnTsx('bare-child.ts', [certs.serverCertFile, certs.serverKeyFile, uid]);
  all.push(bareChild);
  const [live0, live1000, cached, bare] = await Promise.all([
    spawnLive('live0', { decisionMaxAgeMs: 0 }),
    spawnLive('live1000', { decisionMaxAgeMs: 1000 }),
    spawnLive('cached', { decision: 'cached' }),
    firstMessage<{ url: string }>(bareChild, 30_000, 'bare child').then(({ url }) => ({ child: bareChild, url })),
  ]);
  return { live0, live1000, cached, bare };
}

/** Ends a child that tears its stand-ins down on 'stop'; killed when it does not exit in time. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.send('stop');
  const timer = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 15_000).unref());
  if ((await Promise.race([exited, timer])) === 'late') await killAndWait(child);
}

/**
 * p50 of warm live evaluations through a Cluster API target's port-forward and directly,
 * interleaved. The stand-ins (management and workload API servers, the port-forward relay) run in
 * a child process, as a remote API server would: only the evaluation's own work is measured here.
 */
async function capiAgainstDirect(runs: number, log: (line: string) => void): Promise<{ capi: number[]; direct: number[] }> {
  const child = spawnTsx('capi-live-child.ts', ['bench', 'live']);
  const warm = createWarmConnections(guardConfigSchema.parse({ targets: [{ name: 'x', endpoints: ['https://127.0.0.1:1'] }] }));
  if (warm === null) throw new Error('connections.keep is on by default');
  try {
    const setup = await firstMessage<CapiLiveSetup>(child, 60_000, 'CAPI stand-ins child');
    const capi: Target = {
      name: 'capi-bench-live',
      source: 'capi',
      guards: { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', namespace: 'bench', name: 'live' },
      reach: { kind: 'capi', ...setup.cluster, kubeconfigFile: setup.managementKubeconfig },
      machines: setup.cluster,
      endpoints: [],
      timeout: 2_000,
      quotaBackendBytes: 2 * 1024 ** 3,
      match: {},
    };
    const direct = targetSchema.parse({ name: 'direct', endpoints: setup.etcd.endpoints, tls: setup.etcd.tls });
    // As the webhook evaluates it: the management clients built from the target's kubeconfig.
    const options = { warm };
    const timed = async (run: () => Promise<{ verdict: string }>) => {
      const started = performance.now();
      const evaluation = await run();
      if (evaluation.verdict !== 'Healthy') throw new Error(`a bench evaluation was ${evaluation.verdict}`);
      return performance.now() - started;
    };
    // Both through evaluateResolvedTarget with the same kept connections, as the webhook runs them.
    const directRun = () => evaluateResolvedTarget(direct, { warm });
    // Warm: the minted certificate, the kept access and channels, both paths' code.
    for (let run = 0; run < 5; run += 1) {
      await timed(() => evaluateResolvedTarget(capi, options));
      await timed(directRun);
    }
    const samples = { capi: [] as number[], direct: [] as number[] };
    for (let run = 0; run < runs; run += 1) {
      samples.capi.push(await timed(() => evaluateResolvedTarget(capi, options)));
      samples.direct.push(await timed(directRun));
    }
    const streams = firstMessage<{ streams: number }>(child, 5_000, 'CAPI stand-ins streams');
    child.send('streams');
    log(`live: CAPI ${runs} runs, ${(await streams).streams} port-forward streams opened in all`);
    return samples;
  } finally {
    warm.close();
    await stopChild(child);
  }
}

export async function runLiveBench(options: LiveOptions): Promise<ResultRow[]> {
  const { log } = options;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-bench-live-'));
  const children: ChildProcess[] = [];
  let cluster: EtcdTestCluster | undefined;
  const section = 'live';
  try {
    cluster = await startEtcdCluster({ name: 'live' });
    const running = await startChildren(dir, cluster, children);
    const guarded = await readFile(GUARDED, 'utf8');
    const unguarded = await readFile(UNGUARDED, 'utf8');
    log('live: warm-up');
    await oneConnection(running.live0.url, guarded, 1, true);
    await manyConnections(running.live1000.url, guarded, 1);
    await manyConnections(running.cached.url, guarded, 1);

    log('live: 1 connection, a live evaluation per request, against a raw Status round trip');
    const raw: number[] = [];
    const floor: number[] = [];
    const ours: number[] = [];
    const before1 = await stats(running.live0.child);
    const etcd = cluster;
    const clients = etcd.endpoints.map((endpoint) => rawClient(etcd, endpoint));
    try {
      const [one] = clients;
      if (one === undefined) throw new Error('the bench etcd has no member');
      for (let round = 0; round < 2; round += 1) {
        raw.push(...(await rawStatus(one, options.latencySeconds / 2)));
        ours.push(...(await oneConnection(running.live0.url, guarded, options.latencySeconds / 2, true)));
        floor.push(...(await rawEvidence(clients, options.latencySeconds / 2)));
      }
    } finally {
      for (const client of clients) client.close();
    }
    const after1 = await stats(running.live0.child);

    log('live: 32 connections');
    const e0 = await stats(running.live0.child);
    const load0 = await manyConnections(running.live0.url, guarded, options.throughputSeconds);
    const e0After = await stats(running.live0.child);
    const e1 = await stats(running.live1000.child);
    const load1000 = await manyConnections(running.live1000.url, guarded, options.throughputSeconds);
    const e1After = await stats(running.live1000.child);
    const cachedLoad = await manyConnections(running.cached.url, guarded, options.throughputSeconds);

    log('live: a non-guarded UPDATE against the bare server');
    const labelRuns = { ours: [] as number[], bare: [] as number[] };
    for (let round = 0; round < 2; round += 1) {
      labelRuns.ours.push((await manyConnections(running.live1000.url, unguarded, options.throughputSeconds / 2)).rps);
      labelRuns.bare.push((await manyConnections(running.bare.url, unguarded, options.throughputSeconds / 2)).rps);
    }

    log(`live: open sockets around ${options.decisions} guarded decisions and the idle timeout`);
    await waitFor(async () => (await stats(running.live0.child)).connections?.channels === 0, IDLE_TIMEOUT_MS + 10_000, 'idle');
    const socketsBefore = (await stats(running.live0.child)).sockets;
    await manyConnections(running.live0.url, guarded, 0, options.decisions);
    let afterDecisions = await stats(running.live0.child);
    // The load generator's 32 connections close as it ends; the kept channels stay.
    await waitFor(
      async () => {
        afterDecisions = await stats(running.live0.child);
        return afterDecisions.sockets <= socketsBefore + (afterDecisions.connections?.channels ?? 0);
      },
      5_000,
      'the load generator’s connections closed',
    );
    let afterIdle = afterDecisions;
    await waitFor(
      async () => {
        afterIdle = await stats(running.live0.child);
        return afterIdle.connections?.channels === 0 && afterIdle.sockets <= socketsBefore;
      },
      IDLE_TIMEOUT_MS + 10_000,
      'kept channels closed after the idle timeout',
    );

    log('live: through CAPI port-forward against direct');
    const capi = await capiAgainstDirect(options.capiRuns, log);

    const perRequest = (after1.evaluations - before1.evaluations) / Math.max(1, ours.length);
    return [
      {
        section,
        figure: `guarded allow, live evaluation per request (decisionMaxAgeMs 0), warm, 1 conn: p50 (baseline: warm raw etcd Status to one member; ${perRequest.toFixed(2)} evaluations per request)`,
        ours: percentile(ours, 50),
        baseline: percentile(raw, 50),
        unit: 'ms',
        target: { kind: 'ratio-max', max: 4 },
      },
      {
        section,
        figure: `guarded allow, live evaluation per request, warm, 1 conn: p50 (baseline: the evidence floor, the ${2 * cluster.endpoints.length + 1} etcd calls of a healthy evaluation raw and at once)`,
        ours: percentile(ours, 50),
        baseline: percentile(floor, 50),
        unit: 'ms',
        target: { kind: 'info' },
      },
      {
        section,
        figure: 'the evidence floor, raw, no product code: p50 (baseline: warm raw Status to one member)',
        ours: percentile(floor, 50),
        baseline: percentile(raw, 50),
        unit: 'ms',
        target: { kind: 'info' },
      },
      {
        section,
        figure: 'guarded allow, live evaluation per request, warm, 1 conn: p99 (baseline: warm raw Status p99)',
        ours: percentile(ours, 99),
        baseline: percentile(raw, 99),
        unit: 'ms',
        target: { kind: 'ratio-max', max: 10 },
      },
      {
        section,
        figure: `guarded, 32 conn, decisionMaxAgeMs 0: req/s (baseline: cached-only, decision: cached); ${e0After.evaluations - e0.evaluations} evaluations for ${load0.requests} requests`,
        ours: load0.rps,
        baseline: cachedLoad.rps,
        unit: 'req/s',
        target: { kind: 'info' },
      },
      {
        section,
        figure: `guarded, 32 conn, decisionMaxAgeMs 1000 (default): req/s (baseline: cached-only); ${e1After.evaluations - e1.evaluations} evaluations for ${load1000.requests} requests`,
        ours: load1000.rps,
        baseline: cachedLoad.rps,
        unit: 'req/s',
        target: { kind: 'info' },
      },
      {
        section,
        figure: `live evaluation through CAPI pod port-forward (kept access and channels), stand-ins in a child: p50 (baseline: direct, same etcd, kept channels)`,
        ours: percentile(capi.capi, 50),
        baseline: percentile(capi.direct, 50),
        unit: 'ms',
        target: { kind: 'ratio-max', max: 2 },
      },
      {
        section,
        figure: 'non-guarded UPDATE (label edit of a KCP), 32 conn: req/s (baseline: the bare server, both through tsx)',
        ours: Math.max(...labelRuns.ours),
        baseline: Math.max(...labelRuns.bare),
        unit: 'req/s',
        target: { kind: 'ratio-min', min: 0.85 },
      },
      {
        section,
        figure: `webhook open sockets after ${options.decisions} guarded decisions, ${afterDecisions.connections?.channels ?? 0} channels kept (baseline: before)`,
        ours: afterDecisions.sockets,
        baseline: socketsBefore,
        unit: 'sockets',
        target: { kind: 'info' },
      },
      {
        section,
        figure: `webhook open sockets after the idle timeout (${IDLE_TIMEOUT_MS / 1000} s here) (baseline: before)`,
        ours: afterIdle.sockets,
        baseline: socketsBefore,
        unit: 'sockets',
        target: { kind: 'ratio-max', max: 1 },
      },
    ];
  } finally {
    await Promise.all(children.map((child) => killAndWait(child)));
    await cluster?.destroy();
    await rm(dir, { recursive: true, force: true });
  }
}
