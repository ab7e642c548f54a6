// Random free loopback ports: ask the kernel for port 0, read what it chose, release it.
import net from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`unexpected listen address ${String(address)}`));
        return;
      }
      const port = address.port;
      server.close(() => resolve(port));
    });
  });
}

/** `count` distinct free ports (the kernel may hand the same port out twice in a row). */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}
