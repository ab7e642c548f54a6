// Kubernetes Events (events.k8s.io/v1) as data: what the webhook's decisions and the scheduled
// run ask to record, and the verdict transitions worth an Event. Pure; the recorder
// (functions/event-recorder.ts) deduplicates and writes them through an adapter.
import type { Verdict } from './evaluation.js';

/** events.k8s.io/v1 `regarding`: the object the Event is about. */
export interface EventObjectRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

/** One Event to record (the recorder adds name, times, series and the reporting controller). */
export interface EventIntent {
  regarding: EventObjectRef;
  type: 'Normal' | 'Warning';
  /** CamelCase, as Kubernetes reasons are: Denied, WouldDeny, Overridden, EtcdUnhealthy, EtcdHealthy. */
  reason: string;
  /** What was being done: Admission (a webhook decision) or Evaluation (the scheduled run). */
  action: string;
  note: string;
}

/** events.k8s.io/v1 rejects a note over 1 kB. */
export const MAX_EVENT_NOTE_LENGTH = 1024;
export const EVENT_ACTION_ADMISSION = 'Admission';
export const EVENT_ACTION_EVALUATION = 'Evaluation';

/**
 * The Event a new verdict is worth, given the one stored before it: entering Unhealthy (also on a
 * target's first evaluation) and leaving it. Healthy ↔ Degraded is no transition: both let
 * changes through, and Degraded's warnings already reach whoever makes one.
 */
export function verdictTransition(
  previous: Verdict | null,
  current: Verdict,
): { type: EventIntent['type']; reason: 'EtcdUnhealthy' | 'EtcdHealthy' } | null {
  const was = previous === 'Unhealthy';
  const is = current === 'Unhealthy';
  if (is && !was) return { type: 'Warning', reason: 'EtcdUnhealthy' };
  if (was && !is) return { type: 'Normal', reason: 'EtcdHealthy' };
  return null;
}
