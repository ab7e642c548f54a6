// grpc-service-client-shim.ts calls etcd's Maintenance methods through the grpc-js client etcd3
// makes for the service. The shapes it relies on are asserted here on the installed etcd3 and
// grpc-js, so a release that moves one fails this suite instead of quietly dropping etcd 3.6's
// Status fields or the HashKV call.
import { Etcd3 } from 'etcd3';
import { afterEach, describe, expect, it } from 'vitest';
import { onlyHost } from './etcd3-host-shim.js';
import { hashKVRaw, memberListRaw, rangeRaw } from './grpc-service-client-shim.js';

interface ServiceShape {
  makeUnaryRequest: unknown;
  constructor: { service: Record<string, { path: string; requestSerialize: unknown; responseDeserialize: unknown }> };
  [method: string]: unknown;
}

const clients: Etcd3[] = [];
function serviceOf(name: string, hosts: string | string[]): { client: Etcd3; service: ServiceShape } {
  const client = new Etcd3({ hosts });
  clients.push(client);
  const host = onlyHost(client) as { getServiceClient: (name: string) => ServiceShape };
  return { client, service: host.getServiceClient(name) };
}
const maintenance = (hosts: string | string[]) => serviceOf('Maintenance', hosts);
afterEach(() => {
  for (const client of clients.splice(0)) client.close();
});

describe('the Maintenance service client as the shim expects it', () => {
  for (const [method, path] of [
    ['Status', '/etcdserverpb.Maintenance/Status'],
    ['HashKV', '/etcdserverpb.Maintenance/HashKV'],
  ] as const) {
    it(`defines ${method} with its path and codecs`, () => {
      const { service } = maintenance('127.0.0.1:2379');
      expect(typeof service.makeUnaryRequest).toBe('function');
      const definition = service.constructor.service[method];
      expect(definition?.path).toBe(path);
      expect(typeof definition?.requestSerialize).toBe('function');
      expect(typeof definition?.responseDeserialize).toBe('function');
    });
  }

  it("still names HashKV hashKv, so etcd3's own maintenance.hashKV cannot reach it (the shim's reason)", () => {
    const { service } = maintenance('127.0.0.1:2379');
    expect(typeof service.hashKv).toBe('function');
    expect(service.hashKV).toBeUndefined();
  });
});

describe('the KV and Cluster service clients as rangeRaw and memberListRaw expect them', () => {
  for (const [name, method, path] of [
    ['KV', 'Range', '/etcdserverpb.KV/Range'],
    ['Cluster', 'MemberList', '/etcdserverpb.Cluster/MemberList'],
  ] as const) {
    it(`defines ${name} ${method} with its path and codecs`, () => {
      const { service } = serviceOf(name, '127.0.0.1:2379');
      expect(typeof service.makeUnaryRequest).toBe('function');
      const definition = service.constructor.service[method];
      expect(definition?.path).toBe(path);
      expect(typeof definition?.requestSerialize).toBe('function');
      expect(typeof definition?.responseDeserialize).toBe('function');
    });
  }

  const deadline = () => new Date(Date.now() + 2_000);
  it.each([
    {
      call: 'rangeRaw',
      raw: (client: Etcd3) => rangeRaw(client, { key: Buffer.from('k') }, deadline()),
      documented: (client: Etcd3) => client.kv.range({ key: Buffer.from('k') }, { deadline: deadline() }),
    },
    {
      call: 'memberListRaw',
      raw: (client: Etcd3) => memberListRaw(client, {}, deadline()),
      documented: (client: Etcd3) => client.cluster.memberList({}, { deadline: deadline() }),
    },
  ])("$call fails a refused endpoint with the error class and text etcd3's own call gives", async ({ raw, documented }) => {
    const caught = (call: Promise<unknown>) =>
      call.then(
        () => new Error('answered'),
        (error: unknown) => error as Error,
      );
    const ours = await caught(raw(serviceOf('KV', '127.0.0.1:1').client));
    const theirs = await caught(documented(serviceOf('KV', '127.0.0.1:1').client));
    expect(theirs.constructor.name).toMatch(/^GRPC/);
    expect(ours.constructor).toBe(theirs.constructor);
    expect(ours.message).toBe(theirs.message);
  });
});

describe('hashKVRaw', () => {
  it("sends the call through grpc-js (a refused endpoint answers with gRPC's error)", async () => {
    const { client } = maintenance('127.0.0.1:1');
    await expect(hashKVRaw(client, 0, new Date(Date.now() + 2_000))).rejects.toThrow(/UNAVAILABLE|DEADLINE_EXCEEDED/);
  });

  it('says so when the client has no single Host to call through', async () => {
    const client = new Etcd3({ hosts: ['127.0.0.1:1', '127.0.0.1:2'] });
    clients.push(client);
    await expect(hashKVRaw(client, 0, new Date(Date.now() + 2_000))).rejects.toThrow('this etcd3 client offers no HashKV call');
  });
});
