// Shim over the grpc-js service client etcd3 1.1.2 makes per service (checked by
// functions/adapters/grpc-service-client-shim.test.ts on the installed version): reached through the Host's
// getServiceClient (etcd3-host-shim.ts), its makeUnaryRequest and its class's `service`
// definition, so that a call sees the raw response bytes (Status) or reaches a method etcd3
// misnames (HashKV).
import type { Etcd3, IHashKVResponse, IStatusResponse } from 'etcd3';
import { statusExtras, type StatusExtras } from './etcd-status-extras.js';
import { onlyHost } from './etcd3-host-shim.js';

/** The part of a grpc-js service client (etcd3's Maintenance client) a raw Status call needs. */
interface UnaryMethod {
  path: string;
  requestSerialize: (value: unknown) => Buffer;
  responseDeserialize: (bytes: Buffer) => unknown;
}
interface RawServiceClient {
  makeUnaryRequest(
    path: string,
    serialize: (value: unknown) => Buffer,
    deserialize: (bytes: Buffer) => unknown,
    argument: unknown,
    options: { deadline: Date },
    callback: (error: Error | null, value?: unknown) => void,
  ): unknown;
  constructor: { service?: Record<string, UnaryMethod | undefined> };
}

type StatusWithExtras = IStatusResponse & { extras: StatusExtras };

/**
 * maintenance Status, decoded by etcd3's own definition, plus what etcd 3.6 added to the response
 * (etcd-status-extras.ts), read from the same bytes. It goes through the client's Maintenance
 * service directly, so the raw bytes are seen; when etcd3's internals differ, its documented call
 * answers without the extras (a 3.6 member's quota then falls back to the configured one).
 */
export function statusWithExtras(client: Etcd3, deadline: Date): Promise<StatusWithExtras> {
  const host = onlyHost(client) as { getServiceClient?: (name: string) => unknown } | null;
  const service =
    typeof host?.getServiceClient === 'function' ? (host.getServiceClient('Maintenance') as RawServiceClient) : null;
  const method = service?.constructor.service?.Status;
  if (service === null || typeof service.makeUnaryRequest !== 'function' || method === undefined) {
    return client.maintenance.status({ deadline }).then((response) => ({ ...response, extras: {} }));
  }
  return new Promise((resolve, reject) => {
    service.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      (bytes) => ({ ...(method.responseDeserialize(bytes) as IStatusResponse), extras: statusExtras(bytes) }),
      {},
      { deadline },
      (error, value) => (error ? reject(error) : resolve(value as StatusWithExtras)),
    );
  });
}

/**
 * maintenance HashKV, through the Maintenance service's own definition: etcd3 1.1.2's
 * `maintenance.hashKV` asks grpc-js for a method `hashKV`, but grpc-js names it by lodash's
 * camelCase of `HashKV`, `hashKv`, so etcd3's documented call never reaches the member.
 */
export function hashKVRaw(client: Etcd3, revision: number, deadline: Date): Promise<IHashKVResponse> {
  const host = onlyHost(client) as { getServiceClient?: (name: string) => unknown } | null;
  const service =
    typeof host?.getServiceClient === 'function' ? (host.getServiceClient('Maintenance') as RawServiceClient) : null;
  const method = service?.constructor.service?.HashKV;
  if (service === null || typeof service.makeUnaryRequest !== 'function' || method === undefined) {
    return Promise.reject(new Error('this etcd3 client offers no HashKV call'));
  }
  return new Promise((resolve, reject) => {
    service.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      { revision: String(revision) },
      { deadline },
      (error, value) => (error ? reject(error) : resolve(value as IHashKVResponse)),
    );
  });
}
