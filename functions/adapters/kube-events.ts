// Writes events.k8s.io/v1 Events for the recorder (functions/usecases/event-recorder.ts): create, and a
// JSON patch of `series` for a repeat. Each call has the recorder's deadline (callKube).
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { Deadline } from '../domain/deadline.js';
import type { EventObject, EventSeries, EventSink } from '../ports/events.js';
import { callKube, KubeApiError } from './kube.js';

const GROUP = 'events.k8s.io';
const VERSION = 'v1';
const PLURAL = 'events';
const RESOURCE = `${PLURAL}.${GROUP}`;

export function createEventSink(kubeConfig: KubeConfig): EventSink {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  return {
    async create(event: EventObject, timeoutMs: number) {
      const { namespace, name } = event.metadata;
      await callKube({ verb: 'create', resource: RESOURCE, name, namespace }, Deadline.after(timeoutMs), (options) =>
        api.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL, body: event }, options),
      );
    },
    async patchSeries(namespace: string, name: string, series: EventSeries, timeoutMs: number) {
      try {
        await callKube({ verb: 'patch', resource: RESOURCE, name, namespace }, Deadline.after(timeoutMs), (options) =>
          api.patchNamespacedCustomObject(
            {
              group: GROUP,
              version: VERSION,
              namespace,
              plural: PLURAL,
              name,
              // `add` sets the member whether or not it is there (RFC 6902).
              body: [{ op: 'add', path: '/series', value: series }],
            },
            options,
          ),
        );
      } catch (error) {
        if (error instanceof KubeApiError && error.isNotFound) throw Object.assign(error, { notFound: true });
        throw error;
      }
    },
  };
}
