// A loopback listener that carries each accepted TCP connection to a pod's port through the
// Kubernetes API server's WebSocket port-forward (`v4.channel.k8s.io`: per forwarded port a data
// channel 0 and an error channel 1, each starting with the port as two little-endian bytes).
// KCP reaches etcd the same way, over SPDY; an etcd client dials the listener and never knows.
//
// A small adapter on `ws` instead of client-node's PortForward, which has no handshake deadline
// (a hung API server would leave a pending socket per attempt), never ends the local socket when
// the WebSocket closes, and only copies the error channel to a stream.
import net, { type AddressInfo } from 'node:net';
import type { KubeConfig } from '@kubernetes/client-node';
import WebSocket from 'ws';
import type { Deadline } from '../core/deadline.js';

const DATA_CHANNEL = 0;
const ERROR_CHANNEL = 1;
const PORT_FORWARD_PROTOCOL = 'v4.channel.k8s.io';

export interface PodPort {
  namespace: string;
  pod: string;
  port: number;
}

export interface PortForwardListener {
  /** https://127.0.0.1:<random port>: what the etcd client dials. */
  readonly endpoint: string;
  /** The last reason a forwarded connection failed (handshake refused, error channel), if any. */
  lastError(): string | undefined;
  /** Stops listening and cuts every forwarded connection and WebSocket. */
  close(): Promise<void>;
}

function webSocketUrl(server: string, target: PodPort): string {
  const base = server.replace(/^http/, 'ws').replace(/\/+$/, '');
  const path = `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/portforward`;
  return `${base}${path}?ports=${target.port}`;
}

/** One accepted connection relayed over one WebSocket. */
class ForwardedConnection {
  private readonly prefixPending = new Set([DATA_CHANNEL, ERROR_CHANNEL]);
  private webSocket: WebSocket | undefined;
  private closed = false;

  constructor(
    private readonly socket: net.Socket,
    private readonly reportError: (reason: string) => void,
  ) {
    socket.pause();
    socket.on('error', () => this.close());
    socket.on('close', () => this.close());
  }

  start(url: string, options: WebSocket.ClientOptions): void {
    if (this.socket.destroyed) return;
    const webSocket = new WebSocket(url, [PORT_FORWARD_PROTOCOL], { ...options, perMessageDeflate: false });
    this.webSocket = webSocket;
    webSocket.on('unexpected-response', (_request, response) => {
      this.onError(`port-forward refused by the API server: HTTP ${response.statusCode ?? '?'}`);
      response.resume();
      this.close();
    });
    webSocket.on('error', (error) => {
      this.onError(`port-forward failed: ${error.message.split('\n')[0] ?? 'error'}`);
      this.close();
    });
    webSocket.on('close', () => this.close());
    webSocket.on('open', () => {
      this.socket.on('data', (chunk: Buffer) => webSocket.send(Buffer.concat([Buffer.of(DATA_CHANNEL), chunk])));
      this.socket.resume();
    });
    webSocket.on('message', (data: Buffer) => this.receive(data));
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
      this.socket.write(payload);
    } else if (channel === ERROR_CHANNEL) {
      const text = payload.toString('utf8').split('\n')[0]?.slice(0, 200) ?? '';
      this.onError(`port-forward error: ${text}`);
      this.close();
    }
  }

  /** Only the first failure is the cause: closing a connection makes `ws` report its own. */
  private onError(reason: string): void {
    if (!this.closed) this.reportError(reason);
  }

  close(): void {
    this.closed = true;
    if (!this.socket.destroyed) this.socket.destroy();
    const webSocket = this.webSocket;
    if (webSocket !== undefined && webSocket.readyState !== WebSocket.CLOSED) webSocket.terminate();
  }
}

/** The TLS and auth options the kubeconfig gives (CA, client cert, bearer token header). */
async function connectOptions(kubeConfig: KubeConfig): Promise<WebSocket.ClientOptions> {
  const options: { ca?: Buffer; cert?: Buffer; key?: Buffer; headers?: Record<string, string>; rejectUnauthorized?: boolean } =
    {};
  await kubeConfig.applyToHTTPSOptions(options);
  return options;
}

/**
 * Listens on 127.0.0.1:0; every connection to it is forwarded to `target` through the API server
 * of `kubeConfig`. Each WebSocket handshake must finish before `deadline`.
 */
export async function listenForPodPort(
  kubeConfig: KubeConfig,
  target: PodPort,
  deadline: Deadline,
): Promise<PortForwardListener> {
  const server = kubeConfig.getCurrentCluster()?.server ?? '';
  const url = webSocketUrl(server, target);
  const options = await connectOptions(kubeConfig);
  const connections = new Set<ForwardedConnection>();
  let lastError: string | undefined;
  const listener = net.createServer((socket) => {
    const connection = new ForwardedConnection(socket, (reason) => (lastError = reason));
    connections.add(connection);
    socket.on('close', () => connections.delete(connection));
    connection.start(url, { ...options, handshakeTimeout: Math.max(1, Math.round(deadline.remainingMs())) });
  });
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (listener.address() as AddressInfo).port;
  return {
    endpoint: `https://127.0.0.1:${port}`,
    lastError: () => lastError,
    close: () =>
      new Promise<void>((resolve) => {
        for (const connection of connections) connection.close();
        connections.clear();
        listener.close(() => resolve());
      }),
  };
}
