// The admission path over HTTPS keep-alive (32 connections, autocannon in this process) with and
// without the fast-validate listener in front of express, each against a bare express server
// answering a fixed review, for a guarded and a not guarded request; and what parsing one
// AdmissionReview with zod costs (in this process). What keeps webhook/server/fast-validate.ts
// (BENCHMARKS.md, issue 31). Every server runs through tsx in its own child, so the ratios compare
// like with like; the image's compiled figures are bench/admission.ts's.
//
//   npx tsx bench/admission-paths.ts [--seconds=N] [--rounds=N]
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { FileStore } from '../functions/adapters/file-store.js';
import { generateTestCerts } from '../test/harness/certs.js';
import { makeEvaluation } from '../test/harness/evaluation-fixture.js';
import { parseAdmissionReview } from '../webhook/domain/review.js';
import { benchGuardConfig, cpuTimeMs, firstMessage, killAndWait, percentile, REPO_DIR, spawnTsx, validateLoad } from './lib.js';

const TARGET = 'bench';
const FIXTURES = {
  guarded: 'kcp-scale-up-3-to-5.json',
  'not guarded': 'kcp-label-only.json',
} as const;
const VARIANTS = [
  { name: 'fast-validate + express', handler: 'fast' },
  { name: 'express only', handler: 'express' },
] as const;

const arg = (name: string, fallback: number) => {
  const found = process.argv.find((value) => value.startsWith(`--${name}=`));
  return found === undefined ? fallback : Number(found.slice(name.length + 3));
};
const SECONDS = arg('seconds', 4);
const ROUNDS = arg('rounds', 3);

/** µs per zod parse of each fixture (fresh objects, as JSON.parse gives them), median of rounds. */
function parseMicros(): { fixture: string; micros: number }[] {
  return Object.entries(FIXTURES).map(([shape, file]) => {
    const text = readFileSync(path.join(REPO_DIR, 'test/fixtures/admission', file), 'utf8');
    const bodies = Array.from({ length: 2_000 }, () => JSON.parse(text) as unknown);
    const samples: number[] = [];
    for (let round = 0; round < 20; round++) {
      const started = performance.now();
      for (const body of bodies) if (!parseAdmissionReview(body).ok) throw new Error(`zod rejected ${file}`);
      samples.push(((performance.now() - started) * 1000) / bodies.length);
    }
    return { fixture: shape, micros: percentile(samples.slice(6), 50) };
  });
}

/** Requests/s of one load run, and the server's CPU per request (less moved by neighbours on shared cores). */
async function measure(url: string, pid: number, body: string, seconds: number): Promise<{ rate: number; cpuMicros: number }> {
  const cpuBefore = cpuTimeMs(pid);
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    autocannon({ ...validateLoad(url, body, 32, seconds), pipelining: 1, timeout: 10 }, (error, finished) =>
      error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(finished),
    );
  });
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  return {
    rate: result.requests.total / (result.duration > 0 ? result.duration : seconds),
    cpuMicros: ((cpuTimeMs(pid) - cpuBefore) * 1000) / result.requests.total,
  };
}

async function main(): Promise<void> {
  for (const row of parseMicros()) console.log(`zod parse, ${row.fixture.padEnd(12)} ${row.micros.toFixed(1)} µs per review`);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-bench-paths-'));
  const children: ChildProcess[] = [];
  try {
    const certs = await generateTestCerts(dir);
    const storeDir = path.join(dir, 'store');
    await mkdir(storeDir);
    await new FileStore(storeDir).write(makeEvaluation({ target: TARGET, evaluatedAt: new Date().toISOString() }));
    const configFile = path.join(dir, 'guard.json');
    await writeFile(configFile, benchGuardConfig(storeDir, TARGET));
    const bodies = Object.fromEntries(
      await Promise.all(
        Object.entries(FIXTURES).map(async ([shape, file]) => [
          shape,
          await readFile(path.join(REPO_DIR, 'test/fixtures/admission', file), 'utf8'),
        ]),
      ),
    ) as Record<keyof typeof FIXTURES, string>;
    const uid = (JSON.parse(bodies.guarded) as { request: { uid: string } }).request.uid;

    const bare = spawnTsx('bare-child.ts', [certs.serverCertFile, certs.serverKeyFile, uid]);
    children.push(bare);
    const servers: { name: string; url: string; pid: number }[] = [
      { name: 'bare express', url: (await firstMessage<{ url: string }>(bare, 30_000, 'bare child')).url, pid: bare.pid ?? 0 },
    ];
    for (const variant of VARIANTS) {
      const log = openSync(path.join(dir, `${variant.handler}.log`), 'a');
      const child = spawnTsx(
        'admission-paths-child.ts',
        [configFile, certs.serverCertFile, certs.serverKeyFile, variant.handler],
        { stdio: ['ignore', log, 'inherit', 'ipc'] },
      );
      closeSync(log);
      children.push(child);
      const { url } = await firstMessage<{ url: string }>(child, 30_000, variant.name);
      servers.push({ name: variant.name, url, pid: child.pid ?? 0 });
    }

    for (const [shape, body] of Object.entries(bodies)) {
      const samples = new Map<string, { rate: number; cpuMicros: number }[]>(servers.map((server) => [server.name, []]));
      for (const server of servers) await measure(server.url, server.pid, body, 1);
      // Interleaved rounds: a neighbour's load on the shared cores falls on every server alike.
      for (let round = 0; round < ROUNDS; round++) {
        for (const server of servers) samples.get(server.name)?.push(await measure(server.url, server.pid, body, SECONDS));
      }
      const median = (name: string, key: 'rate' | 'cpuMicros') =>
        percentile(
          (samples.get(name) ?? []).map((sample) => sample[key]),
          50,
        );
      const bareRate = median('bare express', 'rate');
      const bareCpu = median('bare express', 'cpuMicros');
      console.log(`\n${shape} (${ROUNDS} rounds of ${SECONDS} s, 32 connections, medians):`);
      for (const server of servers) {
        const rate = median(server.name, 'rate');
        const cpu = median(server.name, 'cpuMicros');
        console.log(
          `  ${server.name.padEnd(26)} ${rate.toFixed(0).padStart(6)} req/s ${(rate / bareRate).toFixed(2)}× bare;` +
            ` ${cpu.toFixed(0).padStart(4)} µs CPU/request, bare/this ${(bareCpu / cpu).toFixed(2)}×`,
        );
      }
    }
  } finally {
    await Promise.all(children.map((child) => killAndWait(child)));
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
