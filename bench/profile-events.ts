// Events on vs off, allow path and denial path: four webhooks of this checkout's bundle (plain node,
// the image's --max-semi-space-size=2), two judging a fresh Healthy evaluation and two an Unhealthy
// one, each pair with `events: true` (writing into the loopback API stand-in through KUBECONFIG)
// and `events: false`. Runs are interleaved round by round; CPU µs per request is read from /proc,
// which on a shared machine is far steadier than requests/s. Scratch driver for issue 20.
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { FileStore } from '../functions/adapters/file-store.js';
import { generateTestCerts } from '../test/harness/certs.js';
import { makeEvaluation, makeMember } from '../test/harness/evaluation-fixture.js';
import { startFakeKubeApiServer } from '../test/harness/fake-kube-apiserver.js';
import { freePort } from '../test/harness/free-port.js';
import { benchGuardConfig, REPO_DIR, spawnWebhook, validateLoad, waitReady } from './lib.js';

const profDir = process.env.PROF_DIR;
const dir = await mkdtemp(path.join(os.tmpdir(), 'h20-events-'));
const certs = await generateTestCerts(dir);
const kube = await startFakeKubeApiServer();
const body = await readFile(path.join(REPO_DIR, 'test/fixtures/admission/kcp-scale-up-3-to-5.json'), 'utf8');

async function store(name: string, unhealthy: boolean): Promise<string> {
  const storeDir = path.join(dir, name);
  await mkdir(storeDir);
  const members = unhealthy
    ? [makeMember(0), makeMember(1), makeMember(2, { healthy: false, error: 'connection refused' })]
    : undefined;
  await new FileStore(storeDir).write(
    makeEvaluation({
      target: 'bench',
      evaluatedAt: new Date().toISOString(),
      ...(unhealthy ? { verdict: 'Unhealthy', members, reasons: ['member etcd-2 unreachable: connection refused'] } : {}),
    }),
  );
  return storeDir;
}

async function webhook(name: string, storeDir: string, events: boolean): Promise<[string, string, ChildProcess]> {
  const configFile = path.join(dir, `${name}.json`);
  await writeFile(configFile, benchGuardConfig(storeDir, 'bench', { maxAgeSeconds: 3600, events }));
  const port = await freePort();
  const child = spawnWebhook(REPO_DIR, {
    // PROF_DIR: a CPU profile of each webhook, written when it exits, in PROF_DIR/<name>.
    nodeArgs: [
      '--max-semi-space-size=2',
      ...(profDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', path.join(profDir, name.replace(/[^a-z]+/g, '-'))]),
    ],
    configFile,
    port,
    certFile: certs.serverCertFile,
    keyFile: certs.serverKeyFile,
    cwd: dir,
    env: { KUBECONFIG: kube.kubeconfigFile },
  });
  return [name, `https://127.0.0.1:${port}`, child];
}

process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';

const healthy = await store('healthy', false);
const sick = await store('sick', true);
const servers = [
  await webhook('allow, events off', healthy, false),
  await webhook('allow, events on', healthy, true),
  await webhook('deny, events off', sick, false),
  await webhook('deny, events on', sick, true),
];
for (const [, url, child] of servers) await waitReady(url, child);

const cpuMs = (c: ChildProcess) => {
  const f = readFileSync(`/proc/${c.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
};
const run = (u: string, c: number, seconds: number) =>
  new Promise<autocannon.Result>((res, rej) => autocannon(validateLoad(u, body, c, seconds), (e, r) => (e ? rej(e) : res(r))));
for (const [, u] of servers) await run(u, 8, 2);
const seconds = Number(process.env.SECONDS_EACH ?? 5);
const rounds = Number(process.env.ROUNDS ?? 3);
const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' / ');
console.log(`load before ${load()}`);
const rate = new Map<string, number[]>();
const cpu = new Map<string, number[]>();
for (let round = 0; round < rounds; round++) {
  for (const [name, u, p] of servers) {
    const before = cpuMs(p);
    const r = await run(u, 32, seconds);
    const used = cpuMs(p) - before;
    if (r.non2xx > 0 || r.errors > 0) throw new Error(`${name}: ${r.non2xx} non-2xx ${r.errors} errors`);
    rate.set(name, [...(rate.get(name) ?? []), r.requests.total / r.duration]);
    cpu.set(name, [...(cpu.get(name) ?? []), (used * 1000) / r.requests.total]);
  }
}
console.log(`load after ${load()}`);
const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
for (const [name, , p] of servers) {
  const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${p.pid}/status`, 'utf8'))?.[1];
  console.log(
    `| ${name} | ${avg(rate.get(name)!).toFixed(0)} req/s (${rate
      .get(name)!
      .map((x) => x.toFixed(0))
      .join(', ')}) | ${avg(cpu.get(name)!).toFixed(0)} µs CPU/req | VmHWM ${(Number(hwm) / 1024).toFixed(0)} MiB |`,
  );
}
const writes = kube.requests.filter((r) => r.resource === 'events').length;
console.log(`Event requests in the stand-in: ${writes}`);
for (const [, , p] of servers) p.kill('SIGTERM');
await Promise.all(servers.map(([, , p]) => (p.exitCode === null ? new Promise((r) => p.once('exit', r)) : null)));
await kube.close();
await rm(dir, { recursive: true, force: true });
