// The labels of the object a /scale request scales. An autoscaling/v1 Scale carries no labels, so
// a target that matches by labels or clusterName can only be told apart by reading the parent
// (a KubeadmControlPlane, an Etcd, a StatefulSet). Every read has a deadline; a success is reused
// for a few seconds so a burst of /scale requests (an autoscaler, a retrying kubectl) costs one
// GET; a failure is not cached, so the next request tries again. The read never throws: a
// failure becomes a message the denial quotes.
import { monotonicNowMs } from '../../functions/domain/deadline.js';
import { labelsOf } from '../domain/classify.js';
import type { ParentLabels, ParentObjectRef } from '../domain/contract.js';

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

function keyOf(ref: ParentObjectRef): string {
  return [ref.group, ref.version, ref.resource, ref.namespace, ref.name].join('/');
}

export function createParentLabelReader(options: ParentLabelReaderOptions): (ref: ParentObjectRef) => Promise<ParentLabels> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_PARENT_READ_TIMEOUT_MS;
  const ttlMs = options.cacheTtlMs ?? DEFAULT_PARENT_CACHE_TTL_MS;
  const cached = new Map<string, { labels: Readonly<Record<string, string>>; readAtMs: number }>();
  const inFlight = new Map<string, Promise<ParentLabels>>();

  async function read(ref: ParentObjectRef, key: string): Promise<ParentLabels> {
    try {
      const object = await options.get(ref, timeoutMs);
      const labels = labelsOf(object);
      cached.delete(key);
      cached.set(key, { labels, readAtMs: monotonicNowMs() });
      if (cached.size > MAX_CACHED_PARENTS) cached.delete(cached.keys().next().value ?? '');
      return { ok: true, labels };
    } catch (error) {
      return { ok: false, message: error instanceof Error ? error.message : String(error) };
    }
  }

  return (ref) => {
    const key = keyOf(ref);
    const hit = cached.get(key);
    if (hit !== undefined && monotonicNowMs() - hit.readAtMs <= ttlMs) return Promise.resolve({ ok: true, labels: hit.labels });
    let pending = inFlight.get(key);
    if (pending === undefined) {
      pending = read(ref, key).finally(() => inFlight.delete(key));
      inFlight.set(key, pending);
    }
    return pending;
  };
}
