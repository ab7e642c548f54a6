// Issue 32, `fragmentation`, on a real 3-member etcd: keys written, deleted and compacted leave
// every member's DB file mostly free pages (dbSize − dbSizeInUse), which warns naming the member
// and the defrag for it alone; a defragmented member drops out of the warning, and once every
// member is defragmented the check passes. The floor is lowered so a test-sized DB crosses it.
import { readFileSync } from 'node:fs';
import { noop } from 'cockatiel';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { targetSchema, type TargetConfig } from '../../functions/domain/config.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { waitFor } from '../harness/wait.js';

const MIB = 1024 * 1024;
const VALUE = Buffer.alloc(64 * 1024, 'f');
const KEYS = 256;

let cluster: EtcdTestCluster;
let target: TargetConfig;

beforeAll(async () => {
  cluster = await startEtcdCluster({ name: 'frag32' });
  target = targetSchema.parse({
    name: 'frag',
    endpoints: cluster.endpoints,
    tls: cluster.clientTls,
    timeout: '2s',
    fragmentation: { warnRatio: 0.5, minFreeBytes: 4 * MIB },
  });
});

afterAll(async () => {
  await cluster?.destroy();
});

const fragmentation = (evaluation: Evaluation) => evaluation.checks.find((check) => check.name === 'fragmentation');

/**
 * Evaluates until `accept` holds, writing one small key before each evaluation: bbolt counts the
 * pages a compaction freed as free only after a later commit, and etcd commits only what was written.
 */
async function evaluationWhere(what: string, accept: (evaluation: Evaluation) => boolean): Promise<Evaluation> {
  let last: Evaluation | undefined;
  try {
    await waitFor(what, 30_000, async () => {
      const touched = await cluster.etcdctl(['put', 'frag-touch', String(Date.now())]);
      if (touched.code !== 0) throw new Error(`put frag-touch: ${touched.stderr}`);
      last = await evaluateTarget(target);
      return accept(last);
    });
  } catch (error) {
    const sizes = last?.members.map((member) => `${member.name} ${member.dbSizeBytes}/${member.dbSizeInUseBytes}`);
    throw new Error(`${(error as Error).message}; last: ${JSON.stringify(last && fragmentation(last))}, sizes ${sizes}`);
  }
  if (last === undefined) throw new Error('no evaluation');
  return last;
}

describe('fragmentation on real etcd (issue 32)', () => {
  it('passes a fresh cluster', async () => {
    const evaluation = await evaluateTarget(target);
    expect(fragmentation(evaluation)).toEqual({
      name: 'fragmentation',
      status: 'pass',
      message: 'no DB more than 50% and 4.0 MiB free',
    });
  });

  it('warns per member after many keys are deleted and compacted, and passes once each is defragmented', async () => {
    const client = new Etcd3({
      hosts: cluster.endpoints,
      credentials: {
        rootCertificate: readFileSync(cluster.clientTls.caFile),
        certChain: readFileSync(cluster.clientTls.certFile),
        privateKey: readFileSync(cluster.clientTls.keyFile),
      },
      faultHandling: { host: () => noop, global: noop },
    });
    try {
      for (let batch = 0; batch < KEYS; batch += 16) {
        await Promise.all(
          Array.from({ length: 16 }, (_, offset) =>
            client
              .put(`frag/${batch + offset}`)
              .value(VALUE)
              .exec(),
          ),
        );
      }
      const deleted = await client.delete().prefix('frag/').exec();
      expect(Number(deleted.deleted)).toBe(KEYS);
      const compacted = await cluster.etcdctl(['compact', deleted.header.revision, '--physical']);
      expect(compacted.code, compacted.stderr).toBe(0);
    } finally {
      client.close();
    }

    const names = cluster.members.map((member) => member.name);
    const fragmented = await evaluationWhere('every member warned fragmented', (evaluation) =>
      names.every((name) => fragmentation(evaluation)?.message.includes(`member ${name} (`) === true),
    );
    const check = fragmentation(fragmented);
    console.log(`fragmented: ${check?.message}`);
    expect(check?.status).toBe('warn');
    expect(fragmented.verdict).toBe('Degraded');
    for (const member of cluster.members) {
      expect(check?.message).toContain(`etcdctl defrag --endpoints=${member.clientUrl}`);
      const report = fragmented.members.find((candidate) => candidate.name === member.name);
      const free = (report?.dbSizeBytes ?? 0) - (report?.dbSizeInUseBytes ?? 0);
      expect(free).toBeGreaterThanOrEqual(4 * MIB);
      expect(free / (report?.dbSizeBytes ?? 1)).toBeGreaterThan(0.5);
    }
    expect(check?.message).toMatch(/DB fragmented: \d+\.\d MiB of \d+\.\d MiB free \(\d+%, \d+\.\d MiB in use\)/);

    const [first, ...rest] = cluster.members;
    if (first === undefined) throw new Error('no member');
    const defragFirst = await cluster.etcdctl(['defrag', '--command-timeout=20s'], { endpoints: [first.clientUrl] });
    expect(defragFirst.code, defragFirst.stderr).toBe(0);
    const partly = await evaluationWhere(`${first.name} no longer named`, (evaluation) => {
      const message = fragmentation(evaluation)?.message ?? '';
      return !message.includes(`member ${first.name} (`) && rest.every((member) => message.includes(`member ${member.name} (`));
    });
    expect(fragmentation(partly)?.status).toBe('warn');

    const defragRest = await cluster.etcdctl(['defrag', '--command-timeout=20s'], {
      endpoints: rest.map((member) => member.clientUrl),
    });
    expect(defragRest.code, defragRest.stderr).toBe(0);
    const defragmented = await evaluationWhere('the check passes', (evaluation) => fragmentation(evaluation)?.status === 'pass');
    expect(defragmented.verdict).toBe('Healthy');
  });
});
