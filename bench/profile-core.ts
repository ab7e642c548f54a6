// Core profile: CPU and allocation per request of the webhook's pure core (and metrics) on a
// cached allow of test/fixtures/admission/kcp-scale-up-3-to-5.json against a fresh Healthy
// evaluation, in process, with no HTTP. BEFORE_DIR=<checkout> runs that checkout's core in a
// second child, rounds interleaved, and prints ratios; PROF_DIR=<dir> adds --cpu-prof to each child.
// A floor row (the body's JSON.parse and the answer's JSON.stringify alone) is subtracted to show
// what the core and the app's objects cost above it.
//
// Each request runs what webhook/server/app.ts runs for one /validate (JSON.parse of the body
// text, parse, classify, chooseEvaluation, the age, decide, enforce, recordDecision, the envelope
// and JSON.stringify of it), calling the core as the app does; the app's own logging is left out.
//
// Allocation: v8.GCProfiler reports the heap before and after every GC, so the bytes allocated in
// a round are what the heap grew by between GCs (used_heap_size before each GC minus after the one
// before it, plus the growth after the last). Young-generation space is fixed
// (--min/--max-semi-space-size) so both sides collect alike; GC ms per request is V8's own cost.
import { readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createHash } from 'node:crypto';
import v8 from 'node:v8';
import type { ChildProcess } from 'node:child_process';
import { makeEvaluation } from '../test/harness/evaluation-fixture.js';
import { REPO_DIR, benchGuardConfig, firstMessage, median, spawnTsx } from './lib.js';

type Core = typeof import('../webhook/domain/review.js') &
  typeof import('../webhook/domain/classify.js') &
  typeof import('../webhook/domain/freshness.js') &
  typeof import('../webhook/domain/decide.js') &
  typeof import('../webhook/domain/enforcement.js') &
  typeof import('../functions/domain/evaluation-document.js') &
  typeof import('../functions/domain/targets.js') &
  typeof import('../functions/domain/config.js') &
  typeof import('../webhook/server/metrics.js');

const FIXTURE = path.join(REPO_DIR, 'test/fixtures/admission/kcp-scale-up-3-to-5.json');
const SEMI_SPACE_MB = '2';
const FLOOR = 'floor (JSON.parse + JSON.stringify)';

interface RoundResult {
  requests: number;
  cpuUs: number;
  allocatedBytes: number;
  gcMs: number;
  scavenges: number;
  /** The answer and the decision counter, hashed: every side must give the same. */
  answer: string;
}

/**
 * The core modules of the checkout at `root`, bundled as scripts/build.mjs bundles the webhook
 * (esbuild, ESM, node22, no keepNames: tsx's __name wrappers would be measured otherwise).
 */
async function bundledCore(root: string): Promise<Core> {
  const modules = [
    'webhook/domain/review.ts',
    'webhook/domain/classify.ts',
    'webhook/domain/freshness.ts',
    'webhook/domain/decide.ts',
    'webhook/domain/enforcement.ts',
    'functions/domain/evaluation-document.ts',
    'functions/domain/targets.ts',
    'functions/domain/config.ts',
    'webhook/server/metrics.ts',
  ];
  const outfile = path.join(os.tmpdir(), `profile-core-${process.pid}.mjs`);
  await build({
    stdin: { contents: modules.map((file) => `export * from './${file}';`).join('\n'), resolveDir: root, loader: 'ts' },
    outfile,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
    logLevel: 'warning',
  });
  try {
    return (await import(pathToFileURL(outfile).href)) as Core;
  } finally {
    await rm(outfile, { force: true });
  }
}

/** The core of the checkout at `root`, and one request through it as the app makes it. */
async function loadCore(root: string): Promise<{ one: (text: string) => string; decisions: () => Promise<string> }> {
  const core = await bundledCore(root);
  const config = core.parseGuardConfig(JSON.parse(benchGuardConfig('/nonexistent', 'bench')), 'bench');
  // A fixed clock, 5 s after the evaluation: every side and round gives the same answer bytes
  // (its evaluation-age-seconds), and the app's Date per call is still made.
  const nowMs = Date.parse('2026-12-01T00:00:05.000Z');
  const evaluation = makeEvaluation({ target: 'bench', evaluatedAt: '2026-12-01T00:00:00.000Z' });
  const held = new Map([['bench', evaluation]]);
  const cache = { get: (name: string) => held.get(name) ?? null };
  const staticOnly = config.targets.map(core.staticTarget);
  const metrics = core.createWebhookMetrics();
  const now = () => new Date(nowMs);
  const budgetMs = 10_000;

  const one = (text: string): string => {
    const startedAt = performance.now();
    const parsed = core.parseAdmissionReview(JSON.parse(text) as unknown);
    if (!parsed.ok) throw new Error(parsed.message);
    const request = parsed.review.request;
    const classification = core.classifyRequest(request, config, undefined, staticOnly, undefined);
    if (classification.kind !== 'needs-evaluation') throw new Error(`classified ${classification.kind}`);
    const target = classification.target;
    const clockMs = now().getTime();
    const choice = core.chooseEvaluation({
      cached: cache.get(target.name),
      arrivedAtMs: clockMs - (performance.now() - startedAt),
      nowMs: clockMs,
      decisionMaxAgeMs: config.decisionMaxAgeMs,
      decision: 'cached',
      remainingMs: budgetMs - (performance.now() - startedAt),
      evaluationTimeoutMs: target.timeout,
    });
    if (choice.kind !== 'use' || choice.evaluation === null) throw new Error('no cached evaluation');
    const ageMs = core.evaluationAgeMs(choice.evaluation, now());
    const decision = core.decide({
      request,
      config,
      classification,
      evaluation: choice.evaluation,
      now: now(),
      evidence: choice.evidence,
    });
    const enforced = core.enforce({
      decision,
      request,
      config,
      target: classification.target,
      object: classification.object,
      evaluation: { verdict: choice.evaluation.verdict, ageSeconds: ageMs / 1000 },
    });
    const response = { ...enforced.response, uid: request.uid };
    metrics.recordDecision(
      { target: enforced.target, decision: enforced.decision, mode: enforced.mode, reason: enforced.reason },
      (performance.now() - startedAt) / 1000,
    );
    if (enforced.decision !== 'allowed') throw new Error(`decided ${enforced.decision}`);
    return JSON.stringify(core.buildAdmissionReviewResponse(response));
  };
  const decisions = async () =>
    (await metrics.render())
      .split('\n')
      .filter((line) => line.startsWith('etcd_guard_admission_decisions_total'))
      .map((line) => line.replace(/ \d+$/, ''))
      .join('\n');
  return { one, decisions };
}

/**
 * A sampling heap profile that keeps what GC collected (--heap-prof drops it, and a request's
 * garbage is exactly what is looked for here): every allocation site, by bytes, over the run.
 */
async function allocationSampler(): Promise<{ stop: (file: string) => Promise<void> }> {
  const session = new inspector.Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return {
    async stop(file) {
      const { profile } = await session.post('HeapProfiler.stopSampling');
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

async function child(): Promise<void> {
  const root = process.env.PROFILE_CORE_ROOT ?? REPO_DIR;
  const text = readFileSync(FIXTURE, 'utf8');
  const { one, decisions } = await loadCore(root);
  // The floor no core change can lower: the body's JSON.parse and the answer's JSON.stringify.
  const answerObject: unknown = JSON.parse(one(text));
  const floor = (body: string): string => {
    JSON.parse(body);
    return JSON.stringify(answerObject);
  };
  const round = async (requests: number, work: (body: string) => string): Promise<RoundResult> => {
    const profiler = new v8.GCProfiler();
    const startUsed = v8.getHeapStatistics().used_heap_size;
    profiler.start();
    const cpu = process.cpuUsage();
    let answer = '';
    for (let index = 0; index < requests; index++) answer = work(text);
    const used = process.cpuUsage(cpu);
    const endUsed = v8.getHeapStatistics().used_heap_size;
    const profile = profiler.stop();
    let allocated = 0;
    let previous = startUsed;
    let gcMs = 0;
    let scavenges = 0;
    for (const gc of profile?.statistics ?? []) {
      allocated += gc.beforeGC.heapStatistics.usedHeapSize - previous;
      previous = gc.afterGC.heapStatistics.usedHeapSize;
      gcMs += gc.cost / 1000;
      if (gc.gcType === 'Scavenge' || gc.gcType === 'MinorMarkSweep') scavenges += 1;
    }
    allocated += endUsed - previous;
    const digest = createHash('sha256')
      .update(answer)
      .update(await decisions())
      .digest('hex')
      .slice(0, 12);
    return {
      requests,
      cpuUs: used.user + used.system,
      allocatedBytes: allocated,
      gcMs,
      scavenges,
      answer: digest,
    };
  };
  const heap = process.env.PROF_DIR && process.env.HEAP_PROF === '1' ? await allocationSampler() : null;
  process.on('message', (message: { requests?: number; floor?: true; exit?: true }) => {
    if (message.exit) {
      void (
        heap?.stop(path.join(process.env.PROF_DIR!, `${process.env.PROFILE_CORE_NAME}.heapprofile`)) ?? Promise.resolve()
      ).then(() => {
        process.disconnect();
        process.exit(0);
      });
      return;
    }
    void round(message.requests ?? 0, message.floor ? floor : one).then((result) => process.send?.(result));
  });
  process.send?.({ ready: true });
}

async function parent(): Promise<void> {
  const sides: Array<[string, string]> = [['after', REPO_DIR]];
  if (process.env.BEFORE_DIR) sides.push(['before', path.resolve(process.env.BEFORE_DIR)]);
  const requests = Number(process.env.REQUESTS ?? 20_000);
  const rounds = Number(process.env.ROUNDS ?? 6);
  const profDir = process.env.PROF_DIR;
  const children = new Map<string, ChildProcess>();
  for (const [name, root] of sides) {
    const proc = spawnTsx('profile-core.ts', [], {
      env: { ...process.env, PROFILE_CORE_CHILD: '1', PROFILE_CORE_ROOT: root, PROFILE_CORE_NAME: name },
      nodeArgs: [
        `--max-semi-space-size=${SEMI_SPACE_MB}`,
        `--min-semi-space-size=${SEMI_SPACE_MB}`,
        // HEAP_PROF=1: the child writes an allocation profile of its rounds instead (see child()).
        ...(profDir && process.env.HEAP_PROF !== '1' ? ['--cpu-prof', '--cpu-prof-dir', path.join(profDir, name)] : []),
      ],
    });
    await firstMessage(proc, 60_000, name);
    children.set(name, proc);
  }
  // FLOOR is a row of its own, run by the after child: JSON.parse of the body and JSON.stringify
  // of the answer alone, what every side pays whatever its core does.
  const ask = (name: string, count: number) => {
    const proc = children.get(name === FLOOR ? 'after' : name)!;
    const reply = firstMessage<RoundResult>(proc, 600_000, name);
    proc.send(name === FLOOR ? { requests: count, floor: true } : { requests: count });
    return reply;
  };
  const measured: Array<[string, string]> = [...sides, [FLOOR, REPO_DIR]];
  // Warm-up: the JIT settles on both sides before anything is counted.
  for (const [name] of measured) await ask(name, requests);
  const results = new Map<string, RoundResult[]>();
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? measured : [...measured].reverse();
    for (const [name] of order) results.set(name, [...(results.get(name) ?? []), await ask(name, requests)]);
  }
  const per = (name: string, pick: (r: RoundResult) => number) => median(results.get(name)!.map((r) => pick(r) / r.requests));
  const row = (name: string) => ({
    cpuUs: per(name, (r) => r.cpuUs),
    bytes: per(name, (r) => r.allocatedBytes),
    gcUs: per(name, (r) => r.gcMs * 1000),
    scavengesPer1k: per(name, (r) => r.scavenges * 1000),
  });
  console.log(`${requests} requests × ${rounds} rounds per side, medians per request (semi-space ${SEMI_SPACE_MB} MB)`);
  const base = sides.length > 1 ? row('before') : null;
  const bottom = row(FLOOR);
  const ratio = (x: number, y: number | undefined) => (y === undefined ? '' : ` (${(x / y).toFixed(2)}×)`);
  for (const [name] of sides) {
    const r = row(name);
    console.log(
      `| ${name} | ${r.cpuUs.toFixed(2)} µs CPU${ratio(r.cpuUs, base?.cpuUs)} | ${(r.bytes / 1024).toFixed(2)} KiB allocated${ratio(r.bytes, base?.bytes)} |` +
        ` ${r.gcUs.toFixed(2)} µs GC${ratio(r.gcUs, base?.gcUs)} | ${r.scavengesPer1k.toFixed(2)} scavenges/1k | answer ${results.get(name)![0]!.answer} |`,
    );
  }
  console.log(
    `| ${FLOOR} | ${bottom.cpuUs.toFixed(2)} µs CPU | ${(bottom.bytes / 1024).toFixed(2)} KiB allocated | ${bottom.gcUs.toFixed(2)} µs GC | ${bottom.scavengesPer1k.toFixed(2)} scavenges/1k |`,
  );
  // Above the floor: what the core and the app's own objects cost.
  for (const [name] of sides) {
    const r = row(name);
    const [cpu, bytes] = [r.cpuUs - bottom.cpuUs, r.bytes - bottom.bytes];
    const [baseCpu, baseBytes] = base === null ? [undefined, undefined] : [base.cpuUs - bottom.cpuUs, base.bytes - bottom.bytes];
    console.log(
      `| ${name} above the floor | ${cpu.toFixed(2)} µs CPU${ratio(cpu, baseCpu)} | ${(bytes / 1024).toFixed(2)} KiB allocated${ratio(bytes, baseBytes)} |`,
    );
  }
  const answers = new Set(sides.map(([name]) => results.get(name)![0]!.answer));
  if (answers.size > 1) console.log('ANSWERS DIFFER between sides (response bytes or decision series)');
  for (const proc of children.values()) {
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.send({ exit: true });
    await exited;
  }
}

if (process.env.PROFILE_CORE_CHILD === '1') await child();
else await parent();
