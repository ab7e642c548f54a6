// What the Event recorder (functions/usecases/event-recorder.ts) writes through, and what it
// writes; functions/adapters/kube-events.ts implements the sink on the Kubernetes API.
import type { EventIntent } from '../domain/events.js';

/** What the recorder writes through. */
export interface EventSink {
  create(event: EventObject, timeoutMs: number): Promise<void>;
  /** Updates the series of a created Event; rejects with `notFound: true` when it is gone. */
  patchSeries(namespace: string, name: string, series: EventSeries, timeoutMs: number): Promise<void>;
}

export interface EventSeries {
  count: number;
  lastObservedTime: string;
}

/** An events.k8s.io/v1 Event as written. */
export interface EventObject extends Omit<EventIntent, 'regarding'> {
  apiVersion: 'events.k8s.io/v1';
  kind: 'Event';
  metadata: { name: string; namespace: string };
  eventTime: string;
  reportingController: string;
  reportingInstance: string;
  regarding: EventIntent['regarding'];
  series?: EventSeries;
}
