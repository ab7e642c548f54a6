// The object a /scale request scales. An autoscaling/v1 Scale carries no labels and no spec but
// replicas, so a target that matches by labels or clusterName can only be told apart by reading
// the parent (a KubeadmControlPlane, an Etcd, a StatefulSet), and a kind whose removal order reads
// the object (a StatefulSet's spec.ordinals) reads it too. Every read has a deadline; a success is
// reused for a few seconds so a burst of /scale requests (an autoscaler, a retrying kubectl) costs
// one GET; a failure is not cached, so the next request tries again. The reads never throw: a
// failure becomes a message the denial quotes.
import { monotonicNowMs } from '../../functions/domain/deadline.js';
import type { ParentRead } from '../../functions/domain/kinds/kind.js';
import { kindOfResource } from '../../functions/domain/kinds/registry.js';
import { pointerTokens, valueAtPointer } from '../../functions/shared/json-pointer.js';
import { labelsOf } from '../domain/classify.js';
import type { ParentLabels, ParentObjectRef } from '../domain/contract.js';
import { CONTROL_PLANE_POINTERS } from '../domain/cluster-topology.js';
import { OWNER_POINTERS } from '../domain/member-exits.js';

/** Well inside the apiserver's 10 s webhook timeout, leaving room for an inline refresh. */
export const DEFAULT_PARENT_READ_TIMEOUT_MS = 2_000;
/**
 * Short: the labels decide which etcd cluster judges the change. A relabel is itself guarded when
 * it moves the object between targets, so a few seconds of staleness judges against the target the
 * object belonged to a moment ago, never an arbitrary one.
 */
export const DEFAULT_PARENT_CACHE_TTL_MS = 5_000;
/** Bounds the cache; beyond it the oldest entry goes. */
const MAX_CACHED_PARENTS = 1_024;
const RESOURCE_VERSION = '/metadata/resourceVersion';
/**
 * GETs the object within `timeoutMs` (functions/adapters/kube.ts createObjectGetter, whose
 * deadline covers the whole call); rejects saying what failed.
 */
export type ParentObjectGetter = (ref: ParentObjectRef, timeoutMs: number) => Promise<unknown>;

export interface ParentLabelReaderOptions {
  get: ParentObjectGetter;
  timeoutMs?: number;
  cacheTtlMs?: number;
}

export interface ParentObjectQuery {
  /**
   * The revision the request scales (the Scale's metadata.resourceVersion, which is its parent's):
   * a cached copy of another revision is read again.
   */
  resourceVersion?: string;
  /** Shorter than the reader's own timeout when the apiserver's budget says so. */
  timeoutMs?: number;
}

export interface ParentReader {
  /** The parent's labels (cached for the TTL). */
  labels(ref: ParentObjectRef): Promise<ParentLabels>;
  /** The parent's fields at its kind's `parentPointers`, and its labels and resourceVersion. */
  object(ref: ParentObjectRef, query?: ParentObjectQuery): Promise<ParentRead>;
}

interface CachedParent {
  labels: Readonly<Record<string, string>>;
  /** Only what some reader asks for: the kind's parentPointers and the resourceVersion. */
  kept: unknown;
  readAtMs: number;
}

interface Failed {
  error: string;
  notFound?: boolean;
}

function keyOf(ref: ParentObjectRef): string {
  return [ref.group, ref.version, ref.resource, ref.namespace, ref.name].join('/');
}

/** A copy of `object` holding only the values at `pointers` (the cache never holds a whole spec). */
export function keepPointers(object: unknown, pointers: readonly string[]): unknown {
  const kept: Record<string, unknown> = {};
  for (const pointer of pointers) {
    const value = valueAtPointer(object, pointer);
    const tokens = pointerTokens(pointer);
    if (value === undefined || tokens === null || tokens.length === 0) continue;
    let at = kept;
    for (const token of tokens.slice(0, -1)) {
      const next = Object.prototype.hasOwnProperty.call(at, token) ? at[token] : undefined;
      at = (next !== null && typeof next === 'object' ? next : (at[token] = {})) as Record<string, unknown>;
    }
    at[tokens[tokens.length - 1] ?? ''] = structuredClone(value);
  }
  return kept;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function createParentReader(options: ParentLabelReaderOptions): ParentReader {
  const timeoutMs = options.timeoutMs ?? DEFAULT_PARENT_READ_TIMEOUT_MS;
  const ttlMs = options.cacheTtlMs ?? DEFAULT_PARENT_CACHE_TTL_MS;
  const cached = new Map<string, CachedParent>();
  const inFlight = new Map<string, Promise<CachedParent | Failed>>();

  async function read(ref: ParentObjectRef, key: string, budgetMs: number): Promise<CachedParent | Failed> {
    try {
      const object = await options.get(ref, budgetMs);
      // What a member-bearing DELETE asks of its owner too (member-exits.ts): is it being deleted;
      // and what a Cluster's topology change is read against (cluster-topology.ts).
      const pointers = [
        RESOURCE_VERSION,
        ...OWNER_POINTERS,
        ...CONTROL_PLANE_POINTERS,
        ...(kindOfResource(ref)?.removal.parentPointers ?? []),
      ];
      const entry: CachedParent = { labels: labelsOf(object), kept: keepPointers(object, pointers), readAtMs: monotonicNowMs() };
      cached.delete(key);
      cached.set(key, entry);
      if (cached.size > MAX_CACHED_PARENTS) cached.delete(cached.keys().next().value ?? '');
      return entry;
    } catch (error) {
      // The adapter's KubeApiError says a 404 so: a DELETE's owner that is gone is a teardown.
      const notFound = (error as { isNotFound?: unknown } | null)?.isNotFound === true;
      return notFound ? { error: messageOf(error), notFound } : { error: messageOf(error) };
    }
  }

  function readShared(ref: ParentObjectRef, budgetMs: number): Promise<CachedParent | Failed> {
    const key = keyOf(ref);
    let pending = inFlight.get(key);
    if (pending === undefined) {
      pending = read(ref, key, budgetMs).finally(() => inFlight.delete(key));
      inFlight.set(key, pending);
    }
    return pending;
  }

  function fresh(ref: ParentObjectRef): CachedParent | undefined {
    const hit = cached.get(keyOf(ref));
    return hit !== undefined && monotonicNowMs() - hit.readAtMs <= ttlMs ? hit : undefined;
  }

  return {
    labels: (ref) => {
      const hit = fresh(ref);
      if (hit !== undefined) return Promise.resolve({ ok: true, labels: hit.labels, object: hit.kept });
      return readShared(ref, timeoutMs).then((got): ParentLabels => {
        if ('error' in got)
          return got.notFound === true ? { ok: false, message: got.error, notFound: true } : { ok: false, message: got.error };
        return { ok: true, labels: got.labels, object: got.kept };
      });
    },
    object: (ref, query = {}) => {
      const hit = fresh(ref);
      const sameRevision =
        hit !== undefined &&
        query.resourceVersion !== undefined &&
        valueAtPointer(hit.kept, RESOURCE_VERSION) === query.resourceVersion;
      if (hit !== undefined && sameRevision) return Promise.resolve({ ok: true, object: hit.kept });
      const budgetMs = Math.min(timeoutMs, query.timeoutMs ?? timeoutMs);
      return readShared(ref, budgetMs).then((got) =>
        'error' in got ? { ok: false, error: got.error } : { ok: true, object: got.kept },
      );
    },
  };
}

/** The labels alone: what classify reads for a target that matches by labels. */
export function createParentLabelReader(options: ParentLabelReaderOptions): (ref: ParentObjectRef) => Promise<ParentLabels> {
  const reader = createParentReader(options);
  return (ref) => reader.labels(ref);
}
