// The pure side of the Runtime Extension (webhook/domain/runtime-hooks.ts), against Cluster API's
// contract at the pinned version: paths as runtime/catalog GVHToPath builds them, the KCP change a
// hook stands for, and the answers' shapes (common_types.go CommonRetryResponse).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  hookAnswer,
  hookEvent,
  hookPath,
  impliedControlPlaneUpdate,
  parseHookRequest,
  withoutOverrideHint,
  type UpgradeHookRequest,
} from './runtime-hooks.js';

function fixture(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(import.meta.dirname, '../../test/fixtures/runtime-hooks', name), 'utf8')) as Record<
    string,
    unknown
  >;
}

function parsed(body: unknown): UpgradeHookRequest {
  const result = parseHookRequest('BeforeClusterUpgrade', body);
  if (!result.ok) throw new Error(result.message);
  return result.request;
}

describe('Runtime Extension contract', () => {
  it.each([
    ['BeforeClusterUpgrade', '/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/etcd-guard'],
    ['BeforeControlPlaneUpgrade', '/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforecontrolplaneupgrade/etcd-guard'],
  ] as const)('%s is served at the path GVHToPath builds: %s', (hook, expected) => {
    expect(hookPath(hook)).toBe(expected);
  });

  it('a hook stands for the KCP UPDATE of spec.version from → to, with the topology replicas and the cluster-name label', () => {
    const request = impliedControlPlaneUpdate(
      'BeforeClusterUpgrade',
      parsed(fixture('before-cluster-upgrade-request.json')),
      'u1',
    );
    expect(request).toMatchObject({
      uid: 'u1',
      operation: 'UPDATE',
      kind: { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane' },
      resource: { group: 'controlplane.cluster.x-k8s.io', resource: 'kubeadmcontrolplanes' },
      namespace: 'default',
      name: 'doors-h-control-plane',
      oldObject: {
        spec: { version: 'v1.34.1', replicas: 3 },
        metadata: { labels: { 'cluster.x-k8s.io/cluster-name': 'doors-h' } },
      },
      object: { spec: { version: 'v1.34.2', replicas: 3 } },
    });
  });

  it('a v1beta1 controlPlaneRef (apiVersion, no apiGroup) names the same group', () => {
    const body = fixture('before-cluster-upgrade-request.json');
    (body.cluster as { spec: Record<string, unknown> }).spec.controlPlaneRef = {
      apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
      kind: 'KubeadmControlPlane',
      name: 'old-style',
      namespace: 'default',
    };
    const request = impliedControlPlaneUpdate('BeforeClusterUpgrade', parsed(body), 'u2');
    expect(request.kind.group).toBe('controlplane.cluster.x-k8s.io');
    expect(request.name).toBe('old-style');
  });

  it.each([
    [{ allowed: true as const, message: 'fine' }, 0, 'proceed'],
    [{ allowed: false as const, message: 'etcd Unhealthy' }, 30, 'retry'],
  ])('answers Success with retryAfterSeconds %#', (verdict, retry, outcome) => {
    const answer = hookAnswer('BeforeControlPlaneUpgrade', verdict, 30);
    expect(answer.outcome).toBe(outcome);
    expect(answer.body).toEqual({
      apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
      kind: 'BeforeControlPlaneUpgradeResponse',
      status: 'Success',
      retryAfterSeconds: retry,
      message: verdict.message,
    });
  });

  it.each([
    [null, 'body is not a BeforeClusterUpgradeRequest object'],
    [[], 'body is not a BeforeClusterUpgradeRequest object'],
    [{ ...fixture('before-cluster-upgrade-request.json'), apiVersion: 'v1' }, 'apiVersion:'],
    [{ ...fixture('before-cluster-upgrade-request.json'), fromKubernetesVersion: '' }, 'fromKubernetesVersion:'],
  ])('refuses %j naming what is wrong', (body, names) => {
    const result = parseHookRequest('BeforeClusterUpgrade', body);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toContain(names);
  });

  it('replaces the admission override hint, which hooks never read', () => {
    const text = withoutOverrideHint(
      'denied: etcd Unhealthy; to override, annotate with etcd-guard.io/override=<reason> (needs x)',
    );
    expect(text).toBe(
      'denied: etcd Unhealthy; the upgrade waits until this passes (an override annotation does not apply to hooks)',
    );
  });

  const denialEvent = {
    regarding: {
      apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
      kind: 'KubeadmControlPlane',
      namespace: 'default',
      name: 'x',
    },
    type: 'Warning' as const,
    reason: 'Denied',
    action: 'Admission',
    note: 'denied',
  };
  it.each([
    [
      'a retry under enforce: UpgradeWaits on the Cluster',
      denialEvent,
      'enforce',
      false,
      'UpgradeWaits',
      /waits \(asked again in 30s\): no$/,
    ],
    [
      'a would-be retry under warn: WouldDeny',
      { ...denialEvent, reason: 'WouldDeny' },
      'warn',
      true,
      'WouldDeny',
      /proceeds \(enforcement warn\), would wait: no$/,
    ],
    ['a proceed nothing would deny: no Event', null, 'enforce', true, null, null],
  ] as const)('%s', (_name, event, mode, allowed, reason, note) => {
    const request = parsed(fixture('before-cluster-upgrade-request.json'));
    const answer = hookAnswer('BeforeClusterUpgrade', allowed ? { allowed, message: 'no' } : { allowed, message: 'no' }, 30);
    const recorded = hookEvent('BeforeClusterUpgrade', request, { event, mode }, answer);
    if (reason === null) {
      expect(recorded).toBeNull();
      return;
    }
    expect(recorded).toMatchObject({
      regarding: {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'Cluster',
        namespace: 'default',
        name: 'doors-h',
        uid: '7f3c2a8e-1b2d-4c5e-9f60-2a1b3c4d5e6f',
      },
      type: 'Warning',
      reason,
      action: 'Admission',
    });
    expect(recorded?.note).toMatch(/^BeforeClusterUpgrade: the upgrade from v1\.34\.1 to v1\.34\.2 /);
    expect(recorded?.note).toMatch(note ?? /.^/);
  });

  it('an Event names the Cluster only at one of its own apiVersions, and only a real uid', () => {
    const body = fixture('before-cluster-upgrade-request.json');
    const cluster = body.cluster as { apiVersion: string; metadata: Record<string, unknown> };
    cluster.apiVersion = 'v1';
    cluster.metadata.uid = 'not a uid';
    const answer = hookAnswer('BeforeClusterUpgrade', { allowed: false, message: 'no' }, 30);
    const recorded = hookEvent('BeforeClusterUpgrade', parsed(body), { event: denialEvent, mode: 'enforce' }, answer);
    expect(recorded?.regarding).toEqual({
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      namespace: 'default',
      name: 'doors-h',
    });
  });
});
