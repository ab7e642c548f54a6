// What every route handler of the stand-in shares: the request record, the apiserver's Status
// body (its shape and message wording, because the product turns them into user-facing messages),
// and reading a JSON body.
import type { IncomingMessage, ServerResponse } from 'node:http';

export type KubeVerb = 'get' | 'list' | 'create' | 'update' | 'patch';

export interface FakeRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  verb: KubeVerb | null;
  /** The resource (plural), e.g. "configmaps", "kubeadmcontrolplanes"; null when no route matched. */
  resource: string | null;
  namespace: string | null;
  name: string | null;
  /** HTTP status sent, or null while unanswered (e.g. hung). */
  status: number | null;
}

export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure';
  message: string;
  reason: string;
  details?: Record<string, unknown>;
  code: number;
}

export function statusBody(code: number, reason: string, message: string, details?: Record<string, unknown>): StatusBody {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

/** As the real server words it: a resource of a named group is `<plural>.<group>` in the message. */
export function notFound(resource: string, name: string, group = ''): StatusBody {
  const qualified = group === '' ? resource : `${resource}.${group}`;
  return statusBody(404, 'NotFound', `${qualified} ${JSON.stringify(name)} not found`, {
    name,
    ...(group === '' ? {} : { group }),
    kind: resource,
  });
}

/** A request the real apiserver would answer 400 (thrown by parsers, caught by the server). */
export class BadRequest extends Error {}

export function send(response: ServerResponse, entry: FakeRequest, code: number, body: unknown): void {
  entry.status = code;
  response.writeHead(code, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

/**
 * The body as JSON; a body that is not JSON is a 400 worded as the real server words it, up to
 * the parser's own text (Go's, there).
 */
export async function readJsonBody(request: IncomingMessage, kind: string): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new BadRequest(
      `the object provided is unrecognized (must be of type ${kind}): couldn't get version/kind; json parse error: ${(error as Error).message} (${text.slice(0, 100)})`,
    );
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export const clone = <T>(value: T): T => structuredClone(value);

/** One route handler: serves the verbs of one resource family for the paths it recognises. */
export interface RouteHandler {
  /** The resource, namespace and name of a path this handler serves, else null. */
  match(pathname: string): { resource: string; namespace: string | null; name: string | null } | null;
  handle(request: IncomingMessage, response: ServerResponse, entry: FakeRequest): Promise<void> | void;
}

/** A list response as the apiserver sends it. */
export function listBody(kind: string, apiVersion: string, revision: number, items: unknown[]): Record<string, unknown> {
  return { kind, apiVersion, metadata: { resourceVersion: String(revision) }, items };
}

export function methodNotAllowed(response: ServerResponse, entry: FakeRequest): void {
  send(
    response,
    entry,
    405,
    statusBody(405, 'MethodNotAllowed', `${entry.method} is not supported on ${entry.path} by this stand-in`),
  );
}
