// Issue 27, "Warm connections, bounded", for the API servers a Cluster API evaluation reads: each
// of them lists the Machines and reads two Secrets on the management API server, and client-node
// opened a new connection for every one of those requests. On a real 3-member etcd behind the
// workload API server stand-in, and a management stand-in over plain http and over TLS (its CA in
// the kubeconfig): 20 evaluations share the connections of the first, TLS is verified as before,
// and the kept sockets close after the idle timeout.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callKube, createCoreV1Api } from './kube.js';
import { KeptKubeAgents, DEFAULT_KUBE_AGENT_LIMITS } from './kube-agents.js';
import { createCustomObjectsApi } from './kube-discovery.js';
import { Deadline } from '../domain/deadline.js';
import type { Target } from '../domain/targets.js';
import { guardConfigSchema } from '../domain/config.js';
import { createWarmConnections, evaluateResolvedTarget, type WarmConnections } from '../usecases/reach-target.js';
import {
  putCapiSecrets,
  startCapiWorkload,
  startWorkloadApiServer,
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

function putMachines(management: FakeKubeApiServer): void {
  for (const node of workload.nodeNames) {
    management.putObject('machines', {
      apiVersion: 'cluster.x-k8s.io/v1beta1',
      kind: 'Machine',
      metadata: {
        name: `${node}-machine`,
        namespace: 'team-k',
        labels: { 'cluster.x-k8s.io/cluster-name': 'kk', 'cluster.x-k8s.io/control-plane': '' },
      },
      status: { nodeRef: { name: node } },
    });
  }
}

function warmConnections(): WarmConnections {
  const warm = createWarmConnections(
    guardConfigSchema.parse({ targets: [{ name: 'unused', endpoints: ['https://127.0.0.1:2379'] }] }),
  );
  if (warm === null) throw new Error('connections.keep is on by default');
  return warm;
}

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
  putMachines(plain);
  putMachines(tls);
  target = {
    name: 'capi-team-k-kk',
    source: 'capi',
    guards: { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', namespace: 'team-k', name: 'kk' },
    reach: { kind: 'capi', ...workload.cluster },
    machines: workload.cluster,
    endpoints: [],
    timeout: 2_000,
    quotaBackendBytes: 2 * 1024 ** 3,
    match: {},
  };
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
      const warm = warmConnections();
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
    const warm = warmConnections();
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
