// The KCP Machines reader against the loopback stand-in apiserver: the selector it sends, the
// Machines it keeps, the version fallback, and the deadline when the apiserver never answers.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMachineReader } from './capi-machines.js';
import { loadKubeConfig } from './kube.js';
import { Deadline } from '../domain/deadline.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../../test/harness/fake-kube-apiserver.js';

let fake: FakeKubeApiServer;

beforeEach(async () => {
  fake = await startFakeKubeApiServer();
});

afterEach(async () => {
  await fake.close();
});

function machine(
  name: string,
  options: { owner?: string; node?: string; annotated?: boolean; cluster?: string } = {},
): FakeObject {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta1',
    kind: 'Machine',
    metadata: {
      name,
      namespace: 'default',
      creationTimestamp: '2026-11-02T09:20:00Z',
      labels: {
        'cluster.x-k8s.io/cluster-name': options.cluster ?? 'prod',
        'cluster.x-k8s.io/control-plane': '',
        'cluster.x-k8s.io/control-plane-name': options.owner ?? 'prod-control-plane',
      },
      ownerReferences: [
        {
          apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
          kind: 'KubeadmControlPlane',
          name: options.owner ?? 'prod-control-plane',
          uid: 'u',
        },
      ],
      ...(options.annotated ? { annotations: { 'cluster.x-k8s.io/delete-machine': '' } } : {}),
    },
    spec: { clusterName: options.cluster ?? 'prod' },
    status: options.node ? { nodeRef: { kind: 'Node', name: options.node } } : {},
  };
}

const query = { namespace: 'default', controlPlaneName: 'prod-control-plane', clusterName: 'prod' };
const reader = () => createMachineReader(() => loadKubeConfig(fake.kubeconfigFile));

describe('createMachineReader', () => {
  it('lists the control-plane Machines of the cluster that the KCP owns, with node and delete annotation', async () => {
    fake.putObject('machines', machine('prod-cp-a', { node: 'node-a', annotated: true }));
    fake.putObject('machines', machine('prod-cp-b'));
    fake.putObject('machines', machine('other-cp-a', { owner: 'other-control-plane' }));
    fake.putObject('machines', machine('staging-cp-a', { cluster: 'staging', owner: 'prod-control-plane' }));
    const { machines, failureDomains } = await reader()(query, Deadline.after(2_000));
    // No Cluster named prod is served: its failure domains stay unknown.
    expect(failureDomains).toBeNull();
    expect(machines).toEqual([
      {
        name: 'prod-cp-a',
        nodeName: 'node-a',
        deleteRequested: true,
        deleting: false,
        createdAt: '2026-11-02T09:20:00Z',
        failureDomain: null,
        upToDate: null,
        kcpOutdated: null,
        version: null,
        componentsHealthy: false,
      },
      {
        name: 'prod-cp-b',
        nodeName: null,
        deleteRequested: false,
        deleting: false,
        createdAt: '2026-11-02T09:20:00Z',
        failureDomain: null,
        upToDate: null,
        kcpOutdated: null,
        version: null,
        componentsHealthy: false,
      },
    ]);
    expect(
      fake.requests
        .filter((entry) => entry.resource === 'machines')
        .at(-1)
        ?.query.get('labelSelector'),
    ).toBe('cluster.x-k8s.io/cluster-name=prod,cluster.x-k8s.io/control-plane');
  });

  it('selects by the control-plane name when the request carried no labels (/scale)', async () => {
    fake.putObject('machines', machine('prod-cp-a', { node: 'node-a' }));
    const { machines } = await reader()({ ...query, clusterName: null }, Deadline.after(2_000));
    expect(machines.map((found) => found.name)).toEqual(['prod-cp-a']);
    expect(
      fake.requests
        .filter((entry) => entry.resource === 'machines')
        .at(-1)
        ?.query.get('labelSelector'),
    ).toBe('cluster.x-k8s.io/control-plane-name=prod-control-plane');
  });

  it('falls back to v1beta2 when the management cluster no longer serves v1beta1', async () => {
    fake.serveVersions('cluster.x-k8s.io', ['v1beta2']);
    fake.putObject('machines', { ...machine('prod-cp-a', { node: 'node-a' }), apiVersion: 'cluster.x-k8s.io/v1beta2' });
    const { machines } = await reader()(query, Deadline.after(2_000));
    expect(machines.map((found) => found.nodeName)).toEqual(['node-a']);
  });

  it('reads the Cluster’s control-plane failure domains, v1beta2 list and v1beta1 map, only when it names this KCP', async () => {
    const cluster = (apiVersion: string, failureDomains: unknown, controlPlane = 'prod-control-plane'): FakeObject => ({
      apiVersion,
      kind: 'Cluster',
      metadata: { name: 'prod', namespace: 'default' },
      spec: { controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: controlPlane } },
      status: { failureDomains },
    });
    fake.putObject('machines', machine('prod-cp-a', { node: 'node-a' }));
    fake.putObject(
      'clusters',
      cluster('cluster.x-k8s.io/v1beta2', [
        { name: 'fd-a', controlPlane: true },
        { name: 'fd-workers', controlPlane: false },
        { name: 'fd-b', controlPlane: true },
      ]),
    );
    expect((await reader()(query, Deadline.after(2_000))).failureDomains).toEqual(['fd-a', 'fd-b']);
    fake.putObject('clusters', cluster('cluster.x-k8s.io/v1beta1', { 'fd-c': { controlPlane: true }, 'fd-d': {} }));
    expect((await reader()(query, Deadline.after(2_000))).failureDomains).toEqual(['fd-c']);
    fake.putObject('clusters', cluster('cluster.x-k8s.io/v1beta2', [{ name: 'fd-a', controlPlane: true }], 'another-kcp'));
    expect((await reader()(query, Deadline.after(2_000))).failureDomains).toBeNull();
  });

  it('keeps the Machines when the Cluster read is refused: its failure domains are unknown', async () => {
    fake.putObject('machines', machine('prod-cp-a', { node: 'node-a' }));
    fake.forbid('get', 'clusters');
    const listing = await reader()(query, Deadline.after(2_000));
    expect(listing).toMatchObject({ failureDomains: null, machines: [{ name: 'prod-cp-a' }] });
  });

  it('gives up at its deadline when the apiserver never answers, saying what timed out', async () => {
    fake.hang('/apis/cluster.x-k8s.io/');
    const started = performance.now();
    await expect(reader()(query, Deadline.after(300))).rejects.toThrow(
      /timed out: list machines\.cluster\.x-k8s\.io\/v1beta2 in namespace "default"/,
    );
    expect(performance.now() - started).toBeLessThan(300 + 250);
  });

  it('names the refusal when RBAC forbids listing Machines', async () => {
    fake.forbid('list', 'machines');
    await expect(reader()(query, Deadline.after(2_000))).rejects.toThrow(/forbidden: cannot list machines/);
  });
});
