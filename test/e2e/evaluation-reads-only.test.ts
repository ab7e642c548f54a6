// A healthy evaluation only reads from etcd: it proposes nothing through raft, so an evaluator
// running every minute adds no entries to a production cluster's log. The alarm GET used to be a
// raft proposal per member per evaluation (issue 20); the alarms now come from Status on the
// healthy path. The opt-in watch probe writes a key and is off here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { targetSchema, type TargetConfig } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';

const EVALUATIONS = 6;

/** The raft index the leader reported in `evaluation` (its committed index). */
function leaderRaftIndex(evaluation: Evaluation): number {
  const leader = evaluation.members.find((member) => member.leader);
  if (leader?.raftIndex == null) throw new Error(`no leader with a raft index: ${evaluation.reasons.join('; ')}`);
  return leader.raftIndex;
}

describe('a healthy evaluation', () => {
  let cluster: EtcdTestCluster;
  let target: TargetConfig;

  beforeAll(async () => {
    cluster = await startEtcdCluster({ name: 'reads-only' });
    target = targetSchema.parse({ name: 'reads-only', endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: '2s' });
  }, 60_000);

  afterAll(async () => {
    await cluster?.destroy();
  });

  it(`appends nothing of its own to the raft log over ${EVALUATIONS} evaluations`, async () => {
    const first = await evaluateTarget(target);
    expect(first.verdict, first.reasons.join('; ')).toBe('Healthy');
    let last = first;
    for (let run = 1; run < EVALUATIONS; run++) {
      last = await evaluateTarget(target);
      expect(last.verdict, last.reasons.join('; ')).toBe('Healthy');
    }
    // etcd itself may append an entry now and then (the cluster version after start-up); a
    // proposal per member per evaluation would be 3 × (EVALUATIONS - 1) = 15 here.
    expect(leaderRaftIndex(last) - leaderRaftIndex(first)).toBeLessThan(EVALUATIONS - 1);
  });
});
