// Controller kinds are told apart by API group AND kind: Talos and k0smotron control planes share
// KubeadmControlPlane's group, and must never be read as one (its Machines, its discovery source).
import { describe, expect, it } from 'vitest';
import { DRUID_ETCD, KUBEADM_CONTROL_PLANE, STATEFUL_SET, discoverySourceOf, isKind } from './controller-kinds.js';
import { findGuardRule } from '../../webhook/domain/rules.js';

const GROUP = 'controlplane.cluster.x-k8s.io';

describe('controller kinds', () => {
  const rows = [
    {
      behaviour: 'a KubeadmControlPlane is KCP and found by capi',
      object: { group: GROUP, kind: 'KubeadmControlPlane' },
      kcp: true,
      source: 'capi',
    },
    {
      behaviour: 'a TalosControlPlane in the same group is not KCP',
      object: { group: GROUP, kind: 'TalosControlPlane' },
      kcp: false,
      source: undefined,
    },
    {
      behaviour: 'a K0smotronControlPlane in the same group is not KCP',
      object: { group: GROUP, kind: 'K0smotronControlPlane' },
      kcp: false,
      source: undefined,
    },
    {
      behaviour: 'a druid Etcd is found by druid',
      object: { group: 'druid.gardener.cloud', kind: 'Etcd' },
      kcp: false,
      source: 'druid',
    },
    {
      behaviour: 'a StatefulSet is found by no discovery source',
      object: { group: 'apps', kind: 'StatefulSet' },
      kcp: false,
      source: undefined,
    },
  ] as const;
  it.each(rows)('$behaviour', ({ object, kcp, source }) => {
    expect(isKind(object, KUBEADM_CONTROL_PLANE)).toBe(kcp);
    expect(discoverySourceOf(object)).toBe(source);
  });

  it('guards exactly the known kinds, by the resource each names', () => {
    for (const id of [KUBEADM_CONTROL_PLANE, DRUID_ETCD, STATEFUL_SET]) {
      expect(findGuardRule(id)).toMatchObject({ group: id.group, kind: id.kind });
    }
    expect(findGuardRule({ group: GROUP, resource: 'taloscontrolplanes' })).toBeUndefined();
  });
});
