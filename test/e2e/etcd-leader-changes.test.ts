// Issue 32, `leader-changes`, on a real 3-member etcd through the scheduled run and its store: the
// first run stores the leader's term, a later run counts the elections since. Leadership moved 5
// times within a minute (etcdctl move-leader) warns; a quiet interval passes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import { waitFor } from '../harness/wait.js';

let e2e: EtcdWebhook;

beforeAll(async () => {
  e2e = await startEtcdWebhook({ name: 'churn32', target: 'prod', timeout: '2s' });
});

afterAll(async () => {
  await e2e?.close();
});

const leaderChanges = (evaluation: Evaluation) => evaluation.checks.find((check) => check.name === 'leader-changes');
const leaderTerm = (evaluation: Evaluation) => evaluation.members.find((member) => member.leader)?.raftTerm;

/** A scheduled run whose evaluation names a leader (a loaded machine can make one member miss a run). */
async function storedWithLeader(): Promise<Evaluation> {
  let stored: Evaluation | undefined;
  await waitFor('an evaluation that names a leader', 30_000, async () => {
    stored = await e2e.scheduledEvaluation();
    return typeof leaderTerm(stored) === 'number';
  });
  if (stored === undefined) throw new Error('no evaluation');
  return stored;
}

/** Member ids in hex, as move-leader takes them, from the evaluation's decimal ids. */
const hexIds = (evaluation: Evaluation) => evaluation.members.map((member) => BigInt(member.id).toString(16));

describe('leader-changes on real etcd (issue 32)', () => {
  it('passes a quiet interval, naming no election', async () => {
    // The first run finds nothing stored: nothing to compare, no check.
    const initial = await e2e.scheduledEvaluation();
    expect(initial.checks.map((check) => check.name)).not.toContain('leader-changes');
    const first = await storedWithLeader();
    const second = await e2e.scheduledEvaluation();
    expect(leaderTerm(second)).toBe(leaderTerm(first));
    expect(leaderChanges(second)).toMatchObject({ status: 'pass' });
    expect(leaderChanges(second)?.message).toContain('(0 elections)');
  });

  it('warns after the leader moved 5 times within a minute, naming the elections and the rate', async () => {
    const stored = await storedWithLeader();
    const startTerm = leaderTerm(stored);
    if (startTerm === undefined || startTerm === null) throw new Error(`no leader term in ${JSON.stringify(stored.members)}`);
    const ids = hexIds(stored);
    const started = performance.now();
    for (let move = 0; move < 5; move += 1) {
      const from = await e2e.cluster.leaderIndex();
      const to = (from + 1) % ids.length;
      const result = await e2e.cluster.etcdctl(['move-leader', ids[to] ?? '', '--command-timeout=5s']);
      expect(result.code, result.stderr).toBe(0);
      await waitFor(`member ${to} to lead`, 10_000, async () => (await e2e.cluster.leaderIndex().catch(() => -1)) === to);
    }
    const movedInMs = performance.now() - started;
    expect(movedInMs).toBeLessThan(60_000);
    const evaluation = await e2e.scheduledEvaluation();
    const check = leaderChanges(evaluation);
    console.log(`leader moved 5 times in ${(movedInMs / 1000).toFixed(1)} s: ${check?.status}: ${check?.message}`);
    expect(check?.status).toBe('warn');
    const endTerm = leaderTerm(evaluation) ?? 0;
    // Every move is an election: the term rose at least 5 (an unrelated election may add more).
    expect(endTerm - startTerm).toBeGreaterThanOrEqual(5);
    expect(check?.message).toContain(`leader churn: raft term ${startTerm} → ${endTerm} (${endTerm - startTerm} elections)`);
    expect(check?.message).toContain('warns at 4 in 15m');
    expect(evaluation.verdict).toBe('Degraded');
    expect(evaluation.reasons).toContain(check?.message);
  });
});
