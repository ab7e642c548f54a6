// Pod port-forward for the stand-in API server, as the kubelet serves it over WebSocket
// (`v4.channel.k8s.io`): GET /api/v1/namespaces/<ns>/pods/<pod>/portforward?ports=<port> upgrades;
// channel 0 carries data, channel 1 errors, and the server opens each channel with the port as two
// little-endian bytes. Each WebSocket is relayed to a real TCP address (an etcd member started by
// the harness). stall() stops relaying bytes while every socket stays open: a stuck stream.
import net from 'node:net';
import type { IncomingMessage } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import type { FakeKubeApiServer } from './fake-kube-apiserver.js';

const PROTOCOLS = new Set(['v4.channel.k8s.io', 'portforward.k8s.io']);
const PATH = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/portforward$/;

export interface PortForwardRelay {
  /** Map `<namespace>/<pod>` to the TCP address its forwarded port reaches. */
  setPod(namespace: string, pod: string, address: { host: string; port: number }): void;
  /** Stop relaying bytes for these pods (all when none given); sockets stay open. */
  stall(pods?: string[]): void;
  unstall(): void;
  /** Open WebSocket streams right now. */
  openStreams(): number;
  /** Streams opened so far. */
  streamsOpened(): number;
  /** A hostile server: every stream opens with three data frames of this many bytes (null: none). */
  sendOnOpen(frameBytes: number | null): void;
}

function portPrefix(channel: number, port: number): Buffer {
  const frame = Buffer.alloc(3);
  frame[0] = channel;
  frame.writeUInt16LE(port, 1);
  return frame;
}

function refuse(socket: net.Socket, code: number, reason: string, message: string): void {
  const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message, reason, code });
  socket.end(
    `HTTP/1.1 ${code} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** Serves port-forward on `apiServer` for the pods given with setPod(). */
export function attachPortForward(apiServer: FakeKubeApiServer): PortForwardRelay {
  const pods = new Map<string, { host: string; port: number }>();
  let stalled: Set<string> | 'all' | null = null;
  let floodFrame: Buffer | null = null;
  let open = 0;
  let opened = 0;
  const webSockets = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    handleProtocols: (offered) => [...offered].find((protocol) => PROTOCOLS.has(protocol)) ?? false,
  });
  const isStalled = (pod: string) => stalled === 'all' || (stalled !== null && stalled.has(pod));

  function relay(webSocket: WebSocket, pod: string, port: number, address: { host: string; port: number }): void {
    open += 1;
    opened += 1;
    webSocket.send(portPrefix(0, port));
    webSocket.send(portPrefix(1, port));
    for (let frame = 0; floodFrame !== null && frame < 3; frame += 1) webSocket.send(floodFrame);
    const upstream = net.connect(address.port, address.host);
    upstream.on('data', (chunk) => {
      if (!isStalled(pod)) webSocket.send(Buffer.concat([Buffer.of(0), chunk]));
    });
    upstream.on('error', (error) => {
      const text = `error forwarding port ${port} to pod ${pod}: ${(error as NodeJS.ErrnoException).code ?? error.message}`;
      if (webSocket.readyState === webSocket.OPEN) webSocket.send(Buffer.concat([Buffer.of(1), Buffer.from(text)]));
      webSocket.close();
    });
    upstream.on('close', () => webSocket.close());
    webSocket.on('message', (data: Buffer) => {
      if (data[0] === 0 && !isStalled(pod)) upstream.write(data.subarray(1));
    });
    webSocket.on('close', () => {
      open -= 1;
      upstream.destroy();
    });
    webSocket.on('error', () => upstream.destroy());
  }

  apiServer.onUpgrade((request: IncomingMessage, socket, head) => {
    const url = new URL(request.url ?? '/', 'http://fake');
    const match = PATH.exec(url.pathname);
    const port = Number(url.searchParams.get('ports'));
    if (!match || !Number.isInteger(port) || port <= 0) {
      return refuse(socket, 400, 'BadRequest', 'port-forward wants /api/v1/namespaces/NS/pods/POD/portforward?ports=PORT');
    }
    const namespace = decodeURIComponent(match[1] ?? '');
    const pod = decodeURIComponent(match[2] ?? '');
    const address = pods.get(`${namespace}/${pod}`);
    if (address === undefined) return refuse(socket, 404, 'NotFound', `pods ${JSON.stringify(pod)} not found`);
    webSockets.handleUpgrade(request, socket, head, (webSocket) => relay(webSocket, pod, port, address));
  });

  return {
    setPod: (namespace, pod, address) => void pods.set(`${namespace}/${pod}`, address),
    stall: (only) => void (stalled = only === undefined ? 'all' : new Set(only)),
    unstall: () => void (stalled = null),
    openStreams: () => open,
    streamsOpened: () => opened,
    sendOnOpen: (frameBytes) => void (floodFrame = frameBytes === null ? null : Buffer.alloc(frameBytes, 0)),
  };
}
