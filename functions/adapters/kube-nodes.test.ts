import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listControlPlaneNodes, nodeLabelSelector } from './kube-nodes.js';
import { inventorySchema } from '../domain/config.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeNodeSpec } from '../../test/harness/fake-kube-apiserver.js';
import { captureStoreError } from '../../test/harness/store-error.js';

const CONTROL_PLANE = 'node-role.kubernetes.io/control-plane';

const NODES: FakeNodeSpec[] = [
  {
    name: 'cp-b',
    labels: { [CONTROL_PLANE]: '', zone: 'b' },
    createdAt: '2026-11-30T23:58:20Z',
    addresses: [
      { type: 'Hostname', address: 'cp-b' },
      { type: 'ExternalIP', address: '203.0.113.2' },
      { type: 'InternalIP', address: '10.0.0.2' },
      { type: 'InternalDNS', address: 'cp-b.internal' },
    ],
  },
  {
    name: 'cp-a',
    labels: { [CONTROL_PLANE]: '', zone: 'a' },
    createdAt: '2025-06-01T08:00:00Z',
    addresses: [
      { type: 'InternalIP', address: '10.0.0.1' },
      { type: 'InternalIP', address: 'fd00::1' },
      { type: 'Hostname', address: 'cp-a' },
    ],
  },
  { name: 'cp-c-no-addresses', labels: { [CONTROL_PLANE]: '', zone: 'c' } },
  {
    name: 'worker-1',
    labels: { 'node-role.kubernetes.io/worker': '', zone: 'a' },
    addresses: [{ type: 'InternalIP', address: '10.0.1.1' }],
  },
  {
    name: 'legacy-master',
    labels: { 'node-role.kubernetes.io/master': 'true' },
    addresses: [{ type: 'InternalIP', address: '10.0.2.1' }],
  },
];

let fake: FakeKubeApiServer;

beforeEach(async () => {
  fake = await startFakeKubeApiServer();
  fake.setNodes(NODES);
});

afterEach(async () => {
  await fake.close();
});

function inventory(nodeLabel?: string) {
  return inventorySchema.parse({ kubeconfigFile: fake.kubeconfigFile, ...(nodeLabel !== undefined ? { nodeLabel } : {}) });
}

describe('listControlPlaneNodes against a fake kube-apiserver', () => {
  it('lists the control-plane nodes by name with InternalIP, ExternalIP and Hostname addresses and creation time', async () => {
    const nodes = await listControlPlaneNodes(inventory(), 2000);
    expect(nodes).toEqual([
      { name: 'cp-a', addresses: ['10.0.0.1', 'fd00::1', 'cp-a'], createdAt: '2025-06-01T08:00:00.000Z' },
      { name: 'cp-b', addresses: ['10.0.0.2', '203.0.113.2', 'cp-b'], createdAt: '2026-11-30T23:58:20.000Z' },
      { name: 'cp-c-no-addresses', addresses: [] },
    ]);
    const [request] = fake.requests;
    expect(request?.verb).toBe('list');
    expect(request?.query.get('labelSelector')).toBe(CONTROL_PLANE);
  });

  it.each([
    { nodeLabel: 'node-role.kubernetes.io/master', expected: ['legacy-master'] },
    { nodeLabel: 'node-role.kubernetes.io/master=true', expected: ['legacy-master'] },
    { nodeLabel: 'node-role.kubernetes.io/master=false', expected: [] },
    { nodeLabel: 'zone=a', expected: ['cp-a', 'worker-1'] },
    { nodeLabel: 'no-such-label', expected: [] },
  ])('honours nodeLabel $nodeLabel', async ({ nodeLabel, expected }) => {
    const nodes = await listControlPlaneNodes(inventory(nodeLabel), 2000);
    expect(nodes.map((node) => node.name)).toEqual(expected);
  });

  it.each(['a=b=c', 'has space', '=value', 'key=bad value', 'key!=x'])(
    'refuses the malformed nodeLabel %j before calling the apiserver',
    async (nodeLabel) => {
      const error = await captureStoreError(listControlPlaneNodes(inventory(nodeLabel), 2000));
      expect(error.kind).toBe('invalid');
      expect(error.message).toContain(JSON.stringify(nodeLabel));
      expect(fake.requests).toEqual([]);
    },
  );

  it('a 403 names the verb and resource and keeps the apiserver message', async () => {
    fake.forbid('list', 'nodes');
    const error = await captureStoreError(listControlPlaneNodes(inventory(), 2000));
    expect(error.kind).toBe('forbidden');
    expect(error.message).toMatch(
      /^forbidden: cannot list nodes: nodes is forbidden: User ".*" cannot list resource "nodes" in API group "" at the cluster scope$/,
    );
  });

  it('a hung apiserver fails within the deadline with a timeout error', async () => {
    fake.hang('/api/v1/nodes');
    const started = performance.now();
    const error = await captureStoreError(listControlPlaneNodes(inventory(), 400));
    const elapsed = performance.now() - started;
    expect(error.kind).toBe('unavailable');
    expect(error.message).toBe('timed out: list nodes got no answer within 400ms');
    expect(elapsed).toBeGreaterThanOrEqual(390);
    expect(elapsed).toBeLessThan(400 + 250);
  });

  it('a missing kubeconfig is an invalid-configuration error naming the file', async () => {
    const error = await captureStoreError(
      listControlPlaneNodes(inventorySchema.parse({ kubeconfigFile: '/nonexistent/kubeconfig' }), 2000),
    );
    expect(error.kind).toBe('invalid');
    expect(error.message).toContain('/nonexistent/kubeconfig');
  });

  it('nodeLabelSelector passes a key and a key=value through unchanged', () => {
    expect(nodeLabelSelector(CONTROL_PLANE)).toBe(CONTROL_PLANE);
    expect(nodeLabelSelector('topology.kubernetes.io/zone=eu-1a')).toBe('topology.kubernetes.io/zone=eu-1a');
  });
});
