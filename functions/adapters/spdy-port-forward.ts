// Pod port-forward over SPDY/3.1 (`portforward.k8s.io`), the protocol kubectl and Cluster API's
// KCP speak: an HTTP/1.1 upgrade, then per forwarded connection an error stream and a data stream,
// both SYN_STREAMs carrying the headers streamType, port and requestID. The fallback for API
// servers (or proxies in front of them) that refuse the WebSocket upgrade. One SPDY connection per
// forwarded TCP connection, as one WebSocket per connection on the other path.
import type tls from 'node:tls';
import type { Deadline } from '../domain/deadline.js';
import {
  FLAG_FIN,
  FrameReader,
  FrameType,
  HeaderCompressor,
  RstStatus,
  type SpdyFrame,
  dataFrame,
  firstWord,
  goAwayFrame,
  pingFrame,
  rstStreamFrame,
  synStreamFrame,
  windowUpdateFrame,
} from './spdy.js';
import type { TlsSessionCache } from './tls-sessions.js';
import { connectWorkload } from './workload-tunnel.js';
import type { WorkloadEndpoint } from './workload-kubeconfig.js';

const ERROR_STREAM = 1;
const DATA_STREAM = 3;
/** The most of the API server's upgrade answer read before its blank line. */
const MAX_UPGRADE_RESPONSE_BYTES = 16 * 1024;
/** Local bytes per DATA frame: the API server relays in 32 KiB reads too. */
const DATA_CHUNK_BYTES = 32 * 1024;
/** The most of the error stream kept: it is only classified, never quoted. */
const MAX_ERROR_TEXT_BYTES = 1024;
/**
 * Bytes we may have queued towards the API server before a reply (PING, RST_STREAM,
 * WINDOW_UPDATE) cuts the session instead: a peer that sends and never reads would otherwise
 * make us buffer every answer. Our own data never queues near this (the local side is paused once
 * a write reports a full buffer), so only a peer that stopped reading reaches it.
 */
export const MAX_UNREAD_BYTES = 1024 * 1024;
/**
 * Frames a port-forward does not ask for (server PINGs and SYN_STREAMs, SETTINGS, HEADERS,
 * unknown types, DATA on other streams): a burst, then one more per second. A server pings
 * every few seconds at most; one that sends more is flooding, and the session is cut.
 */
export const UNSOLICITED_FRAME_BURST = 64;
const UNSOLICITED_REFILL_MS = 1000;

export interface SpdyTarget {
  namespace: string;
  pod: string;
  port: number;
}

/** Why opening failed: before the upgrade the API server's answer is kept to a status code. */
export class SpdyOpenError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface SpdyPortForwardHandlers {
  data(chunk: Buffer): void;
  /** The error stream's text (bounded), to classify; the stream closes after it. */
  errorText(text: string): void;
  /** A frame or stream failure after the streams opened, in our words. */
  failure(reason: string): void;
  closed(): void;
}

function upgradeRequest(workload: WorkloadEndpoint, target: SpdyTarget): string {
  const url = new URL(workload.server);
  const prefix = url.pathname.replace(/\/+$/, '');
  const path = `${prefix}/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/portforward`;
  const auth = workload.token === undefined ? '' : `Authorization: Bearer ${workload.token}\r\n`;
  return (
    `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n` +
    `X-Stream-Protocol-Version: portforward.k8s.io\r\n${auth}Content-Length: 0\r\n\r\n`
  );
}

/** Reads the upgrade answer; resolves with the bytes after it (already SPDY) once it is a 101. */
function awaitUpgrade(socket: tls.TLSSocket, deadline: Deadline): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (error: SpdyOpenError | null, rest?: Buffer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // Frames may follow the 101 at once: hold them until the frame reader listens.
      socket.pause();
      socket.off('data', onData);
      socket.off('close', onClose);
      if (error === null) resolve(rest ?? Buffer.alloc(0));
      else reject(error);
    };
    const timer = setTimeout(
      () => finish(new SpdyOpenError('SPDY upgrade timed out')),
      Math.max(1, Math.round(deadline.remainingMs())),
    );
    const onClose = () => finish(new SpdyOpenError('the API server closed the connection during the SPDY upgrade'));
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) {
        if (received.length > MAX_UPGRADE_RESPONSE_BYTES) finish(new SpdyOpenError('oversized answer to the SPDY upgrade'));
        return;
      }
      const status = /^HTTP\/1\.1 (\d{3})/.exec(received.subarray(0, end).toString('latin1'));
      const code = status === null ? undefined : Number(status[1]);
      if (code !== 101)
        return finish(new SpdyOpenError(code === undefined ? 'no HTTP answer to the SPDY upgrade' : `HTTP ${code}`, code));
      finish(null, received.subarray(end + 4));
    };
    socket.on('data', onData);
    socket.on('close', onClose);
  });
}

/** One SPDY port-forward connection: the error and data streams of one forwarded port. */
export class SpdyPortForward {
  private readonly reader: FrameReader;
  private replies = new Set<number>();
  private errorText = Buffer.alloc(0);
  private closed = false;
  private onReplied: (() => void) | undefined;
  /** Data-stream bytes received and not yet given back as window (one WINDOW_UPDATE per read). */
  private ungranted = 0;
  private unsolicitedTokens = UNSOLICITED_FRAME_BURST;
  private unsolicitedRefilledMs = performance.now();

  private constructor(
    private readonly socket: tls.TLSSocket,
    private readonly handlers: SpdyPortForwardHandlers,
    maxFrameBytes: number,
  ) {
    this.reader = new FrameReader(maxFrameBytes);
  }

  /**
   * Connects (through HTTPS_PROXY when it applies), upgrades and opens both streams before
   * `deadline`. Rejects with SpdyOpenError; `status` is the API server's HTTP answer if any.
   */
  static async open(
    workload: WorkloadEndpoint,
    target: SpdyTarget,
    options: {
      deadline: Deadline;
      environment: Record<string, string | undefined>;
      maxFrameBytes: number;
      tlsSessions?: TlsSessionCache;
    },
    handlers: SpdyPortForwardHandlers,
  ): Promise<SpdyPortForward> {
    let socket: tls.TLSSocket;
    try {
      socket = await connectWorkload(workload, options.deadline, options.environment, options.tlsSessions);
    } catch (error) {
      throw new SpdyOpenError((error as Error).message);
    }
    const session = new SpdyPortForward(socket, handlers, options.maxFrameBytes);
    try {
      socket.write(upgradeRequest(workload, target));
      const rest = await awaitUpgrade(socket, options.deadline);
      await session.openStreams(target.port, rest, options.deadline);
      return session;
    } catch (error) {
      session.close();
      throw error instanceof SpdyOpenError ? error : new SpdyOpenError('SPDY port-forward failed to open');
    }
  }

  private async openStreams(port: number, rest: Buffer, deadline: Deadline): Promise<void> {
    const compressor = new HeaderCompressor();
    try {
      const headers = (streamType: string) => ({ streamtype: streamType, port: String(port), requestid: '0' });
      const errorBlock = await compressor.compress(headers('error'));
      const dataBlock = await compressor.compress(headers('data'));
      // The error stream only ever carries the server's text: our half closes at once, as kubectl's does.
      this.socket.write(synStreamFrame(ERROR_STREAM, FLAG_FIN, errorBlock));
      this.socket.write(synStreamFrame(DATA_STREAM, 0, dataBlock));
    } finally {
      compressor.close();
    }
    const replied = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new SpdyOpenError('SPDY streams not answered in time')),
        Math.max(1, Math.round(deadline.remainingMs())),
      );
      this.onReplied = () => {
        clearTimeout(timer);
        resolve();
      };
      this.socket.once('close', () => {
        clearTimeout(timer);
        reject(new SpdyOpenError('the API server closed the SPDY connection before the streams opened'));
      });
    });
    this.socket.on('data', (chunk: Buffer) => this.receive(chunk));
    this.socket.on('close', () => this.close());
    if (rest.length > 0) this.receive(rest);
    this.socket.resume();
    await replied;
  }

  private receive(chunk: Buffer): void {
    if (this.closed) return;
    let frames: SpdyFrame[];
    try {
      frames = this.reader.push(chunk);
    } catch (error) {
      this.fail(`port-forward closed: the API server sent ${(error as Error).message}`);
      return;
    }
    for (const frame of frames) {
      if (this.closed) return;
      if (frame.control) this.control(frame);
      else this.data(frame.streamId, frame.flags, frame.data);
    }
    if (this.ungranted > 0 && !this.closed) {
      // Give the window back once per read, per stream and (SPDY/3.1) per session: a frame at a time
      // would be one write per frame, however small the frames.
      const bytes = this.ungranted;
      this.ungranted = 0;
      this.reply(Buffer.concat([windowUpdateFrame(DATA_STREAM, bytes), windowUpdateFrame(0, bytes)]));
    }
  }

  /** A frame we did not ask for: counted, and the session cut once the peer sends them faster than it may. */
  private unsolicited(): boolean {
    const nowMs = performance.now();
    const refills = Math.floor((nowMs - this.unsolicitedRefilledMs) / UNSOLICITED_REFILL_MS);
    if (refills > 0) {
      this.unsolicitedTokens = Math.min(UNSOLICITED_FRAME_BURST, this.unsolicitedTokens + refills);
      this.unsolicitedRefilledMs += refills * UNSOLICITED_REFILL_MS;
    }
    if (this.unsolicitedTokens >= 1) {
      this.unsolicitedTokens -= 1;
      return true;
    }
    this.fail('port-forward closed: the API server sent more frames than a port-forward asks for', true);
    return false;
  }

  /** An answer of ours, unless the peer has stopped reading what it is sent: then the session is cut. */
  private reply(frame: Buffer): void {
    if (this.socket.writableLength + frame.length > MAX_UNREAD_BYTES) {
      this.fail('port-forward closed: the API server does not read what it is sent', true);
      return;
    }
    this.socket.write(frame);
  }

  private control(frame: Extract<SpdyFrame, { control: true }>): void {
    const id = firstWord(frame);
    switch (frame.type) {
      case FrameType.SYN_REPLY:
        if ((id !== ERROR_STREAM && id !== DATA_STREAM) || this.replies.has(id)) {
          this.unsolicited();
          return;
        }
        this.replies.add(id);
        if (this.replies.size === 2) this.onReplied?.();
        return;
      case FrameType.RST_STREAM:
        if (id === ERROR_STREAM || id === DATA_STREAM) this.fail('port-forward closed: the API server reset the stream');
        return;
      case FrameType.GOAWAY:
        this.close();
        return;
      case FrameType.PING:
        // Server pings carry even IDs; answering ours would loop.
        if (this.unsolicited() && id !== undefined && id % 2 === 0) this.reply(pingFrame(id));
        return;
      case FrameType.SYN_STREAM:
        // The server opening streams is not part of port-forward.
        if (this.unsolicited() && id !== undefined) this.reply(rstStreamFrame(id, RstStatus.PROTOCOL_ERROR));
        return;
      case FrameType.WINDOW_UPDATE:
        // The server giving window back as it reads our data: expected, and nothing to do.
        return;
      default:
        // SETTINGS, HEADERS and unknown types: nothing port-forward needs (section 2.2.1: ignore), counted.
        this.unsolicited();
        return;
    }
  }

  private data(streamId: number, flags: number, payload: Buffer): void {
    if (streamId === DATA_STREAM) {
      if (payload.length > 0) {
        this.handlers.data(payload);
        this.ungranted += payload.length;
      }
      if ((flags & FLAG_FIN) !== 0) this.close();
    } else if (streamId !== ERROR_STREAM) {
      this.unsolicited();
    } else {
      if (this.errorText.length < MAX_ERROR_TEXT_BYTES) {
        this.errorText = Buffer.concat([this.errorText, payload]).subarray(0, MAX_ERROR_TEXT_BYTES);
      }
      if ((flags & FLAG_FIN) !== 0 && this.errorText.length > 0) {
        this.handlers.errorText(this.errorText.toString('utf8'));
        this.close();
      }
    }
  }

  /** Local bytes to the pod; false when the socket's buffer is full (wait for drain()). */
  write(chunk: Buffer): boolean {
    if (this.closed) return false;
    let ok = true;
    for (let offset = 0; offset < chunk.length; offset += DATA_CHUNK_BYTES) {
      ok = this.socket.write(dataFrame(DATA_STREAM, 0, chunk.subarray(offset, offset + DATA_CHUNK_BYTES)));
    }
    return ok;
  }

  onDrain(listener: () => void): void {
    this.socket.on('drain', listener);
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  /** Reports `reason` and closes; `abort` destroys at once, since a GOAWAY would queue behind what the peer does not read. */
  private fail(reason: string, abort = false): void {
    if (this.closed) return;
    this.handlers.failure(reason);
    if (abort) this.socket.destroy();
    this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (!this.socket.destroyed) {
      this.socket.end(goAwayFrame(DATA_STREAM, 0));
      this.socket.destroySoon();
      setTimeout(() => this.socket.destroy(), 1000).unref();
    }
    this.handlers.closed();
  }
}
