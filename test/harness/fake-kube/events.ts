// events.k8s.io/v1 Events: create, get, list and a JSON patch of `series`, the calls etcd-guard's
// event recorder makes. Create checks what the real API server's validation would refuse for
// the fields the recorder sets (name, namespace matching the regarding object's, required fields,
// note ≤ 1 kB), so a malformed Event fails here as it would in a cluster.
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  BadRequest,
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
} from './http.js';
import type { Revision } from './revision.js';

export interface StoredEvent {
  metadata: { name: string; namespace: string; resourceVersion: string };
  regarding: { apiVersion?: string; kind?: string; namespace?: string; name?: string; uid?: string };
  reason: string;
  action: string;
  type: string;
  note?: string;
  reportingController: string;
  reportingInstance: string;
  eventTime: string;
  series?: { count: number; lastObservedTime: string };
  [field: string]: unknown;
}

const PATH = /^\/apis\/events\.k8s\.io\/v1(?:\/namespaces\/([^/]+))?\/events(?:\/([^/]+))?\/?$/;
const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

function validate(body: unknown, namespace: string): StoredEvent {
  if (!isRecord(body) || !isRecord(body.metadata) || !isRecord(body.regarding)) {
    throw new BadRequest('Event: metadata and regarding are required');
  }
  const name = body.metadata.name;
  if (typeof name !== 'string' || name === '' || name.length > 253) throw new BadRequest('Event: metadata.name: Required value');
  if ((body.metadata.namespace ?? namespace) !== namespace)
    throw new BadRequest('Event: metadata.namespace does not match the path');
  if (body.regarding.namespace !== undefined && body.regarding.namespace !== namespace) {
    throw new BadRequest('Event: regarding.namespace: Invalid value: does not match event.namespace');
  }
  for (const field of ['reason', 'action', 'type', 'reportingController', 'reportingInstance', 'eventTime']) {
    if (typeof body[field] !== 'string' || body[field] === '') throw new BadRequest(`Event: ${field}: Required value`);
  }
  if (!['Normal', 'Warning'].includes(body.type as string)) throw new BadRequest('Event: type: Unsupported value');
  if (!MICRO_TIME.test(body.eventTime as string)) throw new BadRequest('Event: eventTime: not a MicroTime');
  if (typeof body.note === 'string' && body.note.length > 1024)
    throw new BadRequest('Event: note: Too long: may not be more than 1024 bytes');
  return body as unknown as StoredEvent;
}

export class EventRoutes implements RouteHandler {
  private readonly events = new Map<string, StoredEvent>();

  constructor(private readonly revision: Revision) {}

  match(pathname: string) {
    const match = PATH.exec(pathname);
    if (!match) return null;
    return {
      resource: 'events',
      namespace: match[1] ? decodeURIComponent(match[1]) : null,
      name: match[2] ? decodeURIComponent(match[2]) : null,
    };
  }

  async handle(request: IncomingMessage, response: ServerResponse, entry: FakeRequest): Promise<void> {
    const namespace = entry.namespace;
    const key = `${namespace ?? ''}/${entry.name ?? ''}`;
    if (entry.verb === 'list') {
      const items = [...this.events.values()].filter((event) => namespace === null || event.metadata.namespace === namespace);
      return send(response, entry, 200, listBody('EventList', 'events.k8s.io/v1', this.revision.current(), items));
    }
    if (entry.verb === 'get') {
      const found = this.events.get(key);
      return found
        ? send(response, entry, 200, found)
        : send(response, entry, 404, notFound('events', entry.name ?? '', 'events.k8s.io'));
    }
    if (entry.verb === 'create' && namespace !== null) {
      const event = validate(await readJsonBody(request, 'Event'), namespace);
      const createdKey = `${namespace}/${event.metadata.name}`;
      if (this.events.has(createdKey)) {
        return send(
          response,
          entry,
          409,
          statusBody(409, 'AlreadyExists', `events.events.k8s.io "${event.metadata.name}" already exists`),
        );
      }
      const stored = clone(event);
      stored.metadata = { ...stored.metadata, namespace, resourceVersion: String(this.revision.bump()) };
      this.events.set(createdKey, stored);
      return send(response, entry, 201, stored);
    }
    if (entry.verb === 'patch') return this.patch(request, response, entry, key);
    return methodNotAllowed(response, entry);
  }

  private async patch(request: IncomingMessage, response: ServerResponse, entry: FakeRequest, key: string): Promise<void> {
    const found = this.events.get(key);
    if (!found) return send(response, entry, 404, notFound('events', entry.name ?? '', 'events.k8s.io'));
    if (request.headers['content-type'] !== 'application/json-patch+json') {
      return send(response, entry, 415, statusBody(415, 'UnsupportedMediaType', 'the stand-in takes JSON patches only'));
    }
    const ops = await readJsonBody(request, 'Patch');
    if (!Array.isArray(ops)) throw new BadRequest('a JSON patch is an array of operations');
    for (const op of ops) {
      if (!isRecord(op) || !['add', 'replace'].includes(op.op as string) || op.path !== '/series' || !isRecord(op.value)) {
        throw new BadRequest('the stand-in patches only /series of an Event');
      }
      const { count, lastObservedTime } = op.value;
      if (typeof count !== 'number' || typeof lastObservedTime !== 'string' || !MICRO_TIME.test(lastObservedTime)) {
        throw new BadRequest('Event: series: count and lastObservedTime are required');
      }
      found.series = { count, lastObservedTime };
    }
    found.metadata.resourceVersion = String(this.revision.bump());
    return send(response, entry, 200, found);
  }

  all(): StoredEvent[] {
    return [...this.events.values()].map((event) => clone(event));
  }
}
