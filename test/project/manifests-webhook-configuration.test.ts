// The ValidatingWebhookConfiguration: fail closed, call /validate, guard every resource the
// webhook's rules know together with its /scale twin, never its own namespace; and (issue 28) the
// member-bearing DELETEs, each webhook's matchConditions evaluated over what they must and must
// not match.
import { describe, expect, it } from 'vitest';
import { GUARD_RULES } from '../../webhook/domain/rules.js';
import { CelError, evaluateCel } from '../harness/cel.js';
import { admissionFixture } from '../harness/reviews.js';
import { at, guardNamespace, name, objs, service, strings, webhookConfiguration } from '../harness/manifests.js';

const webhooks = objs(at(webhookConfiguration, 'webhooks'));

describe('ValidatingWebhookConfiguration', () => {
  it('has at least one webhook, each failing closed within 10 s with no side effects', () => {
    expect(webhooks.length).toBeGreaterThan(0);
    for (const webhook of webhooks) {
      expect(webhook.failurePolicy).toBe('Fail');
      expect(webhook.timeoutSeconds).toBe(10);
      expect(webhook.sideEffects).toBe('None');
      expect(webhook.admissionReviewVersions).toEqual(['v1']);
      expect(webhook.matchPolicy).toBe('Equivalent');
    }
  });

  it('calls /validate on the webhook Service port', () => {
    const servicePort = objs(at(service, 'spec', 'ports'))[0];
    for (const webhook of webhooks) {
      expect(at(webhook, 'clientConfig', 'service')).toEqual({
        name: name(service),
        namespace: guardNamespace,
        path: '/validate',
        port: at(servicePort, 'port'),
      });
    }
  });

  it.each(GUARD_RULES.map((rule) => [`${rule.group}/${rule.resource}`, rule] as const))(
    'guards %s and its /scale subresource on UPDATE in the same webhook, for every version the rule knows',
    (_label, guardRule) => {
      const covering = webhooks.filter((webhook) =>
        objs(webhook.rules).some(
          (rule) => strings(rule.apiGroups).includes(guardRule.group) && strings(rule.resources).includes(guardRule.resource),
        ),
      );
      expect(covering.length, `a webhook rule for ${guardRule.group}/${guardRule.resource}`).toBeGreaterThan(0);
      for (const webhook of covering) {
        for (const resource of [guardRule.resource, `${guardRule.resource}/scale`]) {
          const rule = objs(webhook.rules).find(
            (candidate) =>
              strings(candidate.apiGroups).includes(guardRule.group) && strings(candidate.resources).includes(resource),
          );
          expect(rule, `${resource} in webhook ${String(webhook.name)}`).toBeDefined();
          expect(strings(at(rule, 'operations'))).toContain('UPDATE');
          for (const version of guardRule.versions) expect(strings(at(rule, 'apiVersions'))).toContain(version);
        }
      }
    },
  );

  it('every guarded resource rule has its /scale twin with the same apiGroup and UPDATE', () => {
    // The member-bearing DELETE webhooks (below) have rules of their own.
    for (const webhook of webhooks.filter((candidate) => candidate.matchConditions === undefined)) {
      const rules = objs(webhook.rules);
      for (const rule of rules) {
        expect(strings(rule.operations), `operations of ${JSON.stringify(rule.resources)}`).toEqual(['UPDATE']);
        for (const resource of strings(rule.resources).filter((entry) => !entry.includes('/'))) {
          const twin = rules.find(
            (candidate) =>
              strings(candidate.resources).includes(`${resource}/scale`) &&
              JSON.stringify(strings(candidate.apiGroups)) === JSON.stringify(strings(rule.apiGroups)) &&
              strings(candidate.operations).includes('UPDATE'),
          );
          expect(twin, `${resource}/scale next to ${resource}`).toBeDefined();
        }
      }
    }
  });

  it('has no objectSelector where /scale requests are matched (a Scale carries no labels)', () => {
    for (const webhook of webhooks) {
      const matchesScale = objs(webhook.rules).some((rule) =>
        strings(rule.resources).some((resource) => resource.endsWith('/scale')),
      );
      if (matchesScale) expect(webhook.objectSelector, String(webhook.name)).toBeUndefined();
    }
  });

  it('never guards its own namespace', () => {
    for (const webhook of webhooks) {
      const expressions = objs(at(webhook, 'namespaceSelector', 'matchExpressions'));
      const exclusion = expressions.find(
        (expression) => expression.key === 'kubernetes.io/metadata.name' && expression.operator === 'NotIn',
      );
      expect(strings(at(exclusion, 'values'))).toContain(guardNamespace);
    }
  });
});

type Json = Record<string, unknown>;

/** The object a DELETE fixture carries as oldObject, edited by `edit`. */
function oldObjectOf(fixture: string, edit: (object: Json) => void = () => undefined): Json {
  const object = admissionFixture(fixture).request.oldObject as unknown as Json;
  edit(object);
  return object;
}
const meta = (object: Json) => object.metadata as Json;
const podSpec = (object: Json) => object.spec as { containers: Json[] };

/** The webhook named so, and every one of its matchConditions evaluated as the apiserver would (a DELETE: no object). */
function matches(webhookName: string, oldObject: unknown, object: unknown = null): boolean {
  const webhook = webhooks.find((candidate) => candidate.name === webhookName);
  if (webhook === undefined) throw new Error(`no webhook ${webhookName}`);
  const conditions = objs(webhook.matchConditions);
  expect(conditions.length).toBeGreaterThan(0);
  return conditions.every((condition) => {
    const value = evaluateCel(String(condition.expression), { object, oldObject, request: {} });
    // An error would make the apiserver apply failurePolicy Fail: the request refused outright.
    if (value instanceof CelError) throw new Error(`${String(condition.name)} errs: ${value.message}`);
    if (typeof value !== 'boolean') throw new Error(`${String(condition.name)} is not a bool`);
    return value;
  });
}

describe('issue 28: the member-bearing DELETE webhooks and their matchConditions', () => {
  it.each([
    {
      webhook: 'machines.etcd-guard.etcd-guard.io',
      group: 'cluster.x-k8s.io',
      resource: 'machines',
      versions: ['v1beta1', 'v1beta2'],
    },
    { webhook: 'pods.etcd-guard.etcd-guard.io', group: '', resource: 'pods', versions: ['v1'] },
  ])('$webhook gets exactly DELETE of $resource, nothing else', ({ webhook: webhookName, group, resource, versions }) => {
    const webhook = webhooks.find((candidate) => candidate.name === webhookName);
    expect(objs(webhook?.rules)).toEqual([
      { apiGroups: [group], apiVersions: versions, operations: ['DELETE'], resources: [resource], scope: 'Namespaced' },
    ]);
  });

  it('no other webhook is sent a DELETE', () => {
    const deleting = webhooks.filter((webhook) =>
      objs(webhook.rules).some((rule) => strings(rule.operations).includes('DELETE')),
    );
    expect(deleting.map((webhook) => webhook.name).sort()).toEqual([
      'machines.etcd-guard.etcd-guard.io',
      'pods.etcd-guard.etcd-guard.io',
    ]);
  });

  const MACHINES = 'machines.etcd-guard.etcd-guard.io';
  const cpMachine = (edit?: (machine: Json) => void) => oldObjectOf('machine-delete-control-plane.json', edit);
  const worker = (edit?: (machine: Json) => void) => oldObjectOf('machine-delete-worker.json', edit);
  it.each([
    { name: 'a control-plane Machine (v1beta2, as the apiserver sends it)', sent: true, object: cpMachine() },
    {
      name: 'a control-plane Machine with no nodeRef yet',
      sent: true,
      object: cpMachine((m) => delete (m.status as Json).nodeRef),
    },
    {
      name: 'a control-plane Machine of another provider (the webhook then allows it)',
      sent: true,
      object: cpMachine((m) => {
        meta(m).ownerReferences = [
          { apiVersion: 'controlplane.cluster.x-k8s.io/v1alpha3', kind: 'TalosControlPlane', name: 'x', uid: 'u' },
        ];
      }),
    },
    { name: 'a worker Machine of a MachineDeployment', sent: false, object: worker() },
    { name: 'a Machine with no labels at all', sent: false, object: worker((m) => delete meta(m).labels) },
    { name: 'a Machine with an empty labels map', sent: false, object: worker((m) => (meta(m).labels = {})) },
    { name: 'no oldObject', sent: false, object: null },
  ])(`${MACHINES}: $name → sent $sent`, ({ sent, object }) => {
    expect(matches(MACHINES, object)).toBe(sent);
  });

  const PODS = 'pods.etcd-guard.etcd-guard.io';
  const STATEFUL_SET_OWNER = { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'etcd', uid: 'u' };
  const pod = (containers: Json[], owner: Json = STATEFUL_SET_OWNER) =>
    oldObjectOf('pod-delete-unrelated.json', (p) => {
      meta(p).ownerReferences = [owner];
      podSpec(p).containers = containers;
    });
  it.each([
    {
      name: 'an etcd-druid pod (container etcd running etcd-wrapper)',
      sent: true,
      object: oldObjectOf('pod-delete-etcd-druid.json'),
    },
    {
      name: 'a StatefulSet pod running the etcd image under another name',
      sent: true,
      object: pod([{ name: 'server', image: 'quay.io/coreos/etcd:v3.5.17' }]),
    },
    {
      name: 'a StatefulSet pod running etcd by digest',
      sent: true,
      object: pod([{ name: 'member', image: 'registry.k8s.io/etcd@sha256:0123' }]),
    },
    { name: 'a StatefulSet pod running a bare etcd image', sent: true, object: pod([{ name: 'member', image: 'etcd' }]) },
    { name: 'an unrelated StatefulSet pod (nginx)', sent: false, object: oldObjectOf('pod-delete-unrelated.json') },
    {
      name: 'a StatefulSet pod whose image only has etcd in its name',
      sent: false,
      object: pod([{ name: 'app', image: 'example.com/etcd-browser:1.0' }]),
    },
    {
      name: 'a Deployment pod running etcd (owned by a ReplicaSet)',
      sent: false,
      object: pod([{ name: 'etcd', image: 'quay.io/coreos/etcd:v3.5.17' }], {
        apiVersion: 'apps/v1',
        kind: 'ReplicaSet',
        name: 'rs',
        uid: 'u',
      }),
    },
    {
      name: 'a kubeadm static etcd pod (a mirror pod owned by its Node)',
      sent: false,
      object: pod([{ name: 'etcd', image: 'registry.k8s.io/etcd:3.5.24-0' }], {
        apiVersion: 'v1',
        kind: 'Node',
        name: 'cp-1',
        uid: 'u',
      }),
    },
    {
      name: 'an owner called StatefulSet of another API group',
      sent: false,
      object: pod([{ name: 'etcd', image: 'etcd' }], { apiVersion: 'example.com/v1', kind: 'StatefulSet', name: 's', uid: 'u' }),
    },
    {
      name: 'a pod with no owner',
      sent: false,
      object: oldObjectOf('pod-delete-etcd-druid.json', (p) => delete meta(p).ownerReferences),
    },
    { name: 'no oldObject', sent: false, object: null },
  ])(`${PODS}: $name → sent $sent`, ({ sent, object }) => {
    expect(matches(PODS, object)).toBe(sent);
  });
});

describe('issue 28: the UPDATEs that would let a member-bearing DELETE go unseen', () => {
  const MACHINE_UPDATES = 'machine-updates.etcd-guard.etcd-guard.io';
  const POD_UPDATES = 'pod-updates.etcd-guard.etcd-guard.io';
  it.each([
    {
      webhook: MACHINE_UPDATES,
      group: 'cluster.x-k8s.io',
      resource: 'machines',
      resources: ['machines', 'machines/status'],
      versions: ['v1beta1', 'v1beta2'],
    },
    { webhook: POD_UPDATES, group: '', resource: 'pods', resources: ['pods'], versions: ['v1'] },
  ])('$webhook gets exactly UPDATE of $resources, and is the only one sent them', (entry) => {
    const webhook = webhooks.find((candidate) => candidate.name === entry.webhook);
    expect(objs(webhook?.rules)).toEqual([
      {
        apiGroups: [entry.group],
        apiVersions: entry.versions,
        operations: ['UPDATE'],
        resources: entry.resources,
        scope: 'Namespaced',
      },
    ]);
    const updating = webhooks.filter((candidate) =>
      objs(candidate.rules).some(
        (rule) =>
          strings(rule.operations).includes('UPDATE') &&
          strings(rule.apiGroups).includes(entry.group) &&
          strings(rule.resources).some((resource) => resource.split('/')[0] === entry.resource),
      ),
    );
    expect(updating.map((candidate) => candidate.name)).toEqual([entry.webhook]);
  });

  type Edit = (object: Json) => void;
  /** The stored object of a DELETE fixture as oldObject, and that object edited as the UPDATE's object. */
  const updateOf = (fixture: string, edit: Edit, editOld: Edit = () => undefined) => {
    const old = oldObjectOf(fixture, editOld);
    const now = structuredClone(old);
    edit(now);
    return { old, now };
  };
  const labelsOf = (object: Json) => meta(object).labels as Record<string, string>;
  const ownersOf = (object: Json) => meta(object).ownerReferences as Json[];
  const CP = 'cluster.x-k8s.io/control-plane';
  const CP_NAME = 'cluster.x-k8s.io/control-plane-name';
  const CP_FIXTURE = 'machine-delete-control-plane.json';
  it.each<{ name: string; fixture?: string; edit: Edit; editOld?: Edit; sent: boolean }>([
    { name: 'the control-plane label removed (kubectl label … control-plane-)', edit: (m) => delete labelsOf(m)[CP], sent: true },
    { name: 'every label removed', edit: (m) => delete meta(m).labels, sent: true },
    { name: 'the control-plane-name label removed', edit: (m) => delete labelsOf(m)[CP_NAME], sent: true },
    { name: 'the control-plane-name label changed', edit: (m) => (labelsOf(m)[CP_NAME] = 'other'), sent: true },
    {
      name: 'the control-plane-name label added (the webhook then allows it without a read)',
      editOld: (m) => delete labelsOf(m)[CP_NAME],
      edit: (m) => (labelsOf(m)[CP_NAME] = 'prod-control-plane'),
      sent: true,
    },
    { name: 'the KubeadmControlPlane owner reference removed', edit: (m) => delete meta(m).ownerReferences, sent: true },
    { name: 'the owner reference renamed', edit: (m) => (ownersOf(m)[0]!.name = 'gone'), sent: true },
    {
      name: 'the owner reference swapped for another provider’s',
      edit: (m) => (ownersOf(m)[0]!.kind = 'TalosControlPlane'),
      sent: true,
    },
    {
      name: 'an owner reference added',
      edit: (m) => ownersOf(m).push({ apiVersion: 'example.com/v1', kind: 'Keeper', name: 'k', uid: 'u' }),
      sent: true,
    },
    {
      name: 'KCP adopting an unowned Machine (its owner reference added; the webhook then allows it)',
      editOld: (m) => delete meta(m).ownerReferences,
      edit: (m) =>
        (meta(m).ownerReferences = [
          {
            apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
            kind: 'KubeadmControlPlane',
            name: 'prod-control-plane',
            uid: 'u',
          },
        ]),
      sent: true,
    },
    { name: 'its nodeRef changed (/status)', edit: (m) => ((m.status as Json).nodeRef = { name: 'elsewhere' }), sent: true },
    { name: 'its nodeRef removed (/status)', edit: (m) => delete (m.status as Json).nodeRef, sent: true },
    { name: 'its whole status removed', edit: (m) => delete m.status, sent: true },
    {
      name: 'the machine controller setting a nodeRef that was unset',
      editOld: (m) => delete (m.status as Json).nodeRef,
      edit: (m) => ((m.status as Json).nodeRef = { name: 'prod-control-plane-7xkqp' }),
      sent: false,
    },
    { name: 'its status conditions changed', edit: (m) => ((m.status as Json).conditions = []), sent: false },
    { name: 'an ordinary label added', edit: (m) => (labelsOf(m).team = 'infra'), sent: false },
    { name: 'an annotation added', edit: (m) => (meta(m).annotations = { note: 'x' }), sent: false },
    { name: 'a finalizer removed (the machine controller)', edit: (m) => (meta(m).finalizers = []), sent: false },
    {
      name: 'the owner reference’s controller flag changed',
      edit: (m) => (ownersOf(m)[0]!.blockOwnerDeletion = false),
      sent: false,
    },
    {
      name: 'the spec changed (KCP’s in-place propagation)',
      edit: (m) => ((m.spec as Json).nodeDeletionTimeout = '10s'),
      sent: false,
    },
    {
      name: 'a worker Machine losing its labels',
      fixture: 'machine-delete-worker.json',
      edit: (m) => delete meta(m).labels,
      sent: false,
    },
  ])(`${MACHINE_UPDATES}: $name → sent $sent`, ({ fixture, edit, editOld, sent }) => {
    const { old, now } = updateOf(fixture ?? CP_FIXTURE, edit, editOld);
    expect(matches(MACHINE_UPDATES, old, now)).toBe(sent);
  });

  const DRUID_POD = 'pod-delete-etcd-druid.json';
  const containersOf = (object: Json) => podSpec(object).containers;
  const imageOnly: Edit = (p) => (podSpec(p).containers = [{ name: 'member', image: 'quay.io/coreos/etcd:v3.5.17' }]);
  it.each<{ name: string; fixture?: string; edit: Edit; editOld?: Edit; sent: boolean }>([
    { name: 'an etcd pod orphaned', edit: (p) => delete meta(p).ownerReferences, sent: true },
    { name: 'its owner reference renamed', edit: (p) => (ownersOf(p)[0]!.name = 'other'), sent: true },
    {
      name: 'its owner reference moved to another API group',
      edit: (p) => (ownersOf(p)[0]!.apiVersion = 'example.com/v1'),
      sent: true,
    },
    {
      name: 'an etcd image (container not named etcd) changed to another image',
      editOld: imageOnly,
      edit: (p) => (containersOf(p)[0]!.image = 'registry.example/busybox:1'),
      sent: true,
    },
    {
      name: 'an etcd image changed to a newer etcd',
      editOld: imageOnly,
      edit: (p) => (containersOf(p)[0]!.image = 'quay.io/coreos/etcd:v3.6.5'),
      sent: false,
    },
    {
      name: 'the etcd container’s image changed (its name still says etcd)',
      edit: (p) => (containersOf(p)[0]!.image = 'registry.example/busybox:1'),
      sent: false,
    },
    { name: 'a label added', edit: (p) => (labelsOf(p).extra = 'x'), sent: false },
    { name: 'an annotation added', edit: (p) => (meta(p).annotations = { note: 'x' }), sent: false },
    {
      name: 'an unrelated StatefulSet pod orphaned',
      fixture: 'pod-delete-unrelated.json',
      edit: (p) => delete meta(p).ownerReferences,
      sent: false,
    },
  ])(`${POD_UPDATES}: $name → sent $sent`, ({ fixture, edit, editOld, sent }) => {
    const { old, now } = updateOf(fixture ?? DRUID_POD, edit, editOld);
    expect(matches(POD_UPDATES, old, now)).toBe(sent);
  });
});

describe('issue 28: the ClusterClass Cluster webhook and its matchConditions', () => {
  const CLUSTERS = 'clusters.etcd-guard.etcd-guard.io';

  it(`${CLUSTERS} gets exactly UPDATE of clusters (a Cluster's DELETE is teardown), and is the only one sent clusters`, () => {
    const webhook = webhooks.find((candidate) => candidate.name === CLUSTERS);
    expect(objs(webhook?.rules)).toEqual([
      {
        apiGroups: ['cluster.x-k8s.io'],
        apiVersions: ['v1beta1', 'v1beta2'],
        operations: ['UPDATE'],
        resources: ['clusters'],
        scope: 'Namespaced',
      },
    ]);
    const sentClusters = webhooks.filter((candidate) =>
      objs(candidate.rules).some((rule) => strings(rule.resources).some((resource) => resource.startsWith('clusters'))),
    );
    expect(sentClusters.map((candidate) => candidate.name)).toEqual([CLUSTERS]);
  });

  type Edit = (old: Json, now: Json) => void;
  const topologyOf = (object: Json) => (object.spec as Json).topology as Json;
  const controlPlaneOf = (object: Json) => topologyOf(object).controlPlane as Json;
  /** The fixture's old and new Cluster, edited by `edit`. */
  const update = (file: string, edit: Edit = () => undefined) => {
    const { request } = admissionFixture(file);
    const old = request.oldObject as unknown as Json;
    const now = request.object as unknown as Json;
    edit(old, now);
    return { old, now };
  };
  const V1BETA2 = 'cluster-v1beta2-topology-version.json';
  const V1BETA1 = 'cluster-v1beta1-topology-replicas-3-to-5.json';
  const sameVersion: Edit = (old, now) => (topologyOf(now).version = topologyOf(old).version);
  it.each<{ name: string; file: string; edit?: Edit; sent: boolean }>([
    { name: 'v1beta2: the topology version changes', file: V1BETA2, sent: true },
    { name: 'v1beta1: the control plane replicas 3 → 5', file: V1BETA1, sent: true },
    {
      name: 'the replicas set where they were unset',
      file: V1BETA1,
      edit: (old) => delete controlPlaneOf(old).replicas,
      sent: true,
    },
    {
      name: 'the old Cluster had no controlPlane entry',
      file: V1BETA1,
      edit: (old) => delete topologyOf(old).controlPlane,
      sent: true,
    },
    { name: 'a Cluster that gains its topology', file: V1BETA2, edit: (old) => delete (old.spec as Json).topology, sent: true },
    {
      name: 'a topology edit of the workers only',
      file: V1BETA2,
      edit: (old, now) => {
        sameVersion(old, now);
        topologyOf(now).workers = { machineDeployments: [] };
      },
      sent: false,
    },
    {
      name: 'the replicas unset (the control plane keeps its own)',
      file: V1BETA1,
      edit: (_old, now) => delete controlPlaneOf(now).replicas,
      sent: false,
    },
    {
      name: 'no controlPlane entry in either',
      file: V1BETA2,
      edit: (old, now) => {
        sameVersion(old, now);
        delete topologyOf(old).controlPlane;
        delete topologyOf(now).controlPlane;
      },
      sent: false,
    },
    {
      name: 'a label edit of a topology Cluster',
      file: V1BETA2,
      edit: (old, now) => {
        sameVersion(old, now);
        (now.metadata as Json).labels = { env: 'staging' };
      },
      sent: false,
    },
    {
      name: 'a Cluster without topology',
      file: V1BETA2,
      edit: (old, now) => {
        delete (old.spec as Json).topology;
        delete (now.spec as Json).topology;
      },
      sent: false,
    },
    {
      name: 'a Cluster whose topology is removed',
      file: V1BETA2,
      edit: (_old, now) => delete (now.spec as Json).topology,
      sent: false,
    },
  ])(`${CLUSTERS}: $name → sent $sent`, ({ file, edit, sent }) => {
    const { old, now } = update(file, edit);
    expect(matches(CLUSTERS, old, now)).toBe(sent);
  });
});

describe('the CEL evaluator the matchConditions tests use keeps CEL’s error rules', () => {
  it.each([
    { expression: "a.missing == 'x'", vars: { a: {} }, value: 'error' },
    { expression: "has(a.missing) && a.missing == 'x'", vars: { a: {} }, value: false },
    { expression: "a.missing == 'x' && false", vars: { a: {} }, value: false },
    { expression: "a.missing == 'x' || true", vars: { a: {} }, value: true },
    { expression: 'has(a.b.c)', vars: { a: {} }, value: 'error' },
    { expression: "a.exists(x, x.k == 'v')", vars: { a: [{}, { k: 'v' }] }, value: true },
    { expression: "a.exists(x, x.k == 'v')", vars: { a: [{}] }, value: 'error' },
    { expression: "'k' in a", vars: { a: { k: '' } }, value: true },
    { expression: "a['k.io/x'] == 'v'", vars: { a: { 'k.io/x': 'v' } }, value: true },
    { expression: "a['missing'] == 'v'", vars: { a: {} }, value: 'error' },
    { expression: "('k' in a) != ('k' in b)", vars: { a: { k: '' }, b: {} }, value: true },
    { expression: "a.matches('(^|/)etcd([:@]|$)')", vars: { a: 'quay.io/coreos/etcd:v3' }, value: true },
  ])('$expression → $value', ({ expression, vars, value }) => {
    const result = evaluateCel(expression, vars);
    expect(result instanceof CelError ? 'error' : result).toBe(value);
  });
});
