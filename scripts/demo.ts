// `npm run demo`: the whole product on one machine in well under a minute. A real 3-member etcd
// (TLS client-cert auth), the scheduled evaluation writing to a file store, the HTTPS admission
// webhook fed by that store, and a real `kubectl scale` AdmissionReview sent three times:
// allowed while etcd is healthy, denied once a member is SIGKILLed, allowed again after it is back.
// Exit 0 only when that allowed → denied → allowed sequence happened; every process it started is
// killed on success, failure, Ctrl-C and SIGTERM.
//
// `npm run demo -- --pause` waits for Enter before each AdmissionReview, for presenting it live.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import readline from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify as toYaml } from 'yaml';
import { createStore } from '../functions/adapters/store-factory.js';
import type { GuardConfig } from '../functions/domain/config.js';
import { loadGuardConfigFile } from '../functions/entrypoints/config-file.js';
import type { Evaluation } from '../functions/domain/evaluation-document.js';
import type { EvaluationStore } from '../functions/domain/store.js';
import { evaluateTarget } from '../functions/usecases/evaluate-target.js';
import { formatEvaluationTable } from '../functions/entrypoints/format-table.js';
import { runScheduledEvaluation } from '../functions/usecases/scheduled-run.js';
import { createLogger } from '../functions/shared/logger.js';
import { startWebhookServer, type RunningWebhookServer } from '../webhook/server/main.js';
import { generateTestCerts } from '../test/harness/certs.js';
import { startEtcdCluster, type EtcdTestCluster } from '../test/harness/etcd-cluster.js';

const TARGET = 'local';
/** The name kubectl shows in a denial: the webhook entry in manifests/base. */
const WEBHOOK_NAME = 'etcd-guard.etcd-guard.io';
const FIXTURE = fileURLToPath(new URL('../test/fixtures/admission/kcp-scale-up-3-to-5.json', import.meta.url));
/** The whole demo normally takes 5–15 s; past this something hangs and the demo fails. */
const OVERALL_DEADLINE_MS = 120_000;
/** How long the webhook's store poll gets to pick up a new evaluation (it polls every 200 ms). */
const CACHE_PICKUP_DEADLINE_MS = 5_000;
/** After a restart the next scheduled rounds may still see the member catching up. */
const RECOVERY_DEADLINE_MS = 20_000;
const VALIDATE_DEADLINE_MS = 15_000;
const TOTAL_STEPS = 8;

const USAGE = 'usage: tsx scripts/demo.ts [--pause]   (--pause: wait for Enter before each AdmissionReview)';

const demoStarted = performance.now();
const print = (line = '') => process.stdout.write(`${line}\n`);
const indent = (text: string) =>
  text
    .split('\n')
    .map((line) => `      ${line}`)
    .join('\n');
const since = (started: number) => Math.round(performance.now() - started);

/** Set by SIGINT/SIGTERM: the demo stops at its next step while cleanup runs. */
let interruptedBy: NodeJS.Signals | null = null;

function step(number: number, title: string): () => void {
  if (interruptedBy) throw new Error(`interrupted by ${interruptedBy}`);
  print();
  print(`[${number}/${TOTAL_STEPS}] ${title}`);
  const started = performance.now();
  return () => print(`      (step ${number} took ${since(started)} ms)`);
}

/** --pause: wait for a line on stdin (EOF continues at once, so a closed stdin never blocks). */
async function pauseBefore(what: string, interactive: boolean): Promise<void> {
  if (!interactive) return;
  print();
  print(`      -- press Enter for ${what} --`);
  await new Promise<void>((resolve) => {
    const lines = readline.createInterface({ input: process.stdin });
    const done = () => {
      lines.close();
      resolve();
    };
    lines.once('line', done);
    lines.once('close', done);
  });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function waitFor<T>(
  what: string,
  deadlineMs: number,
  probe: () => Promise<T | null> | T | null,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() >= deadline) throw new Error(`gave up after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

// ---- everything the demo starts, so cleanup can find it from anywhere (including a signal) ----
interface Started {
  workDir?: string;
  cluster?: EtcdTestCluster;
  server?: RunningWebhookServer;
  agent?: https.Agent;
}
const started: Started = {};
let cleaning: Promise<void> | null = null;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    const cleanupStarted = performance.now();
    started.agent?.destroy();
    const errors: string[] = [];
    if (started.server) {
      await started.server.close().catch((error: unknown) => errors.push(`webhook: ${messageOf(error)}`));
      print(`      webhook stopped`);
    }
    if (started.cluster) {
      // Every pid this run ever gave a member (a restarted member has a new one) is printed on its
      // own line earlier; destroy() SIGKILLs the running ones and waits for their exit events.
      const running = started.cluster.members
        .filter((member) => member.pid !== undefined)
        .map((member) => `${member.name} pid ${member.pid}`);
      await started.cluster.destroy().catch((error: unknown) => errors.push(`etcd: ${messageOf(error)}`));
      print(`      etcd members killed (SIGKILL) and exited: ${running.join(', ') || 'none running'}`);
    }
    if (started.workDir) await rm(started.workDir, { recursive: true, force: true }).catch(() => undefined);
    print(`      cleaned up in ${since(cleanupStarted)} ms${errors.length > 0 ? ` (problems: ${errors.join('; ')})` : ''}`);
  })();
  return cleaning;
}

function onSignal(signal: NodeJS.Signals): void {
  interruptedBy = signal;
  print();
  print(`demo interrupted by ${signal}: cleaning up`);
  // Cleanup is bounded; the harness also SIGKILLs any etcd child still alive on process exit.
  const forced = setTimeout(() => process.exit(signal === 'SIGINT' ? 130 : 143), 15_000);
  void cleanup().finally(() => {
    clearTimeout(forced);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  });
}

// ---- the AdmissionReview round trip ----
interface AdmissionAnswer {
  uid: string;
  allowed: boolean;
  warnings: string[];
  code: number | undefined;
  message: string;
}

function readFixture(): Record<string, unknown> {
  const parsed: unknown = JSON.parse(readFileSync(FIXTURE, 'utf8'));
  if (parsed === null || typeof parsed !== 'object' || !('request' in parsed)) {
    throw new Error(`fixture ${FIXTURE} is not an AdmissionReview`);
  }
  return parsed as Record<string, unknown>;
}

/** The fixture with a fresh uid, as the API server sends one per request. */
function scaleReview(): { uid: string; body: string } {
  const review = readFixture();
  const uid = randomUUID();
  const request = review.request as Record<string, unknown>;
  return { uid, body: JSON.stringify({ ...review, request: { ...request, uid } }) };
}

function postReview(server: RunningWebhookServer, ca: Buffer, agent: https.Agent, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // ?timeout= is what the API server appends: the webhook's budget for an inline refresh.
    const req = https.request(
      `${server.url}/validate?timeout=10s`,
      { method: 'POST', agent, ca, headers: { 'content-type': 'application/json' }, timeout: VALIDATE_DEADLINE_MS },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode === 200) resolve(text);
          else reject(new Error(`POST /validate answered HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`POST /validate gave no answer within ${VALIDATE_DEADLINE_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

async function sendScale(server: RunningWebhookServer, ca: Buffer, agent: https.Agent): Promise<AdmissionAnswer> {
  const { uid, body } = scaleReview();
  print(`      $ kubectl scale kubeadmcontrolplane prod-control-plane --replicas=5   # 3 → 5 via /scale, uid ${uid}`);
  const sent = performance.now();
  const text = await postReview(server, ca, agent, body);
  const parsed: unknown = JSON.parse(text);
  const response = (parsed as { response?: unknown }).response;
  if (response === null || typeof response !== 'object')
    throw new Error(`the webhook answered without a response: ${text.slice(0, 300)}`);
  const {
    uid: echoed,
    allowed,
    warnings,
    status,
  } = response as { uid?: unknown; allowed?: unknown; warnings?: unknown; status?: { code?: unknown; message?: unknown } };
  if (echoed !== uid) throw new Error(`the webhook echoed uid ${String(echoed)}, expected ${uid}`);
  if (typeof allowed !== 'boolean') throw new Error(`the webhook answered allowed=${String(allowed)}`);
  const answer: AdmissionAnswer = {
    uid,
    allowed,
    warnings: Array.isArray(warnings) ? warnings.map(String) : [],
    code: typeof status?.code === 'number' ? status.code : undefined,
    message: typeof status?.message === 'string' ? status.message : '',
  };
  const took = since(sent);
  if (answer.allowed) {
    print(`      ALLOWED (answered in ${took} ms)`);
    // kubectl prints admission warnings this way, on stderr, before the result.
    for (const warning of answer.warnings) print(`      Warning: ${warning}`);
    if (answer.warnings.length === 0) print(`      (no admission warnings)`);
    print(`      kubeadmcontrolplane.controlplane.cluster.x-k8s.io/prod-control-plane scaled`);
  } else {
    print(`      DENIED (answered in ${took} ms, HTTP status code ${answer.code ?? 'none'})`);
    print(`      Error from server (Forbidden): admission webhook "${WEBHOOK_NAME}" denied the request: ${answer.message}`);
  }
  return answer;
}

// ---- the scheduled evaluation, as the CronJob would run it ----
async function scheduledRound(config: GuardConfig, store: EvaluationStore, server?: RunningWebhookServer): Promise<Evaluation> {
  const roundStarted = performance.now();
  const [result] = await runScheduledEvaluation({
    config,
    store,
    evaluate: (target) => evaluateTarget(target),
    logger: { info: () => undefined, error: () => undefined },
  });
  if (!result) throw new Error('the scheduled evaluation ran no target');
  if (!result.ok) throw new Error(`the scheduled evaluation of ${result.target} failed at ${result.stage}: ${result.error}`);
  const stored = await store.read(TARGET);
  if (stored === null) throw new Error(`the scheduled evaluation stored nothing for ${TARGET} in ${store.describe()}`);
  print(`      scheduled evaluation: ${stored.verdict} in ${result.durationMs} ms, written to ${store.describe()}`);
  print(indent(formatEvaluationTable(stored)));
  if (server) {
    // The webhook only knows what its store poll has read: wait until it holds this evaluation.
    await waitFor(`the webhook to read the evaluation of ${stored.evaluatedAt}`, CACHE_PICKUP_DEADLINE_MS, () =>
      server.cache.evaluatedAt(TARGET) === stored.evaluatedAt ? true : null,
    );
    print(`      webhook cache holds it after ${since(roundStarted)} ms`);
  }
  return stored;
}

function printMembers(cluster: EtcdTestCluster): void {
  // One line per running member; scripts/demo.test.ts reads pid and client URL from these lines.
  for (const member of cluster.members) {
    if (member.pid !== undefined) print(`      etcd member ${member.name} pid ${member.pid} client ${member.clientUrl}`);
  }
}

async function runDemo(interactive: boolean): Promise<boolean> {
  print('etcd-guard demo: a real 3-member etcd, the scheduled evaluation, the admission webhook');

  let done = step(1, 'starting a 3-member etcd cluster on loopback (TLS, client-cert auth) and making the webhook serving cert');
  started.workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-demo-'));
  const workDir = started.workDir;
  const certsPromise = generateTestCerts(workDir);
  // Keep the cert promise from becoming an unhandled rejection while etcd starts.
  certsPromise.catch(() => undefined);
  const cluster = await startEtcdCluster({ size: 3, name: 'demo' });
  started.cluster = cluster;
  const certs = await certsPromise;
  printMembers(cluster);
  print(`      all members answer a linearizable read`);
  done();

  done = step(2, 'writing the guard config (file store, target "local", maxAgeSeconds 60)');
  const configFile = path.join(workDir, 'etcd-guard.yaml');
  await writeFile(
    configFile,
    toYaml({
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 60,
      inlineRefresh: true,
      // No Kubernetes API here to write Events to: trying only printed a warning per denial.
      events: false,
      targets: [
        {
          name: TARGET,
          endpoints: cluster.endpoints,
          tls: { caFile: cluster.tls.caFile, certFile: cluster.tls.certFile, keyFile: cluster.tls.keyFile },
          timeout: '1s',
          match: {},
        },
      ],
    }),
  );
  const config = loadGuardConfigFile(configFile);
  const store = createStore(config.store);
  print(indent(`${configFile}:\n${(await readFile(configFile, 'utf8')).trimEnd()}`));
  done();

  done = step(3, 'scheduled evaluation into the file store');
  const healthy = await scheduledRound(config, store);
  done();

  done = step(4, 'starting the admission webhook (HTTPS, generated cert, random loopback port)');
  const logger = createLogger({ env: { LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' } });
  const server = await startWebhookServer({
    config,
    host: '127.0.0.1',
    port: 0,
    tls: { certFile: certs.serverCertFile, keyFile: certs.serverKeyFile },
    token: null,
    logger,
    store,
    pollIntervalMs: 200,
  });
  started.server = server;
  started.agent = new https.Agent({ keepAlive: true });
  const agent = started.agent;
  const ca = await readFile(certs.caFile);
  await server.cache.whenReady();
  print(
    `      webhook listening at ${server.url}/validate; cache holds ${TARGET} evaluated ${server.cache.evaluatedAt(TARGET) ?? 'never'}`,
  );
  done();

  await pauseBefore('the scale up on healthy etcd', interactive);
  done = step(5, `scale up while etcd is ${healthy.verdict}`);
  const first = await sendScale(server, ca, agent);
  done();

  const leader = await cluster.leaderIndex();
  const victimIndex = leader === 1 ? 2 : 1;
  const victim = cluster.members[victimIndex];
  if (!victim) throw new Error(`no etcd member at index ${victimIndex}`);
  await pauseBefore(`killing ${victim.name}`, interactive);
  done = step(
    6,
    `SIGKILL etcd member ${victim.name} (pid ${victim.pid ?? '?'}), re-run the scheduled evaluation, scale up again`,
  );
  await cluster.kill(victimIndex);
  print(`      ${victim.name} exited`);
  await scheduledRound(config, store, server);
  const second = await sendScale(server, ca, agent);
  done();

  await pauseBefore(`restarting ${victim.name}`, interactive);
  done = step(7, `restart ${victim.name}, wait until healthy, re-run the scheduled evaluation, scale up again`);
  await cluster.restart(victimIndex);
  printMembers(cluster);
  await cluster.waitHealthy();
  print(`      all members answer a linearizable read again`);
  // A real scheduler would simply try again on its next round; the demo does the same, bounded.
  const recoveryDeadline = Date.now() + RECOVERY_DEADLINE_MS;
  let recovered = await scheduledRound(config, store, server);
  while (!recovered.passed && Date.now() < recoveryDeadline) {
    print(`      not passed yet (${recovered.reasons[0] ?? 'no reason'}); next scheduled round`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    recovered = await scheduledRound(config, store, server);
  }
  const third = await sendScale(server, ca, agent);
  done();

  done = step(8, 'cleaning up every process the demo started');
  await cleanup();
  done();

  const deniedNamesVictim = second.message.includes(victim.name) || second.message.includes(victim.clientUrl);
  const outcomes = [
    { what: 'healthy etcd: scale up allowed', ok: first.allowed },
    { what: `member ${victim.name} killed: scale up denied with 403`, ok: !second.allowed && second.code === 403 },
    { what: `the denial names ${victim.name}`, ok: deniedNamesVictim },
    { what: `member ${victim.name} back: scale up allowed again`, ok: third.allowed },
  ];
  print();
  for (const outcome of outcomes) print(`  ${outcome.ok ? 'ok  ' : 'FAIL'} ${outcome.what}`);
  return outcomes.every((outcome) => outcome.ok);
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const unknown = args.filter((arg) => arg !== '--pause');
  if (unknown.length > 0) {
    process.stderr.write(`demo: unknown argument ${JSON.stringify(unknown[0])}\n${USAGE}\n`);
    return 2;
  }
  const interactive = args.includes('--pause');
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // A presenter may take as long as they like; unattended, a hang fails the demo.
  const watchdog = interactive
    ? undefined
    : setTimeout(() => {
        print();
        print(`demo FAILED: still running after ${OVERALL_DEADLINE_MS} ms; cleaning up`);
        void cleanup().finally(() => process.exit(1));
      }, OVERALL_DEADLINE_MS);
  let passed = false;
  try {
    passed = await runDemo(interactive);
  } catch (error) {
    print();
    print(`demo FAILED: ${messageOf(error)}`);
  } finally {
    await cleanup();
    clearTimeout(watchdog);
  }
  const total = (since(demoStarted) / 1000).toFixed(1);
  print(passed ? `demo PASSED: allowed → denied → allowed as expected (${total} s)` : `demo FAILED after ${total} s`);
  return passed ? 0 : 1;
}

// Exit explicitly: an open handle left by a library must not keep the demo (or CI) waiting.
main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`demo crashed: ${messageOf(error)}\n`);
    void cleanup().finally(() => process.exit(1));
  },
);
