// Attacks on the webhook's capacity, against `etcd-guard webhook` as its own process (HTTPS) over a
// real 3-member etcd: one address holding every connection it can, a storm of on-demand POSTs,
// and what /readyz tells a stranger. The process's own memory and latency are measured from
// outside, and the verdict it stores must stay the cluster's, not the overload's.
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig, type GuardConfig } from '../../functions/domain/config.js';
import { evaluationSchema } from '../../functions/domain/evaluation-document.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { MAX_CONNECTIONS } from './main.js';
import { generateTestCerts, type TestCerts } from '../../test/harness/certs.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { httpsRequest } from '../../test/harness/https-client.js';
import { startWebhookProcess, type WebhookProcess } from '../../test/harness/webhook-process.js';
import { waitFor } from '../../test/harness/wait.js';
import { startTestWebhook } from '../../test/harness/webhook.js';

/** Storm targets: all judge the same real etcd, so every honest verdict is the same. */
const STORM_TARGETS = 100;
const STORM_POSTS = 500;
/** The storm comes from this many loopback addresses, so it is not just the per-peer limit at work. */
const STORM_ADDRESSES = 20;
/**
 * The kubelet's probes of the shipped Deployment give up after timeoutSeconds: 2, and readiness
 * marks the pod unready after failureThreshold: 2 failures in a row.
 */
const PROBE_TIMEOUT_MS = 2_000;
const PROBE_FAILURE_THRESHOLD = 2;
/** The webhook pod's memory limit is 384 MiB; the storm must leave it far from it. */
const PEAK_RSS_BOUND_MIB = 256;

let workDir: string;
let cluster: EtcdTestCluster;
let certs: TestCerts;
let ca: Buffer;
let config: GuardConfig;
let storeDir: string;
let webhook: WebhookProcess;

function targetsYaml(count: number): string[] {
  const lines: string[] = [];
  for (let index = 0; index < count; index += 1) {
    lines.push(
      `  - name: ${index === 0 ? 'prod' : `storm-${index}`}`,
      `    endpoints: [${cluster.endpoints.join(', ')}]`,
      `    tls: { caFile: ${cluster.clientTls.caFile}, certFile: ${cluster.clientTls.certFile}, keyFile: ${cluster.clientTls.keyFile} }`,
      '    timeout: 1s',
      // prod guards everything the fixtures send; the storm targets guard nothing.
      index === 0 ? '    match: {}' : `    match: { namespaces: [storm-${index}] }`,
    );
  }
  return lines;
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-overload-'));
  [cluster, certs] = await Promise.all([startEtcdCluster({ size: 3, name: 'overload' }), generateTestCerts(workDir)]);
  ca = readFileSync(certs.caFile);
  storeDir = path.join(workDir, 'store');
  const configFile = path.join(workDir, 'guard.yaml');
  await writeFile(
    configFile,
    [
      `store: { kind: file, dir: ${storeDir} }`,
      'maxAgeSeconds: 600',
      'inlineRefresh: false',
      'targets:',
      ...targetsYaml(STORM_TARGETS),
      '',
    ].join('\n'),
  );
  // prod's evaluation, from the real etcd, stored before the webhook starts: reviews have a verdict.
  config = parseGuardConfig(
    {
      store: { kind: 'file', dir: storeDir },
      targets: [{ name: 'prod', endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: '2s' }],
    },
    'prod',
  );
  const prod = config.targets[0];
  if (!prod) throw new Error('no prod target');
  const healthy = await evaluateTarget(prod);
  expect(healthy.passed, healthy.reasons.join('; ')).toBe(true);
  await createStore(config.store).write(healthy);
  webhook = await startWebhookProcess({ configFile, certFile: certs.serverCertFile, keyFile: certs.serverKeyFile });
  await waitFor('/readyz', 30_000, async () => (await request('GET', '/readyz').catch(() => ({ status: 0 }))).status === 200);
  // The etcd engine loads on the first evaluation (in a source checkout, compiled on the fly):
  // load it now, so the storm meets the steady state.
  expect((await request('POST', '/evaluations/prod', { timeoutMs: 30_000 })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await webhook?.stop();
  await cluster?.destroy();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** A request on a new connection from `localAddress` (loopback: 127.x.y.z are all ours). */
function request(
  method: string,
  pathname: string,
  options: { localAddress?: string; body?: string; timeoutMs?: number } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; json: unknown; ms: number }> {
  const agent = new https.Agent({ keepAlive: false, ...(options.localAddress ? { localAddress: options.localAddress } : {}) });
  const started = performance.now();
  return httpsRequest(`${webhook.url}${pathname}`, {
    method,
    agent,
    ca,
    timeoutMs: options.timeoutMs ?? 10_000,
    ...(options.body === undefined ? {} : { body: options.body }),
  })
    .then((answer) => ({ status: answer.status, headers: answer.headers, json: answer.json, ms: performance.now() - started }))
    .finally(() => agent.destroy());
}

const scaleFixture = readFileSync(
  path.join(path.dirname(new URL(import.meta.url).pathname), '../../test/fixtures', 'admission', 'kcp-scale-up-3-to-5.json'),
  'utf8',
);
let reviewCounter = 0;

/** One AdmissionReview as the apiserver sends it; true when answered with its uid echoed and allowed. */
async function review(localAddress: string): Promise<'allowed' | 'denied' | 'unanswered'> {
  reviewCounter += 1;
  const uid = `overload-${reviewCounter}`;
  const body = scaleFixture.replace('7c0f3a9e-1d2b-4c5e-8f6a-0b1c2d3e4f51', uid);
  try {
    const answer = await request('POST', '/validate?timeout=10s', { localAddress, body });
    const response = (answer.json as { response?: { uid?: string; allowed?: boolean } } | null)?.response;
    if (answer.status !== 200 || response?.uid !== uid) return 'unanswered';
    return response.allowed === true ? 'allowed' : 'denied';
  } catch {
    return 'unanswered';
  }
}

/**
 * Holds `count` silent TCP connections from `localAddress` and opens a new one as soon as one is
 * cut, like an attacker who wants the connection cap for himself.
 */
function holdConnections(localAddress: string, count: number) {
  let active = true;
  let opened = 0;
  let cut = 0;
  const sockets = new Set<net.Socket>();
  const open = () => {
    if (!active) return;
    const socket = net.connect({ host: '127.0.0.1', port: webhook.port, localAddress });
    sockets.add(socket);
    socket.on('connect', () => (opened += 1));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      sockets.delete(socket);
      cut += 1;
      // Not in this tick: a refused connect must not spin the test's own event loop.
      if (active) setImmediate(open);
    });
  };
  for (let index = 0; index < count; index += 1) open();
  return {
    opened: () => opened,
    cut: () => cut,
    stop: () => {
      active = false;
      for (const socket of sockets) socket.destroy();
    },
  };
}

describe('connection cap', () => {
  it(`one address holding ${MAX_CONNECTIONS + 1} idle connections, re-opened as soon as cut, does not starve the apiserver's reviews`, async () => {
    expect(await review('127.0.0.1')).toBe('allowed');
    const attacker = holdConnections('127.0.0.2', MAX_CONNECTIONS + 1);
    try {
      await waitFor('the attacker to have connected every socket once', 20_000, () => attacker.opened() >= MAX_CONNECTIONS + 1);
      const outcomes: string[] = [];
      // Long enough to span a handshake timeout (5 s): the cap is re-contested when the server cuts.
      const started = performance.now();
      while (outcomes.length < 22 || performance.now() - started < 6_000) outcomes.push(await review('127.0.0.1'));
      const answered = outcomes.filter((outcome) => outcome !== 'unanswered').length;
      console.log(
        `connection cap: attacker opened ${attacker.opened()} connections (${attacker.cut()} cut); ` +
          `${answered} of ${outcomes.length} reviews answered`,
      );
      expect(
        outcomes.every((outcome) => outcome === 'allowed'),
        outcomes.join(','),
      ).toBe(true);
    } finally {
      attacker.stop();
    }
  }, 60_000);
});

function targetName(index: number): string {
  return index === 0 ? 'prod' : `storm-${index}`;
}

/** Every evaluation in the file store: target → whether it passes (Unhealthy denies changes). */
async function storedEvaluations(): Promise<Map<string, { verdict: string; passed: boolean }>> {
  const stored = new Map<string, { verdict: string; passed: boolean }>();
  for (const file of await readdir(storeDir)) {
    if (!file.endsWith('.json')) continue;
    const evaluation = evaluationSchema.parse(JSON.parse(await readFile(path.join(storeDir, file), 'utf8')));
    stored.set(evaluation.target, { verdict: evaluation.verdict, passed: evaluation.passed });
  }
  return stored;
}

function countBy<T>(items: readonly T[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[String(item)] = (counts[String(item)] ?? 0) + 1;
  return counts;
}

interface Answer {
  status: number;
  retryAfter: string | undefined;
  json: unknown;
}

/** One POST on a warm keep-alive connection of `agent`; status 0 when it failed outright. */
async function post(agent: https.Agent, target: string): Promise<Answer> {
  try {
    const answer = await httpsRequest(`${webhook.url}/evaluations/${target}`, { method: 'POST', agent, ca, timeoutMs: 30_000 });
    const retryAfter = answer.headers['retry-after'];
    return { status: answer.status, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined, json: answer.json };
  } catch (error) {
    return { status: 0, retryAfter: undefined, json: { error: String(error) } };
  }
}

describe('on-demand storm', () => {
  it(`${STORM_POSTS} unauthenticated POST /evaluations from ${STORM_ADDRESSES} addresses: /healthz stays fast, memory bounded, no overload stored as the verdict`, async () => {
    // The attacker's connections are opened first (its TLS handshakes are the connection cap's
    // business): what is measured is what the POSTs make the webhook do.
    const agents = Array.from(
      { length: STORM_ADDRESSES },
      (_unused, index) => new https.Agent({ keepAlive: true, maxSockets: 10, localAddress: `127.0.0.${10 + index}` }),
    );
    try {
      const warm = await Promise.all(
        agents.flatMap((agent) =>
          Array.from({ length: 10 }, () =>
            httpsRequest(`${webhook.url}/healthz`, { method: 'GET', agent, ca, timeoutMs: 30_000 }).then(
              (answer) => answer.status,
            ),
          ),
        ),
      );
      expect(warm.every((status) => status === 200)).toBe(true);
      const before = webhook.memoryMiB();
      const cpuBefore = webhook.cpuMs();
      let storming = true;
      const healthz: Array<{ status: number; ms: number }> = [];
      const prober = (async () => {
        while (storming)
          healthz.push(await request('GET', '/healthz', { timeoutMs: 10_000 }).catch(() => ({ status: 0, ms: 10_000 })));
      })();
      const started = performance.now();
      const answers = await Promise.all(
        Array.from({ length: STORM_POSTS }, (_unused, index) =>
          post(agents[index % STORM_ADDRESSES] as https.Agent, targetName(index % STORM_TARGETS)),
        ),
      );
      const stormMs = performance.now() - started;
      storming = false;
      await prober;
      const after = webhook.memoryMiB();
      const cpuMs = webhook.cpuMs() - cpuBefore;

      const statuses = countBy(answers.map((answer) => answer.status));
      const answered = answers.filter((answer) => answer.status === 200).map((answer) => evaluationSchema.parse(answer.json));
      const stored = await storedEvaluations();
      const slowest = Math.max(...healthz.map((probe) => probe.ms));
      console.log(
        `on-demand storm: ${STORM_POSTS} POSTs over ${STORM_TARGETS} targets in ${Math.round(stormMs)} ms, webhook CPU ${cpuMs} ms; ` +
          `statuses ${JSON.stringify(statuses)}; /healthz ${healthz.length} probes, slowest ${Math.round(slowest)} ms ` +
          `(${healthz.map((probe) => Math.round(probe.ms)).join(',')}); RSS ${before.rss.toFixed(0)} -> ${after.rss.toFixed(0)} MiB, ` +
          `peak ${after.peak.toFixed(0)} MiB; stored ${stored.size}: ${JSON.stringify(countBy([...stored.values()].map((one) => one.verdict)))}`,
      );

      // Every POST got an evaluation or a clear "not now" to retry after; nothing else.
      expect(
        Object.keys(statuses).every((status) => status === '200' || status === '429'),
        JSON.stringify(statuses),
      ).toBe(true);
      for (const answer of answers.filter((one) => one.status === 429)) {
        expect(Number(answer.retryAfter)).toBeGreaterThan(0);
        expect(answer.json).toMatchObject({ notEvaluated: true });
      }
      // The etcd is healthy: no answer and nothing stored may say it denies changes.
      expect(
        answered.every((evaluation) => evaluation.passed),
        answered.map((evaluation) => evaluation.reasons.join('; ')).join(' | '),
      ).toBe(true);
      expect(
        [...stored.values()].every((one) => one.passed),
        JSON.stringify([...stored]),
      ).toBe(true);
      expect(healthz.every((probe) => probe.status === 200)).toBe(true);
      // The kubelet would never have marked the pod unready: no run of failing probes as long as its threshold.
      const failingRuns = healthz.map(
        (_probe, index) =>
          healthz.slice(index, index + PROBE_FAILURE_THRESHOLD).filter((probe) => probe.ms >= PROBE_TIMEOUT_MS).length,
      );
      expect(Math.max(...failingRuns), 'consecutive /healthz probes over the kubelet timeout').toBeLessThan(
        PROBE_FAILURE_THRESHOLD,
      );
      expect(after.peak).toBeLessThan(PEAK_RSS_BOUND_MIB);
      // And the apiserver's changes still go through.
      expect(await review('127.0.0.1')).toBe('allowed');
    } finally {
      for (const agent of agents) agent.destroy();
    }
  }, 120_000);
});

describe('readiness', () => {
  it('/readyz tells a stranger counts, never target names, while a target cannot be read', async () => {
    // A second webhook whose store holds an unreadable document for one tenant's target: it stays
    // unready, and its /readyz (no token: the kubelet asks) must not list the fleet's names.
    const dir = path.join(workDir, 'unready');
    const unreadableStore = path.join(dir, 'store');
    await rm(dir, { recursive: true, force: true });
    await mkdir(unreadableStore, { recursive: true });
    await writeFile(path.join(unreadableStore, 'capi-tenant-a-payments.json'), '{ not json');
    const configFile = path.join(dir, 'guard.yaml');
    await writeFile(
      configFile,
      [
        `store: { kind: file, dir: ${unreadableStore} }`,
        'auth: { tokenFile: token }',
        'targets:',
        ...['capi-tenant-a-payments', 'capi-tenant-b-billing'].flatMap((name) => [
          `  - name: ${name}`,
          `    endpoints: [${cluster.endpoints.join(', ')}]`,
          `    match: { namespaces: [${name}] }`,
        ]),
        '',
      ].join('\n'),
    );
    await writeFile(path.join(dir, 'token'), 'readiness-test-token\n');
    const unready = await startWebhookProcess({ configFile, certFile: certs.serverCertFile, keyFile: certs.serverKeyFile });
    try {
      const agent = new https.Agent({ keepAlive: false });
      const answer = await httpsRequest(`${unready.url}/readyz`, { method: 'GET', agent, ca, timeoutMs: 10_000 });
      agent.destroy();
      console.log(`readiness: /readyz ${answer.status} ${answer.text}`);
      expect(answer.status).toBe(503);
      expect(answer.json).toMatchObject({ ready: false, targets: 2 });
      expect(answer.text).not.toMatch(/tenant|payments|billing/);
    } finally {
      await unready.stop();
    }
  }, 60_000);
});

describe('on-demand bookkeeping', () => {
  it('runs for many targets leave nothing behind once their window passed; unknown names are 404 and keep nothing', async () => {
    const names = Array.from({ length: 30 }, (_unused, index) => `kept-${index}`);
    const inProcess = await startTestWebhook({
      config: parseGuardConfig(
        {
          store: { kind: 'file', dir: path.join(workDir, 'bookkeeping') },
          targets: names.map((name) => ({
            name,
            endpoints: cluster.endpoints,
            tls: cluster.clientTls,
            timeout: '2s',
            match: { namespaces: [name] },
          })),
        },
        'bookkeeping',
      ),
      certs,
      onDemandMinIntervalMs: 200,
      // Few sockets, many requests: the per-peer connection limit is not what this is about.
      agent: { keepAlive: true, maxSockets: 16 },
    });
    const { onDemand } = inProcess.server;
    const post = (name: string) => inProcess.request('POST', `/evaluations/${name}`, { timeoutMs: 30_000 });
    try {
      for (const name of names) {
        const answer = await post(name);
        expect(answer.status, answer.text).toBe(200);
      }
      const keptAfterRuns = onDemand.keptRuns();
      await waitFor('every run to be forgotten after its window', 10_000, () => onDemand.keptRuns() === 0);
      const unknown = await Promise.all(
        Array.from({ length: 2_000 }, (_unused, index) => post(`no-such-target-${index}`).then((answer) => answer.status)),
      );
      console.log(
        `on-demand bookkeeping: ${keptAfterRuns} runs kept right after ${names.length} POSTs, 0 after the window; 2000 unknown names kept ${onDemand.keptRuns()}`,
      );
      expect(unknown.every((status) => status === 404)).toBe(true);
      expect(onDemand.keptRuns()).toBe(0);
    } finally {
      await inProcess.close();
    }
  }, 120_000);
});
