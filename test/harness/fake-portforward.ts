// Pod port-forward for the stand-in API server, as the kubelet serves it over WebSocket
// (`v4.channel.k8s.io`): GET /api/v1/namespaces/<ns>/pods/<pod>/portforward?ports=<port> upgrades;
// channel 0 carries data, channel 1 errors, and the server opens each channel with the port as two
// little-endian bytes. Each WebSocket is relayed to a real TCP address (an etcd member started by
// the harness). stall() stops relaying bytes while every socket stays open: a stuck stream.
// It also serves SPDY/3.1 port-forward (`portforward.k8s.io`, as the kubelet does for kubectl and
// KCP): an upgrade to SPDY/3.1, then an error and a data stream per port, paired by requestID.
// refuseWebSocket() makes it a server behind a proxy that refuses WebSocket upgrades; spdyFlood()
// a hostile one that answers the SPDY upgrade, then floods frames and never reads.
import net from 'node:net';
import type { IncomingMessage } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  FLAG_FIN,
  FrameReader,
  FrameType,
  HeaderCompressor,
  HeaderDecompressor,
  dataFrame,
  firstWord,
  pingFrame,
  synReplyFrame,
  synStreamFrame,
  type SpdyFrame,
} from '../../functions/adapters/spdy.js';
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
  /** Answer WebSocket upgrades with this HTTP status (null: accept them); SPDY is served either way. */
  refuseWebSocket(status: number | null): void;
  /** SPDY port-forward connections opened so far. */
  spdyOpened(): number;
  /** A hostile SPDY server: every SPDY connection answers the upgrade, then sends these bytes. */
  spdyGarbage(bytes: Buffer | null): void;
  /**
   * A hostile SPDY server: every SPDY connection answers the upgrade, then sends these frames
   * for as long as the socket takes them, and never reads (null: serve port-forward).
   */
  spdyFlood(frames: SpdyFlood | null): void;
  /** Bytes of flood frames written so far. */
  spdyFloodBytes(): number;
}

export type SpdyFlood = 'ping' | 'syn-stream';

/** 64 KiB of server PINGs (even IDs) or server SYN_STREAMs (even stream IDs, empty header block). */
function floodBlock(kind: SpdyFlood): Buffer {
  const frames: Buffer[] = [];
  let size = 0;
  for (let id = 2; size < 64 * 1024; id += 2) {
    const frame = kind === 'ping' ? pingFrame(id) : synStreamFrame(id, 0, Buffer.alloc(0));
    frames.push(frame);
    size += frame.length;
  }
  return Buffer.concat(frames);
}

/** Answers the upgrade, stops reading, and writes `block` again each time the socket drains. */
function floodSpdy(socket: net.Socket, block: Buffer, written: (bytes: number) => void): void {
  socket.pause();
  socket.on('error', () => socket.destroy());
  socket.write(
    'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n',
  );
  const pump = () => {
    while (!socket.destroyed) {
      written(block.length);
      if (!socket.write(block)) return;
    }
  };
  socket.on('drain', pump);
  pump();
}

type Address = { host: string; port: number };

/** One SPDY/3.1 port-forward connection: streams paired by requestID, the data stream relayed to `address`. */
function serveSpdy(
  socket: net.Socket,
  pod: string,
  address: Address,
  hooks: { isStalled: () => boolean; garbage: Buffer | null },
) {
  const reader = new FrameReader(1024 * 1024);
  const inflater = new HeaderDecompressor(64 * 1024);
  const deflater = new HeaderCompressor();
  const errorStreams = new Map<string, number>();
  let upstream: net.Socket | undefined;
  let chain: Promise<void> = Promise.resolve();
  const end = () => {
    socket.destroy();
    upstream?.destroy();
    inflater.close();
    deflater.close();
  };
  socket.write(
    'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n',
  );
  if (hooks.garbage !== null) socket.write(hooks.garbage);
  async function handle(frame: SpdyFrame): Promise<void> {
    if (!frame.control) {
      if (upstream !== undefined && !hooks.isStalled()) upstream.write(frame.data);
      return;
    }
    if (frame.type === FrameType.GOAWAY) return end();
    if (frame.type !== FrameType.SYN_STREAM) return;
    const streamId = firstWord(frame) ?? 0;
    const headers = await inflater.decompress(frame.data.subarray(10));
    socket.write(synReplyFrame(streamId, 0, await deflater.compress({})));
    const requestId = headers.requestid ?? '';
    if (headers.streamtype === 'error') return void errorStreams.set(requestId, streamId);
    if (headers.streamtype !== 'data' || upstream !== undefined) return end();
    // TCP_NODELAY, as the kubelet's Go dialer sets it by default.
    upstream = net.connect({ port: address.port, host: address.host, noDelay: true });
    const errorStream = errorStreams.get(requestId);
    upstream.on('data', (chunk: Buffer) => {
      if (!hooks.isStalled()) socket.write(dataFrame(streamId, 0, chunk));
    });
    upstream.on('error', (error: NodeJS.ErrnoException) => {
      const text = `error forwarding port ${headers.port ?? ''} to pod ${pod}: ${error.code ?? error.message}`;
      if (errorStream !== undefined) socket.write(dataFrame(errorStream, FLAG_FIN, Buffer.from(text)));
      socket.end();
    });
    upstream.on('close', () => socket.end());
  }
  socket.on('data', (chunk: Buffer) => {
    let frames: SpdyFrame[];
    try {
      frames = reader.push(chunk);
    } catch {
      return end();
    }
    for (const frame of frames) chain = chain.then(() => handle(frame)).catch(end);
  });
  socket.on('error', end);
  socket.on('close', end);
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
  let webSocketRefusal: number | null = null;
  let spdyGarbage: Buffer | null = null;
  let spdyFlood: Buffer | null = null;
  let spdyFloodBytes = 0;
  let spdyOpened = 0;
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
    // TCP_NODELAY, as the kubelet's Go dialer sets it by default.
    const upstream = net.connect({ port: address.port, host: address.host, noDelay: true });
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
    // SPDY names the port in each stream's headers; WebSocket in the query (?ports=).
    const spdy = /^SPDY\/3\.1$/i.test(request.headers.upgrade ?? '');
    const port = Number(url.searchParams.get('ports'));
    if (!match || (!spdy && (!Number.isInteger(port) || port <= 0))) {
      return refuse(socket, 400, 'BadRequest', 'port-forward wants /api/v1/namespaces/NS/pods/POD/portforward?ports=PORT');
    }
    const namespace = decodeURIComponent(match[1] ?? '');
    const pod = decodeURIComponent(match[2] ?? '');
    const address = pods.get(`${namespace}/${pod}`);
    if (address === undefined) return refuse(socket, 404, 'NotFound', `pods ${JSON.stringify(pod)} not found`);
    if (spdy) {
      spdyOpened += 1;
      if (spdyFlood !== null) return floodSpdy(socket as net.Socket, spdyFlood, (bytes) => (spdyFloodBytes += bytes));
      if (head.length > 0) socket.unshift(head);
      return serveSpdy(socket as net.Socket, pod, address, { isStalled: () => isStalled(pod), garbage: spdyGarbage });
    }
    if (webSocketRefusal !== null)
      return refuse(socket, webSocketRefusal, 'Refused', 'WebSocket upgrades are not passed on here');
    webSockets.handleUpgrade(request, socket, head, (webSocket) => relay(webSocket, pod, port, address));
  });

  return {
    setPod: (namespace, pod, address) => void pods.set(`${namespace}/${pod}`, address),
    stall: (only) => void (stalled = only === undefined ? 'all' : new Set(only)),
    unstall: () => void (stalled = null),
    openStreams: () => open,
    streamsOpened: () => opened,
    sendOnOpen: (frameBytes) => void (floodFrame = frameBytes === null ? null : Buffer.alloc(frameBytes, 0)),
    refuseWebSocket: (status) => void (webSocketRefusal = status),
    spdyOpened: () => spdyOpened,
    spdyGarbage: (bytes) => void (spdyGarbage = bytes),
    spdyFlood: (kind) => void (spdyFlood = kind === null ? null : floodBlock(kind)),
    spdyFloodBytes: () => spdyFloodBytes,
  };
}
