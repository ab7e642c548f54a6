// An in-memory stand-in for kube-apiserver, on loopback, serving only what etcd-guard calls:
// ConfigMaps (get/create/update with conflicts and the size limit), Nodes (list), Events
// (create, patch of their series, list), SubjectAccessReviews (create, answered from grants the
// test sets), and read-only
// Secrets and Cluster API / etcd-druid objects (get/list). Tests talk real HTTP to this instead of
// mocking the client library; it starts in milliseconds where the real kube-apiserver
// (test/harness/kube-apiserver.ts) takes seconds, and it can forbid, hang and race on cue.
// test/harness/fake-kube-apiserver.test.ts runs one request list against both and requires the same
// answers. This file is the server (auth, forbid, hang, request log) and the route table; each
// resource family is one handler under fake-kube/.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AccessReviewRoutes, type FakeAccessGrant } from './fake-kube/access-reviews.js';
import { ConfigMapRoutes, type StoredConfigMap } from './fake-kube/configmaps.js';
import { EventRoutes, type StoredEvent } from './fake-kube/events.js';
import { BadRequest, send, statusBody, type FakeRequest, type KubeVerb, type RouteHandler } from './fake-kube/http.js';
import { NodeRoutes, type FakeNodeSpec } from './fake-kube/nodes.js';
import { ObjectRoutes, type FakeObject } from './fake-kube/objects.js';
import { Revision } from './fake-kube/revision.js';

export { CONFIGMAP_MAX_BYTES, type ObjectMeta, type StoredConfigMap } from './fake-kube/configmaps.js';
export type { FakeRequest, KubeVerb } from './fake-kube/http.js';
export type { FakeNodeSpec } from './fake-kube/nodes.js';
export type { FakeAccessGrant } from './fake-kube/access-reviews.js';
export type { FakeObject } from './fake-kube/objects.js';
export type { StoredEvent } from './fake-kube/events.js';

export const DEFAULT_USER = 'system:serviceaccount:etcd-guard:evaluator';

export type RequestHook = (request: FakeRequest) => void | Promise<void>;

/** Takes an authenticated HTTP Upgrade request (e.g. pod port-forward) the stand-in does not serve itself. */
export type UpgradeHandler = (request: IncomingMessage, socket: Socket, head: Buffer) => void;

export interface FakeKubeApiServer {
  url: string;
  /** A kubeconfig (JSON, valid YAML) pointing at this server with a bearer-token user. */
  kubeconfigFile: string;
  /** The bearer token the kubeconfig carries; anything else gets 401. */
  token: string;
  /** Every request received, in arrival order. */
  readonly requests: FakeRequest[];
  /** Answer 403 Forbidden for this verb on this resource (in this namespace, or any). */
  forbid(verb: KubeVerb, resource: string, namespace?: string): void;
  /** Undo every forbid(). */
  allowAll(): void;
  /** Never answer requests whose path starts with `pathPrefix` (the socket stays open). */
  hang(pathPrefix: string): void;
  /** Stop hanging new requests (already hung ones stay hung until close()). */
  unhang(): void;
  /**
   * Runs before a request is handled (after auth and forbid checks). A hook may change the
   * stored state (e.g. putRaw) to simulate another writer racing the request.
   */
  onRequest(hook: RequestHook | null): void;
  /** Create or overwrite a ConfigMap's data directly, bypassing validation; bumps resourceVersion. */
  putRaw: ConfigMapRoutes['putRaw'];
  getConfigMap(namespace: string, name: string): StoredConfigMap | undefined;
  setNodes(nodes: FakeNodeSpec[]): void;
  /** Store a read-only object (Secret, Cluster, KubeadmControlPlane, Machine, Etcd) under its plural resource. */
  putObject(resource: string, object: FakeObject): void;
  removeObject(resource: string, apiVersion: string, namespace: string, name: string): void;
  /** Serve only these versions of an API group (e.g. an older Cluster API without v1beta2). */
  serveVersions(group: string, versions: string[]): void;
  /** What SubjectAccessReviews answer allowed for (a stand-in for RBAC); none by default. */
  setAccessGrants(grants: FakeAccessGrant[]): void;
  /** The spec of every SubjectAccessReview received. */
  readonly accessReviews: readonly Record<string, unknown>[];
  /** Serve WebSocket upgrades (after the same auth and hang checks as other requests); null refuses them. */
  onUpgrade(handler: UpgradeHandler | null): void;
  /** Every Event written (events.k8s.io/v1), as stored. */
  events(): StoredEvent[];
  /** The current global resourceVersion (increments on every write). */
  resourceVersion(): number;
  /** TCP connections accepted so far, and those still open (upgraded ones included). */
  connections(): { accepted: number; open: number };
  close(): Promise<void>;
}

function verbOf(method: string, name: string | null): KubeVerb | null {
  if (method === 'GET') return name !== null ? 'get' : 'list';
  if (method === 'POST') return name === null ? 'create' : null;
  if (method === 'PUT') return name !== null ? 'update' : null;
  if (method === 'PATCH') return name !== null ? 'patch' : null;
  return null;
}

function forbiddenStatus(entry: FakeRequest, user: string) {
  const subject = entry.name !== null ? `${entry.resource} ${JSON.stringify(entry.name)}` : `${entry.resource}`;
  const scope = entry.namespace !== null ? `in the namespace ${JSON.stringify(entry.namespace)}` : 'at the cluster scope';
  const group = /^\/apis\/([^/]+)\//.exec(entry.path)?.[1] ?? '';
  const message = `${subject} is forbidden: User ${JSON.stringify(user)} cannot ${entry.verb} resource ${JSON.stringify(entry.resource)} in API group ${JSON.stringify(group)} ${scope}`;
  return statusBody(403, 'Forbidden', message, { ...(entry.name !== null ? { name: entry.name } : {}), kind: entry.resource });
}

function writeKubeconfig(directory: string, url: string, token: string, caPem: Buffer | undefined): string {
  const file = path.join(directory, 'kubeconfig');
  const cluster =
    caPem === undefined
      ? // client-node refuses plain http unless TLS verification is explicitly skipped.
        { server: url, 'insecure-skip-tls-verify': true }
      : { server: url, 'certificate-authority-data': caPem.toString('base64') };
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'fake', cluster }],
    users: [{ name: 'evaluator', user: { token } }],
    contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'evaluator', namespace: 'etcd-guard' } }],
    'current-context': 'fake',
  };
  writeFileSync(file, JSON.stringify(kubeconfig), { mode: 0o600 });
  return file;
}

export interface FakeKubeApiServerOptions {
  user?: string;
  /**
   * Serve HTTPS with this certificate; the kubeconfig then carries the CA as
   * certificate-authority-data (as a workload cluster's `<cluster>-kubeconfig` does) instead of
   * skipping verification over plain http.
   */
  tls?: { certFile: string; keyFile: string; caFile: string };
}

export async function startFakeKubeApiServer(options: FakeKubeApiServerOptions = {}): Promise<FakeKubeApiServer> {
  const user = options.user ?? DEFAULT_USER;
  const token = randomBytes(16).toString('hex');
  const revision = new Revision();
  const configMaps = new ConfigMapRoutes(revision);
  const nodes = new NodeRoutes(revision);
  const objects = new ObjectRoutes(revision);
  const events = new EventRoutes(revision);
  const accessReviews = new AccessReviewRoutes();
  const routes: RouteHandler[] = [configMaps, nodes, objects, events, accessReviews];
  const forbidden: { verb: KubeVerb; resource: string; namespace: string | undefined }[] = [];
  let hangPrefixes: string[] = [];
  let hook: RequestHook | null = null;
  let upgradeHandler: UpgradeHandler | null = null;
  // Upgraded sockets leave the HTTP server's bookkeeping: close() cuts them itself.
  const upgradedSockets = new Set<Socket>();
  const requests: FakeRequest[] = [];

  const isForbidden = (entry: FakeRequest) =>
    forbidden.some(
      (rule) =>
        rule.verb === entry.verb &&
        rule.resource === entry.resource &&
        (rule.namespace === undefined || rule.namespace === entry.namespace),
    );

  function findRoute(pathname: string) {
    for (const handler of routes) {
      const route = handler.match(pathname);
      if (route) return { handler, route };
    }
    return null;
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://fake');
    const method = request.method ?? 'GET';
    const found = findRoute(url.pathname);
    const route = found?.route ?? { resource: null, namespace: null, name: null };
    const entry: FakeRequest = {
      method,
      path: url.pathname,
      query: url.searchParams,
      verb: found ? verbOf(method, found.route.name) : null,
      ...route,
      status: null,
    };
    requests.push(entry);

    if (hangPrefixes.some((prefix) => url.pathname.startsWith(prefix))) return; // never answer
    if (request.headers.authorization !== `Bearer ${token}`) {
      return send(response, entry, 401, statusBody(401, 'Unauthorized', 'Unauthorized'));
    }
    if (!found && objects.unservedVersion(url.pathname)) {
      entry.status = 404;
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' });
      response.end('404 page not found\n');
      return;
    }
    if (!found)
      return send(response, entry, 404, statusBody(404, 'NotFound', 'the server could not find the requested resource'));
    if (entry.verb === null) {
      return send(
        response,
        entry,
        405,
        statusBody(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'),
      );
    }
    if (isForbidden(entry)) return send(response, entry, 403, forbiddenStatus(entry, user));
    if (hook) await hook(entry);
    try {
      await found.handler.handle(request, response, entry);
    } catch (error) {
      if (error instanceof BadRequest) return send(response, entry, 400, statusBody(400, 'BadRequest', error.message));
      throw error;
    }
  }

  const listener = (request: IncomingMessage, response: ServerResponse) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) {
        response.writeHead(500, { 'content-type': 'application/json' });
        response.end(JSON.stringify(statusBody(500, 'InternalError', `fake apiserver failed: ${(error as Error).message}`)));
      }
    });
  };
  const tls = options.tls;
  const server: Server =
    tls === undefined
      ? createServer(listener)
      : createHttpsServer({ cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) }, listener);
  if (tls !== undefined) server.on('tlsClientError', (_error, socket) => socket.destroy());
  let accepted = 0;
  const openConnections = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    accepted += 1;
    openConnections.add(socket);
    socket.once('close', () => openConnections.delete(socket));
  });
  server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) => {
    const pathname = new URL(request.url ?? '/', 'http://fake').pathname;
    requests.push({
      method: request.method ?? 'GET',
      path: pathname,
      query: new URLSearchParams(),
      verb: null,
      resource: null,
      namespace: null,
      name: null,
      status: null,
    });
    socket.on('error', () => undefined);
    upgradedSockets.add(socket);
    socket.on('close', () => upgradedSockets.delete(socket));
    if (hangPrefixes.some((prefix) => pathname.startsWith(prefix))) return; // never answer, keep the socket
    if (request.headers.authorization !== `Bearer ${token}` || upgradeHandler === null) {
      socket.end(
        `HTTP/1.1 ${upgradeHandler === null ? '404 Not Found' : '401 Unauthorized'}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`,
      );
      return;
    }
    upgradeHandler(request, socket, head);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const url = `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const directory = mkdtempSync(path.join(tmpdir(), 'fake-kube-'));

  return {
    url,
    kubeconfigFile: writeKubeconfig(directory, url, token, tls === undefined ? undefined : readFileSync(tls.caFile)),
    token,
    requests,
    forbid: (verb, resource, namespace) => void forbidden.push({ verb, resource, namespace }),
    allowAll: () => void (forbidden.length = 0),
    hang: (pathPrefix) => void hangPrefixes.push(pathPrefix),
    unhang: () => void (hangPrefixes = []),
    onRequest: (next) => void (hook = next),
    putRaw: (...args) => configMaps.putRaw(...args),
    getConfigMap: (namespace, name) => configMaps.get(namespace, name),
    setNodes: (next) => nodes.set(next),
    putObject: (resource, object) => objects.put(resource, object),
    removeObject: (resource, apiVersion, namespace, name) => objects.remove(resource, apiVersion, namespace, name),
    serveVersions: (group, versions) => objects.serveVersions(group, versions),
    setAccessGrants: (grants) => accessReviews.set(grants),
    accessReviews: accessReviews.reviews,
    onUpgrade: (next) => void (upgradeHandler = next),
    events: () => events.all(),
    resourceVersion: () => revision.current(),
    connections: () => ({ accepted, open: openConnections.size }),
    async close() {
      // Hung requests would keep close() waiting forever: cut every socket.
      server.closeAllConnections();
      for (const socket of upgradedSockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
