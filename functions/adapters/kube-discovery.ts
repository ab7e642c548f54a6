// Lists what discovery reads from the management cluster (and, for capi-machines.ts, Machines): Cluster API
// KubeadmControlPlanes and Machines, etcd-druid Etcds. Every listing (all pages, every namespace,
// the version fallback) finishes before the caller's Deadline or fails with a KubeApiError.
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { DiscoveryScope } from '../entrypoints/config.js';
import type { Deadline } from '../domain/deadline.js';
import { ETCD_GROUP, KCP_GROUP } from '../domain/discovery-mapping.js';
import { callKube, KubeApiError, loadKubeConfig } from './kube.js';

// Callers outside the adapters name the client by this re-export, never by importing client-node.
export type { CustomObjectsApi };

const PAGE_SIZE = 500;
const MACHINE_GROUP = 'cluster.x-k8s.io';
/** Newest first: a management cluster before Cluster API v1.11 serves only v1beta1 (404 on v1beta2). */
const CAPI_VERSIONS = ['v1beta2', 'v1beta1'];

export interface CustomResource {
  group: string;
  /** Tried in order; a 404 (version not served) moves on to the next. */
  versions: readonly string[];
  plural: string;
}

export const KUBEADM_CONTROL_PLANES: CustomResource = {
  group: KCP_GROUP,
  versions: CAPI_VERSIONS,
  plural: 'kubeadmcontrolplanes',
};
export const MACHINES: CustomResource = { group: MACHINE_GROUP, versions: CAPI_VERSIONS, plural: 'machines' };
export const CLUSTERS: CustomResource = { group: MACHINE_GROUP, versions: CAPI_VERSIONS, plural: 'clusters' };
export const ETCDS: CustomResource = { group: ETCD_GROUP, versions: ['v1alpha1'], plural: 'etcds' };

export function createCustomObjectsApi(kubeconfigFile?: string): CustomObjectsApi {
  return loadKubeConfig(kubeconfigFile).makeApiClient(CustomObjectsApi);
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

export function listKubeadmControlPlanes(api: CustomObjectsApi, scope: DiscoveryScope, deadline: Deadline): Promise<unknown[]> {
  return listCustomObjects(
    api,
    KUBEADM_CONTROL_PLANES,
    { ...scope, labelSelector: equalitySelector(scope.labelSelector) },
    deadline,
  );
}

/**
 * The Clusters of the scope's namespaces, whatever their labels: a KCP is resolved only through the
 * Cluster its owner reference names (by uid) and whose controlPlaneRef names it back.
 */
export function listClusters(api: CustomObjectsApi, scope: DiscoveryScope, deadline: Deadline): Promise<unknown[]> {
  return listCustomObjects(api, CLUSTERS, { ...(scope.namespaces ? { namespaces: scope.namespaces } : {}) }, deadline);
}

export function listEtcds(api: CustomObjectsApi, scope: DiscoveryScope, deadline: Deadline): Promise<unknown[]> {
  return listCustomObjects(api, ETCDS, { ...scope, labelSelector: equalitySelector(scope.labelSelector) }, deadline);
}
