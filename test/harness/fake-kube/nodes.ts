// Nodes as the inventory check lists them: one cluster-scoped list filtered by a label selector.
import type { ServerResponse } from 'node:http';
import { clone, listBody, methodNotAllowed, send, type FakeRequest, type RouteHandler } from './http.js';
import { labelsMatch, parseLabelSelector } from './labels.js';
import type { Revision } from './revision.js';

export interface FakeNodeSpec {
  name: string;
  labels?: Record<string, string>;
  addresses?: { type: string; address: string }[];
  /** metadata.creationTimestamp (RFC 3339); absent when not given. */
  createdAt?: string;
}

function nodeObject(node: FakeNodeSpec, index: number): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: node.name,
      uid: `node-uid-${index}`,
      resourceVersion: String(index + 1),
      labels: node.labels ?? {},
      ...(node.createdAt !== undefined && { creationTimestamp: node.createdAt }),
    },
    spec: {},
    status: { addresses: node.addresses ?? [] },
  };
}

export class NodeRoutes implements RouteHandler {
  private nodes: FakeNodeSpec[] = [];

  constructor(private readonly revision: Revision) {}

  match(pathname: string) {
    return /^\/api\/v1\/nodes\/?$/.test(pathname) ? { resource: 'nodes', namespace: null, name: null } : null;
  }

  handle(_request: unknown, response: ServerResponse, entry: FakeRequest): void {
    if (entry.verb !== 'list') return methodNotAllowed(response, entry);
    const selector = parseLabelSelector(entry.query.get('labelSelector'));
    const items = this.nodes
      .map((node, index) => ({ node, index }))
      .filter(({ node }) => labelsMatch(node.labels, selector))
      .map(({ node, index }) => nodeObject(node, index));
    send(response, entry, 200, listBody('NodeList', 'v1', this.revision.current(), items));
  }

  set(nodes: FakeNodeSpec[]): void {
    this.nodes = clone(nodes);
  }
}
