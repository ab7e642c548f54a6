// End to end with a real 3-member etcd: the scheduled evaluation feeds the store, the webhook's
// cache picks it up, and /validate over HTTPS allows a scale-up while etcd is healthy, denies the
// same change naming the dead member after one is killed, and allows it again once it is back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import { kcpReplicasReview } from '../harness/reviews.js';

let e2e: EtcdWebhook;

beforeAll(async () => {
  e2e = await startEtcdWebhook({ name: 'e2e', target: 'e2e', timeout: '1s', webhook: { ready: true } });
});

afterAll(async () => {
  await e2e?.close();
});

/** A spec edit of KCP default/e2e-control-plane (cluster e2e) changing its replicas. */
const kcpScale = (from: number, to: number) =>
  kcpReplicasReview(from, to, { namespace: 'default', name: 'e2e-control-plane', clusterName: 'e2e' });

describe('webhook + scheduled evaluation + real etcd', () => {
  it('allows, denies naming the killed member, and allows again after it is restarted', async () => {
    const healthy = await e2e.scheduledEvaluation();
    // On a loaded machine a Status round trip can pass the slow-member limit: that warn (Degraded)
    // is about the machine, not the cluster; any other check not passing is.
    const notPassing = healthy.checks.filter((check) => check.status !== 'pass');
    expect(
      notPassing.filter((check) => !(check.name === 'latency' && check.status === 'warn')),
      healthy.reasons.join('; '),
    ).toEqual([]);
    expect((await e2e.webhook.postReview(kcpScale(3, 5))).allowed).toBe(true);

    const { cluster } = e2e;
    const victim = cluster.members[1];
    if (!victim) throw new Error('cluster has no member 1');
    await cluster.kill(1);
    const sick = await e2e.scheduledEvaluation();
    expect(sick.verdict).toBe('Unhealthy');
    const denied = await e2e.webhook.postReview(kcpScale(3, 5));
    expect(denied.allowed).toBe(false);
    expect(denied.status?.code).toBe(403);
    expect(denied.status?.message).toMatch(/target e2e verdict Unhealthy/);
    const namesVictim = denied.status?.message.includes(victim.name) || denied.status?.message.includes(victim.clientUrl);
    expect(namesVictim, `denial should name ${victim.name}: ${denied.status?.message}`).toBe(true);

    await cluster.restart(1);
    await cluster.waitHealthy();
    const recovered = await e2e.scheduledEvaluation();
    expect(recovered.verdict, recovered.reasons.join('; ')).not.toBe('Unhealthy');
    expect((await e2e.webhook.postReview(kcpScale(3, 5))).allowed).toBe(true);
  });
});
