// CLI profile: the `evaluate` process (this bundle and BEFORE_DIR's) vs etcdctl health+status+alarm, interleaved.
import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startEtcdCluster } from '../test/harness/etcd-cluster.js';
import { median, REPO_DIR } from './lib.js';

const runs = Number(process.env.RUNS ?? 9);
const run = (file: string, args: string[]) =>
  new Promise<number>((resolve, reject) => {
    const t = performance.now();
    execFile(file, args, { timeout: 30000, env: { ...process.env, ETCDCTL_API: '3' } }, (e) =>
      e ? reject(e) : resolve(performance.now() - t),
    );
  });
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
  const sides: Array<[string, () => Promise<number>]> = [
    [
      'etcdctl health+status+alarm',
      async () => {
        let sum = 0;
        for (const a of [
          ['endpoint', 'health', '--cluster'],
          ['endpoint', 'status', '--cluster'],
          ['alarm', 'list'],
        ])
          sum += await run('etcdctl', [`--endpoints=${cluster.endpoints[0]}`, ...tls, ...a]);
        return sum;
      },
    ],
    ['after', () => run(process.execPath, cli(REPO_DIR))],
    ...(process.env.BEFORE_DIR
      ? [['before', () => run(process.execPath, cli(process.env.BEFORE_DIR!))] as [string, () => Promise<number>]]
      : []),
  ];
  for (const [, f] of sides) await f();
  console.log(
    `load before ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' / ')}`,
  );
  const ms = new Map<string, number[]>();
  for (let i = 0; i < runs; i++) for (const [name, f] of sides) ms.set(name, [...(ms.get(name) ?? []), await f()]);
  const base = median(ms.get('etcdctl health+status+alarm')!);
  for (const [name] of sides)
    console.log(`| ${name} | ${median(ms.get(name)!).toFixed(0)} ms | ${(median(ms.get(name)!) / base).toFixed(2)}× |`);
  console.log(
    `load after ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' / ')}`,
  );
} finally {
  await cluster.destroy();
}
