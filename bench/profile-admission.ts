// Admission profile: CPU per request and req/s of the webhook bundle (and BEFORE_DIR's bundle) vs a bare express server, same flags, interleaved; PROF_DIR adds --cpu-prof.
// optional --cpu-prof of both. CPU time from /proc is far less load-sensitive than req/s.
import autocannon from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { transform } from 'esbuild';
import { FileStore } from '../functions/adapters/file-store.js';
import { generateTestCerts } from '../test/harness/certs.js';
import { makeEvaluation } from '../test/harness/evaluation-fixture.js';
import { REPO_DIR, BENCH_DIR, benchGuardConfig, firstMessage, spawnWebhook, validateLoad, waitReady } from './lib.js';

const profDir = process.env.PROF_DIR;
const dir = await mkdtemp(path.join(os.tmpdir(), 'h20-prof-'));
const certs = await generateTestCerts(dir);
const body = await readFile(path.join(REPO_DIR, 'test/fixtures/admission/kcp-scale-up-3-to-5.json'), 'utf8');
const uid = (JSON.parse(body) as { request: { uid: string } }).request.uid;
const storeDir = path.join(dir, 'store');
await mkdir(storeDir);
await new FileStore(storeDir).write(makeEvaluation({ target: 'bench', evaluatedAt: new Date().toISOString() }));
const configFile = path.join(dir, 'guard.json');
await writeFile(configFile, benchGuardConfig(storeDir, 'bench'));
// --cpu-prof writes its profile on exit: the bare server gets a SIGINT handler that exits.
const exitOnInt = path.join(dir, 'exit-on-int.cjs');
await writeFile(exitOnInt, "process.on('SIGINT', () => process.exit(0));\n");
// In this checkout's dist/ (ignored, per worktree): packages resolve from its node_modules.
const bareJs = path.join(REPO_DIR, 'dist/profile-bare-child.mjs');
await mkdir(path.dirname(bareJs), { recursive: true });
await writeFile(
  bareJs,
  (await transform(await readFile(path.join(BENCH_DIR, 'bare-child.ts'), 'utf8'), { loader: 'ts', format: 'esm' })).code,
);
const port = 20000 + Math.floor(Math.random() * 20000);
const flags = (name: string) => [
  '--max-semi-space-size=2',
  // HEAP_PROF=1: a sampling allocation profile (--heap-prof) instead of the CPU profile.
  ...(profDir
    ? process.env.HEAP_PROF === '1'
      ? ['--heap-prof', '--heap-prof-dir', path.join(profDir, name)]
      : ['--cpu-prof', '--cpu-prof-dir', path.join(profDir, name)]
    : []),
];
const serverFiles = { configFile, certFile: certs.serverCertFile, keyFile: certs.serverKeyFile };
const child = spawnWebhook(REPO_DIR, {
  ...serverFiles,
  nodeArgs: flags('webhook'),
  port,
  cwd: path.join(REPO_DIR, 'node_modules'),
});
const bare = spawn(
  process.execPath,
  [...flags('bare'), '-r', exitOnInt, bareJs, certs.serverCertFile, certs.serverKeyFile, uid],
  { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], cwd: path.join(REPO_DIR, 'node_modules') },
);
const { url: bareUrl } = await firstMessage<{ url: string }>(bare, 30000, 'bare');
const url = `https://127.0.0.1:${port}`;
process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
await waitReady(url, child);
// BEFORE_DIR: one or more checkouts (comma-separated), each with its own dist/, run side by side.
const befores = (process.env.BEFORE_DIR ?? '').split(',').filter((dir) => dir !== '');
const olds = befores.map((before, index) => {
  const beforePort = port + 1 + index;
  const proc = spawnWebhook(before, { ...serverFiles, nodeArgs: ['--max-semi-space-size=2'], port: beforePort, cwd: before });
  const name = befores.length === 1 ? 'before' : `before ${path.basename(before)}`;
  return [name, `https://127.0.0.1:${beforePort}`, proc] as [string, string, ChildProcess];
});
for (const [, oldUrl, proc] of olds) await waitReady(oldUrl, proc);
const cpuMs = (c: ChildProcess) => {
  const f = readFileSync(`/proc/${c.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
};
/** Every 2xx response's own time (autocannon's histogram keeps whole ms). */
const latencies = new Map<string, number[]>();
const run = (u: string, c: number, seconds: number, name = '') =>
  new Promise<autocannon.Result>((res, rej) => {
    const instance = autocannon(validateLoad(u, body, c, seconds), (e, r) => (e ? rej(e) : res(r)));
    if (c === 1 && name !== '') {
      const into = latencies.get(name) ?? [];
      latencies.set(name, into);
      instance.on('response', (_client, status, _bytes, ms) => {
        if (status >= 200 && status < 300) into.push(ms);
      });
    }
  });
const pct = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
};
const servers = [['bare', bareUrl, bare], ['after', url, child], ...olds] as Array<[string, string, ChildProcess]>;
for (const [, u] of servers) await run(u, 8, 2);
const seconds = Number(process.env.SECONDS_EACH ?? 5);
const rounds = Number(process.env.ROUNDS ?? 2);
console.log(
  `load before ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' / ')}`,
);
for (const c of (process.env.CONNS ?? '32,1').split(',').map(Number)) {
  const rate = new Map<string, number[]>();
  const cpu = new Map<string, number[]>();
  const measure = async (name: string, u: string, p: ChildProcess) => {
    const b = cpuMs(p);
    const r = await run(u, c, seconds, name);
    const used = cpuMs(p) - b;
    if (r.non2xx > 0 || r.errors > 0) throw new Error(`${name}: ${r.non2xx} non-2xx ${r.errors} errors`);
    rate.set(name, [...(rate.get(name) ?? []), r.requests.total / r.duration]);
    cpu.set(name, [...(cpu.get(name) ?? []), (used * 1000) / r.requests.total]);
  };
  for (let round = 0; round < rounds; round++) {
    // TOGETHER=1: every server under load at the same time, so a load swing on the shared machine
    // hits all of them alike (CPU per request is then comparable even at load 20).
    if (process.env.TOGETHER === '1') await Promise.all(servers.map(([name, u, p]) => measure(name, u, p)));
    else for (const [name, u, p] of servers) await measure(name, u, p);
  }
  const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const bareRate = avg(rate.get('bare')!);
  const bareCpu = avg(cpu.get('bare')!);
  for (const [name] of servers) {
    console.log(
      `| ${c} conn | ${name} | ${avg(rate.get(name)!).toFixed(0)} req/s | ${(avg(rate.get(name)!) / bareRate).toFixed(2)}× | ${avg(cpu.get(name)!).toFixed(0)} µs CPU/req | ${(bareCpu / avg(cpu.get(name)!)).toFixed(2)}× |` +
        ` rounds ${cpu
          .get(name)!
          .map((x) => x.toFixed(0))
          .join(' ')} µs |` +
        (c === 1
          ? ` p50 ${pct(latencies.get(name)!, 50).toFixed(3)} ms | p99 ${pct(latencies.get(name)!, 99).toFixed(3)} ms |`
          : ''),
    );
  }
}
console.log(
  `load after ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' / ')}`,
);
for (const [name, , p] of servers) {
  const st = readFileSync(`/proc/${p.pid}/status`, 'utf8');
  console.log(
    name,
    st
      .split('\n')
      .filter((l) => /VmRSS|VmHWM/.test(l))
      .map((l) => l.replace(/\s+/g, ' '))
      .join(' '),
  );
}
child.kill('SIGTERM');
bare.kill('SIGINT');
for (const [, , old] of olds) old.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
if (bare.exitCode === null) await new Promise((r) => bare.once('exit', r));
for (const [, , old] of olds) if (old.exitCode === null) await new Promise((r) => old.once('exit', r));
await rm(dir, { recursive: true, force: true });
