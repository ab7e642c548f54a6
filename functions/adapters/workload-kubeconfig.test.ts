// The workload API server is verified as the kubeconfig names it: `tls-server-name` when given
// (sent as SNI only when it is a DNS name), else the server URL's host. Checked against a real TLS
// server on loopback whose certificate names 127.0.0.1, localhost and workload.example.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverNameOptions } from './workload-kubeconfig.js';
import { generateTestCerts } from '../../test/harness/certs.js';

let dir: string;
let server: tls.Server;
let port: number;
let ca: Buffer;
const sniSeen: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-server-name-'));
  const certs = await generateTestCerts(dir, { serverNames: ['workload.example'] });
  ca = await readFile(certs.caFile);
  server = tls.createServer({ cert: await readFile(certs.serverCertFile), key: await readFile(certs.serverKeyFile) }, (socket) =>
    socket.end('ok'),
  );
  server.on('secureConnection', (socket: tls.TLSSocket) => {
    sniSeen.push(typeof socket.servername === 'string' ? socket.servername : '(none)');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as { port: number }).port;
});

afterAll(async () => {
  server?.close();
  await rm(dir, { recursive: true, force: true });
});

/** Connects to 127.0.0.1 verifying the server as `name`; the SNI the server saw, or the error. */
async function connectAs(name: string): Promise<{ sni: string } | { error: string }> {
  const before = sniSeen.length;
  const socket = tls.connect({ host: '127.0.0.1', port, ca, ...serverNameOptions(name), timeout: 5_000 });
  try {
    await Promise.race([
      once(socket, 'secureConnect'),
      once(socket, 'timeout').then(() => Promise.reject(new Error('timed out'))),
    ]);
    // The server answers only after its own handshake finished, so its SNI is recorded by then.
    socket.resume();
    await once(socket, 'end');
    return { sni: sniSeen[before] ?? '(not recorded)' };
  } catch (error) {
    return { error: (error as Error).message };
  } finally {
    socket.destroy();
  }
}

describe('the workload API server is verified by the name the kubeconfig gives', () => {
  const rows: Array<{ behaviour: string; name: string; sni?: string; error?: RegExp }> = [
    {
      behaviour: 'a DNS tls-server-name the certificate carries is sent as SNI and accepted',
      name: 'workload.example',
      sni: 'workload.example',
    },
    { behaviour: 'an IP address is checked against the certificate but never sent as SNI', name: '127.0.0.1', sni: '(none)' },
    { behaviour: 'a name the certificate does not carry is refused, naming it', name: 'other.example', error: /other\.example/ },
    { behaviour: 'an IP address the certificate does not carry is refused', name: '10.0.0.1', error: /10\.0\.0\.1/ },
  ];
  it.each(rows)('$behaviour', async ({ name, sni, error }) => {
    const outcome = await connectAs(name);
    if (sni !== undefined) expect(outcome).toEqual({ sni });
    else expect('error' in outcome && error?.test(outcome.error)).toBe(true);
  });
});
