// Cluster-ID agreement on real etcd: a member of ANOTHER cluster, started under the same CA so TLS
// lets us in and its answer (with its own cluster ID) is seen, is given as one of the endpoints.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { targetSchema } from '../../functions/domain/config.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';

let home: EtcdTestCluster;
let foreign: EtcdTestCluster;

beforeAll(async () => {
  home = await startEtcdCluster({ name: 'home' });
  foreign = await startEtcdCluster({ name: 'foreign', size: 1, pki: home.pki });
  await Promise.all([home.waitHealthy(), foreign.waitHealthy()]);
}, 90_000);

afterAll(async () => {
  // The shared PKI lives in home's dir.
  await foreign?.destroy();
  await home?.destroy();
});

describe('a member of another cluster given as an endpoint', () => {
  it('is judged Unhealthy by the cluster-id check, which names its endpoint', async () => {
    const stranger = foreign.endpoints[0] ?? '';
    const target = targetSchema.parse({
      name: 'home',
      endpoints: [...home.endpoints, stranger],
      tls: home.clientTls,
      timeout: '2s',
    });
    const evaluation = await evaluateTarget(target);
    const clusterId = evaluation.checks.find((check) => check.name === 'cluster-id');
    expect(evaluation.verdict).toBe('Unhealthy');
    expect(clusterId?.status).toBe('fail');
    expect(clusterId?.message).toContain(stranger);
    expect(clusterId?.message).toMatch(/another cluster/);
    expect(evaluation.reasons.some((reason) => reason.includes(stranger))).toBe(true);
    for (const member of home.endpoints) expect(clusterId?.message).not.toContain(member);
  }, 30_000);

  it('the same endpoints without the stranger are Healthy (the check is not failing for another cause)', async () => {
    const target = targetSchema.parse({ name: 'home', endpoints: home.endpoints, tls: home.clientTls, timeout: '2s' });
    const evaluation = await evaluateTarget(target);
    expect(evaluation.checks.find((check) => check.name === 'cluster-id')?.status).toBe('pass');
    expect(evaluation.verdict).not.toBe('Unhealthy');
  }, 30_000);
});
