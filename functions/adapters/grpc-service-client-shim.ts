// Shim over the grpc-js service client etcd3 1.1.2 makes per service (checked by
// functions/adapters/grpc-service-client-shim.test.ts on the installed version): reached through the Host's
// getServiceClient (etcd3-host-shim.ts), its makeUnaryRequest and its class's `service`
// definition, so that a call sees the raw response bytes (Status), reaches a method etcd3
// misnames (HashKV), or skips etcd3's pool policies on every call of a probe (Range, MemberList).
import {
  castGrpcError,
  isRecoverableError,
  type Etcd3,
  type IHashKVResponse,
  type IMemberListRequest,
  type IMemberListResponse,
  type IRangeRequest,
  type IRangeResponse,
  type IStatusResponse,
} from 'etcd3';
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
  const unary = unaryMethod(client, 'Maintenance', 'Status');
  if (unary === null) return client.maintenance.status({ deadline }).then((response) => ({ ...response, extras: {} }));
  const { serviceClient, definition } = unary;
  return new Promise((resolve, reject) => {
    serviceClient.makeUnaryRequest(
      definition.path,
      definition.requestSerialize,
      (bytes) => ({ ...(definition.responseDeserialize(bytes) as IStatusResponse), extras: statusExtras(bytes) }),
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
  const unary = unaryMethod(client, 'Maintenance', 'HashKV');
  if (unary === null) return Promise.reject(new Error('this etcd3 client offers no HashKV call'));
  const { serviceClient, definition } = unary;
  return new Promise((resolve, reject) => {
    serviceClient.makeUnaryRequest(
      definition.path,
      definition.requestSerialize,
      definition.responseDeserialize,
      { revision: String(revision) },
      { deadline },
      (error, value) => (error ? reject(error) : resolve(value as IHashKVResponse)),
    );
  });
}

/** The part of etcd3 1.1.2's Host a raw call needs beside the service client. */
interface CallingHost {
  getServiceClient?: (name: string) => unknown;
  resetAllServices?: () => void;
}

/**
 * The service client etcd3 made for the client's one Host, and `method`'s definition on it; null
 * when etcd3's or grpc-js's internals differ (each caller then falls back as it says).
 */
function unaryMethod(
  client: Etcd3,
  service: string,
  method: string,
): { host: CallingHost; serviceClient: RawServiceClient; definition: UnaryMethod } | null {
  const host = onlyHost(client) as CallingHost | null;
  if (host === null || typeof host.getServiceClient !== 'function') return null;
  const serviceClient = host.getServiceClient(service) as RawServiceClient | null | undefined;
  const definition = serviceClient?.constructor.service?.[method];
  if (serviceClient == null || typeof serviceClient.makeUnaryRequest !== 'function' || definition === undefined) return null;
  return { host, serviceClient, definition };
}

/**
 * One unary call straight on the service client etcd3 made for the Host, as etcd3's pool makes it
 * (the same call options, its errors cast the same way, a connection-level failure resetting the
 * Host's services), without what a one-member client with its policies off gains nothing from:
 * the pool's host shuffle, two cockatiel policies and the auth metadata promise, a share of every
 * call's CPU. Null when etcd3's internals differ: the caller then makes the documented call.
 */
function rawUnary<T>(client: Etcd3, service: string, method: string, request: unknown, deadline: Date): Promise<T> | null {
  const unary = unaryMethod(client, service, method);
  if (unary === null) return null;
  const { host, serviceClient, definition } = unary;
  return new Promise((resolve, reject) => {
    serviceClient.makeUnaryRequest(
      definition.path,
      definition.requestSerialize,
      definition.responseDeserialize,
      request,
      { deadline },
      (error, value) => {
        if (error === null) {
          resolve(value as T);
          return;
        }
        const cast = castGrpcError(error);
        if (isRecoverableError(cast)) host.resetAllServices?.();
        reject(cast);
      },
    );
  });
}

/** kv Range through rawUnary, else etcd3's kv.range. */
export function rangeRaw(client: Etcd3, request: IRangeRequest, deadline: Date): Promise<IRangeResponse> {
  return rawUnary<IRangeResponse>(client, 'KV', 'Range', request, deadline) ?? client.kv.range(request, { deadline });
}

/** cluster MemberList through rawUnary, else etcd3's cluster.memberList. */
export function memberListRaw(client: Etcd3, request: IMemberListRequest, deadline: Date): Promise<IMemberListResponse> {
  return (
    rawUnary<IMemberListResponse>(client, 'Cluster', 'MemberList', request, deadline) ??
    client.cluster.memberList(request, { deadline })
  );
}
