// One HTTP/1.1 exchange over a bare socket, for tests that compare answers byte for byte: the
// request is written as given, the whole answer read until the server closes the connection.
import net from 'node:net';

/**
 * Sends `request` (head and body, ending the head with `Connection: close`) to 127.0.0.1:`port`
 * and resolves with the raw answer, its Date header blanked (the only part two equal answers may
 * differ in). The socket is written, not ended: a half-closed client gets no answer to a gzip
 * body, from express alone too.
 */
export function rawHttpExchange(port: number, request: Buffer | string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () =>
      resolve(
        Buffer.concat(chunks)
          .toString('latin1')
          .replace(/\r\nDate: [^\r]*/, '\r\nDate: -'),
      ),
    );
    socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.write(request);
  });
}
