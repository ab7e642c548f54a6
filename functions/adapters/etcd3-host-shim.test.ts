// etcd3-host-shim.ts reaches into etcd3's connection pool. Each shape it relies on is asserted here
// on the installed etcd3, so an etcd3 release that moves one fails this suite instead of quietly
// turning the shim into a no-op (one TLS handshake per service, a c-ares channel per client).
import { Etcd3 } from 'etcd3';
import { afterEach, describe, expect, it } from 'vitest';
import { channelUsable, onlyHost, resolveIpDirectly, shareOneChannel } from './etcd3-host-shim.js';
import { etcd3GrpcJs } from '../../test/harness/etcd3-grpc.js';

interface HostShape {
  host: unknown;
  channelCredentials: unknown;
  channelOptions: unknown;
  getServiceClient: (name: string) => { getChannel: () => { getConnectivityState(connect: boolean): number }; close(): void };
  resetAllServices: () => void;
}

// As the probe session makes them: with channel options of its own.
const GRPC_OPTIONS = { 'grpc.enable_retries': 0 };
const clients: Etcd3[] = [];
function client(hosts: string | string[]): Etcd3 {
  const made = new Etcd3({ hosts, grpcOptions: GRPC_OPTIONS });
  clients.push(made);
  return made;
}
afterEach(() => {
  for (const made of clients.splice(0)) made.close();
});

describe("etcd3's Host as the shim expects it", () => {
  it('a one-endpoint client has one Host with target, credentials, options and service clients', () => {
    const host = (client('127.0.0.1:2379') as unknown as { pool: { hosts: HostShape[] } }).pool.hosts;
    expect(host).toHaveLength(1);
    expect(host[0]).toMatchObject({ host: '127.0.0.1:2379', channelOptions: GRPC_OPTIONS });
    expect(host[0]?.channelCredentials).toEqual(expect.any(Object));
    expect(typeof host[0]?.getServiceClient).toBe('function');
    expect(typeof host[0]?.resetAllServices).toBe('function');
    expect(onlyHost(client('127.0.0.1:2379'))).not.toBeNull();
  });

  it('finds no single Host in a client of two endpoints', () => {
    expect(onlyHost(client(['127.0.0.1:2379', '127.0.0.1:2380']))).toBeNull();
  });

  it("a service client's channel reports grpc-js's connectivity states the shim compares with", () => {
    const host = onlyHost(client('127.0.0.1:2379')) as unknown as HostShape;
    const service = host.getServiceClient('Maintenance');
    expect(service.getChannel().getConnectivityState(false)).toBe(etcd3GrpcJs.connectivityState.IDLE);
    expect(etcd3GrpcJs.connectivityState).toMatchObject({ TRANSIENT_FAILURE: 3, SHUTDOWN: 4 });
    service.close();
    expect(service.getChannel().getConnectivityState(false)).toBe(etcd3GrpcJs.connectivityState.SHUTDOWN);
  });
});

describe('shareOneChannel', () => {
  it("gives every service of the client the first service's channel", () => {
    const shared = client('127.0.0.1:2379');
    shareOneChannel(shared);
    const host = onlyHost(shared) as unknown as HostShape;
    expect(host.getServiceClient('KV').getChannel()).toBe(host.getServiceClient('Maintenance').getChannel());
  });

  it('leaves each service its own channel without it (what the shim saves)', () => {
    const host = onlyHost(client('127.0.0.1:2379')) as unknown as HostShape;
    expect(host.getServiceClient('KV').getChannel()).not.toBe(host.getServiceClient('Maintenance').getChannel());
  });
});

describe('resolveIpDirectly', () => {
  const cases = [
    { endpoint: '127.0.0.1:2379', target: 'ipv4:127.0.0.1:2379' },
    { endpoint: '[::1]:2379', target: 'ipv6:[::1]:2379' },
    { endpoint: 'etcd-0.example:2379', target: 'etcd-0.example:2379' },
  ];
  for (const { endpoint, target } of cases) {
    it(`targets ${endpoint} as ${target}`, () => {
      const made = client(endpoint);
      resolveIpDirectly(made);
      expect((onlyHost(made) as unknown as HostShape).host).toBe(target);
    });
  }
});

describe('channelUsable', () => {
  it('is true for a fresh channel and false once it is shut down', () => {
    const made = client('127.0.0.1:2379');
    shareOneChannel(made);
    expect(channelUsable(made)).toBe(true);
    (onlyHost(made) as unknown as HostShape).getServiceClient('Maintenance').close();
    expect(channelUsable(made)).toBe(false);
  });
});
