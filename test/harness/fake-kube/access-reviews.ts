// SubjectAccessReviews, answered from a short list of grants the test sets (a stand-in for RBAC):
// enough for the webhook to ask "may this user override?" and get allowed or not.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BadRequest, isRecord, methodNotAllowed, readJsonBody, send, type FakeRequest, type RouteHandler } from './http.js';

/**
 * One grant: a user or a group may `verb` `resource` in `apiGroup` (optionally only the named
 * object); `*` matches anything, as in an RBAC rule. `namespace`: granted by a RoleBinding there,
 * so only a review asking in that namespace is allowed; absent: a ClusterRoleBinding (any review).
 */
export interface FakeAccessGrant {
  user?: string;
  group?: string;
  verb: string;
  apiGroup: string;
  resource: string;
  name?: string;
  namespace?: string;
}

const granted = (rule: string, asked: unknown) => rule === '*' || rule === asked;

const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];

export class AccessReviewRoutes implements RouteHandler {
  private grants: FakeAccessGrant[] = [];
  /** The spec of every review received, in order. */
  readonly reviews: Record<string, unknown>[] = [];

  match(pathname: string) {
    return /^\/apis\/authorization\.k8s\.io\/v1\/subjectaccessreviews\/?$/.test(pathname)
      ? { resource: 'subjectaccessreviews', namespace: null, name: null }
      : null;
  }

  async handle(request: IncomingMessage, response: ServerResponse, entry: FakeRequest): Promise<void> {
    if (entry.verb !== 'create') return methodNotAllowed(response, entry);
    const body = await readJsonBody(request, 'SubjectAccessReview');
    const spec = isRecord(body) && isRecord(body.spec) ? body.spec : null;
    const attributes = spec !== null && isRecord(spec.resourceAttributes) ? spec.resourceAttributes : null;
    if (spec === null || attributes === null) throw new BadRequest('spec.resourceAttributes is required');
    this.reviews.push(spec);
    const groups = strings(spec.groups);
    const allowed = this.grants.some(
      (grant) =>
        (grant.user === undefined || grant.user === spec.user) &&
        (grant.group === undefined || groups.includes(grant.group)) &&
        granted(grant.verb, attributes.verb) &&
        granted(grant.apiGroup, attributes.group) &&
        granted(grant.resource, attributes.resource) &&
        (grant.name === undefined || grant.name === attributes.name) &&
        (grant.namespace === undefined || grant.namespace === attributes.namespace),
    );
    send(response, entry, 201, {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec,
      status: { allowed, ...(allowed ? { reason: 'granted by the stand-in' } : {}) },
    });
  }

  set(grants: FakeAccessGrant[]): void {
    this.grants = structuredClone(grants);
  }
}
