// Issue 28, the way around the member-bearing DELETE doors: an UPDATE that strips a control-plane
// Machine's labels or owner reference, or an etcd pod's StatefulSet owner reference or etcd image,
// would let its DELETE through unseen, so the pure core judges it as that DELETE; every UPDATE
// after which the DELETE is still judged the same way is allowed without a read.
import { describe, expect, it } from 'vitest';
import { classify, CONFIG, decideOn, kcp, members, NODE, OTHERS, read, statefulSet } from '../../test/harness/member-doors.js';
import type { ParentLabels } from './contract.js';
import { fixtureReview, type ReviewObject, type TestReview } from '../../test/harness/reviews.js';

const CP = 'cluster.x-k8s.io/control-plane';
const CP_NAME = 'cluster.x-k8s.io/control-plane-name';

type Json = Record<string, unknown>;
type Edit = (object: ReviewObject) => void;

/** The DELETE fixture turned into the UPDATE the apiserver sends: the stored object as oldObject, `edit` applied to object. */
function updateOf(file: string, edit: Edit): TestReview {
  const review = fixtureReview(file);
  const old = review.request.oldObject;
  if (old === null) throw new Error('fixture has no oldObject');
  review.request.operation = 'UPDATE';
  review.request.object = structuredClone(old);
  edit(review.request.object);
  return review;
}
const machineUpdate = (edit: Edit) => updateOf('machine-delete-control-plane.json', edit);
const podUpdate = (edit: Edit) => updateOf('pod-delete-etcd-druid.json', edit);
const asStatus = (review: TestReview): TestReview => {
  review.request.subResource = 'status';
  review.request.requestSubResource = 'status';
  return review;
};
const labels = (object: ReviewObject) => object.metadata.labels ?? {};
const owners = (object: ReviewObject) => object.metadata.ownerReferences as Json[];
const containers = (object: ReviewObject) => (object.spec as { containers: Json[] }).containers;

describe('issue 28: which Machine and Pod UPDATEs are judged as the DELETE they enable', () => {
  it.each<{ name: string; review: () => TestReview; parent?: ParentLabels; kind: string; reason?: string; strip?: RegExp }>([
    {
      name: 'removing the control-plane label asks for the KubeadmControlPlane first',
      review: () => machineUpdate((m) => delete labels(m)[CP]),
      kind: 'deny',
      reason: 'labels-unknown',
    },
    {
      name: 'removing the control-plane label is judged as deleting the Machine',
      review: () => machineUpdate((m) => delete labels(m)[CP]),
      parent: read(kcp()),
      kind: 'needs-evaluation',
      strip: /^removes label cluster\.x-k8s\.io\/control-plane$/,
    },
    {
      name: 'removing the owner reference while the control-plane-name label names the same KCP keeps its guard',
      review: () => machineUpdate((m) => delete m.metadata.ownerReferences),
      kind: 'allow',
      reason: 'keeps-guard',
    },
    {
      name: 'removing the owner reference and the control-plane-name label is judged',
      review: () =>
        machineUpdate((m) => {
          delete m.metadata.ownerReferences;
          delete labels(m)[CP_NAME];
        }),
      parent: read(kcp()),
      kind: 'needs-evaluation',
      strip:
        /removes label cluster\.x-k8s\.io\/control-plane-name, removes owner reference KubeadmControlPlane prod-control-plane/,
    },
    {
      name: 'an owner reference to a KubeadmControlPlane that does not exist is judged (its DELETE would read a 404: teardown)',
      review: () => machineUpdate((m) => (owners(m)[0]!.name = 'gone')),
      parent: read(kcp()),
      kind: 'needs-evaluation',
      strip: /removes owner reference KubeadmControlPlane prod-control-plane, adds owner reference KubeadmControlPlane gone/,
    },
    {
      name: 'another provider’s owner in place of KCP’s (its DELETE would be "not guarded") is judged',
      review: () =>
        machineUpdate((m) => {
          owners(m)[0] = { apiVersion: 'controlplane.cluster.x-k8s.io/v1alpha3', kind: 'TalosControlPlane', name: 'x', uid: 'u' };
        }),
      parent: read(kcp()),
      kind: 'needs-evaluation',
      strip: /adds owner reference TalosControlPlane x/,
    },
    {
      name: 'an ordinary label edit is allowed without a read',
      review: () => machineUpdate((m) => (labels(m).team = 'infra')),
      kind: 'allow',
      reason: 'keeps-guard',
    },
    {
      name: 'the control-plane label’s value changed (its DELETE keys on its presence) is allowed',
      review: () => machineUpdate((m) => (labels(m)[CP] = 'yes')),
      kind: 'allow',
      reason: 'keeps-guard',
    },
    {
      name: 'the owner reference moving to a newer apiVersion of the same KCP is allowed',
      review: () => machineUpdate((m) => (owners(m)[0]!.apiVersion = 'controlplane.cluster.x-k8s.io/v1beta3')),
      kind: 'allow',
      reason: 'keeps-guard',
    },
    {
      name: 'KCP adopting a Machine its control-plane-name label names is allowed',
      review: () => {
        const review = machineUpdate(() => undefined);
        delete review.request.oldObject!.metadata.ownerReferences;
        return review;
      },
      kind: 'allow',
      reason: 'keeps-guard',
    },
    {
      name: 'a worker Machine gaining or losing labels is allowed',
      review: () => {
        const review = updateOf('machine-delete-worker.json', (m) => (m.metadata.labels = {}));
        return review;
      },
      kind: 'allow',
      reason: 'not-guarded',
    },
    {
      name: 'stripping a Machine already terminating (its DELETE was judged) is allowed',
      review: () => {
        const review = machineUpdate((m) => delete labels(m)[CP]);
        for (const object of [review.request.oldObject, review.request.object])
          object!.metadata.deletionTimestamp = '2026-11-30T01:00:00Z';
        return review;
      },
      kind: 'allow',
      reason: 'already-terminating',
    },
    {
      name: 'stripping a Machine whose KubeadmControlPlane is being deleted (teardown) is allowed',
      review: () => machineUpdate((m) => delete labels(m)[CP]),
      parent: read(kcp({ deletionTimestamp: '2026-11-30T01:59:00Z' })),
      kind: 'allow',
      reason: 'teardown',
    },
    {
      name: 'a Machine’s /status with new conditions keeps its guard',
      review: () => asStatus(machineUpdate((m) => ((m.status as Json).conditions = []))),
      kind: 'allow',
      reason: 'keeps-guard',
    },
    {
      name: 'a Machine’s /status naming another Node is judged as deleting it (by the member it named)',
      review: () => asStatus(machineUpdate((m) => ((m.status as Json).nodeRef = { name: 'elsewhere' }))),
      parent: read(kcp()),
      kind: 'needs-evaluation',
      strip: /^changes status\.nodeRef$/,
    },
    {
      name: 'a Machine’s /status dropping its nodeRef is judged',
      review: () => asStatus(machineUpdate((m) => delete (m.status as Json).nodeRef)),
      parent: read(kcp()),
      kind: 'needs-evaluation',
      strip: /^removes status\.nodeRef$/,
    },
    {
      name: 'the machine controller setting the nodeRef of a Machine that had none is allowed without a read',
      review: () => {
        const review = asStatus(machineUpdate(() => undefined));
        delete (review.request.oldObject!.status as Json).nodeRef;
        return review;
      },
      kind: 'allow',
      reason: 'keeps-guard',
    },
    {
      name: 'a pod’s /status is not judged',
      review: () => asStatus(podUpdate((p) => delete p.metadata.ownerReferences)),
      kind: 'allow',
      reason: 'not-guarded',
    },
    {
      name: 'orphaning an etcd pod is judged as deleting it',
      review: () => podUpdate((p) => delete p.metadata.ownerReferences),
      parent: read(statefulSet()),
      kind: 'needs-evaluation',
      strip: /^removes owner reference StatefulSet etcd-main$/,
    },
    {
      name: 'an etcd pod’s image changed to one that is not etcd is judged',
      review: () => {
        const review = podUpdate((p) => (containers(p)[0] = { name: 'member', image: 'registry.example/busybox:1' }));
        containers(review.request.oldObject!)[0] = { name: 'member', image: 'quay.io/coreos/etcd:v3.5.17' };
        containers(review.request.oldObject!).splice(1);
        containers(review.request.object!).splice(1);
        return review;
      },
      parent: read(statefulSet()),
      kind: 'needs-evaluation',
      strip: /runs no etcd image any more/,
    },
    {
      name: 'orphaning an etcd pod while its StatefulSet is deleted with --cascade=orphan (the garbage collector) is allowed',
      review: () => podUpdate((p) => delete p.metadata.ownerReferences),
      parent: read(statefulSet(3, { deletionTimestamp: '2026-11-30T01:59:00Z' })),
      kind: 'allow',
      reason: 'teardown',
    },
    {
      name: 'an etcd pod’s label edit is allowed without a read',
      review: () => podUpdate((p) => (labels(p).extra = 'x')),
      kind: 'allow',
      reason: 'keeps-guard',
    },
    {
      name: 'an unrelated StatefulSet pod orphaned is allowed',
      review: () => updateOf('pod-delete-unrelated.json', (p) => delete p.metadata.ownerReferences),
      kind: 'allow',
      reason: 'not-guarded',
    },
  ])('$name', ({ review, parent, kind, reason, strip }) => {
    const result = classify(review(), parent);
    expect(result.kind, JSON.stringify(result)).toBe(kind);
    if (result.kind !== 'needs-evaluation') expect(result.reason).toBe(reason);
    else {
      expect(result.change).toMatchObject({ kind: result.object.kind === 'Machine' ? 'machine-delete' : 'pod-delete' });
      expect('strip' in result.change ? result.change.strip : '').toMatch(strip ?? /.^/);
    }
  });

  it('its messages before an evaluation say what the UPDATE does, not that it deletes', () => {
    const result = classify(
      machineUpdate((m) => delete labels(m)[CP]),
      { ok: false, message: 'forbidden: cannot get' },
    );
    expect(result).toMatchObject({ kind: 'deny', reason: 'parent-unreadable' });
    expect(result.kind === 'deny' && result.message).toMatch(
      /^etcd-guard cannot judge changing the labels or owner references of Machine default\/prod-control-plane-7xkqp: reading its KubeadmControlPlane/,
    );
  });
});

describe('issue 28: a stripping UPDATE is decided like the DELETE it enables', () => {
  const stripLabel = () => machineUpdate((m) => delete labels(m)[CP]);
  const orphanPod = () => podUpdate((p) => delete p.metadata.ownerReferences);
  const pods = ['etcd-main-0', 'etcd-main-1', 'etcd-main-2'];
  it.each([
    [
      'a Machine’s label, its healthy member in a healthy etcd: allowed, warning',
      stripLabel,
      read(kcp()),
      members([NODE, ...OTHERS]),
      true,
      /^etcd-guard: this change removes label cluster\.x-k8s\.io\/control-plane: deleting it afterwards goes unseen \| /,
    ],
    [
      'a Machine’s label, its member dead: allowed',
      stripLabel,
      read(kcp()),
      members([NODE, ...OTHERS], { dead: [NODE] }),
      true,
      /removes its etcd member .* is unhealthy/,
    ],
    [
      'a Machine’s label, no member named after its Node: allowed',
      stripLabel,
      read(kcp()),
      members(OTHERS.concat('c3')),
      true,
      /no etcd member is named/,
    ],
    [
      'a Machine’s label, its healthy member while another is dead: denied naming the member and the label',
      stripLabel,
      read(kcp()),
      members([NODE, ...OTHERS], { dead: [OTHERS[1]!] }),
      false,
      /^etcd-guard denied change \(removes label cluster\.x-k8s\.io\/control-plane: its deletion would go unseen\) of Machine default\/prod-control-plane-7xkqp: .*its etcd member prod-control-plane-7xkqp is healthy and leaves with it; removing 1 member would leave 1 healthy of 2 voting, below quorum 2.*keep its labels and owner reference; the safe paths/,
    ],
    [
      'a Machine’s label while the evaluation has no member list: undetermined, denied',
      stripLabel,
      read(kcp()),
      [],
      false,
      /deleting Machine prod-control-plane-7xkqp: the evaluation has no member list, so which member it holds is undetermined/,
    ],
    [
      'a Machine’s nodeRef moved away from its healthy member while another is dead: denied naming that member',
      () => asStatus(machineUpdate((m) => ((m.status as Json).nodeRef = { name: 'elsewhere' }))),
      read(kcp()),
      members([NODE, ...OTHERS], { dead: [OTHERS[1]!] }),
      false,
      /^etcd-guard denied change \(changes status\.nodeRef: its deletion would go unseen\) of Machine default\/prod-control-plane-7xkqp: .*its etcd member prod-control-plane-7xkqp is healthy and leaves with it/,
    ],
    [
      'an etcd pod orphaned at fault tolerance 1: allowed',
      () => orphanPod(),
      read(statefulSet()),
      members(pods),
      true,
      /tolerates no further member failure/,
    ],
    [
      'an etcd pod orphaned at fault tolerance 0: denied',
      () => orphanPod(),
      read(statefulSet()),
      members(pods, { dead: ['etcd-main-2'] }),
      false,
      /^etcd-guard denied change \(removes owner reference StatefulSet etcd-main: its deletion would go unseen\) of Pod shoot--prod\/etcd-main-0: .*below quorum 2 \(fault tolerance now 0\).*keep its owner reference and image/,
    ],
  ] as const)('%s', (_name, review, parent, list, allowed, text) => {
    const decision = decideOn(review(), parent, [...list]);
    expect(decision.response.allowed, decision.response.status?.message).toBe(allowed);
    const said = allowed ? (decision.response.warnings ?? []).join(' | ') : (decision.response.status?.message ?? '');
    expect(said).toMatch(text);
  });

  it('an override annotation set in the same UPDATE lets an authorised user through', () => {
    const review = machineUpdate((m) => {
      delete labels(m)[CP];
      m.metadata.annotations = { ...(m.metadata.annotations as Json), 'etcd-guard.io/override': 'replacing the disk' };
    });
    review.request.userInfo = { username: 'alice', groups: ['system:masters'] };
    const config = { ...CONFIG, override: { ...CONFIG.override, groups: ['system:masters'] } };
    const decision = decideOn(review, read(kcp()), members([NODE, ...OTHERS], { dead: [OTHERS[0]!] }), config);
    expect(decision.result).toBe('overridden');
  });
});
