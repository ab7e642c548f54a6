// Issue 28: every path that changes etcd membership goes through the gate. The pure core's side of
// the two DELETE doors: which control-plane Machine and etcd pod DELETEs are judged, against which
// target, and the decision on an evaluation (dead, absent or learner members allowed; a healthy
// member's exit judged like a shrink or a member down; a Machine without a nodeRef undetermined).
import { describe, expect, it } from 'vitest';
import { KCP_CONTROLLER_USER } from '../../functions/domain/machines.js';
import type { GuardConfig } from '../../functions/domain/config.js';
import { classify, CONFIG, decideOn, kcp, members, NODE, OTHERS, read, statefulSet } from '../../test/harness/member-doors.js';
import { fixtureReview, type ReviewObject, type TestReview } from '../../test/harness/reviews.js';

function machineReview(edit: (machine: ReviewObject) => void = () => undefined): TestReview {
  const review = fixtureReview('machine-delete-control-plane.json');
  if (review.request.oldObject === null) throw new Error('fixture has no oldObject');
  edit(review.request.oldObject);
  return review;
}

function podReview(name = 'etcd-main-0'): TestReview {
  const review = fixtureReview('pod-delete-etcd-druid.json', { name });
  return review;
}

describe('issue 28: which DELETEs are member exits, judged against which target', () => {
  it.each([
    [
      'a worker Machine (no control-plane label) is allowed without a read',
      () => classify(fixtureReview('machine-delete-worker.json')),
      'allow',
      'not-control-plane',
    ],
    ['a control-plane Machine asks for its KubeadmControlPlane first', () => classify(machineReview()), 'deny', 'labels-unknown'],
    [
      'a control-plane Machine already terminating (a repeated DELETE) is allowed without a read',
      () =>
        classify(
          machineReview((machine) => {
            (machine.metadata as Record<string, unknown>).deletionTimestamp = '2026-11-30T02:00:00Z';
          }),
        ),
      'allow',
      'already-terminating',
    ],
    [
      'its KubeadmControlPlane gone (404): the end of a teardown',
      () => classify(machineReview(), { ok: false, message: 'not found', notFound: true }),
      'allow',
      'teardown',
    ],
    [
      'its KubeadmControlPlane being deleted: teardown',
      () => classify(machineReview(), read(kcp({ deletionTimestamp: '2026-11-30T01:59:00Z' }))),
      'allow',
      'teardown',
    ],
    [
      'its KubeadmControlPlane unreadable: denied saying so',
      () => classify(machineReview(), { ok: false, message: 'forbidden: cannot get' }),
      'deny',
      'parent-unreadable',
    ],
    [
      'a KubeadmControlPlane with external etcd: its Machines run no member',
      () => {
        const external = kcp();
        external.spec.kubeadmConfigSpec.clusterConfiguration.etcd = { external: { endpoints: ['https://e:2379'] } } as never;
        return classify(machineReview(), read(external));
      },
      'allow',
      'external-etcd',
    ],
    [
      'a KubeadmControlPlane no target matches: denied, as its own changes are',
      () => classify(machineReview(), read(kcp({}, { 'cluster.x-k8s.io/cluster-name': 'staging' }))),
      'deny',
      'no-target',
    ],
    [
      'another provider’s control-plane Machine is not a KCP member',
      () =>
        classify(
          machineReview((machine) => {
            machine.metadata.ownerReferences = [
              { apiVersion: 'controlplane.cluster.x-k8s.io/v1alpha3', kind: 'TalosControlPlane', name: 'prod-cp', uid: 'u' },
            ];
          }),
        ),
      'allow',
      'not-guarded',
    ],
    [
      'two KubeadmControlPlane owners: denied, which one is unknown',
      () =>
        classify(
          machineReview((machine) => {
            const owners = machine.metadata.ownerReferences as Record<string, unknown>[];
            owners.push({ ...owners[0], name: 'other-control-plane', controller: false });
          }),
        ),
      'deny',
      'invalid',
    ],
    [
      'an unrelated StatefulSet pod is allowed without a read',
      () => classify(fixtureReview('pod-delete-unrelated.json')),
      'allow',
      'not-guarded',
    ],
    ['a pod of the guarded StatefulSet asks for the StatefulSet first', () => classify(podReview()), 'deny', 'labels-unknown'],
    [
      "a terminating pod's repeated DELETE (the apiserver's second validation, the kubelet's grace-0 delete) is allowed",
      () => {
        const review = podReview();
        if (review.request.oldObject === null) throw new Error('fixture has no oldObject');
        (review.request.oldObject.metadata as Record<string, unknown>).deletionTimestamp = '2026-11-30T02:00:00Z';
        return classify(review);
      },
      'allow',
      'already-terminating',
    ],
    [
      'a pod the StatefulSet itself drops (ordinal beyond spec.replicas: its scale-down or hibernation)',
      () => classify(podReview('etcd-main-2'), read(statefulSet(2))),
      'allow',
      'scale-down',
    ],
    [
      'a pod whose StatefulSet is gone: teardown',
      () => classify(podReview(), { ok: false, message: 'not found', notFound: true }),
      'allow',
      'teardown',
    ],
  ] as const)('%s', (_name, run, kind, reason) => {
    const result = run();
    expect(result.kind).toBe(kind);
    if (result.kind !== 'needs-evaluation') expect(result.reason).toBe(reason);
  });

  it('reads the KubeadmControlPlane its owner reference names, at that version', () => {
    const first = classify(machineReview());
    expect(first.kind === 'deny' && first.parent).toEqual({
      group: 'controlplane.cluster.x-k8s.io',
      version: 'v1beta2',
      resource: 'kubeadmcontrolplanes',
      namespace: 'default',
      name: 'prod-control-plane',
    });
  });

  it('judges a control-plane Machine against its KubeadmControlPlane’s target, by its nodeRef', () => {
    const result = classify(machineReview(), read(kcp()));
    expect(result).toMatchObject({
      kind: 'needs-evaluation',
      target: { name: 'prod' },
      object: { kind: 'Machine', namespace: 'default', name: NODE },
      change: { kind: 'machine-delete', machine: NODE, nodeName: NODE, controlPlane: 'prod-control-plane' },
    });
  });

  it('judges an etcd pod against the target naming its StatefulSet, reading the StatefulSet', () => {
    const first = classify(podReview());
    expect(first.kind === 'deny' && first.parent).toMatchObject({
      group: 'apps',
      version: 'v1',
      resource: 'statefulsets',
      name: 'etcd-main',
    });
    const result = classify(podReview(), read(statefulSet(3)));
    expect(result).toMatchObject({
      kind: 'needs-evaluation',
      target: { name: 'etcd-main' },
      change: { kind: 'pod-delete', pod: 'etcd-main-0' },
    });
  });

  it('still allows deleting the KCP, an Etcd or a StatefulSet itself (teardown)', () => {
    expect(classify(fixtureReview('kcp-delete.json'))).toEqual({ kind: 'allow', reason: 'delete' });
  });
});

const withoutNodeRef = () => machineReview((machine) => delete (machine.status as Record<string, unknown>).nodeRef);

describe('issue 28: a control-plane Machine DELETE as "this member leaves"', () => {
  it.each([
    [
      'its healthy member leaves a healthy 3-member etcd: allowed',
      machineReview,
      members([NODE, ...OTHERS]),
      true,
      /survives no member failure/,
    ],
    [
      'its member is dead: allowed',
      machineReview,
      members([NODE, ...OTHERS], { dead: [NODE] }),
      true,
      /removes its etcd member .* is unhealthy/,
    ],
    [
      'its member is a learner: allowed',
      machineReview,
      members([...OTHERS, 'x', NODE], { learner: [NODE] }),
      true,
      /holds no voting etcd member/,
    ],
    ['no member is named after its Node: allowed', machineReview, members(OTHERS.concat('c3')), true, /no etcd member is named/],
    [
      'its healthy member while another member is dead: denied',
      machineReview,
      members([NODE, ...OTHERS], { dead: [OTHERS[1] ?? ''] }),
      false,
      /deleting Machine .*: its etcd member prod-control-plane-7xkqp is healthy and leaves with it; removing 1 member would leave 1 healthy of 2 voting, below quorum 2/,
    ],
    ['the only member of a 1-member etcd: denied', machineReview, members([NODE]), false, /below 1 replica|below quorum/],
    [
      'no nodeRef, a healthy 3-member etcd: allowed even in the worst case',
      withoutNodeRef,
      members([NODE, ...OTHERS]),
      true,
      /survives no member failure/,
    ],
    [
      'no nodeRef while a member is dead: undetermined, denied',
      withoutNodeRef,
      members([NODE, ...OTHERS], { dead: [OTHERS[1] ?? ''] }),
      false,
      /has no nodeRef yet.*cluster-api#11772/,
    ],
    [
      'the evaluation has no member list (every endpoint failed it): undetermined, denied',
      machineReview,
      [],
      false,
      /the evaluation has no member list, so which member it holds is undetermined/,
    ],
    [
      'a voting member reports no name and none is named after its Node: undetermined',
      machineReview,
      members(['blank', ...OTHERS], { blank: ['blank'], dead: [OTHERS[1] ?? ''] }),
      false,
      /report no name/,
    ],
  ] as const)('%s', (_name, review, list, allowed, text) => {
    const decision = decideOn(review(), read(kcp()), [...list]);
    expect(decision.response.allowed, decision.response.status?.message).toBe(allowed);
    const said = allowed ? (decision.response.warnings ?? []).join(' | ') : (decision.response.status?.message ?? '');
    expect(said).toMatch(text);
  });

  it('a denial names the member and the safe paths (remediate-machine, or a KCP scale)', () => {
    const decision = decideOn(machineReview(), read(kcp()), members([NODE, ...OTHERS], { dead: [OTHERS[0] ?? ''] }));
    const message = decision.response.status?.message ?? '';
    expect(message).toContain(`etcd-guard denied deletion (its etcd member leaves) of Machine default/${NODE}`);
    expect(message).toContain(`annotate machine ${NODE} cluster.x-k8s.io/remediate-machine=""`);
    expect(message).toContain('scale KubeadmControlPlane prod-control-plane down by one');
    expect(message).toContain('then delete it again');
  });
});

describe('issue 28: an etcd pod DELETE as "this member is down until it returns"', () => {
  const pods = ['etcd-main-0', 'etcd-main-1', 'etcd-main-2'];
  it.each([
    [
      'fault tolerance 1 (3 healthy of 3): allowed, warning it leaves none',
      'etcd-main-0',
      members(pods),
      true,
      /tolerates no further member failure/,
    ],
    [
      'fault tolerance 0 (one of 3 dead): denied',
      'etcd-main-0',
      members(pods, { dead: ['etcd-main-2'] }),
      false,
      /takes its member down until it returns .* 1 of 3 voting members would be healthy, below quorum 2 \(fault tolerance now 0\)/,
    ],
    ['the dead member’s own pod: allowed', 'etcd-main-2', members(pods, { dead: ['etcd-main-2'] }), true, /is unhealthy already/],
    ['no member list in the evaluation: denied', 'etcd-main-0', [], false, /the evaluation has no member list/],
    [
      'fault tolerance 1 of 5 (one dead): allowed',
      'etcd-main-0',
      members([...pods, 'etcd-main-3', 'etcd-main-4'], { dead: ['etcd-main-4'] }),
      true,
      /tolerates no further/,
    ],
  ] as const)('%s', (_name, pod, list, allowed, text) => {
    const decision = decideOn(podReview(pod), read(statefulSet(Math.max(list.length, 3))), [...list]);
    expect(decision.response.allowed, decision.response.status?.message).toBe(allowed);
    const said = allowed ? (decision.response.warnings ?? []).join(' | ') : (decision.response.status?.message ?? '');
    expect(said).toMatch(text);
  });
});

describe('issue 28: deletes by KCP’s own controller', () => {
  const sick = () => members([NODE, ...OTHERS], { dead: [OTHERS[0] ?? ''] });
  const byKcp = () => {
    const review = machineReview();
    review.request.userInfo = { username: KCP_CONTROLLER_USER, groups: ['system:serviceaccounts', 'system:authenticated'] };
    return review;
  };
  const decideWith = (config: GuardConfig, review: TestReview) => decideOn(review, read(kcp()), sick(), config);

  it('are judged like anyone’s by default, and audited as the controller’s', () => {
    const decision = decideWith(CONFIG, byKcp());
    expect(decision.response.allowed).toBe(false);
    expect(decision.response.auditAnnotations?.['member-delete-controller']).toBe(KCP_CONTROLLER_USER);
  });

  it('with memberDeletes.exemptControllers are allowed, saying and auditing what was judged', () => {
    const exempt: GuardConfig = { ...CONFIG, memberDeletes: { ...CONFIG.memberDeletes, exemptControllers: true } };
    const decision = decideWith(exempt, byKcp());
    expect(decision.response.allowed).toBe(true);
    expect(decision.response.warnings?.[1]).toMatch(/^exempt: etcd-guard denied deletion/);
    expect(decision.response.auditAnnotations?.['member-delete-exempt']).toContain('leaves with it');
    // Anyone else is still judged.
    expect(decideWith(exempt, machineReview()).response.allowed).toBe(false);
  });
});
