// Admission bench: POST /validate over HTTPS keep-alive against the real webhook process (fresh
// cached evaluation in a file store) next to a bare express HTTPS server answering a fixed
// AdmissionReview, same body, same load generator (autocannon, in this process).
import autocannon from 'autocannon';
import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { pathToFileURL } from 'node:url';
import os from 'node:os';
import path from 'node:path';
import { FileStore } from '../functions/adapters/file-store.js';
import { generateTestCerts } from '../test/harness/certs.js';
import { makeEvaluation } from '../test/harness/evaluation-fixture.js';
import { firstMessage, killAndWait, peakRssMiB, percentile, REPO_DIR, spawnTsx, type ResultRow } from './lib.js';

const FIXTURE = path.join(REPO_DIR, 'test/fixtures/admission/kcp-scale-up-3-to-5.json');
const TARGET = 'bench';
export const TUNED_NODE_FLAG = process.env.BENCH_TUNED_NODE_FLAG ?? '--max-semi-space-size=4';

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
      {
        url: `${url}/validate?timeout=10s`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        connections,
        pipelining: 1,
        duration: seconds,
        timeout: 10,
      },
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

/** Where the bench compiles functions/ and webhook/ (inside node_modules so packages resolve). */
const COMPILED_DIR = path.join(REPO_DIR, 'node_modules/.cache/etcd-guard-bench-dist');

/**
 * `tsc -p tsconfig.build.json` into COMPILED_DIR: the webhook as plain JavaScript, no tsx. tsc
 * still emits when some file does not type-check (e.g. another change in progress); the bench
 * goes on with the output then and says so.
 */
function compileWebhook(log: (line: string) => void): Promise<void> {
  const main = path.join(COMPILED_DIR, 'webhook/main.js');
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [path.join(REPO_DIR, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', COMPILED_DIR],
      { cwd: REPO_DIR, timeout: 120_000 },
      (error, stdout) => {
        if (!error) resolve();
        else if (existsSync(main)) {
          log(`admission: tsc reported errors but emitted; measuring its output anyway: ${stdout.split('\n')[0] ?? ''}`);
          resolve();
        } else reject(new Error(`tsc -p tsconfig.build.json failed: ${error.message} ${stdout.slice(0, 500)}`));
      },
    );
  });
}

/** The compiled webhook under plain node, reporting its URL over IPC like webhook-child.ts. */
function spawnCompiledWebhook(configFile: string, certFile: string, keyFile: string, logFd: number, nodeArgs: string[]) {
  const mainUrl = pathToFileURL(path.join(COMPILED_DIR, 'webhook/main.js')).href;
  const script = `
    const { runWebhookCommand } = await import(${JSON.stringify(mainUrl)});
    const [configFile, tlsCertFile, tlsKeyFile] = process.argv.slice(1);
    process.exitCode = await runWebhookCommand(
      { configFile, listen: '127.0.0.1:0', tlsCertFile, tlsKeyFile, insecureHttp: false },
      process.env,
      { onListening: (server) => { void server.cache.whenReady().then(() => process.send({ url: server.url })); } },
    );`;
  return spawn(process.execPath, [...nodeArgs, '--input-type=module', '-e', script, configFile, certFile, keyFile], {
    cwd: REPO_DIR,
    stdio: ['ignore', logFd, 'inherit', 'ipc'],
  });
}

export async function runAdmissionBench(options: AdmissionOptions): Promise<ResultRow[]> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-bench-admission-'));
  const children: Array<ReturnType<typeof spawnTsx>> = [];
  try {
    const certs = await generateTestCerts(dir);
    const body = await readFile(FIXTURE, 'utf8');
    const uid = (JSON.parse(body) as { request: { uid: string } }).request.uid;

    // A fresh, passing evaluation in the store the webhook reads; maxAge covers the whole run.
    const storeDir = path.join(dir, 'store');
    await mkdir(storeDir);
    await new FileStore(storeDir).write(makeEvaluation({ target: TARGET, evaluatedAt: new Date().toISOString() }));
    const configFile = path.join(dir, 'guard.json');
    await writeFile(
      configFile,
      JSON.stringify({
        store: { kind: 'file', dir: storeDir },
        maxAgeSeconds: 600,
        inlineRefresh: false,
        targets: [{ name: TARGET, endpoints: ['https://127.0.0.1:2379'], timeout: '2s' }],
      }),
    );

    // The webhook logs one line per decision to stdout as in production; a file takes it.
    const logFile = openSync(path.join(dir, 'webhook.log'), 'a');
    const webhook = spawnTsx('webhook-child.ts', [configFile, certs.serverCertFile, certs.serverKeyFile], {
      stdio: ['ignore', logFile, 'inherit', 'ipc'],
      nodeArgs: (process.env.BENCH_WEBHOOK_NODE_ARGS ?? '').split(' ').filter(Boolean),
    });
    closeSync(logFile);
    children.push(webhook);
    const bare = spawnTsx('bare-child.ts', [certs.serverCertFile, certs.serverKeyFile, uid]);
    children.push(bare);
    // The same webhook with 4 MiB semi-spaces (V8 default: 16 MiB semi-spaces, grown
    // under load): the knob that decides peak RSS under load, settable only at process start.
    const tunedLog = openSync(path.join(dir, 'webhook-tuned.log'), 'a');
    const tuned = spawnTsx('webhook-child.ts', [configFile, certs.serverCertFile, certs.serverKeyFile], {
      stdio: ['ignore', tunedLog, 'inherit', 'ipc'],
      nodeArgs: [TUNED_NODE_FLAG],
    });
    closeSync(tunedLog);
    children.push(tuned);
    await compileWebhook(options.log);
    const compiledLog = openSync(path.join(dir, 'webhook-compiled.log'), 'a');
    const compiled = spawnCompiledWebhook(configFile, certs.serverCertFile, certs.serverKeyFile, compiledLog, []);
    const compiledTuned = spawnCompiledWebhook(configFile, certs.serverCertFile, certs.serverKeyFile, compiledLog, [
      TUNED_NODE_FLAG,
    ]);
    closeSync(compiledLog);
    children.push(compiled, compiledTuned);
    const [{ url: webhookUrl }, { url: bareUrl }, { url: tunedUrl }, { url: compiledUrl }, { url: compiledTunedUrl }] =
      await Promise.all([
        firstMessage<{ url: string }>(webhook, 30_000, 'webhook child'),
        firstMessage<{ url: string }>(bare, 30_000, 'bare child'),
        firstMessage<{ url: string }>(tuned, 30_000, 'tuned webhook child'),
        firstMessage<{ url: string }>(compiled, 30_000, 'compiled webhook child'),
        firstMessage<{ url: string }>(compiledTuned, 30_000, 'compiled tuned webhook child'),
      ]);

    // The bench must measure the real allow path: a guarded scale-up judged against the cache.
    const smoke = await postOnce(webhookUrl, body);
    if (smoke.status !== 200 || allowedOf(smoke.json) !== true) {
      throw new Error(`webhook did not allow the fixture (status ${smoke.status}): ${JSON.stringify(smoke.json).slice(0, 300)}`);
    }
    const bareSmoke = await postOnce(bareUrl, body);
    if (bareSmoke.status !== 200 || allowedOf(bareSmoke.json) !== true)
      throw new Error(`bare server answered ${bareSmoke.status}`);

    if (webhook.pid !== undefined)
      options.log(`admission: webhook peak RSS after start, before any load: ${peakRssMiB(webhook.pid).toFixed(0)} MiB`);
    options.log(`admission: warming up both servers (${options.warmupSeconds}s each)`);
    await load(bareUrl, body, 8, options.warmupSeconds);
    await load(webhookUrl, body, 8, options.warmupSeconds);

    options.log(`admission: 1 connection, ${options.latencySeconds}s each`);
    const bareSerial = await load(bareUrl, body, 1, options.latencySeconds);
    const oursSerial = await load(webhookUrl, body, 1, options.latencySeconds);
    checkClean('bare, 1 connection', bareSerial);
    checkClean('webhook, 1 connection', oursSerial);

    options.log(`admission: 32 connections, ${options.throughputSeconds}s each`);
    const bareParallel = await load(bareUrl, body, 32, options.throughputSeconds);
    const oursParallel = await load(webhookUrl, body, 32, options.throughputSeconds);
    checkClean('bare, 32 connections', bareParallel);
    checkClean('webhook, 32 connections', oursParallel);

    options.log(`admission: 32 connections against the webhook started with ${TUNED_NODE_FLAG}`);
    await load(tunedUrl, body, 8, options.warmupSeconds);
    const tunedParallel = await load(tunedUrl, body, 32, options.throughputSeconds);
    checkClean(`webhook ${TUNED_NODE_FLAG}, 32 connections`, tunedParallel);

    options.log('admission: 32 connections against the webhook compiled to JavaScript under plain node');
    await load(compiledUrl, body, 8, options.warmupSeconds);
    const compiledParallel = await load(compiledUrl, body, 32, options.throughputSeconds);
    checkClean('compiled webhook, 32 connections', compiledParallel);
    options.log(`admission: 32 connections against the compiled webhook with ${TUNED_NODE_FLAG}`);
    await load(compiledTunedUrl, body, 8, options.warmupSeconds);
    const compiledTunedParallel = await load(compiledTunedUrl, body, 32, options.throughputSeconds);
    checkClean(`compiled webhook ${TUNED_NODE_FLAG}, 32 connections`, compiledTunedParallel);

    if (
      webhook.pid === undefined ||
      bare.pid === undefined ||
      tuned.pid === undefined ||
      compiled.pid === undefined ||
      compiledTuned.pid === undefined
    ) {
      throw new Error('a server child has no pid');
    }
    const tunedPeakRss = peakRssMiB(tuned.pid);
    const compiledPeakRss = peakRssMiB(compiled.pid);
    const compiledTunedPeakRss = peakRssMiB(compiledTuned.pid);
    const webhookPeakRss = peakRssMiB(webhook.pid);
    const barePeakRss = peakRssMiB(bare.pid);
    for (const [name, child] of [
      ['webhook', webhook],
      ['bare', bare],
    ] as const) {
      const reply = firstMessage<{ memory: NodeJS.MemoryUsage }>(child, 5_000, `${name} memory`);
      child.send('memory');
      const { memory } = await reply;
      const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
      options.log(
        `admission: ${name} after load: rss ${mib(memory.rss)}, heap ${mib(memory.heapUsed)}/${mib(memory.heapTotal)}, external ${mib(memory.external)}, peak ${(name === 'webhook' ? webhookPeakRss : barePeakRss).toFixed(0)} MiB`,
      );
    }

    const ms = (samples: number[], p: number) => percentile(samples, p);
    return [
      {
        section: 'admission',
        figure: 'POST /validate p50, 1 conn',
        ours: ms(oursSerial.latenciesMs, 50),
        baseline: ms(bareSerial.latenciesMs, 50),
        unit: 'ms',
        target: { kind: 'info' },
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
        target: { kind: 'ratio-min', min: 0.7 },
      },
      {
        section: 'admission',
        figure: 'POST /validate p99, 32 conn',
        ours: ms(oursParallel.latenciesMs, 99),
        baseline: ms(bareParallel.latenciesMs, 99),
        unit: 'ms',
        target: { kind: 'info' },
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
        figure: `webhook with ${TUNED_NODE_FLAG}: req/s, 32 conn`,
        ours: tunedParallel.requestsPerSecond,
        baseline: bareParallel.requestsPerSecond,
        unit: 'req/s',
        target: { kind: 'info' },
      },
      {
        section: 'admission',
        figure: `webhook with ${TUNED_NODE_FLAG}: peak RSS under load`,
        ours: tunedPeakRss,
        baseline: barePeakRss,
        unit: 'MiB',
        target: { kind: 'info' },
      },
      {
        section: 'admission',
        figure: 'webhook compiled to JS, plain node (no tsx): req/s, 32 conn',
        ours: compiledParallel.requestsPerSecond,
        baseline: bareParallel.requestsPerSecond,
        unit: 'req/s',
        target: { kind: 'info' },
      },
      {
        section: 'admission',
        figure: 'webhook compiled to JS, plain node (no tsx): peak RSS under load',
        ours: compiledPeakRss,
        baseline: barePeakRss,
        unit: 'MiB',
        target: { kind: 'info' },
      },
      {
        section: 'admission',
        figure: `webhook compiled to JS, plain node ${TUNED_NODE_FLAG}: req/s, 32 conn`,
        ours: compiledTunedParallel.requestsPerSecond,
        baseline: bareParallel.requestsPerSecond,
        unit: 'req/s',
        target: { kind: 'info' },
      },
      {
        section: 'admission',
        figure: `webhook compiled to JS, plain node ${TUNED_NODE_FLAG}: peak RSS under load`,
        ours: compiledTunedPeakRss,
        baseline: barePeakRss,
        unit: 'MiB',
        target: { kind: 'info' },
      },
    ];
  } finally {
    await Promise.all(children.map((child) => killAndWait(child)));
    await rm(dir, { recursive: true, force: true });
  }
}
