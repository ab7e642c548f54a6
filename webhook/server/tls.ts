// HTTPS server whose certificate and key are reloaded when their files change, without a
// restart (cert-manager and kubelet rotate Secret mounts under a running pod). fs.watch on the
// files' directories reacts quickly; a periodic stat check backs it up because watches can be
// silent (symlink swaps of Secret volumes, some filesystems, overlayfs). A bad pair — unreadable,
// garbage, or a key that does not match the cert — keeps the old context and logs an error.
import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import https from 'node:https';
import type { RequestListener } from 'node:http';
import path from 'node:path';
import tls from 'node:tls';
import type { Logger } from '../../functions/shared/logger.js';

export interface ReloadingHttpsServerOptions {
  certFile: string;
  keyFile: string;
  handler: RequestListener;
  logger?: Logger;
  /** Backup stat check period; default 10 s. */
  statIntervalMs?: number;
  /** Watch events come in bursts while files are written; wait this long before reading. Default 100 ms. */
  debounceMs?: number;
  /** Watch the directories for changes (default true); the periodic stat check runs either way. */
  watchFiles?: boolean;
  /** Passed to https.createServer beside the key pair (timeouts, connection checks). */
  serverOptions?: https.ServerOptions;
  /** Called after each reload attempt (tests wait on this instead of sleeping). */
  onReload?: (outcome: { ok: true } | { ok: false; error: string }) => void;
}

export interface ReloadingHttpsServer {
  readonly server: https.Server;
  /** Re-reads the files now; true when a new pair was installed. */
  reload(): Promise<boolean>;
  /** Stops watching (the server itself is closed by its owner). */
  stopWatching(): void;
  /** notAfter of the certificate the server presents now (the metrics export it for expiry alerts). */
  certificateNotAfter(): Date;
}

export class TlsFilesError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TlsFilesError';
  }
}

interface KeyPair {
  cert: Buffer;
  key: Buffer;
}

async function readPair(certFile: string, keyFile: string): Promise<KeyPair> {
  const read = async (file: string, flag: string) => {
    try {
      return await readFile(file);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      throw new TlsFilesError(`cannot read ${flag} file ${file}: ${code}`);
    }
  };
  const [cert, key] = await Promise.all([read(certFile, 'TLS certificate'), read(keyFile, 'TLS key')]);
  return { cert, key };
}

/**
 * TLS 1.2 only with forward-secret (ECDHE) AEAD suites; TLS 1.3 suites are all forward secret.
 * Applied at start and at every reload (setSecureContext replaces the whole context).
 */
export const TLS_SERVER_OPTIONS = {
  minVersion: 'TLSv1.2',
  ciphers: [
    'TLS_AES_128_GCM_SHA256',
    'TLS_AES_256_GCM_SHA384',
    'TLS_CHACHA20_POLY1305_SHA256',
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-RSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-RSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
    'ECDHE-RSA-CHACHA20-POLY1305',
  ].join(':'),
  honorCipherOrder: true,
} as const satisfies tls.SecureContextOptions;

/** Throws unless the key file's private key is the one the certificate's public key belongs to. */
function checkKeyMatchesCertificate(pair: KeyPair, certFile: string, keyFile: string): void {
  // OpenSSL checks this only when both keys have the same type: an RSA certificate with an EC key
  // was accepted, and every handshake failed afterwards.
  const certificateKey = new X509Certificate(pair.cert).publicKey;
  const publicOfPrivate = createPublicKey(createPrivateKey(pair.key));
  if (!certificateKey.equals(publicOfPrivate)) {
    throw new TlsFilesError(
      `TLS key ${keyFile} does not belong to certificate ${certFile} (the certificate holds a ` +
        `${certificateKey.asymmetricKeyType ?? 'unknown'} public key, the key file a ${publicOfPrivate.asymmetricKeyType ?? 'unknown'} key that is not its pair)`,
    );
  }
}

function validatePair(pair: KeyPair, certFile: string, keyFile: string): tls.SecureContext {
  let context: tls.SecureContext;
  try {
    // Throws on garbage PEM and on a key of the certificate's type that is not its pair.
    context = tls.createSecureContext({ ...TLS_SERVER_OPTIONS, cert: pair.cert, key: pair.key });
  } catch (error) {
    // The OpenSSL message names the problem, never the key bytes.
    throw new TlsFilesError(`TLS certificate ${certFile} and key ${keyFile} are not a usable pair: ${(error as Error).message}`);
  }
  try {
    checkKeyMatchesCertificate(pair, certFile, keyFile);
  } catch (error) {
    if (error instanceof TlsFilesError) throw error;
    throw new TlsFilesError(`TLS certificate ${certFile} and key ${keyFile} are not a usable pair: ${(error as Error).message}`);
  }
  return context;
}

/** Reads and validates the pair once; throws TlsFilesError naming the file or the problem. */
export async function loadTlsPair(certFile: string, keyFile: string): Promise<{ cert: Buffer; key: Buffer }> {
  const pair = await readPair(certFile, keyFile);
  validatePair(pair, certFile, keyFile);
  return pair;
}

async function fileSignature(file: string): Promise<string> {
  try {
    // stat follows symlinks, so a Secret volume's ..data swap changes the signature.
    const info = await stat(file);
    return `${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}`;
  } catch (error) {
    return `missing:${(error as NodeJS.ErrnoException).code ?? 'error'}`;
  }
}

async function pairSignature(certFile: string, keyFile: string): Promise<string> {
  return `${await fileSignature(certFile)}|${await fileSignature(keyFile)}`;
}

interface PairReloader {
  /** Re-reads the files now; true when a new pair was installed. */
  reload(): Promise<boolean>;
  /** The files' signature as of the last reload attempt (or start). */
  signature(): string;
  /** The certificate the server presents now (the leaf, first in the file). */
  certificate(): Buffer;
}

/** Reloads the pair into the server, one reload at a time, keeping the old pair on any error. */
function createPairReloader(
  server: https.Server,
  options: ReloadingHttpsServerOptions,
  initial: { pair: KeyPair; signature: string },
): PairReloader {
  const { certFile, keyFile, logger } = options;
  let current = initial.pair;
  let signature = initial.signature;
  let reloading: Promise<boolean> | null = null;
  let again = false;

  const reloadOnce = async (): Promise<boolean> => {
    signature = await pairSignature(certFile, keyFile);
    try {
      const pair = await readPair(certFile, keyFile);
      if (pair.cert.equals(current.cert) && pair.key.equals(current.key)) {
        options.onReload?.({ ok: true });
        return false;
      }
      validatePair(pair, certFile, keyFile);
      server.setSecureContext({ ...TLS_SERVER_OPTIONS, cert: pair.cert, key: pair.key });
      current = pair;
      logger?.info({ certFile, keyFile }, 'TLS certificate reloaded');
      options.onReload?.({ ok: true });
      return true;
    } catch (error) {
      const message = (error as Error).message;
      logger?.error({ certFile, keyFile, err: message }, 'TLS reload failed, keeping the previous certificate');
      options.onReload?.({ ok: false, error: message });
      return false;
    }
  };

  // One reload at a time; a change seen during a reload triggers one more afterwards.
  const reload = (): Promise<boolean> => {
    if (reloading) {
      again = true;
      return reloading;
    }
    reloading = reloadOnce().finally(() => {
      reloading = null;
      if (again) {
        again = false;
        void reload();
      }
    });
    return reloading;
  };

  return { reload, signature: () => signature, certificate: () => current.cert };
}

/** Watches the files' directories (debounced) and polls their signature; returns the stopper. */
function watchPairFiles(options: ReloadingHttpsServerOptions, reloader: PairReloader): () => void {
  const { certFile, keyFile, logger } = options;
  let debounceTimer: NodeJS.Timeout | null = null;
  const scheduleReload = () => {
    if (debounceTimer) clearTimeout(debounceTimer);
    debounceTimer = setTimeout(() => {
      debounceTimer = null;
      void reloader.reload();
    }, options.debounceMs ?? 100);
  };

  const watchers: FSWatcher[] = [];
  const watchedNames = new Set([path.basename(certFile), path.basename(keyFile), '..data']);
  const watchedDirs = options.watchFiles === false ? [] : [...new Set([path.dirname(certFile), path.dirname(keyFile)])];
  for (const dir of watchedDirs) {
    try {
      const watcher = watch(dir, { persistent: false }, (_event, name) => {
        if (name === null || watchedNames.has(name.toString())) scheduleReload();
      });
      watcher.on('error', (error) =>
        logger?.warn({ dir, err: error.message }, 'TLS directory watch failed; relying on the periodic check'),
      );
      watchers.push(watcher);
    } catch (error) {
      logger?.warn({ dir, err: (error as Error).message }, 'cannot watch the TLS directory; relying on the periodic check');
    }
  }

  const statTimer = setInterval(() => {
    void (async () => {
      const now = await pairSignature(certFile, keyFile);
      if (now !== reloader.signature()) void reloader.reload();
    })();
  }, options.statIntervalMs ?? 10_000);
  statTimer.unref();

  return () => {
    clearInterval(statTimer);
    if (debounceTimer) clearTimeout(debounceTimer);
    for (const watcher of watchers) watcher.close();
  };
}

export async function createReloadingHttpsServer(options: ReloadingHttpsServerOptions): Promise<ReloadingHttpsServer> {
  const { certFile, keyFile } = options;
  const pair = await loadTlsPair(certFile, keyFile);
  const server = https.createServer(
    { ...options.serverOptions, ...TLS_SERVER_OPTIONS, cert: pair.cert, key: pair.key },
    options.handler,
  );
  const reloader = createPairReloader(server, options, { pair, signature: await pairSignature(certFile, keyFile) });
  const stopWatching = watchPairFiles(options, reloader);
  server.on('close', stopWatching);
  let parsed: { cert: Buffer; notAfter: Date } | null = null;
  const certificateNotAfter = () => {
    const cert = reloader.certificate();
    if (parsed?.cert !== cert) parsed = { cert, notAfter: new Date(new X509Certificate(cert).validTo) };
    return parsed.notAfter;
  };
  return { server, reload: reloader.reload, stopWatching, certificateNotAfter };
}
