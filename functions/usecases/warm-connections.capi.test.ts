// Issue 27, "Warm connections, bounded", for a Cluster API target: the webhook keeps the
// port-forward listeners, the WebSocket streams their etcd channels ride and a keep-alive
// connection to the workload API server open between evaluations. On a real 3-member etcd behind
// the workload API server stand-in: the second evaluation opens no port-forward stream, makes no
// etcd TLS handshake and no new socket; a SIGKILLed member that comes back is reached on a fresh
// stream and judged healthy; after the idle timeout every stream and socket is gone. Evaluated as
// the webhook does, the Secrets and the workload's Node list are read once per reuse window and
// the Machines every time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CoreV1Api } from '../adapters/kube.js';
import { createCoreV1Api } from '../adapters/kube.js';
import { createCustomObjectsApi } from '../adapters/kube-discovery.js';
import { tlsHandshakeCounts } from '../adapters/etcd-member-probe.js';
import type { Evaluation } from '../domain/evaluation-document.js';
import type { Target } from '../domain/targets.js';
import { evaluateResolvedTarget, type WarmConnections } from './reach-target.js';
import { CAPI_MANAGEMENT_REUSE_MS } from './warm-connections.js';
import {
  capiTarget,
  controlPlaneMachine,
  putControlPlaneMachines,
  startCapiWorkload,
  warmConnectionsFor,
  type CapiWorkload,
} from '../../test/harness/capi-workload.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';
import { openSockets } from '../../test/harness/sockets.js';
import { waitFor } from '../../test/harness/wait.js';

const SETTLE_MS = 5_000;

/** The connections the webhook keeps, idle for at most `idleTimeout`. */
const warmWith = (idleTimeout: string, nowMs?: () => number) => warmConnectionsFor({ idleTimeout }, nowMs);

let management: FakeKubeApiServer;
let coreApi: CoreV1Api;
let workload: CapiWorkload;
let target: Target;

function evaluate(warm: WarmConnections | null): Promise<Evaluation> {
  return evaluateResolvedTarget(target, {
    coreApi,
    customObjectsApi: createCustomObjectsApi(management.kubeconfigFile),
    ...(warm === null ? {} : { warm }),
  });
}

function handshakes(): number {
  const { resumed, verified } = tlsHandshakeCounts();
  return resumed + verified;
}

beforeAll(async () => {
  management = await startFakeKubeApiServer();
  coreApi = createCoreV1Api(management.kubeconfigFile);
  workload = await startCapiWorkload(management, { namespace: 'team-w', clusterName: 'ww' });
  putControlPlaneMachines(management, workload);
  target = capiTarget(workload);
  // Mints the client certificate and loads the engine: what a warm webhook has done long before.
  expect((await evaluate(null)).verdict).toBe('Healthy');
  await waitFor('the warm-up evaluation’s streams closed', SETTLE_MS, () => workload.relay.openStreams() === 0);
}, 60_000);

afterAll(async () => {
  await Promise.all([workload?.destroy(), management?.close()]);
});

describe('warm connections, bounded: a Cluster API target through port-forward', () => {
  it('the second evaluation opens no port-forward stream, makes no etcd handshake and no socket', async () => {
    const warm = warmWith('60s');
    try {
      const first = await evaluate(warm);
      expect(first.verdict, first.reasons.join('; ')).toBe('Healthy');
      expect(warm.counts()).toMatchObject({ channels: 3, capiAccesses: 1 });
      await evaluate(warm);
      const streams = workload.relay.streamsOpened();
      const before = handshakes();
      const sockets = openSockets();
      const third = await evaluate(warm);
      expect(third.verdict, third.reasons.join('; ')).toBe('Healthy');
      expect(workload.relay.streamsOpened() - streams).toBe(0);
      expect(handshakes() - before).toBe(0);
      expect(openSockets()).toBeLessThanOrEqual(sockets);
    } finally {
      warm.close();
    }
    await waitFor('every stream closed with the kept access', SETTLE_MS, () => workload.relay.openStreams() === 0);
  });

  it('a SIGKILLed member is judged dead, and after its restart is reached on a fresh stream and judged healthy', async () => {
    const warm = warmWith('60s');
    const leader = await workload.etcd.leaderIndex();
    const victim = (leader + 1) % workload.etcd.members.length;
    try {
      expect((await evaluate(warm)).verdict).toBe('Healthy');
      await workload.etcd.kill(victim);
      const down = await evaluate(warm);
      expect(down.members.filter((member) => !member.healthy).map((member) => member.name)).toEqual([workload.nodeNames[victim]]);
      await workload.etcd.restart(victim);
      await workload.etcd.waitHealthy();
      const streams = workload.relay.streamsOpened();
      await waitFor('the restarted member judged healthy through the kept access', 15_000, async () => {
        return (await evaluate(warm)).verdict === 'Healthy';
      });
      expect(workload.relay.streamsOpened() - streams).toBeGreaterThanOrEqual(1);
      expect(warm.counts()).toMatchObject({ channels: 3, capiAccesses: 1 });
    } finally {
      warm.close();
    }
  });

  it('after the idle timeout the listeners, streams and sockets are gone', async () => {
    await waitFor('no stream left from earlier tests', SETTLE_MS, () => workload.relay.openStreams() === 0);
    const baseline = openSockets();
    const warm = warmWith('1s');
    try {
      await evaluate(warm);
      await evaluate(warm);
      expect(workload.relay.openStreams()).toBe(3);
      await waitFor('kept connections closed when idle', 1_000 + SETTLE_MS, () => {
        const counts = warm.counts();
        return counts.channels === 0 && counts.capiAccesses === 0;
      });
      await waitFor('every stream closed', SETTLE_MS, () => workload.relay.openStreams() === 0);
      await waitFor(`open sockets back to ${baseline}`, SETTLE_MS, () => openSockets() <= baseline);
    } finally {
      warm.close();
    }
  });

  it('the Secrets, clients and Node list are reused for a few seconds; the Machines are listed every time', async () => {
    let now = 0;
    const warm = warmWith('60s', () => now);
    // As the webhook evaluates it: the clients built from the target's kubeconfig, not handed in.
    const asWebhook = {
      ...target,
      reach: { ...workload.cluster, kind: 'capi' as const, kubeconfigFile: management.kubeconfigFile },
    };
    const evaluateAsWebhook = () => evaluateResolvedTarget(asWebhook, { warm });
    const reads = (resource: string, verb: string) => () =>
      management.requests.filter(
        (request) => request.resource === resource && request.verb === verb && request.namespace === 'team-w',
      ).length;
    const secretReads = reads('secrets', 'get');
    const machineLists = reads('machines', 'list');
    const nodeLists = () =>
      workload.apiServer.requests.filter((request) => request.resource === 'nodes' && request.verb === 'list').length;
    const [victim] = workload.nodeNames;
    if (victim === undefined) throw new Error('the workload has nodes');
    try {
      const rows: {
        step: string;
        act: () => void;
        verdict: string;
        secretReads: number;
        machineLists: number;
        nodeLists: number;
      }[] = [
        { step: 'first evaluation', act: () => undefined, verdict: 'Healthy', secretReads: 2, machineLists: 1, nodeLists: 1 },
        { step: 'again at once', act: () => undefined, verdict: 'Healthy', secretReads: 0, machineLists: 1, nodeLists: 0 },
        {
          step: 'a Machine removed: seen at once',
          act: () => management.removeObject('machines', 'cluster.x-k8s.io/v1beta1', 'team-w', `${victim}-machine`),
          verdict: 'Unhealthy',
          secretReads: 0,
          machineLists: 1,
          nodeLists: 0,
        },
        {
          step: 'Machine back',
          act: () => management.putObject('machines', controlPlaneMachine(workload.cluster, victim)),
          verdict: 'Healthy',
          secretReads: 0,
          machineLists: 1,
          nodeLists: 0,
        },
        {
          step: 'just inside the window',
          act: () => (now = CAPI_MANAGEMENT_REUSE_MS - 1),
          verdict: 'Healthy',
          secretReads: 0,
          machineLists: 1,
          nodeLists: 0,
        },
        {
          step: 'the window over: read again',
          act: () => (now = CAPI_MANAGEMENT_REUSE_MS),
          verdict: 'Healthy',
          secretReads: 2,
          machineLists: 1,
          nodeLists: 1,
        },
        {
          step: 'a failed read is not kept (Secrets forbidden, next window)',
          act: () => {
            management.forbid('get', 'secrets', 'team-w');
            now = 2 * CAPI_MANAGEMENT_REUSE_MS;
          },
          verdict: 'NotEvaluatedError',
          secretReads: 2,
          machineLists: 1,
          nodeLists: 0,
        },
        {
          step: 'allowed again: read at once',
          act: () => management.allowAll(),
          verdict: 'Healthy',
          secretReads: 2,
          machineLists: 1,
          nodeLists: 1,
        },
      ];
      for (const row of rows) {
        row.act();
        const [secretsBefore, listsBefore, nodesBefore] = [secretReads(), machineLists(), nodeLists()];
        const evaluation = await evaluateAsWebhook().catch((error: unknown) => ({
          verdict: (error as Error).name,
          reasons: [(error as Error).message],
        }));
        expect(
          {
            verdict: evaluation.verdict,
            secretReads: secretReads() - secretsBefore,
            machineLists: machineLists() - listsBefore,
            nodeLists: nodeLists() - nodesBefore,
          },
          `${row.step}: ${evaluation.reasons.join('; ')}`,
        ).toEqual({
          verdict: row.verdict,
          secretReads: row.secretReads,
          machineLists: row.machineLists,
          nodeLists: row.nodeLists,
        });
      }
    } finally {
      management.allowAll();
      management.putObject('machines', controlPlaneMachine(workload.cluster, victim));
      warm.close();
    }
  });
});
