// RBAC: no wildcards, configmaps by name only, no secrets, and every workload able to read and
// write the ConfigMap of every configured target.
import { describe, expect, it } from 'vitest';
import { GUARD_RULES } from '../../webhook/domain/rules.js';
import {
  at,
  guardConfig,
  guardNamespace,
  isObj,
  name,
  type Obj,
  objs,
  ofKind,
  strings,
  text,
  workloads,
} from '../harness/manifests.js';

const roles = [...ofKind('Role'), ...ofKind('ClusterRole')];
const allRules = roles.flatMap((role) => objs(role.rules).map((rule) => ({ role: `${String(role.kind)}/${name(role)}`, rule })));

function rolesBoundTo(serviceAccount: string): Obj[] {
  return ofKind('RoleBinding')
    .filter((binding) =>
      objs(binding.subjects).some((subject) => subject.kind === 'ServiceAccount' && subject.name === serviceAccount),
    )
    .map((binding) =>
      ofKind(String(at(binding, 'roleRef', 'kind'))).find((role) => name(role) === at(binding, 'roleRef', 'name')),
    )
    .filter(isObj);
}

/** The configmap names a Role lets its subject get and update. */
function readableAndWritableConfigMaps(role: Obj): { get: string[]; update: string[] } {
  const rules = objs(role.rules).filter((rule) => strings(rule.resources).includes('configmaps'));
  const namesFor = (verb: string) =>
    rules.filter((rule) => strings(rule.verbs).includes(verb)).flatMap((rule) => strings(rule.resourceNames));
  return { get: namesFor('get'), update: namesFor('update') };
}

describe('RBAC', () => {
  it('grants no wildcard verb, resource, apiGroup or name anywhere', () => {
    expect(allRules.length).toBeGreaterThan(0);
    for (const { role, rule } of allRules) {
      for (const field of ['verbs', 'resources', 'apiGroups', 'resourceNames', 'nonResourceURLs']) {
        expect(
          strings(rule[field]).filter((entry) => entry.includes('*')),
          `${role} ${field}`,
        ).toEqual([]);
      }
    }
  });

  it('lets get/update/patch/delete on configmaps touch only etcd-guard-* names, and never reads secrets', () => {
    for (const { role, rule } of allRules) {
      expect(strings(rule.resources), role).not.toContain('secrets');
      if (!strings(rule.resources).includes('configmaps')) continue;
      const byName = strings(rule.verbs).filter((verb) => ['get', 'update', 'patch', 'delete'].includes(verb));
      if (byName.length === 0) continue;
      const names = strings(rule.resourceNames);
      expect(names.length, `${role} ${byName.join('/')} needs resourceNames`).toBeGreaterThan(0);
      for (const configMapName of names) expect(configMapName.startsWith('etcd-guard-'), `${role}: ${configMapName}`).toBe(true);
    }
  });

  it('grants on configmaps only the verbs the stores use (get, create, update, patch), and on nothing else namespaced', () => {
    for (const role of ofKind('Role')) {
      for (const rule of objs(role.rules)) {
        expect(strings(rule.apiGroups), name(role)).toEqual(['']);
        expect(strings(rule.resources), name(role)).toEqual(['configmaps']);
        expect(
          strings(rule.verbs).filter((verb) => !['get', 'create', 'update', 'patch'].includes(verb)),
          name(role),
        ).toEqual([]);
      }
    }
  });

  it('grants cluster-wide only list on nodes, create/patch on Events, the webhook get on what it guards (the /scale parent read), list on Machines and create on subjectaccessreviews (who may override)', () => {
    const clusterRoles = ofKind('ClusterRole');
    const clusterGrants = (serviceAccount: string): string[] =>
      ofKind('ClusterRoleBinding')
        .filter((binding) => objs(binding.subjects).some((subject) => subject.name === serviceAccount))
        .map((binding) => clusterRoles.find((role) => name(role) === at(binding, 'roleRef', 'name')))
        .flatMap((role) => objs(role?.rules))
        .flatMap((rule) =>
          strings(rule.apiGroups).flatMap((group) =>
            strings(rule.resources).flatMap((resource) => strings(rule.verbs).map((verb) => `${group}/${resource}:${verb}`)),
          ),
        )
        .sort();
    // Events on the guarded objects (in their namespaces): create, and patch for a series' count.
    const events = ['events.k8s.io/events:create', 'events.k8s.io/events:patch'];
    expect(clusterGrants('etcd-guard-evaluator')).toEqual(['/nodes:list', ...events].sort());
    expect(clusterGrants('etcd-guard-webhook')).toEqual(
      [
        '/nodes:list',
        ...events,
        'cluster.x-k8s.io/machines:list',
        // The KCP's Cluster, for its failure domains (capi-machines.ts).
        'cluster.x-k8s.io/clusters:get',
        // "may override" is asked of RBAC with a SubjectAccessReview.
        'authorization.k8s.io/subjectaccessreviews:create',
        ...GUARD_RULES.map((rule) => `${rule.group}/${rule.resource}:get`),
      ].sort(),
    );
    for (const binding of ofKind('ClusterRoleBinding')) {
      expect(at(binding, 'roleRef', 'kind')).toBe('ClusterRole');
      expect(clusterRoles.map(name)).toContain(at(binding, 'roleRef', 'name'));
    }
    for (const binding of ofKind('RoleBinding')) expect(at(binding, 'roleRef', 'kind'), name(binding)).toBe('Role');
  });

  it('binds only service accounts that exist, in the guard namespace', () => {
    const serviceAccounts = ofKind('ServiceAccount').map(name);
    for (const binding of [...ofKind('RoleBinding'), ...ofKind('ClusterRoleBinding')]) {
      for (const subject of objs(binding.subjects)) {
        expect(subject.kind, name(binding)).toBe('ServiceAccount');
        expect(serviceAccounts).toContain(subject.name);
        expect(subject.namespace).toBe(guardNamespace);
      }
    }
  });

  it.each(workloads.map((workload) => [workload.what, workload] as const))(
    'the %s service account may get and update the ConfigMap of every configured target',
    (_label, workload) => {
      const serviceAccount = text(workload.podSpec.serviceAccountName) ?? '';
      expect(ofKind('ServiceAccount').map(name)).toContain(serviceAccount);
      const granted = rolesBoundTo(serviceAccount).map(readableAndWritableConfigMaps);
      const get = granted.flatMap((grant) => grant.get);
      const update = granted.flatMap((grant) => grant.update);
      expect(guardConfig().targets.length).toBeGreaterThan(0);
      for (const target of guardConfig().targets) {
        expect(get, `get etcd-guard-${target.name}`).toContain(`etcd-guard-${target.name}`);
        expect(update, `update etcd-guard-${target.name}`).toContain(`etcd-guard-${target.name}`);
      }
      const creates = rolesBoundTo(serviceAccount).some((role) =>
        objs(role.rules).some((rule) => strings(rule.resources).includes('configmaps') && strings(rule.verbs).includes('create')),
      );
      expect(creates, 'create configmaps (first evaluation of a target)').toBe(true);
    },
  );
});

// ---------------------------------------------------------------------------------------------
