// What the evaluation takes from newer etcd, against the etcd under test (3.4 by default, 3.5 in
// CI's second pass): on 3.5+ the membership comes from a linearizable MemberList (the committed
// list); on 3.4, which ignores the request's `linearizable` field, from the members' local lists
// as before. With quorum gone a 3.5 member cannot serve the committed list and the evaluation
// falls back to the local one, still naming the members.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGuardConfig, type TargetConfig } from '../functions/entrypoints/config.js';
import type { Evaluation } from '../functions/domain/evaluation-document.js';
import { evaluateTarget } from '../functions/usecases/evaluate-target.js';
import { etcdVersion, startEtcdCluster, type EtcdTestCluster } from './harness/etcd-cluster.js';

let cluster: EtcdTestCluster;
let target: TargetConfig;
let linearizableMemberList: boolean;

beforeAll(async () => {
  const version = await etcdVersion();
  const [major, minor] = version.split('.').map(Number);
  linearizableMemberList = (major ?? 0) > 3 || ((major ?? 0) === 3 && (minor ?? 0) >= 5);
  cluster = await startEtcdCluster({ size: 3, name: 'features' });
  const config = parseGuardConfig(
    { targets: [{ name: 'features', endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: '2s' }] },
    'test config',
  );
  const [only] = config.targets;
  if (!only) throw new Error('no target');
  target = only;
});

afterAll(async () => {
  await cluster?.destroy();
});

const memberListMessage = (evaluation: Evaluation) => evaluation.checks.find((check) => check.name === 'member-list')?.message;

describe('the member list by etcd version', () => {
  it('is the committed (linearizable) list on etcd 3.5+, the local lists on 3.4', async () => {
    const evaluation = await evaluateTarget(target);
    expect(evaluation.verdict).not.toBe('Unhealthy');
    expect(memberListMessage(evaluation)).toBe(
      linearizableMemberList ? '3 members listed (linearizable: the committed membership)' : '3 members listed',
    );
  });

  it('falls back to the local lists when quorum is gone, still naming every member', async () => {
    await cluster.kill(1);
    await cluster.kill(2);
    try {
      const evaluation = await evaluateTarget({ ...target, timeout: 1000 });
      expect(evaluation.verdict).toBe('Unhealthy');
      expect(memberListMessage(evaluation)).toBe('3 members listed');
      expect(evaluation.members.map((member) => member.name).sort()).toEqual(cluster.members.map((member) => member.name).sort());
    } finally {
      await cluster.restart(1);
      await cluster.restart(2);
      await cluster.waitHealthy();
    }
  });
});
