// Read-only objects the product gets and lists but never writes: Secrets, and the Cluster API and
// etcd-druid custom resources discovery reads. Tests put objects in; the product reads them at any
// version the stand-in serves for the group (no conversion: an object is returned as stored, so a
// test can hand the product either version's shape). A group can be made to serve fewer versions,
// like a management cluster with an older Cluster API.
import type { ServerResponse } from 'node:http';
import { clone, listBody, methodNotAllowed, notFound, send, statusBody, type FakeRequest, type RouteHandler } from './http.js';
import { labelsMatch, parseLabelSelector } from './labels.js';
import type { Revision } from './revision.js';

export interface FakeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [extra: string]: unknown };
  [field: string]: unknown;
}

/** The resources served, by group: plural name → kind. */
const RESOURCES: Record<string, { versions: string[]; resources: Record<string, string> }> = {
  '': { versions: ['v1'], resources: { secrets: 'Secret' } },
  apps: { versions: ['v1'], resources: { statefulsets: 'StatefulSet' } },
  'cluster.x-k8s.io': { versions: ['v1beta1', 'v1beta2'], resources: { clusters: 'Cluster', machines: 'Machine' } },
  'controlplane.cluster.x-k8s.io': {
    versions: ['v1beta1', 'v1beta2'],
    resources: { kubeadmcontrolplanes: 'KubeadmControlPlane' },
  },
  'druid.gardener.cloud': { versions: ['v1alpha1'], resources: { etcds: 'Etcd' } },
  'coordination.k8s.io': { versions: ['v1'], resources: { leases: 'Lease' } },
};

interface ObjectPath {
  group: string;
  version: string;
  resource: string;
  namespace: string | null;
  name: string | null;
}

function parsePath(pathname: string): ObjectPath | null {
  const match = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?\/?$/.exec(pathname);
  if (!match) return null;
  const [, coreVersion, group, groupVersion, namespace, resource, name] = match;
  return {
    group: group ?? '',
    version: coreVersion ?? groupVersion ?? '',
    resource: resource ?? '',
    namespace: namespace ? decodeURIComponent(namespace) : null,
    name: name ? decodeURIComponent(name) : null,
  };
}

const groupOf = (apiVersion: string): string => (apiVersion.includes('/') ? (apiVersion.split('/')[0] ?? '') : '');

export class ObjectRoutes implements RouteHandler {
  private readonly objects = new Map<string, FakeObject>();
  private readonly servedVersions = new Map(Object.entries(RESOURCES).map(([group, { versions }]) => [group, versions]));

  constructor(private readonly revision: Revision) {}

  match(pathname: string) {
    const parsed = parsePath(pathname);
    if (!parsed || RESOURCES[parsed.group]?.resources[parsed.resource] === undefined) return null;
    if (!this.servedVersions.get(parsed.group)?.includes(parsed.version)) return null;
    if (parsed.name !== null && parsed.namespace === null) return null; // every served resource is namespaced
    return { resource: parsed.resource, namespace: parsed.namespace, name: parsed.name };
  }

  handle(_request: unknown, response: ServerResponse, entry: FakeRequest): void {
    const parsed = parsePath(entry.path);
    if (!parsed) return methodNotAllowed(response, entry);
    const group = RESOURCES[parsed.group];
    if (entry.verb === 'get') {
      const found = this.objects.get(this.key(parsed.group, parsed.resource, parsed.namespace ?? '', parsed.name ?? ''));
      if (!found) return send(response, entry, 404, notFound(parsed.resource, parsed.name ?? '', parsed.group));
      return send(response, entry, 200, found);
    }
    if (entry.verb !== 'list') return methodNotAllowed(response, entry);
    const selector = parseLabelSelector(entry.query.get('labelSelector'));
    const prefix = `${parsed.group}/${parsed.resource}/${parsed.namespace === null ? '' : `${parsed.namespace}/`}`;
    const items = [...this.objects.entries()]
      .filter(([key, object]) => key.startsWith(prefix) && labelsMatch(object.metadata.labels, selector))
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([, object]) => object);
    const apiVersion = parsed.group === '' ? parsed.version : `${parsed.group}/${parsed.version}`;
    const kind = `${group?.resources[parsed.resource] ?? 'Object'}List`;
    send(response, entry, 200, listBody(kind, apiVersion, this.revision.current(), items));
  }

  private key(group: string, resource: string, namespace: string, name: string): string {
    return `${group}/${resource}/${namespace}/${name}`;
  }

  /** Store (or replace) an object under `resource` of its apiVersion's group. */
  put(resource: string, object: FakeObject): void {
    const group = groupOf(object.apiVersion);
    if (RESOURCES[group]?.resources[resource] === undefined) {
      throw new Error(`the stand-in does not serve ${resource} in group ${JSON.stringify(group)}`);
    }
    const stored = clone(object);
    stored.metadata.resourceVersion = String(this.revision.bump());
    this.objects.set(this.key(group, resource, object.metadata.namespace ?? '', object.metadata.name), stored);
  }

  remove(resource: string, apiVersion: string, namespace: string, name: string): void {
    this.objects.delete(this.key(groupOf(apiVersion), resource, namespace, name));
  }

  /**
   * Whether the path lies under a version of one of these groups that is not served: the real
   * server has no handler there at all and answers its mux's plain-text 404, not a Status.
   */
  unservedVersion(pathname: string): boolean {
    const match = /^\/apis\/([^/]+)\/([^/]+)(?:\/|$)/.exec(pathname);
    if (!match?.[1] || !match[2] || RESOURCES[match[1]] === undefined) return false;
    return !(this.servedVersions.get(match[1])?.includes(match[2]) ?? false);
  }

  /** Serve only these versions of a group (e.g. ['v1beta1'] for a Cluster API before v1.11). */
  serveVersions(group: string, versions: string[]): void {
    if (!RESOURCES[group]) throw new Error(statusBody(404, 'NotFound', `unknown group ${group}`).message);
    this.servedVersions.set(group, [...versions]);
  }
}
