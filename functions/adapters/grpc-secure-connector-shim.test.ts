// grpc-secure-connector-shim.ts wraps the connectors grpc-js's channel credentials make. The shapes
// it relies on are asserted here on the installed grpc-js, so a release that moves one fails this
// suite instead of quietly losing socket cleanup (a hung member keeps its sockets), IP endpoints'
// SNI removal and TLS session resumption.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import { instrumentCredentials } from './grpc-secure-connector-shim.js';
import { SessionSockets } from './session-sockets.js';
import { etcd3TlsCredentials, grpcTarget } from '../../test/harness/etcd3-credentials.js';

interface Connector {
  connectionOptions: { servername?: unknown; host?: unknown; secureContext?: unknown };
  connect: (socket: Socket) => Promise<unknown>;
  destroy(): void;
}
interface CredentialsShape {
  _createSecureConnector: (target: unknown, options: Record<string, unknown>, callCredentials: null) => Connector;
}

const closers: Array<() => void> = [];
function credentials(): CredentialsShape {
  const made = etcd3TlsCredentials();
  closers.push(made.close);
  return made.credentials as CredentialsShape;
}
function connector(made: CredentialsShape, hostPort: string, options: Record<string, unknown> = {}): Connector {
  const made_ = made._createSecureConnector(grpcTarget(hostPort), options, null);
  closers.push(() => made_.destroy());
  return made_;
}
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

describe("grpc-js's secure connector as the shim expects it", () => {
  it('keeps tls.connect options with host, server name and context, and a connect per socket', () => {
    const made = connector(credentials(), '127.0.0.1:2379');
    expect(made.connectionOptions).toMatchObject({ host: '127.0.0.1', servername: '127.0.0.1' });
    expect(made.connectionOptions.secureContext).toEqual(expect.any(Object));
    expect(typeof made.connect).toBe('function');
  });
});

describe('instrumentCredentials', () => {
  const cases = [
    { name: 'an IP endpoint gets no server name', hostPort: '127.0.0.1:2379', options: {}, servername: undefined },
    { name: 'a host name keeps its server name', hostPort: 'etcd-0.example:2379', options: {}, servername: 'etcd-0.example' },
    {
      name: "a relay keeps the member's name",
      hostPort: '127.0.0.1:40000',
      options: { 'grpc.ssl_target_name_override': 'etcd-0.example' },
      servername: 'etcd-0.example',
    },
  ];
  for (const { name, hostPort, options, servername } of cases) {
    it(name, () => {
      const made = credentials();
      instrumentCredentials(made, new SessionSockets());
      expect(connector(made, hostPort, options).connectionOptions.servername).toBe(servername);
    });
  }

  describe('with a peer that never answers the handshake', () => {
    const accepted = new Set<Socket>();
    let silent: Server;
    let port = 0;
    beforeAll(async () => {
      silent = createServer((socket) => accepted.add(socket));
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      port = (silent.address() as { port: number }).port;
    });
    afterAll(async () => {
      for (const socket of accepted) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    });

    it('tracks the socket of a connect in progress, so the session can destroy it', async () => {
      const made = credentials();
      const sockets = new SessionSockets();
      instrumentCredentials(made, sockets);
      const socket = connect(port, '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      // grpc-js's connect settles only on the handshake, which never comes.
      void connector(made, `127.0.0.1:${port}`)
        .connect(socket)
        .catch(() => undefined);
      const closed = new Promise((resolve) => socket.once('close', resolve));
      sockets.destroyAll();
      await closed;
      expect(socket.destroyed).toBe(true);
    });
  });
});
