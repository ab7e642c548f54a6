#!/usr/bin/env node
// Usage: node bench/cli-compile-cache.mjs NODE_BINARY bin/etcd-guard.mjs [RUNS] [evaluate|help]
// etcd-guard `evaluate` start-up with and without Node's module compile cache: wall and CPU time
// (the child's own process.cpuUsage at exit, less sensitive to the shared machine's load), N runs each, interleaved.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
const [nodeBin, bin, runs = '10', mode = 'evaluate'] = process.argv.slice(2);
const server = net.createServer();
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const port = server.address().port;
await new Promise((r) => server.close(r));
// A closed loopback port: evaluate loads its whole path (etcd3, gRPC) and fails at once.
const args =
  mode === 'evaluate'
    ? [bin, 'evaluate', '--endpoints', `http://127.0.0.1:${port}`, '--timeout', '2s', '--output', 'json']
    : [bin, '--help'];
const hook =
  'data:text/javascript,' +
  encodeURIComponent(
    "process.on('exit',()=>{const u=process.cpuUsage();process.stderr.write('CPU_MS '+((u.user+u.system)/1000)+'\\n')})",
  );
function time(env) {
  const t = process.hrtime.bigint();
  const r = spawnSync(nodeBin, args, { env: { ...process.env, NODE_OPTIONS: `--import=${hook}`, ...env }, encoding: 'utf8' });
  const wall = Number(process.hrtime.bigint() - t) / 1e6;
  const cpu = Number(/CPU_MS ([\d.]+)/.exec(r.stderr)?.[1]);
  if (r.status === null || r.status > 1 || Number.isNaN(cpu)) throw new Error(`exit ${r.status}: ${r.stderr}`);
  return { wall, cpu };
}
const cache = mkdtempSync('/tmp/ccache-');
time({ NODE_COMPILE_CACHE: cache });
const off = [],
  on = [];
for (let i = 0; i < Number(runs); i += 1) {
  off.push(time({ NODE_DISABLE_COMPILE_CACHE: '1' }));
  on.push(time({ NODE_COMPILE_CACHE: cache }));
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sum = (xs) => ({
  wallMedianMs: Math.round(median(xs.map((x) => x.wall))),
  cpuMedianMs: Math.round(median(xs.map((x) => x.cpu))),
});
const a = sum(off),
  b = sum(on);
console.log(
  JSON.stringify({
    node: spawnSync(nodeBin, ['--version'], { encoding: 'utf8' }).stdout.trim(),
    mode,
    runs: Number(runs),
    without: a,
    with: b,
    wallRatio: +(b.wallMedianMs / a.wallMedianMs).toFixed(2),
    cpuRatio: +(b.cpuMedianMs / a.cpuMedianMs).toFixed(2),
  }),
);
rmSync(cache, { recursive: true, force: true });
