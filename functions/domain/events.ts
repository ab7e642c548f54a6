// Kubernetes Events (events.k8s.io/v1) as data: what the webhook's decisions and the scheduled
// run ask to record, and the verdict transitions worth an Event. Pure; the recorder
// (functions/usecases/event-recorder.ts) deduplicates and writes them through an adapter.
import type { StoreConfig } from './config.js';
import type { Evaluation, Verdict } from './evaluation-document.js';
import type { Target } from './targets.js';
import { apiVersionOf } from './kinds/registry.js';
import { objectUid } from '../shared/object-uid.js';

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

const MAX_REASONS_IN_NOTE = 3;

export interface TransitionInput {
  target: Pick<Target, 'name' | 'guards' | 'guardsUid'>;
  /** Where evaluations are stored: a static target's Event goes on its ConfigMap, when there is one. */
  store: StoreConfig;
  previous: Verdict | null;
  evaluation: Pick<Evaluation, 'verdict' | 'reasons'>;
}

/**
 * The Event a scheduled evaluation records when the verdict enters or leaves Unhealthy: on the
 * object a discovered target guards, or on a static target's evaluation ConfigMap (a static
 * target's `match` may cover many objects). A file store has no object to put it on: none.
 */
export function transitionEvent(input: TransitionInput): EventIntent | null {
  const transition = verdictTransition(input.previous, input.evaluation.verdict);
  if (transition === null) return null;
  const { target, store } = input;
  let regarding: EventObjectRef;
  if (target.guards !== null) {
    const { group, kind, namespace, name } = target.guards;
    // With the object's uid kubectl describe shows the Event (it selects by uid); checked again
    // here, as every transition Event passes here whoever built the target.
    const uid = objectUid(target.guardsUid);
    regarding = {
      apiVersion: apiVersionOf({ group, kind }) ?? `${group}/v1`,
      kind,
      namespace,
      name,
      ...(uid === undefined ? {} : { uid }),
    };
  } else if (store.kind === 'configmap') {
    regarding = { apiVersion: 'v1', kind: 'ConfigMap', namespace: store.namespace, name: `etcd-guard-${target.name}` };
  } else {
    return null;
  }
  const reasons = input.evaluation.reasons.slice(0, MAX_REASONS_IN_NOTE).join('; ');
  const note =
    transition.reason === 'EtcdUnhealthy'
      ? `etcd of target ${target.name} is Unhealthy${input.previous === null ? '' : ` (was ${input.previous})`}: ${reasons}`
      : `etcd of target ${target.name} is ${input.evaluation.verdict} again (was Unhealthy)`;
  return {
    regarding,
    type: transition.type,
    reason: transition.reason,
    action: EVENT_ACTION_EVALUATION,
    note: oneLineClip(note, MAX_EVENT_NOTE_LENGTH),
  };
}

/** Stored reasons are untrusted text: one line, bounded. */
function oneLineClip(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 3)}...` : line;
}
