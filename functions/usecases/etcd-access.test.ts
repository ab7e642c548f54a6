// evaluateThroughAccess with accesses other than a static target's: members reached by a way in
// that is not their advertised URL and described by name, an access that cannot be opened, and
// one whose opening hangs past the target's timeout.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { targetSchema } from '../domain/config.js';
import { evaluationSchema, type Evaluation } from '../domain/evaluation-document.js';
import { readTargetCredentials } from './etcd-access.js';
import { directEtcdAccess, EtcdAccessError, type EtcdAccess } from '../ports/etcd-access.js';
import { evaluateThroughAccess } from './evaluate-target.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { BOUND_SLACK_MS } from '../../test/harness/timing.js';

const target = targetSchema.parse({ name: 'aliased', endpoints: ['https://unused.invalid:2379'], timeout: '1s' });

/**
 * Reaches each member at https://localhost:PORT (its server cert names localhost) instead of its
 * advertised https://127.0.0.1:PORT, and describes it as "via alias <member name>".
 */
async function aliasAccess(cluster: EtcdTestCluster, closed: { count: number }): Promise<EtcdAccess> {
  const direct = directEtcdAccess([], await readTargetCredentials({ name: 'aliased', tls: cluster.clientTls }));
  const alias = (url: string) => url.replace('127.0.0.1', 'localhost');
  const nameByAlias = new Map(cluster.members.map((member) => [alias(member.clientUrl), member.name]));
  return {
    ...direct,
    seedEndpoints: cluster.members.map((member) => alias(member.clientUrl)),
    endpointFor: (member) => (member.clientUrls[0] === undefined ? undefined : alias(member.clientUrls[0])),
    describe: (endpoint) => `via alias ${nameByAlias.get(endpoint) ?? 'unknown'}`,
    close: () => {
      closed.count += 1;
      return Promise.resolve();
    },
  };
}

function reasonsAndErrors(evaluation: Evaluation): string {
  return JSON.stringify([evaluation.reasons, evaluation.checks, evaluation.members]);
}

describe('evaluateThroughAccess', () => {
  let cluster: EtcdTestCluster;
  beforeAll(async () => {
    cluster = await startEtcdCluster({ name: 'access' });
  }, 30_000);
  afterAll(async () => {
    await cluster.destroy();
  });

  it('judges members reached through the access and shows its descriptions, never the dialled URL', async () => {
    const closed = { count: 0 };
    const evaluation = await evaluateThroughAccess(target, () => aliasAccess(cluster, closed));
    evaluationSchema.parse(evaluation);
    expect(evaluation.verdict).toBe('Healthy');
    expect(evaluation.members.map((member) => member.endpoint).sort()).toEqual(
      cluster.members.map((member) => `via alias ${member.name}`).sort(),
    );
    expect(closed.count).toBe(1);
  });

  it('names a killed member by its description, matched to it although its probe failed', async () => {
    const closed = { count: 0 };
    // A follower: killing the leader would add an election to the reasons.
    const victimIndex = ((await cluster.leaderIndex()) + 1) % cluster.members.length;
    const victim = cluster.members[victimIndex];
    await cluster.kill(victimIndex);
    const evaluation = await evaluateThroughAccess(target, () => aliasAccess(cluster, closed));
    expect(evaluation.verdict).toBe('Unhealthy');
    expect(evaluation.reasons).toEqual([expect.stringContaining(`via alias ${victim?.name}`)]);
    expect(evaluation.members.find((member) => member.name === victim?.name)).toMatchObject({
      endpoint: `via alias ${victim?.name}`,
      healthy: false,
      error: expect.stringMatching(/connection refused/),
    });
    expect(reasonsAndErrors(evaluation)).not.toContain('localhost:');
    expect(closed.count).toBe(1);
    await cluster.restart(victimIndex);
    await cluster.waitHealthy();
  });

  it('reports an access that cannot be opened as Unhealthy with its reason', async () => {
    const evaluation = await evaluateThroughAccess(target, () =>
      Promise.reject(new EtcdAccessError('Secret ns/b-etcd not found')),
    );
    evaluationSchema.parse(evaluation);
    expect(evaluation.verdict).toBe('Unhealthy');
    expect(evaluation.checks.find((check) => check.name === 'member-list')).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('Secret ns/b-etcd not found'),
    });
  });

  it('bounds an access that opens too late by the target timeout and closes it once it opens', async () => {
    const closed = { count: 0 };
    let lateOpen: (access: EtcdAccess) => void = () => undefined;
    const started = performance.now();
    const evaluation = await evaluateThroughAccess(target, () => new Promise<EtcdAccess>((resolve) => (lateOpen = resolve)));
    const wallMs = performance.now() - started;
    expect(wallMs).toBeLessThan(target.timeout + BOUND_SLACK_MS);
    expect(evaluation.verdict).toBe('Unhealthy');
    expect(evaluation.reasons.join('\n')).toMatch(/opening access to etcd timed out after \d+ ms/);
    lateOpen(await aliasAccess(cluster, closed));
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed.count).toBe(1);
  });
});
