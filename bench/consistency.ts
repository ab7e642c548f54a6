// The consistency check's cost (issue 32): HashKV reads a member's whole keyspace, so its price
// grows with the DB. A 1-member TLS etcd on loopback is filled to each size in turn (random values,
// 64 KiB or --value-kib), and at each size, interleaved run by run: HashKV through the probe session (what the
// check adds per member), next to a Status call on the same channel (the baseline of the same
// run), and a whole evaluateTarget with `consistency: true` next to one without.
//
//   npx tsx bench/consistency.ts [--mib=100,1024] [--runs=5] [--value-kib=64]
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { noop } from 'cockatiel';
import { Etcd3 } from 'etcd3';
import { EtcdProbeSession } from '../functions/adapters/etcd-member-probe.js';
import { Deadline } from '../functions/domain/deadline.js';
import { targetSchema } from '../functions/domain/config.js';
import { evaluateTarget } from '../functions/usecases/evaluate-target.js';
import { etcdVersion, startEtcdCluster } from '../test/harness/etcd-cluster.js';
import { median } from './lib.js';

const MIB = 1024 * 1024;
const arg = (name: string, fallback: string) =>
  process.argv.find((value) => value.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const sizes = arg('mib', '100,1024').split(',').map(Number);
const runs = Number(arg('runs', '5'));
// Large values measure reading bytes; small ones (Kubernetes objects are mostly a few KiB) the per-key cost.
const VALUE_BYTES = Number(arg('value-kib', '64')) * 1024;
const BATCH = 64;

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

const cluster = await startEtcdCluster({ size: 1, name: 'hashbench', quotaBackendBytes: 8 * 1024 * MIB });
const endpoint = cluster.endpoints[0] ?? '';
const tls = cluster.clientTls;
const credentials = { ca: readFileSync(tls.caFile), cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) };
const client = new Etcd3({
  hosts: endpoint,
  credentials: { rootCertificate: credentials.ca, certChain: credentials.cert, privateKey: credentials.key },
  faultHandling: { host: () => noop, global: noop },
});
const session = new EtcdProbeSession(credentials);
const base = { name: 'hashbench', endpoints: cluster.endpoints, tls, timeout: '120s' };
const withCheck = targetSchema.parse({ ...base, consistency: true });
const without = targetSchema.parse(base);
const rows: string[] = [];
try {
  console.log(`etcd ${await etcdVersion()}, 1 member, load average ${(await import('node:os')).loadavg().join(' ')}`);
  let written = 0;
  for (const mib of sizes) {
    const fillStarted = performance.now();
    while (written * VALUE_BYTES < mib * MIB) {
      const batch = Array.from({ length: BATCH }, (_, offset) =>
        client
          .put(`bench/${written + offset}`)
          .value(randomBytes(VALUE_BYTES))
          .exec(),
      );
      await Promise.all(batch);
      written += batch.length;
    }
    const fillS = (performance.now() - fillStarted) / 1000;
    const status = await session.probe(endpoint, Deadline.after(10_000));
    if (!status.status.ok || status.status.value.revision === undefined) throw new Error(`no status: ${JSON.stringify(status)}`);
    const revision = status.status.value.revision;
    const hash: number[] = [];
    const statusCall: number[] = [];
    const evalOn: number[] = [];
    const evalOff: number[] = [];
    const putAlone: number[] = [];
    const putDuring: number[] = [];
    const put = (key: string) => timed(() => client.put(key).value('x').exec());
    for (let run = 0; run < runs; run += 1) {
      // Whether the member keeps taking writes while it hashes: a put sent as HashKV starts.
      putAlone.push(await put('bench-put'));
      const hashing = session.hashKV(endpoint, revision, Deadline.after(120_000));
      putDuring.push(await put('bench-put'));
      await hashing;
      hash.push(
        await timed(async () => {
          const answer = await session.hashKV(endpoint, revision, Deadline.after(120_000));
          if (!answer.ok) throw new Error(answer.error);
        }),
      );
      statusCall.push(await timed(() => session.probe(endpoint, Deadline.after(10_000))));
      evalOn.push(
        await timed(async () => {
          const evaluation = await evaluateTarget(withCheck);
          const check = evaluation.checks.find((candidate) => candidate.name === 'consistency');
          if (check?.status !== 'pass') throw new Error(`consistency ${check?.status}: ${check?.message}`);
        }),
      );
      evalOff.push(await timed(() => evaluateTarget(without)));
    }
    // After the runs: every write committed, so the file's size is the DB's.
    const after = await session.probe(endpoint, Deadline.after(10_000));
    const dbMiB = after.status.ok ? after.status.value.dbSizeBytes / MIB : Number.NaN;
    const ms = (value: number) => `${value.toFixed(value < 10 ? 1 : 0)} ms`;
    rows.push(
      `| ${mib} MiB of ${VALUE_BYTES / 1024} KiB values (DB ${dbMiB.toFixed(0)} MiB, ${written} keys, filled in ${fillS.toFixed(0)} s) | HashKV ${ms(median(hash))} (max ${ms(Math.max(...hash))}) | Status ${ms(median(statusCall))} | ${(median(hash) / median(statusCall)).toFixed(0)}× | evaluate with ${ms(median(evalOn))} vs without ${ms(median(evalOff))} (+${ms(median(evalOn) - median(evalOff))}) | a put during HashKV ${ms(median(putDuring))} (max ${ms(Math.max(...putDuring))}) vs alone ${ms(median(putAlone))} |`,
    );
    console.log(rows.at(-1));
  }
} finally {
  session.close();
  client.close();
  await cluster.destroy();
}
console.log(
  `\n| size | ours (median of ${runs}) | baseline | ratio | whole evaluation | writes meanwhile |\n|---|---|---|---|---|---|\n${rows.join('\n')}`,
);
console.log(`load average after: ${(await import('node:os')).loadavg().join(' ')}`);
