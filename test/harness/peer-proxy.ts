// A userspace TCP relay in front of one etcd member's advertised peer URL, so a test can cut a
// member off from its peers in both directions without root (no iptables on loopback). etcd 3.4
// makes a removed member exit once its peers refuse its traffic, so a test of "a removed member
// still running" must isolate it BEFORE the removal. Traffic TO the isolated member is refused by
// its own relay; traffic FROM it is recognised by the `X-Server-From: <member id hex>` header etcd
// puts on every peer request (stream and pipeline alike) and refused by the others' relays.
import net from 'node:net';

/** Shared by all relays of one cluster: the member ids (hex) cut off from the rest. */
export interface PeerIsolation {
  isolated: Set<string>;
}

export interface PeerProxy {
  /** The port members advertise and dial; the relay forwards to the member's real peer port. */
  port: number;
  /** The member id (hex) behind this relay, known once the cluster answered a member list. */
  memberIdHex: string | undefined;
  /** Closes every relayed connection, so new ones are judged by the current isolation. */
  cutAll(): void;
  close(): Promise<void>;
}

const HEADER_LIMIT_BYTES = 64 * 1024;

function serverFrom(head: string): string | undefined {
  return /^x-server-from:\s*([0-9a-f]+)\s*$/im.exec(head)?.[1]?.toLowerCase();
}

export async function startPeerProxy(listenPort: number, targetPort: number, isolation: PeerIsolation): Promise<PeerProxy> {
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const relay = (client: net.Socket, firstBytes: Buffer) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    track(upstream);
    upstream.write(firstBytes);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  };
  const proxy: PeerProxy = {
    port: listenPort,
    memberIdHex: undefined,
    cutAll() {
      for (const socket of sockets) socket.destroy();
    },
    close() {
      proxy.cutAll();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  const server = net.createServer((client) => {
    track(client);
    if (isolation.isolated.size === 0) {
      relay(client, Buffer.alloc(0));
      return;
    }
    if (proxy.memberIdHex !== undefined && isolation.isolated.has(proxy.memberIdHex)) {
      client.destroy();
      return;
    }
    // Judge the connection by its first request's headers; a request without X-Server-From (a
    // version probe) is refused too while someone is isolated: it cannot be told apart.
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0 && head.length < HEADER_LIMIT_BYTES) return;
      client.off('data', onData);
      client.pause();
      const from = serverFrom(head.subarray(0, end < 0 ? head.length : end).toString('latin1'));
      if (from === undefined || isolation.isolated.has(from)) client.destroy();
      else relay(client, head);
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenPort, '127.0.0.1', () => resolve());
  });
  return proxy;
}
