// CLI profile: the `evaluate` process (this bundle and BEFORE_DIR's) vs etcdctl health+status+alarm,
// interleaved, under the node that runs this script (npm scripts: the `node` devDependency, 22).
// Wall time and CPU (user + system, from GNU time when /usr/bin/time exists): on a shared machine
// the CPU a process spends is far steadier than its wall time.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startEtcdCluster } from '../test/harness/etcd-cluster.js';
import { median, REPO_DIR } from './lib.js';

const runs = Number(process.env.RUNS ?? 9);
const GNU_TIME = '/usr/bin/time';
const withCpu = existsSync(GNU_TIME);

interface Sample {
  ms: number;
  cpuMs: number;
}

const run = (file: string, args: string[]) =>
  new Promise<Sample>((resolve, reject) => {
    const t = performance.now();
    const [command, commandArgs] = withCpu ? [GNU_TIME, ['-f', 'cpu %U %S', file, ...args]] : [file, args];
    execFile(command, commandArgs, { timeout: 30000, env: { ...process.env, ETCDCTL_API: '3' } }, (e, _stdout, stderr) => {
      if (e) return reject(e);
      const cpu = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(stderr);
      resolve({ ms: performance.now() - t, cpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : NaN });
    });
  });
const loadavg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' / ');

const cluster = await startEtcdCluster({ name: 'h20cli' });
try {
  const tls = ['--cacert', cluster.tls.caFile, '--cert', cluster.tls.certFile, '--key', cluster.tls.keyFile];
  const cli = (dir: string) => [
    path.join(dir, 'bin/etcd-guard.mjs'),
    'evaluate',
    '--endpoints',
    cluster.endpoints.join(','),
    ...tls,
    '--timeout',
    '2s',
    '--output',
    'json',
    '--store',
    'none',
  ];
  const sides: Array<[string, () => Promise<Sample>]> = [
    [
      'etcdctl health+status+alarm',
      async () => {
        const sum = { ms: 0, cpuMs: 0 };
        for (const a of [
          ['endpoint', 'health', '--cluster'],
          ['endpoint', 'status', '--cluster'],
          ['alarm', 'list'],
        ]) {
          const one = await run('etcdctl', [`--endpoints=${cluster.endpoints[0]}`, ...tls, ...a]);
          sum.ms += one.ms;
          sum.cpuMs += one.cpuMs;
        }
        return sum;
      },
    ],
    ['after', () => run(process.execPath, cli(REPO_DIR))],
    ...(process.env.BEFORE_DIR
      ? [['before', () => run(process.execPath, cli(process.env.BEFORE_DIR!))] as [string, () => Promise<Sample>]]
      : []),
  ];
  // Two warm-up rounds: the first run of a new bundle writes its compile cache.
  for (let i = 0; i < 2; i++) for (const [, f] of sides) await f();
  console.log(`node ${process.version} (${process.execPath}); load before ${loadavg()}`);
  const samples = new Map<string, Sample[]>();
  for (let i = 0; i < runs; i++) for (const [name, f] of sides) samples.set(name, [...(samples.get(name) ?? []), await f()]);
  const of = (name: string, key: keyof Sample) => median((samples.get(name) ?? []).map((sample) => sample[key]));
  const base = 'etcdctl health+status+alarm';
  console.log(`| side (median of ${runs}) | wall | ratio | CPU | ratio |`);
  for (const [name] of sides)
    console.log(
      `| ${name} | ${of(name, 'ms').toFixed(0)} ms | ${(of(name, 'ms') / of(base, 'ms')).toFixed(2)}× | ${of(name, 'cpuMs').toFixed(0)} ms | ${(of(name, 'cpuMs') / of(base, 'cpuMs')).toFixed(2)}× |`,
    );
  console.log(`load after ${loadavg()}`);
} finally {
  await cluster.destroy();
}
