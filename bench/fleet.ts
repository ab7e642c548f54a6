// Fleet bench: the scheduled function over 10, 100 and 300 targets (one local cluster under
// different names), each size in its own child process so wall time and peak RSS are its own.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { EtcdTestCluster } from '../test/harness/etcd-cluster.js';
import { firstMessage, killAndWait, onceMoreIfKilled, spawnTsx, type ResultRow } from './lib.js';

export interface FleetReport {
  wallMs: number;
  peakRssMiB: number;
  rssBeforeMiB: number;
  ok: number;
  passed: number;
  errors: string[];
  p50TargetMs: number;
  maxTargetMs: number;
}

export interface FleetOptions {
  sizes: number[];
  concurrency: number;
  log: (line: string) => void;
}

export async function runFleetSize(cluster: EtcdTestCluster, count: number, concurrency: number): Promise<FleetReport> {
  const storeDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-bench-fleet-'));
  const child = spawnTsx('fleet-child.ts', [
    String(count),
    String(concurrency),
    cluster.endpoints.join(','),
    cluster.tls.caFile,
    cluster.tls.certFile,
    cluster.tls.keyFile,
    storeDir,
  ]);
  try {
    const report = await firstMessage<FleetReport>(child, 120_000, `fleet child (${count} targets)`);
    if (report.ok !== count || report.passed !== count) {
      throw new Error(`fleet of ${count}: ${report.ok} stored, ${report.passed} passed; errors: ${report.errors.join(' | ')}`);
    }
    return report;
  } finally {
    await killAndWait(child);
    await rm(storeDir, { recursive: true, force: true });
  }
}

export async function runFleetBench(cluster: EtcdTestCluster, options: FleetOptions): Promise<ResultRow[]> {
  const rows: ResultRow[] = [];
  for (const count of options.sizes) {
    options.log(`fleet: ${count} targets, concurrency ${options.concurrency}`);
    const run = await onceMoreIfKilled(() => runFleetSize(cluster, count, options.concurrency), options.log);
    const report = run.value;
    const crashed = run.crashed === null ? '' : `; the first child died with ${run.crashed} and was run again`;
    const judged = count >= 300;
    rows.push(
      {
        section: 'fleet',
        figure: `fleet ${count} targets: wall time (${(report.wallMs / count).toFixed(1)} ms/target; per target p50 ${report.p50TargetMs} ms, max ${report.maxTargetMs} ms${crashed})`,
        ours: report.wallMs,
        baseline: null,
        unit: 'ms',
        target: judged ? { kind: 'value-max', max: 10_000, unit: 'ms' } : { kind: 'info' },
      },
      {
        section: 'fleet',
        figure: `fleet ${count} targets: peak RSS (before the run ${report.rssBeforeMiB.toFixed(0)} MiB)`,
        ours: report.peakRssMiB,
        baseline: null,
        unit: 'MiB',
        target: judged ? { kind: 'value-max', max: 256, unit: 'MiB' } : { kind: 'info' },
      },
    );
  }
  return rows;
}
