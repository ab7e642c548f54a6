// Issue 27, "Warm connections, bounded", for the API servers a Cluster API evaluation reads: each
// of them lists the Machines and reads two Secrets on the management API server, and client-node
// opened a new connection for every one of those requests. On a real 3-member etcd behind the
// workload API server stand-in, and a management stand-in over plain http and over TLS (its CA in
// the kubeconfig): 20 evaluations share the connections of the first, TLS is verified as before,
// and the kept sockets close after the idle timeout. A GET on a kept socket the server closes
// unanswered is sent once more on a new socket; a create, or a GET on a new socket, never is.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callKube, createCoreV1Api } from './kube.js';
import { KeptKubeAgents, DEFAULT_KUBE_AGENT_LIMITS } from './kube-agents.js';
import { createCustomObjectsApi } from './kube-discovery.js';
import { Deadline } from '../domain/deadline.js';
import type { Target } from '../domain/targets.js';
import { evaluateResolvedTarget, type WarmConnections } from '../usecases/reach-target.js';
import {
  capiTarget,
  putCapiSecrets,
  putControlPlaneMachines,
  startCapiWorkload,
  startWorkloadApiServer,
  warmConnectionsFor,
  type CapiWorkload,
} from '../../test/harness/capi-workload.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';
import { waitFor } from '../../test/harness/wait.js';

const EVALUATIONS = 20;
const SETTLE_MS = 5_000;

let plain: FakeKubeApiServer;
let tls: FakeKubeApiServer;
let workload: CapiWorkload;
let target: Target;

/** Evaluations of the target through `management`, on clients whose connections `agents` keeps. */
function evaluator(management: FakeKubeApiServer, agents: KeptKubeAgents, warm: WarmConnections) {
  const options = {
    coreApi: createCoreV1Api(management.kubeconfigFile, agents),
    customObjectsApi: createCustomObjectsApi(management.kubeconfigFile, agents),
    warm,
  };
  return async () => {
    const evaluation = await evaluateResolvedTarget(target, options);
    expect(evaluation.verdict, evaluation.reasons.join('; ')).toBe('Healthy');
  };
}

beforeAll(async () => {
  [plain, tls] = await Promise.all([startFakeKubeApiServer(), startWorkloadApiServer()]);
  workload = await startCapiWorkload(plain, { namespace: 'team-k', clusterName: 'kk' });
  await putCapiSecrets(tls, workload.cluster, workload);
  putControlPlaneMachines(plain, workload);
  putControlPlaneMachines(tls, workload);
  target = capiTarget(workload);
}, 60_000);

afterAll(async () => {
  await Promise.all([workload?.destroy(), plain?.close(), tls?.close()]);
});

describe('kept API server connections: a Cluster API target', () => {
  it.each([
    { management: 'plain http', server: () => plain },
    { management: 'TLS', server: () => tls },
  ])(
    `${EVALUATIONS} evaluations through a $management management API server share the first one's connections`,
    async ({ server }) => {
      const management = server();
      const agents = new KeptKubeAgents();
      const warm = warmConnectionsFor();
      try {
        const evaluate = evaluator(management, agents, warm);
        const before = { management: management.connections().accepted, workload: workload.apiServer.connections().accepted };
        for (let run = 0; run < EVALUATIONS; run += 1) await evaluate();
        // The Machine list and both Secret reads run at once: at most a connection each, in all.
        // Without kept agents every request opened one: 3 × EVALUATIONS.
        const opened = management.connections().accepted - before.management;
        expect(opened).toBeGreaterThanOrEqual(1);
        expect(opened).toBeLessThanOrEqual(3);
        // The workload API server: the port-forward streams and the Node list, kept with the access.
        expect(workload.apiServer.connections().accepted - before.workload).toBeLessThanOrEqual(4);
        expect(agents.sockets().active).toBe(0);
      } finally {
        warm.close();
        agents.close();
      }
    },
    60_000,
  );

  it('a kept connection is never shared with a client that does not trust the server', async () => {
    const agents = new KeptKubeAgents();
    const trusting = createCoreV1Api(tls.kubeconfigFile, agents);
    const read = (api: typeof trusting) =>
      callKube({ verb: 'get', resource: 'secrets', name: 'kk-etcd', namespace: 'team-k' }, Deadline.after(2_000), (options) =>
        api.readNamespacedSecret({ name: 'kk-etcd', namespace: 'team-k' }, options),
      );
    // The same server and token, but no CA: the system roots do not know the stand-in's.
    const kubeconfig = JSON.parse(readFileSync(tls.kubeconfigFile, 'utf8')) as {
      clusters: { cluster: Record<string, unknown> }[];
    };
    for (const { cluster } of kubeconfig.clusters) delete cluster['certificate-authority-data'];
    const untrustingFile = path.join(path.dirname(tls.kubeconfigFile), 'kubeconfig-no-ca');
    writeFileSync(untrustingFile, JSON.stringify(kubeconfig), { mode: 0o600 });
    const untrusting = createCoreV1Api(untrustingFile, agents);
    try {
      expect((await read(trusting)).metadata?.name).toBe('kk-etcd');
      expect(agents.sockets().idle).toBe(1);
      await expect(read(untrusting)).rejects.toThrow(/certificate/i);
      expect((await read(trusting)).metadata?.name).toBe('kk-etcd');
    } finally {
      agents.close();
    }
  });

  it('the kept sockets close after the idle timeout', async () => {
    const idleTimeoutMs = 300;
    const agents = new KeptKubeAgents({ ...DEFAULT_KUBE_AGENT_LIMITS, idleTimeoutMs });
    const warm = warmConnectionsFor();
    try {
      await waitFor('no management connection left from earlier tests', SETTLE_MS, () => tls.connections().open === 0);
      const evaluate = evaluator(tls, agents, warm);
      await evaluate();
      await evaluate();
      expect(tls.connections().open).toBeGreaterThanOrEqual(1);
      expect(agents.sockets().idle).toBe(tls.connections().open);
      await waitFor('the idle management connections closed', idleTimeoutMs + SETTLE_MS, () => tls.connections().open === 0);
      expect(agents.sockets()).toEqual({ active: 0, idle: 0 });
      // Closed, not broken: the next evaluation opens a connection again.
      const accepted = tls.connections().accepted;
      await evaluate();
      expect(tls.connections().accepted).toBeGreaterThan(accepted);
    } finally {
      warm.close();
      agents.close();
    }
  });
});

/**
 * An API server that closes a kept-alive socket when a request arrives on it (`reused`), as a
 * server does when its idle timeout fires just as the client reuses the socket, or a socket's first
 * request (`fresh`): the socket ends with no answer. Counts the requests that reached it.
 */
async function startClosingServer() {
  const closeOn = { reused: false, fresh: false };
  const seen: { method: string; reused: boolean; closed: boolean }[] = [];
  const served = new WeakMap<object, number>();
  const server = http.createServer((request, response) => {
    const before = served.get(request.socket) ?? 0;
    served.set(request.socket, before + 1);
    const reused = before > 0;
    const closed = reused ? closeOn.reused : closeOn.fresh;
    seen.push({ method: request.method ?? '', reused, closed });
    if (closed) {
      request.socket.destroy();
      return;
    }
    request.resume();
    request.on('end', () => {
      const kind = request.method === 'GET' ? 'Secret' : 'ConfigMap';
      response.writeHead(request.method === 'GET' ? 200 : 201, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ apiVersion: 'v1', kind, metadata: { name: 'x', namespace: 'n' } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const directory = mkdtempSync(path.join(os.tmpdir(), 'closing-apiserver-'));
  const kubeconfigFile = path.join(directory, 'kubeconfig');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  writeFileSync(
    kubeconfigFile,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
    { mode: 0o600 },
  );
  return {
    closeOn,
    seen,
    kubeconfigFile,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

describe('a request on a kept socket the API server has just closed', () => {
  const get = (api: ReturnType<typeof createCoreV1Api>) =>
    callKube({ verb: 'get', resource: 'secrets', name: 'x', namespace: 'n' }, Deadline.after(2_000), (options) =>
      api.readNamespacedSecret({ name: 'x', namespace: 'n' }, options),
    );
  const create = (api: ReturnType<typeof createCoreV1Api>) =>
    callKube({ verb: 'create', resource: 'configmaps', namespace: 'n' }, Deadline.after(2_000), (options) =>
      api.createNamespacedConfigMap({ namespace: 'n', body: { metadata: { name: 'x' } } }, options),
    );

  it.each([
    { request: 'a GET', closed: 'reused' as const, send: get, answered: true, sent: ['GET', 'GET'] },
    { request: 'a create', closed: 'reused' as const, send: create, answered: false, sent: ['POST'] },
    { request: 'a GET', closed: 'fresh' as const, send: get, answered: false, sent: ['GET'] },
  ])(
    '$request on a $closed socket closed unanswered: answered $answered, sent as $sent',
    async ({ closed, send, answered, sent }) => {
      const server = await startClosingServer();
      const agents = new KeptKubeAgents();
      try {
        const api = createCoreV1Api(server.kubeconfigFile, agents);
        // The socket the next request reuses, or none when the next one is to open its own.
        if (closed === 'reused') {
          expect((await get(api)).metadata?.name).toBe('x');
          expect(agents.sockets().idle).toBe(1);
        }
        server.closeOn[closed] = true;
        const before = server.seen.length;
        const outcome = await send(api).then(
          () => 'answered',
          (error: unknown) => (error as Error).message,
        );
        if (answered) expect(outcome).toBe('answered');
        else expect(outcome).toMatch(/ECONNRESET/);
        expect(server.seen.slice(before).map((request) => request.method)).toEqual(sent);
        // A retry rides a new socket, never the one that was closed.
        if (answered) expect(server.seen.slice(before).map((request) => request.reused)).toEqual([true, false]);
      } finally {
        agents.close();
        await server.close();
      }
    },
  );
});
