// The workload cluster's control-plane Nodes, read through the tenant-written kubeconfig's static
// credentials against the HTTPS workload stand-in: names and creation times only, the label
// selector KCP uses, a deadline, a size bound, and errors that never quote the answer.
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseWorkloadKubeconfig, type WorkloadEndpoint } from './workload-kubeconfig.js';
import { CONTROL_PLANE_NODE_LABEL, MAX_NODE_LIST_BYTES, listWorkloadControlPlaneNodes } from './workload-nodes.js';
import { startWorkloadApiServer } from '../../test/harness/capi-workload.js';
import type { FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';
import { BOUND_SLACK_MS } from '../../test/harness/timing.js';

let server: FakeKubeApiServer;
let workload: WorkloadEndpoint;

beforeAll(async () => {
  server = await startWorkloadApiServer();
  const kubeconfig = await readFile(server.kubeconfigFile);
  workload = parseWorkloadKubeconfig({ value: kubeconfig.toString('base64') }, 'fleet/roll-kubeconfig');
});

afterAll(async () => {
  await server?.close();
});

beforeEach(() => {
  server.unhang();
  server.allowAll();
  server.setNodes([]);
});

describe('listWorkloadControlPlaneNodes', () => {
  it('returns the control-plane Nodes with their creation times, selected by the control-plane label', async () => {
    server.setNodes([
      { name: 'cp-0', labels: { [CONTROL_PLANE_NODE_LABEL]: '' }, createdAt: '2026-11-01T10:00:00Z' },
      { name: 'cp-1', labels: { [CONTROL_PLANE_NODE_LABEL]: '' } },
      { name: 'worker-0', labels: { 'node-role.kubernetes.io/worker': '' }, createdAt: '2026-11-01T10:00:00Z' },
    ]);
    const nodes = await listWorkloadControlPlaneNodes(workload, 2000);
    expect(nodes).toEqual([
      { name: 'cp-0', addresses: [], createdAt: '2026-11-01T10:00:00.000Z' },
      { name: 'cp-1', addresses: [] },
    ]);
    expect(server.requests.at(-1)?.query.get('labelSelector')).toBe(CONTROL_PLANE_NODE_LABEL);
  });

  it('gives up at its deadline when the workload API server never answers', async () => {
    server.hang('/api/v1/nodes');
    const started = performance.now();
    await expect(listWorkloadControlPlaneNodes(workload, 300)).rejects.toThrow(
      "listing the workload's control-plane Nodes failed or took over 300 ms",
    );
    expect(performance.now() - started).toBeLessThan(300 + BOUND_SLACK_MS);
  });

  it('names only the status of a refusal, never the answer', async () => {
    server.forbid('list', 'nodes');
    await expect(listWorkloadControlPlaneNodes(workload, 2000)).rejects.toThrow(
      /^listing the workload's control-plane Nodes: HTTP 403$/,
    );
  });

  it(`stops reading an answer larger than ${MAX_NODE_LIST_BYTES / 1024 / 1024} MiB`, async () => {
    const padding = 'x'.repeat(60);
    server.setNodes(
      Array.from({ length: 4000 }, (_, index) => ({
        name: `cp-${index}`,
        labels: { [CONTROL_PLANE_NODE_LABEL]: '', ...Object.fromEntries([0, 1, 2, 3, 4, 5].map((n) => [`pad-${n}`, padding])) },
      })),
    );
    await expect(listWorkloadControlPlaneNodes(workload, 5000)).rejects.toThrow(/Node list is larger than 2 MiB/);
  });
});
