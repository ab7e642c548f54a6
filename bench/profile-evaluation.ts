// Evaluation profile: evaluateTarget (and BEFORE_DIR's) p50 and CPU vs a raw etcd3 Status, interleaved; run under node --cpu-prof for frames.
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { startEtcdCluster } from '../test/harness/etcd-cluster.js';
import { evaluateTarget } from '../functions/usecases/evaluate-target.js';
import { percentile } from './lib.js';
import { rawClient, targetFor } from './evaluation.js';
const beforeModule =
  process.env.BEFORE_DIR === undefined
    ? null
    : ((await import(
        `${process.env.BEFORE_DIR}/functions/usecases/evaluate-target.ts`
      )) as typeof import('../functions/usecases/evaluate-target.js'));

const runs = Number(process.env.RUNS ?? 60);
const cluster = await startEtcdCluster({ name: 'h20prof' });
try {
  const target = targetFor(cluster, 'bench', '2s');
  const raw = async () => {
    const client = rawClient(cluster, cluster.endpoints[0] ?? '');
    try {
      await client.maintenance.status({ deadline: new Date(Date.now() + 2000) });
    } finally {
      client.close();
    }
  };
  const timedCpu = async (work: () => Promise<unknown>) => {
    const c = process.cpuUsage();
    const t = performance.now();
    await work();
    const u = process.cpuUsage(c);
    return { ms: performance.now() - t, cpu: (u.user + u.system) / 1000 };
  };
  const sides: Array<[string, () => Promise<unknown>]> = [
    ['raw Status', raw],
    [
      'after',
      async () => {
        const e = await evaluateTarget(target);
        if (e.verdict !== 'Healthy') throw new Error(e.reasons.join('; '));
      },
    ],
    ...(beforeModule
      ? [
          [
            'before',
            async () => {
              const e = await beforeModule.evaluateTarget(target);
              if (e.verdict !== 'Healthy') throw new Error(e.reasons.join('; '));
            },
          ] as [string, () => Promise<unknown>],
        ]
      : []),
  ];
  for (let i = 0; i < 10; i++) for (const [, work] of sides) await work();
  const ms = new Map<string, number[]>();
  const cpu = new Map<string, number[]>();
  console.log(
    `node ${process.version} (${process.execPath}); load before ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' / ')}`,
  );
  for (let i = 0; i < runs; i++)
    for (const [name, work] of sides) {
      const r = await timedCpu(work);
      ms.set(name, [...(ms.get(name) ?? []), r.ms]);
      cpu.set(name, [...(cpu.get(name) ?? []), r.cpu]);
    }
  const rawP50 = percentile(ms.get('raw Status')!, 50);
  const rawCpu = percentile(cpu.get('raw Status')!, 50);
  for (const [name] of sides) {
    const p50 = percentile(ms.get(name)!, 50);
    const c50 = percentile(cpu.get(name)!, 50);
    console.log(
      `| ${name} | ${p50.toFixed(1)} ms | ${(p50 / rawP50).toFixed(2)}× | ${c50.toFixed(1)} ms CPU | ${(c50 / rawCpu).toFixed(2)}× |`,
    );
  }
  console.log(
    `load after ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' / ')}`,
  );
} finally {
  await cluster.destroy();
}
