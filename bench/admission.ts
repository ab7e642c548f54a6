// Admission bench: POST /validate over HTTPS keep-alive against the real webhook process (fresh
// cached evaluation in a file store) next to a bare express HTTPS server answering a fixed
// AdmissionReview, same body, same load generator (autocannon, in this process). The headline rows
// run the webhook as the image does (the esbuild bundle in dist/cli/, plain node, the Dockerfile's
// node flags) and
// the bare server compiled under plain node with the same flags.
import autocannon from 'autocannon';
import { transform } from 'esbuild';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse } from 'yaml';
import { FileStore } from '../functions/adapters/file-store.js';
import { createStore } from '../functions/adapters/store-factory.js';
import { plural } from '../functions/domain/judgement/wording.js';
import { generateTestCerts } from '../test/harness/certs.js';
import { imageNodeFlags, memoryQuantityBytes, nodeFlagsUnderLimit } from '../test/harness/image-node-flags.js';
import { makeEvaluation, makeMember } from '../test/harness/evaluation-fixture.js';
import { startFakeKubeApiServer } from '../test/harness/fake-kube-apiserver.js';
import { freePort } from '../test/harness/free-port.js';
import {
  BENCH_DIR,
  benchGuardConfig,
  firstMessage,
  killAndWait,
  peakRssMiB,
  cpuTimeMs,
  percentile,
  REPO_DIR,
  spawnTsx,
  waitReady,
  validateLoad,
  webhookArgs,
  type ResultRow,
} from './lib.js';

const FIXTURE = path.join(REPO_DIR, 'test/fixtures/admission/kcp-scale-up-3-to-5.json');
const TARGET = 'bench';

interface LoadResult {
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  requestsPerSecond: number;
  /** Per-response latency in ms at full resolution (autocannon's histogram keeps whole ms). */
  latenciesMs: number[];
}

export interface AdmissionOptions {
  latencySeconds: number;
  throughputSeconds: number;
  warmupSeconds: number;
  log: (line: string) => void;
}

async function load(url: string, body: string, connections: number, seconds: number): Promise<LoadResult> {
  const latenciesMs: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      { ...validateLoad(url, body, connections, seconds), pipelining: 1, timeout: 10 },
      (error, finished) => (error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(finished)),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTimeMs) => {
      if (statusCode >= 200 && statusCode < 300) latenciesMs.push(responseTimeMs);
    });
  });
  return {
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    requestsPerSecond: result.requests.total / (result.duration > 0 ? result.duration : seconds),
    latenciesMs,
  };
}

/** One request through Node's https client: the answer the apiserver would get. */
function postOnce(url: string, body: string): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const request = https.request(
      `${url}/validate?timeout=10s`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        rejectUnauthorized: false,
        agent: false,
        timeout: 5_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          try {
            resolve({ status: response.statusCode ?? 0, json: JSON.parse(text) as unknown });
          } catch {
            reject(new Error(`${url}/validate answered ${response.statusCode} with non-JSON: ${text.slice(0, 200)}`));
          }
        });
      },
    );
    request.on('timeout', () => request.destroy(new Error(`${url}/validate did not answer within 5 s`)));
    request.on('error', reject);
    request.end(body);
  });
}

function allowedOf(json: unknown): boolean | undefined {
  const response = (json as { response?: { allowed?: unknown } } | null)?.response;
  return typeof response?.allowed === 'boolean' ? response.allowed : undefined;
}

function checkClean(name: string, result: LoadResult): void {
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(
      `${name}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts in ${result.requests} requests`,
    );
  }
}

/**
 * The node flags the webhook runs with in the Deployment's pod: the Dockerfile ENTRYPOINT's, its
 * heap percentage turned into the cap node derives from the Deployment's `limits.memory` (read
 * from manifests/base, so the rows follow what ships; this host has no such cgroup). Read from the
 * Dockerfile, so the headline rows measure what ships. BENCH_NODE_FLAGS (space separated)
 * overrides them, for trying other settings; the rows then name the flags used.
 */
export function podWebhookNodeFlags(dockerfile: string, deploymentYaml: string): { flags: string[]; limit: string } {
  const deployment = parse(deploymentYaml) as {
    spec?: { template?: { spec?: { containers?: { resources?: { limits?: { memory?: unknown } } }[] } } };
  };
  const limit = String(deployment.spec?.template?.spec?.containers?.[0]?.resources?.limits?.memory ?? '');
  return { flags: nodeFlagsUnderLimit(imageNodeFlags(dockerfile), memoryQuantityBytes(limit)), limit };
}

/**
 * The image's /app, rebuilt here: package.json, bin/ and the bundle in dist/cli/ only (no
 * TypeScript sources, so bin/etcd-guard.mjs takes the bundle as it does in the image). Inside
 * node_modules so that packages resolve from it exactly as from /app/node_modules.
 */
const IMAGE_DIR = path.join(REPO_DIR, 'node_modules/.cache/etcd-guard-bench-image');

/** `node scripts/build.mjs --outdir` into the image layout, as the Dockerfile's build stage runs it. */
async function buildImageLayout(): Promise<void> {
  await rm(IMAGE_DIR, { recursive: true, force: true });
  await mkdir(path.join(IMAGE_DIR, 'bench'), { recursive: true });
  await cp(path.join(REPO_DIR, 'package.json'), path.join(IMAGE_DIR, 'package.json'));
  await cp(path.join(REPO_DIR, 'bin'), path.join(IMAGE_DIR, 'bin'), { recursive: true });
  await new Promise<void>((resolve, reject) => {
    execFile(
      process.execPath,
      [path.join(REPO_DIR, 'scripts/build.mjs'), '--outdir', path.join(IMAGE_DIR, 'dist')],
      { cwd: REPO_DIR, timeout: 120_000 },
      (error, _stdout, stderr) => {
        if (error) reject(new Error(`scripts/build.mjs failed: ${error.message} ${stderr.slice(0, 500)}`));
        else resolve();
      },
    );
  });
  // The baseline is deployed the way a bare express server would be: compiled, plain node.
  const bare = await transform(await readFile(path.join(BENCH_DIR, 'bare-child.ts'), 'utf8'), {
    loader: 'ts',
    format: 'esm',
    target: 'node22',
  });
  await writeFile(path.join(IMAGE_DIR, 'bench/bare-child.mjs'), bare.code);
}

/** The bundle's chunk of webhook/server/main.ts: the one that exports runWebhookCommand. */
function webhookChunk(): string {
  const dir = path.join(IMAGE_DIR, 'dist/cli');
  const chunks = readdirSync(dir).filter(
    (name) => name.endsWith('.mjs') && /^export \{[^}]*\brunWebhookCommand\b/m.test(readFileSync(path.join(dir, name), 'utf8')),
  );
  if (chunks.length !== 1) throw new Error(`expected one chunk in ${dir} exporting runWebhookCommand, found ${chunks.length}`);
  return path.join(dir, chunks[0] ?? '');
}

/**
 * The image's command line, `node FLAGS bin/etcd-guard.mjs webhook ...`, run from the image layout.
 * With `entry: 'webhook-module'` the same bundled webhook is started without the CLI module (the
 * bundle's webhook chunk, which the CLI imports lazily, with its runWebhookCommand called
 * directly): the difference is what the CLI's own imports cost the webhook.
 */
async function spawnImageWebhook(
  nodeFlags: string[],
  files: { configFile: string; certFile: string; keyFile: string; logFile: string },
  entry: 'cli' | 'webhook-module' = 'cli',
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const listen = `127.0.0.1:${port}`;
  const webhookModule = pathToFileURL(webhookChunk()).href;
  const direct = `
    const { runWebhookCommand } = await import(${JSON.stringify(webhookModule)});
    const [configFile, listen, tlsCertFile, tlsKeyFile] = process.argv.slice(1);
    process.exitCode = await runWebhookCommand({ configFile, listen, tlsCertFile, tlsKeyFile, insecureHttp: false }, process.env);`;
  const args =
    entry === 'cli'
      ? webhookArgs(path.join(IMAGE_DIR, 'bin/etcd-guard.mjs'), files.configFile, listen, files.certFile, files.keyFile)
      : ['--input-type=module', '-e', direct, files.configFile, listen, files.certFile, files.keyFile];
  const logFd = openSync(files.logFile, 'a');
  const child = spawn(process.execPath, [...nodeFlags, ...args], {
    cwd: IMAGE_DIR,
    stdio: ['ignore', logFd, 'inherit'],
    env: { ...process.env, NODE_ENV: 'production', ...env },
  });
  closeSync(logFd);
  return { child, url: `https://127.0.0.1:${port}` };
}

function spawnCompiledBare(nodeFlags: string[], certFile: string, keyFile: string, uid: string): ChildProcess {
  return spawn(process.execPath, [...nodeFlags, path.join(IMAGE_DIR, 'bench/bare-child.mjs'), certFile, keyFile, uid], {
    cwd: IMAGE_DIR,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
}

/** Resident memory split from /proc: anonymous (heap, buffers) and file-backed (node binary, code). */
function residentSplit(pid: number | undefined): string {
  if (pid === undefined) return 'no pid';
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) / 1024;
  return `rss ${field('VmRSS').toFixed(0)} MiB (anon ${field('RssAnon').toFixed(0)}, file ${field('RssFile').toFixed(0)}), peak ${field('VmHWM').toFixed(0)} MiB`;
}

/** What the admission section's comparisons share: its options, scratch dir, node flags, files and body. */
interface SectionParts {
  options: AdmissionOptions;
  dir: string;
  flags: string[];
  files: (name: string) => { configFile: string; certFile: string; keyFile: string; logFile: string };
  body: string;
  /** Every child started is pushed here, so the section's cleanup stops it. */
  children: ChildProcess[];
}

/**
 * The denial path with Events on and off, same run, same flags: two image webhooks judge the
 * fixture against an Unhealthy evaluation; one records Events into the loopback API stand-in
 * (through KUBECONFIG), the other has `events: false`. Audit annotations are on in both (they are
 * on every decision). One body means one object, so the Events form one series: the realistic
 * flood (a controller retrying) and what the recorder must absorb without slowing answers.
 */
async function eventsComparison(parts: SectionParts): Promise<ResultRow[]> {
  const { options, dir, flags, files, body, children } = parts;
  const kube = await startFakeKubeApiServer();
  try {
    const storeDir = path.join(dir, 'store-unhealthy');
    await mkdir(storeDir);
    const sick = [makeMember(0), makeMember(1), makeMember(2, { healthy: false, error: 'connection refused' })];
    await new FileStore(storeDir).write(
      makeEvaluation({
        target: TARGET,
        evaluatedAt: new Date().toISOString(),
        verdict: 'Unhealthy',
        members: sick,
        reasons: ['member etcd-2 unreachable: connection refused'],
      }),
    );
    const configFor = async (events: boolean) => {
      const configFile = path.join(dir, `guard-deny-events-${events ? 'on' : 'off'}.json`);
      await writeFile(configFile, benchGuardConfig(storeDir, TARGET, { events }));
      return { ...files(`webhook-deny-events-${events ? 'on' : 'off'}`), configFile };
    };
    const on = await spawnImageWebhook(flags, await configFor(true), 'cli', { KUBECONFIG: kube.kubeconfigFile });
    children.push(on.child);
    const off = await spawnImageWebhook(flags, await configFor(false), 'cli', { KUBECONFIG: kube.kubeconfigFile });
    children.push(off.child);
    await Promise.all([waitReady(on.url, on.child, 30_000), waitReady(off.url, off.child, 30_000)]);
    for (const url of [on.url, off.url]) {
      const smoke = await postOnce(url, body);
      if (smoke.status !== 200 || allowedOf(smoke.json) !== false)
        throw new Error(`denial-path webhook did not deny the fixture`);
    }
    options.log(
      `admission: denial path, Events on vs off (${options.latencySeconds}s at 1 connection, ${options.throughputSeconds}s at 32)`,
    );
    const measure = async (url: string, pid: number | undefined) => {
      if (pid === undefined) throw new Error('a denial-path webhook has no pid');
      await load(url, body, 8, options.warmupSeconds);
      const serial = await load(url, body, 1, options.latencySeconds);
      const cpuBefore = cpuTimeMs(pid);
      const parallel = await load(url, body, 32, options.throughputSeconds);
      const cpuPerRequestUs = ((cpuTimeMs(pid) - cpuBefore) * 1000) / parallel.requests;
      checkClean('denial path', serial);
      checkClean('denial path', parallel);
      return { serial, parallel, cpuPerRequestUs, requests: serial.requests + parallel.requests };
    };
    // Off first, then on, then off again: a drift of the machine's load shows as off ≠ off.
    const offFirst = await measure(off.url, off.child.pid);
    const onRun = await measure(on.url, on.child.pid);
    const offAgain = await measure(off.url, off.child.pid);
    const writes = kube.requests.filter(
      (entry) => entry.resource === 'events' && entry.status !== null && entry.status < 300,
    ).length;
    options.log(
      `admission: events on: ${onRun.requests} denials measured (plus smoke and warm-up) → ${writes} Event writes in the stand-in; ` +
        `off p99 1 conn ${percentile(offFirst.serial.latenciesMs, 99).toFixed(2)} then ${percentile(offAgain.serial.latenciesMs, 99).toFixed(2)} ms`,
    );
    const info = { kind: 'info' } as const;
    const [onPid, offPid] = [on.child.pid, off.child.pid];
    if (onPid === undefined || offPid === undefined) throw new Error('a denial-path webhook has no pid');
    const offSerial = [...offFirst.serial.latenciesMs, ...offAgain.serial.latenciesMs];
    const offRate = (offFirst.parallel.requestsPerSecond + offAgain.parallel.requestsPerSecond) / 2;
    return [
      {
        section: 'admission',
        figure: 'denial path, Events + audit annotations on (baseline: Events off): p99, 1 conn',
        ours: percentile(onRun.serial.latenciesMs, 99),
        baseline: percentile(offSerial, 99),
        unit: 'ms',
        target: info,
      },
      {
        section: 'admission',
        figure: 'denial path, Events + audit annotations on (baseline: Events off): req/s, 32 conn',
        ours: onRun.parallel.requestsPerSecond,
        baseline: offRate,
        unit: 'req/s',
        target: { kind: 'ratio-min', min: 0.9 },
      },
      {
        // What the load of the shared machine moves least: CPU per request, from /proc.
        section: 'admission',
        figure: 'denial path, Events on (baseline: Events off): CPU per request at 32 conn, from /proc',
        ours: onRun.cpuPerRequestUs,
        baseline: (offFirst.cpuPerRequestUs + offAgain.cpuPerRequestUs) / 2,
        unit: 'µs',
        target: info,
      },
      {
        // The Events recorder loads @kubernetes/client-node, as the ConfigMap store and access
        // reviews do in the manifests' config: what that client costs the webhook's memory.
        section: 'admission',
        figure: 'denial path: peak RSS, Events on (loads @kubernetes/client-node) vs off',
        ours: peakRssMiB(onPid),
        baseline: peakRssMiB(offPid),
        unit: 'MiB',
        target: info,
      },
      {
        section: 'admission',
        figure: 'denial path, Events on: Event writes for all denials of one object',
        ours: writes,
        baseline: null,
        unit: 'writes',
        target: info,
      },
    ];
  } finally {
    await kube.close();
  }
}

/**
 * The allow path as the manifests deploy the webhook: the ConfigMap store, read through the
 * loopback API stand-in, and Events on. The webhook then runs @kubernetes/client-node and its
 * HTTPS client beside the server, which the file-store rows above never load. Against the bare
 * server again, right after, in the same run.
 */
async function manifestStoreRows(parts: SectionParts, bare: { url: string; pid: number }): Promise<ResultRow[]> {
  const { options, dir, flags, files, body, children } = parts;
  const kube = await startFakeKubeApiServer();
  try {
    const namespace = 'etcd-guard';
    const store = createStore({ kind: 'configmap', namespace }, { kubeconfigFile: kube.kubeconfigFile });
    await store.write(makeEvaluation({ target: TARGET, evaluatedAt: new Date().toISOString() }));
    const configFile = path.join(dir, 'guard-configmap.json');
    await writeFile(configFile, benchGuardConfig(dir, TARGET, { events: true, configMapNamespace: namespace }));
    const webhook = await spawnImageWebhook(flags, { ...files('webhook-configmap'), configFile }, 'cli', {
      KUBECONFIG: kube.kubeconfigFile,
    });
    children.push(webhook.child);
    await waitReady(webhook.url, webhook.child, 30_000);
    const smoke = await postOnce(webhook.url, body);
    if (smoke.status !== 200 || allowedOf(smoke.json) !== true)
      throw new Error('the ConfigMap-store webhook did not allow the fixture');
    const reads = () => kube.requests.filter((entry) => entry.resource === 'configmaps').length;
    const readsBefore = reads();
    options.log(
      `admission: the manifests' store (ConfigMap through the API stand-in), ${options.throughputSeconds}s at 32 connections`,
    );
    await load(webhook.url, body, 8, options.warmupSeconds);
    const ours = await load(webhook.url, body, 32, options.throughputSeconds);
    const baseline = await load(bare.url, body, 32, options.throughputSeconds);
    checkClean('ConfigMap-store webhook, 32 connections', ours);
    checkClean('bare, 32 connections', baseline);
    const pid = webhook.child.pid;
    if (pid === undefined) throw new Error('the ConfigMap-store webhook has no pid');
    return [
      {
        section: 'admission',
        figure: `the manifests' store (ConfigMap via the API stand-in, ${plural(reads() - readsBefore, 'read')} during the runs) and Events on: req/s, 32 conn`,
        ours: ours.requestsPerSecond,
        baseline: baseline.requestsPerSecond,
        unit: 'req/s',
        target: { kind: 'info' },
      },
      {
        section: 'admission',
        figure: "the manifests' store and Events on: peak RSS under load (baseline: the bare server's)",
        ours: peakRssMiB(pid),
        baseline: peakRssMiB(bare.pid),
        unit: 'MiB',
        target: { kind: 'info' },
      },
    ];
  } finally {
    await kube.close();
  }
}

export async function runAdmissionBench(options: AdmissionOptions): Promise<ResultRow[]> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-bench-admission-'));
  const children: ChildProcess[] = [];
  try {
    const certs = await generateTestCerts(dir);
    const body = await readFile(FIXTURE, 'utf8');
    const uid = (JSON.parse(body) as { request: { uid: string } }).request.uid;
    const override = process.env.BENCH_NODE_FLAGS;
    const flags =
      override === undefined
        ? podWebhookNodeFlags(
            await readFile(path.join(REPO_DIR, 'Dockerfile'), 'utf8'),
            await readFile(path.join(REPO_DIR, 'manifests/base/deployment.yaml'), 'utf8'),
          ).flags
        : override.split(' ').filter(Boolean);
    const flagsText = flags.length > 0 ? flags.join(' ') : 'no flags';

    // A fresh, passing evaluation in the store the webhook reads; maxAge covers the whole run.
    const storeDir = path.join(dir, 'store');
    await mkdir(storeDir);
    await new FileStore(storeDir).write(makeEvaluation({ target: TARGET, evaluatedAt: new Date().toISOString() }));
    const configFile = path.join(dir, 'guard.json');
    await writeFile(configFile, benchGuardConfig(storeDir, TARGET));
    await buildImageLayout();
    options.log(`admission: the image's node flags in the Deployment's pod: ${flagsText}`);

    // Every webhook logs one line per decision to stdout as in production; a file takes it.
    const files = (name: string) => ({
      configFile,
      certFile: certs.serverCertFile,
      keyFile: certs.serverKeyFile,
      logFile: path.join(dir, `${name}.log`),
    });
    // Headline: the image's command line and flags, against the bare server with the same flags.
    const webhook = await spawnImageWebhook(flags, files('webhook'));
    children.push(webhook.child);
    const bare = spawnCompiledBare(flags, certs.serverCertFile, certs.serverKeyFile, uid);
    children.push(bare);
    // Informational: what the flags buy (both sides compiled, no flags) and what a source checkout
    // costs (both sides through tsx, no flags: how `npx etcd-guard` runs before a build).
    const plain = await spawnImageWebhook([], files('webhook-plain'));
    children.push(plain.child);
    const moduleOnly = await spawnImageWebhook(flags, files('webhook-module'), 'webhook-module');
    children.push(moduleOnly.child);
    const plainBare = spawnCompiledBare([], certs.serverCertFile, certs.serverKeyFile, uid);
    children.push(plainBare);
    const tsxLog = openSync(path.join(dir, 'webhook-tsx.log'), 'a');
    const tsxWebhook = spawnTsx('webhook-child.ts', [configFile, certs.serverCertFile, certs.serverKeyFile], {
      stdio: ['ignore', tsxLog, 'inherit', 'ipc'],
    });
    closeSync(tsxLog);
    children.push(tsxWebhook);
    const tsxBare = spawnTsx('bare-child.ts', [certs.serverCertFile, certs.serverKeyFile, uid]);
    children.push(tsxBare);

    const [{ url: bareUrl }, { url: plainBareUrl }, { url: tsxUrl }, { url: tsxBareUrl }] = await Promise.all([
      firstMessage<{ url: string }>(bare, 30_000, 'bare child'),
      firstMessage<{ url: string }>(plainBare, 30_000, 'bare child without flags'),
      firstMessage<{ url: string }>(tsxWebhook, 30_000, 'tsx webhook child'),
      firstMessage<{ url: string }>(tsxBare, 30_000, 'tsx bare child'),
      waitReady(webhook.url, webhook.child, 30_000),
      waitReady(plain.url, plain.child, 30_000),
      waitReady(moduleOnly.url, moduleOnly.child, 30_000),
    ]);

    // The bench must measure the real allow path: a guarded scale-up judged against the cache.
    for (const url of [webhook.url, plain.url, moduleOnly.url, tsxUrl]) {
      const smoke = await postOnce(url, body);
      if (smoke.status !== 200 || allowedOf(smoke.json) !== true) {
        throw new Error(
          `webhook did not allow the fixture (status ${smoke.status}): ${JSON.stringify(smoke.json).slice(0, 300)}`,
        );
      }
    }
    for (const url of [bareUrl, plainBareUrl, tsxBareUrl]) {
      const bareSmoke = await postOnce(url, body);
      if (bareSmoke.status !== 200 || allowedOf(bareSmoke.json) !== true)
        throw new Error(`bare server answered ${bareSmoke.status}`);
    }

    options.log(`admission: webhook before any load: ${residentSplit(webhook.child.pid)}`);
    options.log(`admission: warming up both servers (${options.warmupSeconds}s each)`);
    await load(bareUrl, body, 8, options.warmupSeconds);
    await load(webhook.url, body, 8, options.warmupSeconds);

    options.log(`admission: 1 connection, ${options.latencySeconds}s each`);
    const bareSerial = await load(bareUrl, body, 1, options.latencySeconds);
    const oursSerial = await load(webhook.url, body, 1, options.latencySeconds);
    checkClean('bare, 1 connection', bareSerial);
    checkClean('webhook, 1 connection', oursSerial);

    options.log(`admission: 32 connections, ${options.throughputSeconds}s each`);
    const bareParallel = await load(bareUrl, body, 32, options.throughputSeconds);
    const oursParallel = await load(webhook.url, body, 32, options.throughputSeconds);
    checkClean('bare, 32 connections', bareParallel);
    checkClean('webhook, 32 connections', oursParallel);
    options.log(`admission: webhook after load: ${residentSplit(webhook.child.pid)}`);
    options.log(`admission: bare after load: ${residentSplit(bare.pid)}`);

    /** Warm-up and one 32-connection run; requests/s and the process's peak RSS after it. */
    const throughputOf = async (name: string, url: string, pid: number | undefined) => {
      await load(url, body, 8, options.warmupSeconds);
      const result = await load(url, body, 32, options.throughputSeconds);
      checkClean(`${name}, 32 connections`, result);
      if (pid === undefined) throw new Error(`${name}: no pid`);
      options.log(`admission: ${name} after load: ${residentSplit(pid)}`);
      return { requestsPerSecond: result.requestsPerSecond, peakRss: peakRssMiB(pid) };
    };
    options.log('admission: 32 connections, compiled without node flags, and through tsx');
    const plainBareRun = await throughputOf('bare, compiled, no flags', plainBareUrl, plainBare.pid);
    const plainRun = await throughputOf('webhook, compiled, no flags', plain.url, plain.child.pid);
    const moduleRun = await throughputOf(`webhook module without the CLI, ${flagsText}`, moduleOnly.url, moduleOnly.child.pid);
    const tsxBareRun = await throughputOf('bare through tsx', tsxBareUrl, tsxBare.pid);
    const tsxRun = await throughputOf('webhook through tsx', tsxUrl, tsxWebhook.pid);

    if (webhook.child.pid === undefined || bare.pid === undefined) throw new Error('a server child has no pid');
    const webhookPeakRss = peakRssMiB(webhook.child.pid);
    const barePeakRss = peakRssMiB(bare.pid);

    const parts: SectionParts = { options, dir, flags, files, body, children };
    const events = await eventsComparison(parts);
    const manifestStore = await manifestStoreRows(parts, { url: bareUrl, pid: bare.pid });

    const ms = (samples: number[], p: number) => percentile(samples, p);
    const info = { kind: 'info' } as const;
    return [
      ...events,
      ...manifestStore,
      {
        section: 'admission',
        figure: 'POST /validate p50, 1 conn',
        ours: ms(oursSerial.latenciesMs, 50),
        baseline: ms(bareSerial.latenciesMs, 50),
        unit: 'ms',
        target: info,
      },
      {
        section: 'admission',
        figure: 'POST /validate p99, 1 conn',
        ours: ms(oursSerial.latenciesMs, 99),
        baseline: ms(bareSerial.latenciesMs, 99),
        unit: 'ms',
        target: { kind: 'value-max', max: 2, unit: 'ms' },
      },
      {
        section: 'admission',
        figure: 'POST /validate req/s, 32 conn',
        ours: oursParallel.requestsPerSecond,
        baseline: bareParallel.requestsPerSecond,
        unit: 'req/s',
        target: { kind: 'ratio-min', min: 0.85 },
      },
      {
        section: 'admission',
        figure: 'POST /validate p99, 32 conn',
        ours: ms(oursParallel.latenciesMs, 99),
        baseline: ms(bareParallel.latenciesMs, 99),
        unit: 'ms',
        target: info,
      },
      {
        section: 'admission',
        figure: 'webhook peak RSS (VmHWM) under load',
        ours: webhookPeakRss,
        baseline: barePeakRss,
        unit: 'MiB',
        target: { kind: 'value-max', max: 120, unit: 'MiB' },
      },
      {
        section: 'admission',
        figure: `started without node flags (both compiled, plain node, V8's own heap sizing: etcd-guard outside the image): req/s, 32 conn`,
        ours: plainRun.requestsPerSecond,
        baseline: plainBareRun.requestsPerSecond,
        unit: 'req/s',
        target: info,
      },
      {
        section: 'admission',
        // Informational since issue 31: nothing re-executes node with flags any more; the image's
        // ENTRYPOINT carries them, and outside it they are the user's to give (docs/operations.md).
        figure: 'started without node flags: peak RSS under load',
        ours: plainRun.peakRss,
        baseline: plainBareRun.peakRss,
        unit: 'MiB',
        target: info,
      },
      {
        section: 'admission',
        figure: `webhook started without the CLI module (runWebhookCommand directly), ${flagsText}: req/s, 32 conn`,
        ours: moduleRun.requestsPerSecond,
        baseline: bareParallel.requestsPerSecond,
        unit: 'req/s',
        target: info,
      },
      {
        section: 'admission',
        figure: `webhook started without the CLI module (runWebhookCommand directly), ${flagsText}: peak RSS under load`,
        ours: moduleRun.peakRss,
        baseline: barePeakRss,
        unit: 'MiB',
        target: info,
      },
      {
        section: 'admission',
        figure: 'source checkout (both through tsx, no flags): req/s, 32 conn',
        ours: tsxRun.requestsPerSecond,
        baseline: tsxBareRun.requestsPerSecond,
        unit: 'req/s',
        target: info,
      },
      {
        section: 'admission',
        figure: 'source checkout (both through tsx, no flags): peak RSS under load',
        ours: tsxRun.peakRss,
        baseline: tsxBareRun.peakRss,
        unit: 'MiB',
        target: info,
      },
    ];
  } finally {
    await Promise.all(children.map((child) => killAndWait(child)));
    await rm(dir, { recursive: true, force: true });
  }
}
