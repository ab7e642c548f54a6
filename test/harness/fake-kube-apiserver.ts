// An in-memory stand-in for kube-apiserver, on loopback, for the parts etcd-guard uses:
// ConfigMaps (CRUD, resourceVersion conflicts, size limit, labelSelector, watch) and Nodes (list).
// Real kube-apiserver cannot be installed here, so tests talk real HTTP to this instead of mocking
// the client library. Error bodies copy the apiserver's Status shape and message wording, because
// the code under test turns those into user-facing messages.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** Kubernetes' limit on the summed size of a ConfigMap's data and binaryData (keys included). */
export const CONFIGMAP_MAX_BYTES = 1_048_576;

export const DEFAULT_USER = 'system:serviceaccount:etcd-guard:evaluator';

export type KubeVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'delete';
export type FakeResource = 'configmaps' | 'nodes';

export interface ObjectMeta {
  name: string;
  namespace?: string;
  resourceVersion?: string;
  uid?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [extra: string]: unknown;
}

export interface StoredConfigMap {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  metadata: ObjectMeta & { namespace: string; resourceVersion: string };
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}

export interface FakeNodeSpec {
  name: string;
  labels?: Record<string, string>;
  addresses?: { type: string; address: string }[];
}

export interface FakeRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  verb: KubeVerb | null;
  resource: FakeResource | null;
  namespace: string | null;
  name: string | null;
  /** HTTP status sent, or null while unanswered (e.g. hung). */
  status: number | null;
}

export type RequestHook = (request: FakeRequest) => void | Promise<void>;

export interface FakeKubeApiServer {
  url: string;
  /** A kubeconfig (JSON, valid YAML) pointing at this server with a bearer-token user. */
  kubeconfigFile: string;
  /** The bearer token the kubeconfig carries; anything else gets 401. */
  token: string;
  /** Every request received, in arrival order. */
  readonly requests: FakeRequest[];
  /** Answer 403 Forbidden for this verb on this resource (in this namespace, or any). */
  forbid(verb: KubeVerb, resource: FakeResource, namespace?: string): void;
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
  putRaw(namespace: string, name: string, data: Record<string, string>, labels?: Record<string, string>): StoredConfigMap;
  getConfigMap(namespace: string, name: string): StoredConfigMap | undefined;
  setNodes(nodes: FakeNodeSpec[]): void;
  /** The current global resourceVersion (increments on every write). */
  resourceVersion(): number;
  close(): Promise<void>;
}

interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure';
  message: string;
  reason: string;
  details?: Record<string, unknown>;
  code: number;
}

function statusBody(code: number, reason: string, message: string, details?: Record<string, unknown>): StatusBody {
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

interface WatchEvent {
  resourceVersion: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: StoredConfigMap;
}

interface Watcher {
  namespace: string | null;
  selector: LabelRequirement[];
  response: ServerResponse;
}

type LabelRequirement =
  | { kind: 'exists'; key: string }
  | { kind: 'not-exists'; key: string }
  | { kind: 'equals'; key: string; value: string }
  | { kind: 'not-equals'; key: string; value: string };

class BadRequest extends Error {}

/** Parses the subset of label selectors we support; anything else is a 400 like the real one. */
function parseLabelSelector(text: string | null): LabelRequirement[] {
  if (text === null || text.trim() === '') return [];
  return text.split(',').map((rawTerm) => {
    const term = rawTerm.trim();
    let match: RegExpExecArray | null;
    if ((match = /^([\w./-]+)\s*!=\s*([\w.-]*)$/.exec(term))) {
      return { kind: 'not-equals', key: match[1] ?? '', value: match[2] ?? '' };
    }
    if ((match = /^([\w./-]+)\s*==?\s*([\w.-]*)$/.exec(term))) {
      return { kind: 'equals', key: match[1] ?? '', value: match[2] ?? '' };
    }
    if ((match = /^!([\w./-]+)$/.exec(term))) return { kind: 'not-exists', key: match[1] ?? '' };
    if ((match = /^([\w./-]+)$/.exec(term))) return { kind: 'exists', key: match[1] ?? '' };
    throw new BadRequest(`unable to parse requirement: ${JSON.stringify(term)}`);
  });
}

function labelsMatch(labels: Record<string, string> | undefined, selector: LabelRequirement[]): boolean {
  const actual = labels ?? {};
  return selector.every((requirement) => {
    const value = actual[requirement.key];
    switch (requirement.kind) {
      case 'exists':
        return value !== undefined;
      case 'not-exists':
        return value === undefined;
      case 'equals':
        return value === requirement.value;
      case 'not-equals':
        return value !== requirement.value;
    }
  });
}

function configMapSize(object: { data?: unknown; binaryData?: unknown }): number {
  let total = 0;
  for (const field of [object.data, object.binaryData]) {
    if (field && typeof field === 'object') {
      for (const [key, value] of Object.entries(field)) {
        total += Buffer.byteLength(key) + (typeof value === 'string' ? Buffer.byteLength(value) : 0);
      }
    }
  }
  return total;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function isStringMap(value: unknown): value is Record<string, string> {
  return isRecord(value) && Object.values(value).every((entry) => typeof entry === 'string');
}

const clone = <T>(value: T): T => structuredClone(value);

interface Route {
  resource: FakeResource;
  namespace: string | null;
  name: string | null;
}

function parseRoute(pathname: string): Route | null {
  let match = /^\/api\/v1\/namespaces\/([^/]+)\/configmaps(?:\/([^/]+))?\/?$/.exec(pathname);
  if (match)
    return {
      resource: 'configmaps',
      namespace: decodeURIComponent(match[1] ?? ''),
      name: match[2] ? decodeURIComponent(match[2]) : null,
    };
  match = /^\/api\/v1\/configmaps\/?$/.exec(pathname);
  if (match) return { resource: 'configmaps', namespace: null, name: null };
  match = /^\/api\/v1\/nodes(?:\/([^/]+))?\/?$/.exec(pathname);
  if (match) return { resource: 'nodes', namespace: null, name: match[1] ? decodeURIComponent(match[1]) : null };
  return null;
}

function verbOf(method: string, route: Route, query: URLSearchParams): KubeVerb | null {
  switch (method) {
    case 'GET':
      if (route.name !== null) return 'get';
      return query.get('watch') === 'true' || query.get('watch') === '1' ? 'watch' : 'list';
    case 'POST':
      return route.name === null ? 'create' : null;
    case 'PUT':
      return route.name !== null ? 'update' : null;
    case 'DELETE':
      return route.name !== null ? 'delete' : null;
    default:
      return null;
  }
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startFakeKubeApiServer(options: { user?: string } = {}): Promise<FakeKubeApiServer> {
  const user = options.user ?? DEFAULT_USER;
  const token = randomBytes(16).toString('hex');
  const configMaps = new Map<string, StoredConfigMap>();
  let nodes: FakeNodeSpec[] = [];
  let revision = 1;
  const history: WatchEvent[] = [];
  const watchers = new Set<Watcher>();
  const forbidden: { verb: KubeVerb; resource: FakeResource; namespace: string | undefined }[] = [];
  let hangPrefixes: string[] = [];
  let hook: RequestHook | null = null;
  const requests: FakeRequest[] = [];

  const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;

  function record(type: WatchEvent['type'], object: StoredConfigMap): void {
    const event: WatchEvent = { resourceVersion: Number(object.metadata.resourceVersion), type, object: clone(object) };
    history.push(event);
    for (const watcher of watchers) deliver(watcher, event);
  }

  function deliver(watcher: Watcher, event: WatchEvent): void {
    if (watcher.namespace !== null && event.object.metadata.namespace !== watcher.namespace) return;
    if (!labelsMatch(event.object.metadata.labels, watcher.selector)) return;
    watcher.response.write(`${JSON.stringify({ type: event.type, object: event.object })}\n`);
  }

  function store(object: StoredConfigMap, type: WatchEvent['type']): StoredConfigMap {
    revision += 1;
    object.metadata.resourceVersion = String(revision);
    if (type === 'DELETED') configMaps.delete(keyOf(object.metadata.namespace, object.metadata.name));
    else configMaps.set(keyOf(object.metadata.namespace, object.metadata.name), object);
    record(type, object);
    return clone(object);
  }

  function send(response: ServerResponse, entry: FakeRequest, code: number, body: unknown): void {
    entry.status = code;
    response.writeHead(code, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  }

  function forbiddenMessage(entry: FakeRequest): string {
    const subject = entry.name !== null ? `${entry.resource} ${JSON.stringify(entry.name)}` : `${entry.resource}`;
    const scope = entry.namespace !== null ? `in the namespace ${JSON.stringify(entry.namespace)}` : 'at the cluster scope';
    return `${subject} is forbidden: User ${JSON.stringify(user)} cannot ${entry.verb} resource ${JSON.stringify(entry.resource)} in API group "" ${scope}`;
  }

  function isForbidden(entry: FakeRequest): boolean {
    return forbidden.some(
      (rule) =>
        rule.verb === entry.verb &&
        rule.resource === entry.resource &&
        (rule.namespace === undefined || rule.namespace === entry.namespace),
    );
  }

  function notFound(resource: FakeResource, name: string): StatusBody {
    return statusBody(404, 'NotFound', `${resource} ${JSON.stringify(name)} not found`, { name, kind: resource });
  }

  function validateConfigMap(raw: unknown, namespace: string, nameFromPath: string | null): StoredConfigMap | StatusBody {
    if (!isRecord(raw) || !isRecord(raw.metadata)) {
      return statusBody(400, 'BadRequest', 'the body is not a ConfigMap object (metadata missing)');
    }
    const metadata = raw.metadata;
    const name = typeof metadata.name === 'string' ? metadata.name : '';
    if (name === '') {
      return statusBody(
        422,
        'Invalid',
        'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required',
        {
          kind: 'ConfigMap',
          causes: [
            { reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' },
          ],
        },
      );
    }
    if (nameFromPath !== null && name !== nameFromPath) {
      return statusBody(
        400,
        'BadRequest',
        `the name of the object (${name}) does not match the name on the URL (${nameFromPath})`,
      );
    }
    if (metadata.namespace !== undefined && metadata.namespace !== namespace) {
      return statusBody(
        400,
        'BadRequest',
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
    for (const field of ['data', 'binaryData'] as const) {
      if (raw[field] !== undefined && raw[field] !== null && !isStringMap(raw[field])) {
        return statusBody(
          400,
          'BadRequest',
          `ConfigMap in version "v1" cannot be handled as a ConfigMap: ${field} must map strings to strings`,
        );
      }
    }
    const size = configMapSize(raw);
    if (size > CONFIGMAP_MAX_BYTES) {
      const message = `Too long: must have at most ${CONFIGMAP_MAX_BYTES} bytes`;
      return statusBody(422, 'Invalid', `ConfigMap ${JSON.stringify(name)} is invalid: []: ${message}`, {
        name,
        kind: 'ConfigMap',
        causes: [{ reason: 'FieldValueTooLong', message, field: '[]' }],
      });
    }
    const object: StoredConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        ...(metadata as ObjectMeta),
        name,
        namespace,
        resourceVersion: typeof metadata.resourceVersion === 'string' ? metadata.resourceVersion : '',
      },
    };
    if (isStringMap(raw.data)) object.data = { ...raw.data };
    if (isStringMap(raw.binaryData)) object.binaryData = { ...raw.binaryData };
    return object;
  }

  function listConfigMaps(namespace: string | null, selector: LabelRequirement[]): StoredConfigMap[] {
    return [...configMaps.values()]
      .filter((object) => namespace === null || object.metadata.namespace === namespace)
      .filter((object) => labelsMatch(object.metadata.labels, selector))
      .sort((a, b) => keyOf(a.metadata.namespace, a.metadata.name).localeCompare(keyOf(b.metadata.namespace, b.metadata.name)))
      .map(clone);
  }

  function nodeObject(node: FakeNodeSpec, index: number): Record<string, unknown> {
    return {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: node.name, uid: `node-uid-${index}`, resourceVersion: String(index + 1), labels: node.labels ?? {} },
      spec: {},
      status: { addresses: node.addresses ?? [] },
    };
  }

  async function handleConfigMaps(
    request: IncomingMessage,
    response: ServerResponse,
    entry: FakeRequest,
    route: Route,
  ): Promise<void> {
    const namespace = route.namespace;
    switch (entry.verb) {
      case 'list': {
        const items = listConfigMaps(namespace, parseLabelSelector(entry.query.get('labelSelector')));
        send(response, entry, 200, {
          kind: 'ConfigMapList',
          apiVersion: 'v1',
          metadata: { resourceVersion: String(revision) },
          items,
        });
        return;
      }
      case 'watch': {
        startWatch(response, entry, namespace);
        return;
      }
      case 'get': {
        const found = configMaps.get(keyOf(namespace ?? '', route.name ?? ''));
        if (!found) return send(response, entry, 404, notFound('configmaps', route.name ?? ''));
        return send(response, entry, 200, found);
      }
      case 'create': {
        if (namespace === null)
          return send(response, entry, 405, statusBody(405, 'MethodNotAllowed', 'create needs a namespace'));
        const parsed = parseJson(await readBody(request));
        const validated = validateConfigMap(parsed, namespace, null);
        if (validated.kind === 'Status') return send(response, entry, validated.code, validated);
        const key = keyOf(namespace, validated.metadata.name);
        if (configMaps.has(key)) {
          return send(
            response,
            entry,
            409,
            statusBody(409, 'AlreadyExists', `configmaps ${JSON.stringify(validated.metadata.name)} already exists`, {
              name: validated.metadata.name,
              kind: 'configmaps',
            }),
          );
        }
        validated.metadata.uid = randomBytes(8).toString('hex');
        validated.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
        return send(response, entry, 201, store(validated, 'ADDED'));
      }
      case 'update': {
        const name = route.name ?? '';
        const parsed = parseJson(await readBody(request));
        const validated = validateConfigMap(parsed, namespace ?? '', name);
        if (validated.kind === 'Status') return send(response, entry, validated.code, validated);
        const current = configMaps.get(keyOf(namespace ?? '', name));
        if (!current) return send(response, entry, 404, notFound('configmaps', name));
        // Stricter than the real apiserver (which allows unconditional ConfigMap updates): every
        // writer in this project must send the resourceVersion it read, so demand it.
        if (validated.metadata.resourceVersion !== current.metadata.resourceVersion) {
          return send(
            response,
            entry,
            409,
            statusBody(
              409,
              'Conflict',
              `Operation cannot be fulfilled on configmaps ${JSON.stringify(name)}: the object has been modified; please apply your changes to the latest version and try again`,
              { name, kind: 'configmaps' },
            ),
          );
        }
        validated.metadata.uid = current.metadata.uid;
        validated.metadata.creationTimestamp = current.metadata.creationTimestamp;
        return send(response, entry, 200, store(validated, 'MODIFIED'));
      }
      case 'delete': {
        const name = route.name ?? '';
        const current = configMaps.get(keyOf(namespace ?? '', name));
        if (!current) return send(response, entry, 404, notFound('configmaps', name));
        store(current, 'DELETED');
        return send(response, entry, 200, {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Success',
          details: { name, kind: 'configmaps', uid: current.metadata.uid },
        });
      }
      default:
        return send(
          response,
          entry,
          405,
          statusBody(405, 'MethodNotAllowed', `${request.method} is not supported on ${entry.path}`),
        );
    }
  }

  function startWatch(response: ServerResponse, entry: FakeRequest, namespace: string | null): void {
    const selector = parseLabelSelector(entry.query.get('labelSelector'));
    const fromText = entry.query.get('resourceVersion');
    const from = fromText === null || fromText === '' || fromText === '0' ? null : Number(fromText);
    if (from !== null && !Number.isInteger(from)) {
      return send(response, entry, 400, statusBody(400, 'BadRequest', `invalid resourceVersion ${JSON.stringify(fromText)}`));
    }
    entry.status = 200;
    response.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    const watcher: Watcher = { namespace, selector, response };
    if (from === null) {
      // No resourceVersion: like the apiserver, start with the current state as ADDED events.
      for (const object of listConfigMaps(namespace, selector)) {
        deliver(watcher, { resourceVersion: Number(object.metadata.resourceVersion), type: 'ADDED', object });
      }
    } else {
      for (const event of history) if (event.resourceVersion > from) deliver(watcher, event);
    }
    watchers.add(watcher);
    const timeoutSeconds = Number(entry.query.get('timeoutSeconds'));
    const timer = timeoutSeconds > 0 ? setTimeout(() => response.end(), timeoutSeconds * 1000) : null;
    // The response's close fires when the client goes away (or timeoutSeconds ends the stream).
    response.on('close', () => {
      if (timer) clearTimeout(timer);
      watchers.delete(watcher);
    });
  }

  function parseJson(text: string): unknown {
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new BadRequest(`the body is not JSON: ${(error as Error).message}`);
    }
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://fake');
    const route = parseRoute(url.pathname);
    const entry: FakeRequest = {
      method: request.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      verb: route ? verbOf(request.method ?? 'GET', route, url.searchParams) : null,
      resource: route?.resource ?? null,
      namespace: route?.namespace ?? null,
      name: route?.name ?? null,
      status: null,
    };
    requests.push(entry);

    if (hangPrefixes.some((prefix) => url.pathname.startsWith(prefix))) return; // never answer

    if (request.headers.authorization !== `Bearer ${token}`) {
      return send(response, entry, 401, statusBody(401, 'Unauthorized', 'Unauthorized'));
    }
    if (!route)
      return send(response, entry, 404, statusBody(404, 'NotFound', 'the server could not find the requested resource'));
    if (entry.verb === null) {
      return send(
        response,
        entry,
        405,
        statusBody(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`),
      );
    }
    if (isForbidden(entry)) {
      return send(
        response,
        entry,
        403,
        statusBody(403, 'Forbidden', forbiddenMessage(entry), {
          ...(entry.name !== null ? { name: entry.name } : {}),
          kind: entry.resource,
        }),
      );
    }
    if (hook) await hook(entry);

    try {
      if (route.resource === 'configmaps') {
        await handleConfigMaps(request, response, entry, route);
        return;
      }
      if (entry.verb === 'list') {
        const selector = parseLabelSelector(entry.query.get('labelSelector'));
        const items = nodes
          .map((node, index) => ({ node, index }))
          .filter(({ node }) => labelsMatch(node.labels, selector))
          .map(({ node, index }) => nodeObject(node, index));
        return send(response, entry, 200, {
          kind: 'NodeList',
          apiVersion: 'v1',
          metadata: { resourceVersion: String(revision) },
          items,
        });
      }
      if (entry.verb === 'get') {
        const index = nodes.findIndex((node) => node.name === route.name);
        const node = nodes[index];
        if (!node) return send(response, entry, 404, notFound('nodes', route.name ?? ''));
        return send(response, entry, 200, nodeObject(node, index));
      }
      return send(
        response,
        entry,
        405,
        statusBody(405, 'MethodNotAllowed', `${entry.verb} is not supported on nodes by this fake`),
      );
    } catch (error) {
      if (error instanceof BadRequest) return send(response, entry, 400, statusBody(400, 'BadRequest', error.message));
      throw error;
    }
  }

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) {
        response.writeHead(500, { 'content-type': 'application/json' });
        response.end(JSON.stringify(statusBody(500, 'InternalError', `fake apiserver failed: ${(error as Error).message}`)));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;

  const directory = mkdtempSync(path.join(tmpdir(), 'fake-kube-'));
  const kubeconfigFile = path.join(directory, 'kubeconfig');
  writeFileSync(
    kubeconfigFile,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      // client-node refuses plain http unless TLS verification is explicitly skipped.
      clusters: [{ name: 'fake', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'evaluator', user: { token } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'evaluator', namespace: 'etcd-guard' } }],
      'current-context': 'fake',
    }),
    { mode: 0o600 },
  );

  return {
    url,
    kubeconfigFile,
    token,
    requests,
    forbid(verb, resource, namespace) {
      forbidden.push({ verb, resource, namespace });
    },
    allowAll() {
      forbidden.length = 0;
    },
    hang(pathPrefix) {
      hangPrefixes.push(pathPrefix);
    },
    unhang() {
      hangPrefixes = [];
    },
    onRequest(next) {
      hook = next;
    },
    putRaw(namespace, name, data, labels) {
      const existing = configMaps.get(keyOf(namespace, name));
      const object: StoredConfigMap = existing
        ? { ...clone(existing), data: { ...data } }
        : {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name, namespace, resourceVersion: '', uid: randomBytes(8).toString('hex') },
            data: { ...data },
          };
      if (labels) object.metadata.labels = { ...labels };
      return store(object, existing ? 'MODIFIED' : 'ADDED');
    },
    getConfigMap(namespace, name) {
      const found = configMaps.get(keyOf(namespace, name));
      return found ? clone(found) : undefined;
    },
    setNodes(next) {
      nodes = clone(next);
    },
    resourceVersion() {
      return revision;
    },
    async close() {
      for (const watcher of watchers) watcher.response.end();
      watchers.clear();
      // Hung requests would keep close() waiting forever: cut every socket.
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
