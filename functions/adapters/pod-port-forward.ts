// A loopback listener that carries each accepted TCP connection to a pod's port through the
// Kubernetes API server's WebSocket port-forward (`v4.channel.k8s.io`: per forwarded port a data
// channel 0 and an error channel 1, each starting with the port as two little-endian bytes).
// KCP reaches etcd the same way, over SPDY; an etcd client dials the listener and never knows.
// When the API server (or a proxy in front of it) refuses the WebSocket upgrade (400, 403, 404,
// 426 or 5xx), the connection falls back to SPDY/3.1 (`portforward.k8s.io`, spdy-port-forward.ts)
// and the listener's later connections go to SPDY directly. Both honour HTTPS_PROXY/NO_PROXY.
//
// A small adapter on `ws` instead of client-node's PortForward, which has no handshake deadline
// (a hung API server would leave a pending socket per attempt), never ends the local socket when
// the WebSocket closes, and only copies the error channel to a stream.
import net, { type AddressInfo } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import WebSocket from 'ws';
import type { Deadline } from '../domain/deadline.js';
import { SpdyPortForward } from './spdy-port-forward.js';
import type { TlsSessionCache } from './tls-sessions.js';
import { serverNameOptions, type WorkloadEndpoint } from './workload-kubeconfig.js';
import { connectWorkload, proxyFor, workloadTlsConnect, workloadTlsSessions } from './workload-tunnel.js';

const DATA_CHANNEL = 0;
const ERROR_CHANNEL = 1;
const PORT_FORWARD_PROTOCOL = 'v4.channel.k8s.io';
/**
 * The largest WebSocket message accepted from a workload API server. The API server relays a
 * pod's stream in the chunks it reads (io.Copy: 32 KiB); ws's default of 100 MiB let a server
 * that sends huge frames take one evaluation far past the pod's memory limit (BENCHMARKS.md). A
 * larger frame closes the stream.
 */
export const MAX_FRAME_BYTES = 1024 * 1024;
/** Bytes buffered towards either side before the other side is paused (backpressure). */
const HIGH_WATER_BYTES = 4 * MAX_FRAME_BYTES;

export interface PodPort {
  namespace: string;
  pod: string;
  port: number;
}

/**
 * How forwarded connections failed. Before any WebSocket opened, the API server's answer (or
 * silence) is not reported: whoever writes the kubeconfig picks the server, and refused,
 * timed out or "HTTP 404" would tell them what listens where, as seen from the guard.
 */
export type ForwardFailure = { reachedApiServer: false } | { reachedApiServer: true; detail: string };

export interface PortForwardListener {
  /** https://127.0.0.1:<random port>: what the etcd client dials. */
  readonly endpoint: string;
  /** Why forwarded connections failed so far, if any did (see ForwardFailure). */
  failure(): ForwardFailure | undefined;
  /**
   * For the next evaluation of a kept listener (the webhook's, warm-connections): new connections
   * get `deadline` for their handshakes, and failure() forgets earlier evaluations' failures.
   * Connections already forwarded stay as they are.
   */
  renew(deadline: Deadline): void;
  /** False once closed, or once the listening socket failed. */
  listening(): boolean;
  /** Stops listening and cuts every forwarded connection and WebSocket. */
  close(): Promise<void>;
}

function webSocketUrl(server: string, target: PodPort): string {
  const path = `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/portforward`;
  return `${server.replace(/^https:/, 'wss:')}${path}?ports=${target.port}`;
}

/** The API server's error channel text, in our words: it is the server's text, so never quoted. */
function describeErrorChannel(text: string): string {
  if (/refused/i.test(text)) return 'port-forward error: the pod refused the connection';
  if (/not found|NotFound/i.test(text)) return 'port-forward error: the pod or its port was not found';
  if (/timed? ?out|deadline/i.test(text)) return 'port-forward error: the connection to the pod timed out';
  return 'port-forward error: the API server could not forward to the pod';
}

/** A `ws` error after the stream opened, in our words. */
function describeStreamError(error: Error & { code?: string }): string {
  if (error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
    return `port-forward closed: the API server sent a frame over ${MAX_FRAME_BYTES / 1024 / 1024} MiB`;
  }
  if (typeof error.code === 'string' && error.code.startsWith('WS_ERR_')) return 'port-forward closed: invalid WebSocket frame';
  return 'port-forward stream lost';
}

interface ListenerState {
  attempts: number;
  opened: number;
  detail: string | undefined;
  /** Set once a SPDY port-forward opened after a refused WebSocket: later connections skip the WebSocket. */
  spdy: boolean;
}

/** What every connection of one listener forwards to, and how. */
interface ForwardContext {
  workload: WorkloadEndpoint;
  target: PodPort;
  url: string;
  options: ForwardOptions;
  /** The current evaluation's: a kept listener gets each evaluation's (renew). */
  deadline: Deadline;
  environment: Record<string, string | undefined>;
  /** Where TLS sessions to the workload API server are kept (workload-tunnel.ts). */
  tlsSessions: TlsSessionCache;
}

/** Answers to the WebSocket upgrade that mean "try SPDY": refused by the server or a proxy, not an auth failure. */
export function webSocketRefusalFallsBack(status: number | undefined): boolean {
  return (
    status === 400 ||
    status === 403 ||
    status === 404 ||
    status === 426 ||
    (status !== undefined && status >= 500 && status <= 599)
  );
}

/** One accepted connection relayed over one WebSocket. */
class ForwardedConnection {
  private readonly prefixPending = new Set([DATA_CHANNEL, ERROR_CHANNEL]);
  private webSocket: WebSocket | undefined;
  private spdy: SpdyPortForward | undefined;
  private opened = false;
  private closed = false;

  constructor(
    private readonly socket: net.Socket,
    private readonly state: ListenerState,
    private readonly context: ForwardContext,
  ) {
    socket.pause();
    socket.on('error', () => this.close());
    socket.on('close', () => this.close());
  }

  start(): void {
    if (this.socket.destroyed) return;
    this.state.attempts += 1;
    if (this.state.spdy) {
      void this.startSpdy();
      return;
    }
    const { url, options, workload, deadline, environment, tlsSessions } = this.context;
    let proxied: boolean;
    try {
      proxied = proxyFor(new URL(workload.server), environment) !== undefined;
    } catch {
      // An unusable HTTPS_PROXY fails the connection like an unreachable server.
      this.close();
      return;
    }
    if (!proxied) {
      // Our TLS connect instead of ws's: the same options, plus a kept session to resume.
      this.startWebSocket(url, { ...options, createConnection: () => workloadTlsConnect(workload, tlsSessions) });
      return;
    }
    // ws cannot CONNECT through a proxy itself: hand it the tunnelled, verified TLS socket.
    connectWorkload(workload, deadline, environment, tlsSessions).then(
      (tlsSocket) => {
        if (this.closed) tlsSocket.destroy();
        else this.startWebSocket(url, { ...options, createConnection: () => tlsSocket });
      },
      () => this.close(),
    );
  }

  private startWebSocket(url: string, options: ForwardOptions): void {
    const handshakeTimeout = Math.max(1, Math.round(this.context.deadline.remainingMs()));
    let webSocket: WebSocket;
    try {
      webSocket = new WebSocket(url, [PORT_FORWARD_PROTOCOL], { ...options, handshakeTimeout } as WebSocket.ClientOptions);
    } catch {
      // A URL or TLS option ws cannot use must fail this connection, never the process.
      this.close();
      return;
    }
    this.webSocket = webSocket;
    webSocket.on('unexpected-response', (_request, response) => {
      response.resume();
      if (webSocketRefusalFallsBack(response.statusCode)) {
        this.webSocket = undefined;
        webSocket.removeAllListeners('close');
        webSocket.removeAllListeners('error');
        webSocket.on('error', () => undefined);
        webSocket.terminate();
        void this.startSpdy();
      } else this.close();
    });
    webSocket.on('error', (error) => {
      if (this.opened) this.onError(describeStreamError(error));
      this.close();
    });
    webSocket.on('close', () => this.close());
    webSocket.on('open', () => this.relay(webSocket));
    webSocket.on('message', (data: Buffer) => this.receive(data));
  }

  /** The SPDY fallback: the same relay over the data stream; the error stream classified as channel 1 is. */
  private async startSpdy(): Promise<void> {
    if (this.closed) return;
    const { workload, target, deadline, environment, tlsSessions } = this.context;
    try {
      this.spdy = await SpdyPortForward.open(
        workload,
        target,
        { deadline, environment, maxFrameBytes: MAX_FRAME_BYTES, tlsSessions },
        {
          data: (chunk) => {
            if (!this.socket.write(chunk) || this.socket.writableLength >= HIGH_WATER_BYTES) this.spdy?.pause();
          },
          errorText: (text) => this.onError(describeErrorChannel(text)),
          failure: (reason) => this.onError(reason),
          closed: () => this.close(),
        },
      );
    } catch {
      // Before the streams opened nothing is reported (see ForwardFailure), as on the WebSocket path.
      this.close();
      return;
    }
    if (this.closed) {
      this.spdy.close();
      return;
    }
    this.state.spdy = true;
    this.relaySpdy(this.spdy);
  }

  private relaySpdy(spdy: SpdyPortForward): void {
    this.opened = true;
    this.state.opened += 1;
    this.socket.on('data', (chunk: Buffer) => {
      if (!spdy.write(chunk)) this.socket.pause();
    });
    spdy.onDrain(() => {
      if (!this.closed) this.socket.resume();
    });
    this.socket.on('drain', () => spdy.resume());
    this.socket.resume();
  }

  /** Local bytes go out on channel 0; each side pauses the other while its buffer is full. */
  private relay(webSocket: WebSocket): void {
    this.opened = true;
    this.state.opened += 1;
    this.socket.on('data', (chunk: Buffer) => {
      webSocket.send(Buffer.concat([Buffer.of(DATA_CHANNEL), chunk]), () => {
        if (webSocket.bufferedAmount < HIGH_WATER_BYTES && this.socket.isPaused() && !this.closed) this.socket.resume();
      });
      if (webSocket.bufferedAmount >= HIGH_WATER_BYTES) this.socket.pause();
    });
    this.socket.on('drain', () => {
      if (webSocket.isPaused) webSocket.resume();
    });
    this.socket.resume();
  }

  private receive(frame: Buffer): void {
    const channel = frame[0];
    if (channel === undefined) return;
    let payload = frame.subarray(1);
    if (this.prefixPending.has(channel)) {
      // Each channel opens with the forwarded port; it may arrive split from the first data.
      const strip = Math.min(2, payload.length);
      payload = payload.subarray(strip);
      if (strip === 2) this.prefixPending.delete(channel);
    }
    if (payload.length === 0) return;
    if (channel === DATA_CHANNEL) {
      if (!this.socket.write(payload) || this.socket.writableLength >= HIGH_WATER_BYTES) this.webSocket?.pause();
    } else if (channel === ERROR_CHANNEL) {
      this.onError(describeErrorChannel(payload.subarray(0, 1024).toString('utf8')));
      this.close();
    }
  }

  /** Only the first failure is the cause: closing a connection makes `ws` report its own. */
  private onError(reason: string): void {
    if (!this.closed) this.state.detail = reason;
  }

  close(): void {
    this.closed = true;
    if (!this.socket.destroyed) this.socket.destroy();
    const webSocket = this.webSocket;
    if (webSocket !== undefined && webSocket.readyState !== WebSocket.CLOSED) webSocket.terminate();
    this.spdy?.close();
  }
}

/**
 * The WebSocket options from the kubeconfig's static fields only: its TLS context (CA, client
 * certificate), the server name to verify, the bearer token. Nothing of client-node's auth runs.
 */
/** ws hands its options to tls.connect; its types list only some of the TLS ones. */
type ForwardOptions = Omit<WebSocket.ClientOptions, 'checkServerIdentity' | 'createConnection'> & {
  createConnection?: () => net.Socket;
} & Pick<ConnectionOptions, 'secureContext' | 'servername' | 'checkServerIdentity'>;

function connectOptions(workload: WorkloadEndpoint): ForwardOptions {
  const options: ForwardOptions = {
    secureContext: workload.secureContext,
    rejectUnauthorized: true,
    perMessageDeflate: false,
    maxPayload: MAX_FRAME_BYTES,
    followRedirects: false,
    headers: workload.token === undefined ? {} : { Authorization: `Bearer ${workload.token}` },
  };
  // Without a tls-server-name the URL's host is verified, as ws does by default.
  return workload.tlsServerName === undefined ? options : { ...options, ...serverNameOptions(workload.tlsServerName) };
}

/**
 * Listens on 127.0.0.1:0; every connection to it is forwarded to `target` through the workload
 * API server. Each handshake (proxy CONNECT, TLS, WebSocket or SPDY upgrade, SPDY streams) must
 * finish before `deadline`. `environment` supplies HTTPS_PROXY/NO_PROXY (the process's by default);
 * `tlsSessions` keeps the API server's TLS sessions (the process's by default).
 */
export async function listenForPodPort(
  workload: WorkloadEndpoint,
  target: PodPort,
  deadline: Deadline,
  environment: Record<string, string | undefined> = process.env,
  tlsSessions: TlsSessionCache = workloadTlsSessions,
): Promise<PortForwardListener> {
  const context: ForwardContext = {
    workload,
    target,
    url: webSocketUrl(workload.server, target),
    options: connectOptions(workload),
    deadline,
    environment,
    tlsSessions,
  };
  const connections = new Set<ForwardedConnection>();
  const state: ListenerState = { attempts: 0, opened: 0, detail: undefined, spdy: false };
  // Without TCP_NODELAY a gRPC request written in pieces waited on the client's delayed ACK
  // (tens of milliseconds per round trip on Linux loopback) before its last piece left.
  const listener = net.createServer({ noDelay: true }, (socket) => {
    const connection = new ForwardedConnection(socket, state, context);
    connections.add(connection);
    socket.on('close', () => connections.delete(connection));
    connection.start();
  });
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (listener.address() as AddressInfo).port;
  return {
    endpoint: `https://127.0.0.1:${port}`,
    failure: () => {
      if (state.attempts === 0) return undefined;
      if (state.opened === 0) return { reachedApiServer: false };
      return state.detail === undefined ? undefined : { reachedApiServer: true, detail: state.detail };
    },
    renew: (deadline) => {
      context.deadline = deadline;
      state.attempts = 0;
      state.opened = 0;
      state.detail = undefined;
    },
    listening: () => listener.listening,
    close: () =>
      new Promise<void>((resolve) => {
        for (const connection of connections) connection.close();
        connections.clear();
        listener.close(() => resolve());
      }),
  };
}
