// How an evaluation reaches one etcd cluster: which endpoints to ask for the member list, the
// credentials to dial them with, how to reach each listed member and what to call an endpoint in
// an evaluation. A static target dials its configured URLs with TLS files; a discovered one may
// dial loopback listeners that relay elsewhere (Cluster API: pod port-forward) with credentials
// that only exist in memory.
import { readFile } from 'node:fs';
import { ConfigError, type TargetConfig } from '../domain/config.js';
import { probeCredentialsProblem } from '../adapters/etcd-tls-identity.js';
import { BriefReuse } from './brief-reuse.js';
import { directEtcdAccess, type EtcdAccess, type ProbeCredentials } from '../ports/etcd-access.js';

/** How long a long-running process uses the bytes it read from a TLS file before reading it again. */
export const TLS_FILE_REREAD_MS = 5_000;

/**
 * TLS files read again only once TLS_FILE_REREAD_MS has passed since the last read, for a process
 * that evaluates the same targets many times a second (the webhook with kept connections): each
 * read is several native file calls, each a thread-pool round trip, and was a large share of a
 * warm live evaluation's CPU. A rotated file still takes effect: a Secret volume sees new bytes
 * only when the kubelet syncs it, much later than this, and the first read after the window picks
 * them up (their digest keys a new channel). A failed read is not kept: the next evaluation tries
 * again.
 */
export class TlsFileReuse extends BriefReuse<Buffer> {
  constructor(rereadAfterMs = TLS_FILE_REREAD_MS, nowMs: () => number = () => performance.now()) {
    super(rereadAfterMs, nowMs);
  }

  read(file: string, load: (file: string) => Promise<Buffer>): Promise<Buffer> {
    return this.get(file, () => load(file));
  }
}

function readBytes(file: string): Promise<Buffer> {
  // fs.readFile rather than fs/promises': one native read of the whole file instead of a
  // promise per chunk, less CPU for the three small files every evaluation reads (BENCHMARKS.md).
  return new Promise<Buffer>((resolve, reject) =>
    readFile(file, (error, bytes) => (error === null ? resolve(bytes) : reject(error))),
  );
}

async function readTlsFile(
  targetName: string,
  field: string,
  file: string | undefined,
  reuse: TlsFileReuse | undefined,
): Promise<Buffer | undefined> {
  if (file === undefined) return undefined;
  try {
    return await (reuse === undefined ? readBytes(file) : reuse.read(file, readBytes));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError(`target ${targetName}`, [`${field}: cannot read ${JSON.stringify(file)} (${code})`]);
  }
}

/** Reads the target's TLS files (through `reuse` when given); a missing or unreadable one is a ConfigError naming the field. */
export async function readTargetCredentials(
  target: Pick<TargetConfig, 'name' | 'tls'>,
  reuse?: TlsFileReuse,
): Promise<ProbeCredentials> {
  const [ca, cert, key] = await Promise.all([
    readTlsFile(target.name, 'tls.caFile', target.tls?.caFile, reuse),
    readTlsFile(target.name, 'tls.certFile', target.tls?.certFile, reuse),
    readTlsFile(target.name, 'tls.keyFile', target.tls?.keyFile, reuse),
  ]);
  const credentials: ProbeCredentials = {};
  if (ca) credentials.ca = ca;
  if (cert) credentials.cert = cert;
  if (key) credentials.key = key;
  const problem = probeCredentialsProblem(credentials);
  if (problem !== null) throw new ConfigError(`target ${target.name}`, [`tls: ${problem}`]);
  return credentials;
}

/** A static target's access: its configured endpoints and TLS files (ConfigError when unreadable). */
export async function openStaticEtcdAccess(
  target: Pick<TargetConfig, 'name' | 'endpoints' | 'tls'>,
  reuse?: TlsFileReuse,
): Promise<EtcdAccess> {
  return directEtcdAccess(target.endpoints, await readTargetCredentials(target, reuse));
}
