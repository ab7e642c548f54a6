// The serverless handlers keep each member's channel open between warm invocations of one
// container (issue 27, "warm connections, bounded"), as the webhook does between requests: on a
// real 3-member etcd the second invocation makes no TLS handshake, and once the container has
// been idle for connections.idleTimeout the channels are closed (sockets back to the baseline)
// and the next invocation dials afresh.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tlsHandshakeCounts } from '../adapters/etcd-member-probe.js';
import { parseGuardConfig, type GuardConfig } from '../domain/config.js';
import { createEvaluateHandler, createEvaluateHttpHandler } from './handlers.js';
import { evaluateTarget } from '../usecases/evaluate-target.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { openSockets } from '../../test/harness/sockets.js';
import { waitFor } from '../../test/harness/wait.js';

const IDLE_TIMEOUT_MS = 1_000;
/** Sockets closed by us or by a peer settle within a few event loop turns; this bounds the wait. */
const SETTLE_MS = 5_000;

let cluster: EtcdTestCluster;
let dir: string;
let baseline: number;

function handshakes(): number {
  const { resumed, verified } = tlsHandshakeCounts();
  return resumed + verified;
}

function config(idleTimeoutMs = IDLE_TIMEOUT_MS): GuardConfig {
  return parseGuardConfig(
    {
      store: { kind: 'file', dir },
      connections: { idleTimeout: `${idleTimeoutMs}ms` },
      targets: [{ name: 'warm', endpoints: cluster.endpoints, tls: cluster.clientTls, timeout: '2s' }],
    },
    'serverless warm config',
  );
}

beforeAll(async () => {
  cluster = await startEtcdCluster({ name: 'slswarm' });
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-sls-warm-'));
  const before = openSockets();
  // The first evaluation loads grpc-js and opens process-wide handles that stay.
  await evaluateTarget(config().targets[0] as GuardConfig['targets'][number]);
  await waitFor('the warm-up evaluation’s sockets closed', SETTLE_MS, () => openSockets() <= before);
  baseline = openSockets();
}, 60_000);

afterAll(async () => {
  await cluster?.destroy();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('serverless handlers: member channels kept between warm invocations, bounded by the idle timeout', () => {
  const env = { LOG_LEVEL: 'silent' };

  it('evaluate: the second invocation makes no handshake; after the idle timeout sockets return to the baseline and the next dials afresh', async () => {
    const evaluate = createEvaluateHandler({ loadConfig: config, env });
    await expect(evaluate({})).resolves.toMatchObject({ targets: 1, passed: 1, failed: 0 });
    const before = handshakes();
    await expect(evaluate({})).resolves.toMatchObject({ targets: 1, passed: 1, failed: 0 });
    expect(handshakes() - before).toBe(0);
    await waitFor(`open sockets back to ${baseline}`, IDLE_TIMEOUT_MS + SETTLE_MS, () => openSockets() <= baseline);
    const idle = handshakes();
    await expect(evaluate({})).resolves.toMatchObject({ targets: 1, passed: 1, failed: 0 });
    expect(handshakes() - idle).toBeGreaterThan(0);
    await waitFor(`open sockets back to ${baseline}`, IDLE_TIMEOUT_MS + SETTLE_MS, () => openSockets() <= baseline);
  });

  it('evaluateHttp: two POSTs in one container, the second on the kept channels', async () => {
    // Longer than the on-demand service's minimum interval between runs, which the test waits out.
    const idleTimeoutMs = 5_000;
    const evaluateHttp = createEvaluateHttpHandler({ loadConfig: () => config(idleTimeoutMs), env });
    const post = async () => {
      const response = await evaluateHttp({ requestContext: { http: { method: 'POST' } }, pathParameters: { target: 'warm' } });
      expect(response.statusCode, response.body).toBe(200);
      return JSON.parse(response.body) as { verdict: string; evaluatedAt: string };
    };
    const first = await post();
    expect(first.verdict).toBe('Healthy');
    // A POST within the minimum interval shares the first run: wait for one that evaluated anew.
    let before = handshakes();
    await waitFor('a second POST that ran its own evaluation', SETTLE_MS, async () => {
      before = handshakes();
      return (await post()).evaluatedAt !== first.evaluatedAt;
    });
    expect(handshakes() - before).toBe(0);
    await waitFor(`open sockets back to ${baseline}`, idleTimeoutMs + SETTLE_MS, () => openSockets() <= baseline);
  });
});
