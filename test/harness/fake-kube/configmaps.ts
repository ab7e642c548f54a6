// ConfigMaps as the ConfigMapStore uses them: get, create and update (with resourceVersion
// conflicts and the 1 MiB size limit), and a labelled list of one namespace (readAll).
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  clone,
  isRecord,
  listBody,
  methodNotAllowed,
  notFound,
  readJsonBody,
  send,
  statusBody,
  type FakeRequest,
  type RouteHandler,
  type StatusBody,
} from './http.js';
import { labelsMatch, parseLabelSelector } from './labels.js';
import type { Revision } from './revision.js';

/** Kubernetes' limit on the summed size of a ConfigMap's data and binaryData (keys included). */
export const CONFIGMAP_MAX_BYTES = 1_048_576;

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

function isStringMap(value: unknown): value is Record<string, string> {
  return isRecord(value) && Object.values(value).every((entry) => typeof entry === 'string');
}

function configMapSize(object: { data?: unknown; binaryData?: unknown }): number {
  let total = 0;
  for (const field of [object.data, object.binaryData]) {
    if (isRecord(field)) {
      for (const [key, value] of Object.entries(field)) {
        total += Buffer.byteLength(key) + (typeof value === 'string' ? Buffer.byteLength(value) : 0);
      }
    }
  }
  return total;
}

function invalidName(): StatusBody {
  return statusBody(422, 'Invalid', 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required', {
    kind: 'ConfigMap',
    causes: [
      { reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' },
    ],
  });
}

function tooLong(name: string): StatusBody {
  const message = `Too long: may not be more than ${CONFIGMAP_MAX_BYTES} bytes`;
  return statusBody(422, 'Invalid', `ConfigMap ${JSON.stringify(name)} is invalid: []: ${message}`, {
    name,
    kind: 'ConfigMap',
    causes: [{ reason: 'FieldValueTooLong', message, field: '[]' }],
  });
}

function validateConfigMap(raw: unknown, namespace: string, nameFromPath: string | null): StoredConfigMap | StatusBody {
  if (!isRecord(raw) || !isRecord(raw.metadata)) {
    return statusBody(400, 'BadRequest', 'the body is not a ConfigMap object (metadata missing)');
  }
  const metadata = raw.metadata;
  const name = typeof metadata.name === 'string' ? metadata.name : '';
  if (name === '') return invalidName();
  if (nameFromPath !== null && name !== nameFromPath) {
    return statusBody(400, 'BadRequest', `the name of the object (${name}) does not match the name on the URL (${nameFromPath})`);
  }
  if (metadata.namespace !== undefined && metadata.namespace !== namespace) {
    return statusBody(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
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
  if (configMapSize(raw) > CONFIGMAP_MAX_BYTES) return tooLong(name);
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

function conflict(name: string): StatusBody {
  return statusBody(
    409,
    'Conflict',
    `Operation cannot be fulfilled on configmaps ${JSON.stringify(name)}: the object has been modified; please apply your changes to the latest version and try again`,
    { name, kind: 'configmaps' },
  );
}

export class ConfigMapRoutes implements RouteHandler {
  private readonly objects = new Map<string, StoredConfigMap>();

  constructor(private readonly revision: Revision) {}

  match(pathname: string) {
    const match = /^\/api\/v1\/namespaces\/([^/]+)\/configmaps(?:\/([^/]+))?\/?$/.exec(pathname);
    if (!match) return null;
    return {
      resource: 'configmaps',
      namespace: decodeURIComponent(match[1] ?? ''),
      name: match[2] ? decodeURIComponent(match[2]) : null,
    };
  }

  async handle(request: IncomingMessage, response: ServerResponse, entry: FakeRequest): Promise<void> {
    const namespace = entry.namespace ?? '';
    if (entry.verb === 'get') {
      const found = this.objects.get(`${namespace}/${entry.name ?? ''}`);
      return found ? send(response, entry, 200, found) : send(response, entry, 404, notFound('configmaps', entry.name ?? ''));
    }
    if (entry.verb === 'list') return this.list(response, entry);
    if (entry.verb === 'create') return this.create(await readJsonBody(request, 'ConfigMap'), response, entry);
    if (entry.verb === 'update') return this.update(await readJsonBody(request, 'ConfigMap'), response, entry);
    return methodNotAllowed(response, entry);
  }

  /** The webhook cache's feed: one labelled list of the namespace (no paging: every item at once). */
  private list(response: ServerResponse, entry: FakeRequest): void {
    const selector = parseLabelSelector(entry.query.get('labelSelector'));
    const prefix = `${entry.namespace ?? ''}/`;
    const items = [...this.objects.entries()]
      .filter(([key, object]) => key.startsWith(prefix) && labelsMatch(object.metadata.labels, selector))
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([, object]) => object);
    send(response, entry, 200, listBody('ConfigMapList', 'v1', this.revision.current(), items));
  }

  private create(body: unknown, response: ServerResponse, entry: FakeRequest): void {
    const validated = validateConfigMap(body, entry.namespace ?? '', null);
    if (validated.kind === 'Status') return send(response, entry, validated.code, validated);
    const name = validated.metadata.name;
    if (this.objects.has(`${validated.metadata.namespace}/${name}`)) {
      const exists = statusBody(409, 'AlreadyExists', `configmaps ${JSON.stringify(name)} already exists`, {
        name,
        kind: 'configmaps',
      });
      return send(response, entry, 409, exists);
    }
    validated.metadata.uid = randomBytes(8).toString('hex');
    validated.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    send(response, entry, 201, this.store(validated));
  }

  private update(body: unknown, response: ServerResponse, entry: FakeRequest): void {
    const name = entry.name ?? '';
    const validated = validateConfigMap(body, entry.namespace ?? '', name);
    if (validated.kind === 'Status') return send(response, entry, validated.code, validated);
    const current = this.objects.get(`${validated.metadata.namespace}/${name}`);
    if (!current) return send(response, entry, 404, notFound('configmaps', name));
    // Stricter than the real apiserver (which allows unconditional ConfigMap updates): every
    // writer in this project must send the resourceVersion it read, so demand it.
    if (validated.metadata.resourceVersion !== current.metadata.resourceVersion)
      return send(response, entry, 409, conflict(name));
    validated.metadata.uid = current.metadata.uid;
    validated.metadata.creationTimestamp = current.metadata.creationTimestamp;
    send(response, entry, 200, this.store(validated));
  }

  private store(object: StoredConfigMap): StoredConfigMap {
    object.metadata.resourceVersion = String(this.revision.bump());
    this.objects.set(`${object.metadata.namespace}/${object.metadata.name}`, object);
    return clone(object);
  }

  /** Create or overwrite a ConfigMap's data directly, bypassing validation; bumps resourceVersion. */
  putRaw(
    namespace: string,
    name: string,
    data: Record<string, string>,
    labels?: Record<string, string>,
    annotations?: Record<string, string>,
  ): StoredConfigMap {
    const existing = this.objects.get(`${namespace}/${name}`);
    const object: StoredConfigMap = existing
      ? { ...clone(existing), data: { ...data } }
      : {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name, namespace, resourceVersion: '', uid: randomBytes(8).toString('hex') },
          data: { ...data },
        };
    if (labels) object.metadata.labels = { ...labels };
    if (annotations) object.metadata.annotations = { ...annotations };
    return this.store(object);
  }

  get(namespace: string, name: string): StoredConfigMap | undefined {
    const found = this.objects.get(`${namespace}/${name}`);
    return found ? clone(found) : undefined;
  }
}
