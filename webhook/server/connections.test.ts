// What a client can hold or cost the webhook: silent TCP connections that never send a
// ClientHello are cut and the server recovers by itself; only forward-secret TLS 1.2 suites are
// offered; an absurd replica count is answered at once. Real HTTPS server in this process.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGuardConfig } from '../../functions/domain/config.js';
import { CONNECTION_BOUNDS } from './main.js';
import { generateTestCerts, type TestCerts } from '../../test/harness/certs.js';
import { httpsRequest } from '../../test/harness/https-client.js';
import { admissionFixture } from '../../test/harness/reviews.js';
import { waitFor } from '../../test/harness/wait.js';
import { startTestWebhook, type TestWebhook } from '../../test/harness/webhook.js';

const SILENT_CONNECTIONS = 250;
const MAX_CONNECTIONS = 100;

let workDir: string;
let certs: TestCerts;
let ca: Buffer;
let webhook: TestWebhook;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-connections-'));
  certs = await generateTestCerts(workDir);
  ca = readFileSync(certs.caFile);
  const config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 60,
      inlineRefresh: false,
      targets: [{ name: 'prod', endpoints: ['https://127.0.0.1:2379'], match: {} }],
    },
    'connections config',
  );
  webhook = await startTestWebhook({
    config,
    certs,
    evaluate: () => Promise.reject(new Error('this server never evaluates')),
    maxConnections: MAX_CONNECTIONS,
    ready: true,
  });
});

afterAll(async () => {
  await webhook?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** GET /healthz on a new connection; the status, or 0 when the connection is refused, cut or slow. */
async function healthz(): Promise<number> {
  const agent = new https.Agent({ keepAlive: false });
  try {
    const answer = await httpsRequest(`${webhook.url}/healthz`, { method: 'GET', agent, ca, timeoutMs: 1_000 });
    return answer.status;
  } catch {
    return 0;
  } finally {
    agent.destroy();
  }
}

describe('silent connections', () => {
  it(`cuts ${SILENT_CONNECTIONS} TCP connections that never send a ClientHello, and /healthz answers again by itself`, async () => {
    expect(await healthz()).toBe(200);
    const port = new URL(webhook.url).port;
    const closedByServer: boolean[] = [];
    const sockets = await Promise.all(
      Array.from(
        { length: SILENT_CONNECTIONS },
        (_unused, index) =>
          new Promise<net.Socket>((resolve) => {
            const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => resolve(socket));
            socket.on('close', () => (closedByServer[index] = true));
            socket.on('error', () => resolve(socket));
          }),
      ),
    );
    const attackStarted = performance.now();
    try {
      // While the silent sockets fill the connection limit, new clients are turned away ...
      expect(await healthz()).toBe(0);
      // ... until the handshake timeout cuts them, without a restart.
      await waitFor('/healthz to answer after the silent connections', CONNECTION_BOUNDS.handshakeTimeout + 10_000, async () => {
        return (await healthz()) === 200;
      });
      const recoveredMs = Math.round(performance.now() - attackStarted);
      await waitFor('every silent connection to be closed by the server', 10_000, () =>
        sockets.every((_socket, index) => closedByServer[index] === true),
      );
      console.log(`silent connections: ${SILENT_CONNECTIONS} opened, /healthz answered again after ${recoveredMs} ms`);
      expect(recoveredMs).toBeLessThan(
        CONNECTION_BOUNDS.handshakeTimeout + CONNECTION_BOUNDS.connectionsCheckingInterval + 5_000,
      );
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  }, 30_000);
});

describe('TLS', () => {
  function handshake(options: tls.ConnectionOptions): Promise<string> {
    return new Promise((resolve) => {
      const socket = tls.connect({ host: '127.0.0.1', port: Number(new URL(webhook.url).port), ca, ...options }, () => {
        const cipher = socket.getCipher().name;
        socket.end();
        resolve(cipher);
      });
      socket.setTimeout(5_000, () => socket.destroy(new Error('handshake timed out')));
      socket.on('error', (error) => resolve(`refused: ${error.message}`));
    });
  }

  it.each(['AES128-SHA', 'AES256-GCM-SHA384', 'DHE-RSA-AES128-SHA'])(
    'refuses the TLS 1.2 suite %s (no forward secrecy)',
    async (cipher) => {
      expect(await handshake({ maxVersion: 'TLSv1.2', ciphers: cipher })).toMatch(/^refused: /);
    },
  );

  it('accepts ECDHE suites on TLS 1.2 and TLS 1.3', async () => {
    expect(await handshake({ maxVersion: 'TLSv1.2' })).toMatch(/^ECDHE-/);
    expect(await handshake({ minVersion: 'TLSv1.3' })).toMatch(/^TLS_/);
  });
});

describe('absurd replica counts', () => {
  it('answers a 2^53+1 scale-up at once with a denial naming the count', async () => {
    const fixture = admissionFixture('kcp-scale-up-3-to-5.json');
    // As the apiserver would send it: a JSON number, not representable as a double.
    const body = JSON.stringify(fixture).replace('"replicas":5', '"replicas":9007199254740993');
    expect(body).toContain('9007199254740993');
    // Warm the connection and the code path with the unmodified request, then measure.
    await webhook.postReview(fixture, { query: '', timeoutMs: 5_000 });
    // The fastest of five: the test workers share two cores with other work, and a spinning
    // projection would make every one of them slow, not just one.
    const timings: number[] = [];
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const started = performance.now();
      const answer = await webhook.request('POST', '/validate', { body, timeoutMs: 5_000 });
      timings.push(performance.now() - started);
      const response = (answer.json as { response: { allowed: boolean; status?: { message: string } } }).response;
      expect(response.allowed).toBe(false);
      expect(response.status?.message).toContain('object spec.replicas 9007199254740992 is more than the 100 replicas');
    }
    console.log(`2^53+1 replicas: denied in ${timings.map((ms) => ms.toFixed(1)).join(', ')} ms`);
    expect(Math.min(...timings)).toBeLessThan(50);
  });
});
