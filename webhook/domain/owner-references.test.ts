// Owner references as an AdmissionReview carries them: read as written, junk read as empty, so the
// DELETE of a member and the UPDATE that would hide it see the same owners.
import { describe, expect, it } from 'vitest';
import { hasOwners, ownerReferences, ownersOf } from './owner-references.js';

const owned = (...ownerReferences: unknown[]) => ({ metadata: { name: 'm-0', ownerReferences } });
const KCP = { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane' };

describe('ownerReferences', () => {
  it.each([
    [
      'a grouped apiVersion',
      { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'etcd' },
      { group: 'apps', version: 'v1', kind: 'StatefulSet', name: 'etcd' },
    ],
    ['the core group', { apiVersion: 'v1', kind: 'Node', name: 'n' }, { group: '', version: 'v1', kind: 'Node', name: 'n' }],
    [
      'a group without a version',
      { apiVersion: 'apps/', kind: 'StatefulSet', name: 'etcd' },
      { group: 'apps', version: undefined, kind: 'StatefulSet', name: 'etcd' },
    ],
    ['fields missing', {}, { group: '', version: undefined, kind: '', name: '' }],
    [
      'fields of the wrong type',
      { apiVersion: ['apps/v1'], kind: 7, name: { x: 1 } },
      { group: '', version: undefined, kind: '', name: '' },
    ],
    ['an entry that is not an object', 'apps/v1 StatefulSet etcd', { group: '', version: undefined, kind: '', name: '' }],
  ])('reads %s', (_case, written, read) => {
    expect(ownerReferences(owned(written))).toEqual([read]);
  });

  it('keeps every entry, in order, duplicates included', () => {
    const entry = { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'etcd' };
    expect(ownerReferences(owned(entry, { ...entry, name: 'b' }, entry)).map((owner) => owner.name)).toEqual([
      'etcd',
      'b',
      'etcd',
    ]);
  });

  it.each([
    ['no metadata', {}],
    ['ownerReferences not a list', { metadata: { ownerReferences: { kind: 'StatefulSet' } } }],
    ['not an object', 'pod'],
  ])('reads %s as no owners', (_case, object) => {
    expect(ownerReferences(object)).toEqual([]);
    expect(hasOwners(object)).toBe(false);
  });
});

describe('ownersOf', () => {
  it('names each owner of the kind in its group once, any version', () => {
    const object = owned(
      { apiVersion: `${KCP.group}/v1beta1`, kind: KCP.kind, name: 'kcp' },
      { apiVersion: `${KCP.group}/v1beta2`, kind: KCP.kind, name: 'kcp' },
      { apiVersion: `${KCP.group}/v1beta2`, kind: KCP.kind, name: 'other' },
    );
    expect(ownersOf(object, KCP)).toEqual([
      { name: 'kcp', version: 'v1beta1' },
      { name: 'other', version: 'v1beta2' },
    ]);
  });

  it.each([
    ['another group', { apiVersion: 'example.com/v1', kind: KCP.kind, name: 'kcp' }],
    ['another kind', { apiVersion: `${KCP.group}/v1beta1`, kind: 'TalosControlPlane', name: 'kcp' }],
    ['no group at all', { apiVersion: 'v1', kind: KCP.kind, name: 'kcp' }],
    ['an empty name', { apiVersion: `${KCP.group}/v1beta1`, kind: KCP.kind, name: '' }],
    ['a name that is not a string', { apiVersion: `${KCP.group}/v1beta1`, kind: KCP.kind, name: ['kcp'] }],
  ])('passes over an owner of %s', (_case, owner) => {
    expect(ownersOf(owned(owner), KCP)).toEqual([]);
    expect(hasOwners(owned(owner))).toBe(true);
  });
});
