// Issue 32, `consistency`, on a real 3-member etcd: HashKV of every voting member at one revision.
// A healthy cluster with keys written agrees (pass, naming the revision and hash); a killed member
// or a hung one is not judged ("consistency not judged", a warning naming it), never a pass and
// never a divergence; without `consistency` the check is not run. Last, a member whose backend was
// changed while it was stopped (test/fixtures/bbolt-edit, bbolt as a library, built here with the
// Go toolchain from the module cache) fails it, named as the diverging member.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { targetSchema, type TargetConfig } from '../../functions/domain/config.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { divergeMember } from '../harness/diverge-member.js';
import { BOUND_SLACK_MS } from '../harness/timing.js';

let cluster: EtcdTestCluster;
let target: TargetConfig;

beforeAll(async () => {
  cluster = await startEtcdCluster({ name: 'hash32' });
  target = targetSchema.parse({
    name: 'hash',
    endpoints: cluster.endpoints,
    tls: cluster.clientTls,
    timeout: '2s',
    consistency: true,
  });
  for (let key = 0; key < 20; key += 1) {
    const put = await cluster.etcdctl(['put', `hash/${key}`, `value-${key}`]);
    if (put.code !== 0) throw new Error(`put: ${put.stderr}`);
  }
});

afterAll(async () => {
  await cluster?.destroy();
});

const consistency = (evaluation: Evaluation) => evaluation.checks.find((check) => check.name === 'consistency');

describe('consistency on real etcd (issue 32)', () => {
  it('is not run unless the target turns it on', async () => {
    const { consistency: _on, ...off } = target;
    expect(consistency(await evaluateTarget(off))).toBeUndefined();
  });

  it('passes a healthy cluster: every voting member agrees at one revision', async () => {
    const evaluation = await evaluateTarget(target);
    const check = consistency(evaluation);
    console.log(`healthy: ${check?.status}: ${check?.message}`);
    expect(check?.status).toBe('pass');
    expect(check?.message).toMatch(/^3 voting members agree at revision (\d+) \(never compacted\): hash \d+$/);
    // At least the 20 puts: the revision is one every member has applied, not 0 ("latest").
    expect(Number(/at revision (\d+)/.exec(check?.message ?? '')?.[1])).toBeGreaterThanOrEqual(21);
    expect(evaluation.verdict).toBe('Healthy');
  });

  it('agrees again after a compaction (the members compare at the same compact revision)', async () => {
    const status = await cluster.etcdctl(['endpoint', 'status', '-w', 'json']);
    const revision = (JSON.parse(status.stdout) as { Status: { header: { revision: number } } }[])[0]?.Status.header.revision;
    const compacted = await cluster.etcdctl(['compact', String(revision), '--physical']);
    expect(compacted.code, compacted.stderr).toBe(0);
    const check = consistency(await evaluateTarget(target));
    expect(check?.status).toBe('pass');
    // etcd 3.4 refuses HashKV at the compacted revision itself (the check then asks for the
    // latest) and reports the compaction; 3.5+ hash it and may report none.
    expect(check?.message).toMatch(
      new RegExp(`^3 voting members agree at revision ${revision} \\((compact revision ${revision}|never compacted)\\)`),
    );
  });

  it('leaves a killed member not judged, naming it, and never passes or fails on it', async () => {
    const down = cluster.members[2];
    if (down === undefined) throw new Error('no member');
    await cluster.kill(2);
    try {
      const evaluation = await evaluateTarget(target);
      const check = consistency(evaluation);
      console.log(`one down: ${check?.status}: ${check?.message}`);
      expect(check?.status).toBe('warn');
      expect(check?.message).toMatch(new RegExp(`^consistency not judged: member ${down.name} \\(`));
      expect(check?.message).toMatch(/; hash32-0 \(.*\), hash32-1 \(.*\) agree at revision \d+/);
    } finally {
      await cluster.restart(2);
      await cluster.waitHealthy();
    }
  });

  it('is not judged while a member hangs (SIGSTOP): the deadline bounds it and it never passes', async () => {
    const hung = cluster.members[1];
    if (hung === undefined) throw new Error('no member');
    cluster.pause(1);
    try {
      const started = performance.now();
      const evaluation = await evaluateTarget({ ...target, timeout: 1000 });
      const wallMs = performance.now() - started;
      const check = consistency(evaluation);
      console.log(`one hung: ${check?.status} in ${Math.round(wallMs)} ms: ${check?.message}`);
      expect(check?.status).toBe('warn');
      expect(check?.message).toContain(`member ${hung.name} (`);
      expect(check?.message).toMatch(/^consistency not judged: /);
      expect(wallMs).toBeLessThan(1000 + BOUND_SLACK_MS);
    } finally {
      cluster.resume(1);
      await cluster.waitHealthy();
    }
  });

  it('fails naming the member whose stored data was changed while it was stopped', { timeout: 180_000 }, async () => {
    const changed = await divergeMember(cluster, 1);
    const evaluation = await evaluateTarget(target);
    const check = consistency(evaluation);
    console.log(`diverged: ${check?.status}: ${check?.message}`);
    expect(check?.status).toBe('fail');
    expect(check?.message).toMatch(
      new RegExp(`^data diverges at revision \\d+ \\(compact revision \\d+\\): member ${changed.name} \\(`),
    );
    expect(check?.message).toMatch(/differs from hash \d+ of hash32-0 \(.*\), hash32-2 \(/);
    expect(evaluation.verdict).toBe('Unhealthy');
    expect(evaluation.reasons).toContain(check?.message);
  });
});
