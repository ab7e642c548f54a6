// Lists what discovery reads from the management cluster (each kind's `discovery.lists`: Cluster
// API KubeadmControlPlanes and Clusters, etcd-druid Etcds, …) and, for capi-machines.ts, Machines.
// Every listing (all pages, every namespace, the version fallback) finishes before the caller's
// Deadline or fails with a KubeApiError.
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { DiscoveryScope } from '../domain/config.js';
import type { Deadline } from '../domain/deadline.js';
import type { ListedResource } from '../domain/kinds/kind.js';
import { CAPI_VERSIONS } from '../domain/kinds/kubeadm-control-plane.js';
import { callKube, KubeApiError, loadKubeConfig } from './kube.js';
import type { KeptKubeAgents } from './kube-agents.js';

// Callers outside the adapters name the client by this re-export, never by importing client-node.
export type { CustomObjectsApi };

const PAGE_SIZE = 500;
const MACHINE_GROUP = 'cluster.x-k8s.io';

/** A resource listed version by version, newest first: a 404 (version not served) moves on to the next. */
export type CustomResource = ListedResource;

export const MACHINES: CustomResource = { group: MACHINE_GROUP, versions: CAPI_VERSIONS, plural: 'machines' };

export function createCustomObjectsApi(kubeconfigFile?: string, agents?: KeptKubeAgents): CustomObjectsApi {
  return loadKubeConfig(kubeconfigFile, process.env, agents).makeApiClient(CustomObjectsApi);
}

/** An equality map as a label selector string ("a=b,c=d"). */
export function equalitySelector(labels: Readonly<Record<string, string>> | undefined): string | undefined {
  const pairs = Object.entries(labels ?? {}).map(([key, value]) => `${key}=${value}`);
  return pairs.length > 0 ? pairs.join(',') : undefined;
}

async function listPages(
  api: CustomObjectsApi,
  resource: CustomResource,
  version: string,
  namespace: string | undefined,
  labelSelector: string | undefined,
  deadline: Deadline,
): Promise<unknown[]> {
  const items: unknown[] = [];
  const operation = {
    verb: 'list' as const,
    resource: `${resource.plural}.${resource.group}/${version}`,
    ...(namespace ? { namespace } : {}),
  };
  let continueToken: string | undefined;
  do {
    const page = (await callKube(operation, deadline, (options) =>
      namespace === undefined
        ? api.listClusterCustomObject(
            {
              group: resource.group,
              version,
              plural: resource.plural,
              labelSelector,
              limit: PAGE_SIZE,
              _continue: continueToken,
            },
            options,
          )
        : api.listNamespacedCustomObject(
            {
              group: resource.group,
              version,
              namespace,
              plural: resource.plural,
              labelSelector,
              limit: PAGE_SIZE,
              _continue: continueToken,
            },
            options,
          ),
    )) as { items?: unknown; metadata?: { _continue?: unknown } };
    if (Array.isArray(page.items)) items.push(...(page.items as unknown[]));
    const next = page.metadata?._continue;
    continueToken = typeof next === 'string' && next !== '' ? next : undefined;
  } while (continueToken !== undefined);
  return items;
}

/** Every object of `resource` in the scope's namespaces (all when none) that carries its labels. */
export async function listCustomObjects(
  api: CustomObjectsApi,
  resource: CustomResource,
  scope: { namespaces?: readonly string[]; labelSelector?: string | undefined },
  deadline: Deadline,
): Promise<unknown[]> {
  for (const [index, version] of resource.versions.entries()) {
    try {
      const namespaces = scope.namespaces ?? [undefined];
      const lists = await Promise.all(
        namespaces.map((namespace) => listPages(api, resource, version, namespace, scope.labelSelector, deadline)),
      );
      return lists.flat();
    } catch (error) {
      const lastVersion = index === resource.versions.length - 1;
      if (!(error instanceof KubeApiError && error.isNotFound) || lastVersion) throw error;
    }
  }
  return [];
}

/**
 * One of a discovery provider's listings in its scope's namespaces: the kind's own objects
 * (`selectByLabels`) carry the scope's labels; what its mapping reads besides (a KCP's Clusters)
 * is listed whatever its labels, since an object is resolved through it by identity.
 */
export function listInScope(
  api: CustomObjectsApi,
  resource: CustomResource,
  scope: DiscoveryScope,
  selectByLabels: boolean,
  deadline: Deadline,
): Promise<unknown[]> {
  return listCustomObjects(
    api,
    resource,
    {
      ...(scope.namespaces ? { namespaces: scope.namespaces } : {}),
      ...(selectByLabels ? { labelSelector: equalitySelector(scope.labelSelector) } : {}),
    },
    deadline,
  );
}
