// The sockets one probe session's gRPC channels hold, so that closing the session destroys them.
import type { Socket } from 'node:net';

/**
 * The sockets a session's gRPC channels hold, so close() can destroy them. grpc-js's channel
 * close() shuts its subchannel connector down but never the socket of a connect in progress: a
 * TLS handshake that a hung (SIGSTOPped) member or a stalled relay never answers keeps its
 * socket until the peer wakes up or dies, and a handshake that completes after the shutdown is
 * handed to createSession, which rejects without destroying it (transport.js, grpc-js 1.14).
 * That was 3-4 sockets per evaluation of a hung member. Every socket that reaches the connector
 * is recorded here and destroyed when the session closes; one arriving after that is destroyed
 * at once.
 */
export class SessionSockets {
  private readonly open = new Set<Socket>();
  private closed = false;

  track(socket: Socket): void {
    if (this.closed) {
      destroyOutsideReads(socket);
      return;
    }
    if (socket.destroyed) return;
    this.open.add(socket);
    socket.once('close', () => this.open.delete(socket));
  }

  /**
   * `tls` now carries `raw` (grpc-js's TLS connect wraps the TCP socket it was given): only `tls`
   * is destroyed at close, which closes `raw` under it; destroying `raw` itself would pull the
   * TCP handle from under a live TLS socket.
   */
  wrapped(raw: Socket, tls: Socket): void {
    if (tls !== raw) this.open.delete(raw);
    this.track(tls);
  }

  destroyAll(): void {
    this.closed = true;
    for (const socket of this.open) destroyOutsideReads(socket);
    this.open.clear();
  }
}

/**
 * Destroys `socket` from the event loop's check phase, never from inside a read. A session closes
 * when its last answer arrives, i.e. from promise callbacks Node runs while a TLS socket is still
 * delivering that answer (TLSWrap::ClearOut → EmitRead → JS → microtasks); destroying that very
 * socket there let Node 22's ClearOut touch its freed TLSWrap: a SIGSEGV now and then over a run
 * of evaluations (core dump: ClearOut after EmitRead, `this` already freed; BENCHMARKS.md).
 * setImmediate runs once every read callback has returned; a socket already destroyed by then is
 * left alone.
 */
function destroyOutsideReads(socket: Socket): void {
  setImmediate(() => {
    if (!socket.destroyed) socket.destroy();
  });
}
