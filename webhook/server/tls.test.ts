// The webhook's serving certificate is replaced on disk (as cert-manager does) and new TLS
// connections see the new one without the server being restarted; a bad pair is refused.
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReloadingHttpsServer, loadTlsPair, TlsFilesError, type ReloadingHttpsServer } from './tls.js';
import { generateTestCerts, type TestCerts } from '../../test/harness/certs.js';

let workDir: string;
let certsA: TestCerts;
let certsB: TestCerts;
let servedCert: string;
let servedKey: string;
let reloading: ReloadingHttpsServer;
let port: number;
const reloadOutcomes: Array<{ ok: boolean; error?: string }> = [];

let rsaKeyFile: string;

function rsaKeyPem(): string {
  return generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

function fingerprintOf(pemFile: string): Promise<string> {
  return readFile(pemFile).then((pem) => new X509Certificate(pem).fingerprint256);
}

/** Opens a new TLS connection and returns the fingerprint of the certificate the server presents. */
function servedFingerprint(): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, timeout: 5_000 }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve(fingerprint);
    });
    socket.once('timeout', () => {
      socket.destroy();
      reject(new Error('TLS handshake timed out'));
    });
    socket.once('error', reject);
  });
}

async function waitForServedFingerprint(expected: string, timeoutMs: number): Promise<number> {
  const started = Date.now();
  let last = '';
  while (Date.now() - started < timeoutMs) {
    last = await servedFingerprint();
    if (last === expected) return Date.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 50)); // poll interval, not synchronisation
  }
  throw new Error(`server still presents ${last} after ${timeoutMs} ms, expected ${expected}`);
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-cert-rotation-'));
  const [dirA, dirB] = await Promise.all([mkdtemp(path.join(workDir, 'a-')), mkdtemp(path.join(workDir, 'b-'))]);
  [certsA, certsB] = await Promise.all([generateTestCerts(dirA), generateTestCerts(dirB)]);
  rsaKeyFile = path.join(workDir, 'rsa.key');
  await writeFile(rsaKeyFile, rsaKeyPem());
  servedCert = path.join(workDir, 'tls.crt');
  servedKey = path.join(workDir, 'tls.key');
  await copyFile(certsA.serverCertFile, servedCert);
  await copyFile(certsA.serverKeyFile, servedKey);
  reloading = await createReloadingHttpsServer({
    certFile: servedCert,
    keyFile: servedKey,
    handler: (_req, res) => res.end('ok'),
    statIntervalMs: 300,
    onReload: (outcome) => reloadOutcomes.push(outcome),
  });
  await new Promise<void>((resolve) => reloading.server.listen(0, '127.0.0.1', resolve));
  port = (reloading.server.address() as AddressInfo).port;
});

afterAll(async () => {
  reloading?.server.closeAllConnections();
  await new Promise<void>((resolve) => (reloading ? reloading.server.close(() => resolve()) : resolve()));
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

describe('serving certificate rotation', () => {
  it('serves certificate A at start', async () => {
    expect(await servedFingerprint()).toBe(await fingerprintOf(certsA.serverCertFile));
  });

  it('keeps certificate A when the key file holds a key of another type (RSA key, EC certificate)', async () => {
    await writeFile(servedKey, rsaKeyPem());
    const installed = await reloading.reload();
    expect(installed).toBe(false);
    expect(reloadOutcomes.at(-1)?.error).toMatch(/does not belong to certificate .*ec public key, the key file a rsa key/);
    expect(await servedFingerprint()).toBe(await fingerprintOf(certsA.serverCertFile));
    await copyFile(certsA.serverKeyFile, servedKey);
  });

  it('keeps certificate A when the files hold a certificate with a key that does not match', async () => {
    await copyFile(certsB.serverCertFile, servedCert); // key A still in place: a mismatched pair
    const installed = await reloading.reload();
    expect(installed).toBe(false);
    expect(reloadOutcomes.at(-1)).toMatchObject({ ok: false });
    expect(reloadOutcomes.at(-1)?.error).toMatch(/not a usable pair/);
    expect(await servedFingerprint()).toBe(await fingerprintOf(certsA.serverCertFile));
  });

  it('presents certificate B to new connections once the files are replaced, without a restart', async () => {
    const listeningBefore = reloading.server;
    await copyFile(certsB.serverKeyFile, servedKey);
    await copyFile(certsB.serverCertFile, servedCert);
    const waitedMs = await waitForServedFingerprint(await fingerprintOf(certsB.serverCertFile), 10_000);
    expect(reloading.server).toBe(listeningBefore);
    expect(reloading.server.listening).toBe(true);
    expect((reloading.server.address() as AddressInfo).port).toBe(port);
    expect(waitedMs).toBeLessThan(10_000);
  });

  it('picks up a rotation through the periodic check alone when no watch event arrives', async () => {
    // No watchers (as if the filesystem never reported the change): only stat polling is left.
    const statOnly = await createReloadingHttpsServer({
      certFile: servedCert,
      keyFile: servedKey,
      handler: (_req, res) => res.end('ok'),
      statIntervalMs: 200,
      watchFiles: false,
    });
    await new Promise<void>((resolve) => statOnly.server.listen(0, '127.0.0.1', resolve));
    const statOnlyPort = (statOnly.server.address() as AddressInfo).port;
    try {
      const fingerprintAt = (p: number) =>
        new Promise<string>((resolve, reject) => {
          const socket = tls.connect({ host: '127.0.0.1', port: p, rejectUnauthorized: false }, () => {
            resolve(socket.getPeerCertificate().fingerprint256);
            socket.end();
          });
          socket.once('error', reject);
        });
      expect(await fingerprintAt(statOnlyPort)).toBe(await fingerprintOf(certsB.serverCertFile));
      // Replace the files by rename so the inode changes, as a Secret volume's symlink swap does.
      const stagedCert = path.join(workDir, 'staged.crt');
      const stagedKey = path.join(workDir, 'staged.key');
      await writeFile(stagedCert, await readFile(certsA.serverCertFile));
      await writeFile(stagedKey, await readFile(certsA.serverKeyFile));
      const { rename } = await import('node:fs/promises');
      await rename(stagedKey, servedKey);
      await rename(stagedCert, servedCert);
      const expected = await fingerprintOf(certsA.serverCertFile);
      const started = Date.now();
      let seen = '';
      while (Date.now() - started < 10_000 && seen !== expected) {
        seen = await fingerprintAt(statOnlyPort);
        if (seen !== expected) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(seen).toBe(expected);
    } finally {
      statOnly.server.closeAllConnections();
      await new Promise<void>((resolve) => statOnly.server.close(() => resolve()));
    }
  });
});

describe('loadTlsPair', () => {
  it.each([
    [
      'a missing certificate file',
      () => ({ cert: path.join(workDir, 'nope.crt'), key: servedKey }),
      /cannot read TLS certificate file .*nope\.crt: ENOENT/,
    ],
    [
      'a missing key file',
      () => ({ cert: servedCert, key: path.join(workDir, 'nope.key') }),
      /cannot read TLS key file .*nope\.key: ENOENT/,
    ],
    [
      'a key that belongs to another certificate',
      () => ({ cert: certsA.serverCertFile, key: certsB.serverKeyFile }),
      /not a usable pair/,
    ],
    [
      'a key of another type (RSA key, EC certificate)',
      () => ({ cert: certsA.serverCertFile, key: rsaKeyFile }),
      /TLS key .*rsa\.key does not belong to certificate/,
    ],
    [
      'a certificate file that is not PEM',
      () => ({ cert: certsA.serverKeyFile.replace(/server-key\.pem$/, 'server.ext'), key: certsA.serverKeyFile }),
      /not a usable pair/,
    ],
  ])('rejects %s with a message naming the problem', async (_name, files, message) => {
    const { cert, key } = files();
    const error = await loadTlsPair(cert, key).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TlsFilesError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toMatch(/PRIVATE KEY/);
  });
});
