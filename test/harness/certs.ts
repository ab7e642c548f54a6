// Test PKI made at test time with the openssl CLI (execFile, no shell): a CA, a server cert for
// 127.0.0.1/localhost, a client cert, and an unrelated "wrong" CA with its own client cert so
// tests can show TLS rejections in both directions.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export interface TestCerts {
  dir: string;
  caFile: string;
  /** The CA's key in the traditional PEM form kubeadm writes (RSA PRIVATE KEY / EC PRIVATE KEY). */
  caKeyFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  certFile: string;
  keyFile: string;
  /** A CA that signed nothing the server knows: trusting it must fail server verification. */
  wrongCaFile: string;
  /** A client cert signed by the wrong CA: the server must refuse it. */
  wrongCertFile: string;
  wrongKeyFile: string;
  /** A client cert from the right CA whose notAfter is a day before it was made: already expired. */
  expiredCertFile: string;
  expiredKeyFile: string;
}

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await execFileAsync('openssl', args, { cwd, timeout: 30_000 });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`openssl ${args[0]} failed: ${(error as Error).message} ${stderr}`.trim());
  }
}

// A random serial per leaf: -CAcreateserial would race on one serial file when leaves are signed in parallel.
function randomSerial(): string {
  return `0x${randomBytes(16).toString('hex')}`;
}

export interface TestCertOptions {
  /** The CA's key: ECDSA P-256 (default) or RSA 2048 as kubeadm makes it. */
  caKeyType?: CaKeyType;
  /** Extra DNS names on the server certificate (e.g. node names, as kubeadm writes them). */
  serverNames?: string[];
}

const KEY_ALGORITHMS = {
  ec: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'],
  'ec-p384': ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384'],
  'ec-p521': ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-521'],
  rsa: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'],
  // Key types a CA Secret may hold that the minter does not sign with.
  'ec-secp256k1': ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:secp256k1'],
  'rsa-pss': ['-algorithm', 'RSA-PSS', '-pkeyopt', 'rsa_keygen_bits:2048'],
  ed25519: ['-algorithm', 'ED25519'],
  ed448: ['-algorithm', 'ED448'],
};

export type CaKeyType = keyof typeof KEY_ALGORITHMS;

/** The types PEM has a traditional form for (RSA PRIVATE KEY / EC PRIVATE KEY); the others stay PKCS #8. */
const TRADITIONAL_KEY_TYPES: ReadonlySet<CaKeyType> = new Set<CaKeyType>(['ec', 'ec-p384', 'ec-p521', 'rsa', 'ec-secp256k1']);

export interface TestCaOptions {
  keyType?: CaKeyType;
  /** An openssl `-subj` string read as UTF-8, `+` joining attributes into one multi-valued RDN; `/CN=<name>` by default. */
  subject?: string;
  /** false: no subject key identifier (so nothing it signs can carry an authority key identifier). */
  subjectKeyIdentifier?: boolean;
}

/** A self-signed CA in `dir`: `<name>.pem` and `<name>-key.pem`. */
export async function makeTestCa(dir: string, name: string, options: TestCaOptions = {}): Promise<{ cert: string; key: string }> {
  const keyType = options.keyType ?? 'ec';
  const pkcs8Key = path.join(dir, `${name}-key.pkcs8.pem`);
  const key = path.join(dir, `${name}-key.pem`);
  const cert = path.join(dir, `${name}.pem`);
  await openssl(['genpkey', ...KEY_ALGORITHMS[keyType], '-out', pkcs8Key], dir);
  await openssl(['pkey', '-in', pkcs8Key, ...(TRADITIONAL_KEY_TYPES.has(keyType) ? ['-traditional'] : []), '-out', key], dir);
  // Ed25519 and Ed448 sign without a separate digest: openssl refuses -sha256 for them.
  const digest = keyType === 'ed25519' || keyType === 'ed448' ? [] : ['-sha256'];
  const noKeyId =
    options.subjectKeyIdentifier === false
      ? ['-addext', 'subjectKeyIdentifier=none', '-addext', 'authorityKeyIdentifier=none']
      : [];
  const subject = options.subject ?? `/CN=${name}`;
  await openssl(
    [
      'req',
      '-x509',
      '-new',
      '-key',
      key,
      ...digest,
      '-days',
      '2',
      '-utf8',
      '-multivalue-rdn',
      '-subj',
      subject,
      ...noKeyId,
      '-out',
      cert,
    ],
    dir,
  );
  return { cert, key };
}

async function makeLeaf(
  dir: string,
  name: string,
  ca: { cert: string; key: string },
  extensions: string,
  days = 2,
  subject = `/CN=${name}`,
): Promise<{ cert: string; key: string }> {
  const key = path.join(dir, `${name}-key.pem`);
  const csr = path.join(dir, `${name}.csr`);
  const cert = path.join(dir, `${name}.pem`);
  const extFile = path.join(dir, `${name}.ext`);
  await writeFile(extFile, extensions);
  await openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key], dir);
  await openssl(['req', '-new', '-key', key, '-subj', subject, '-out', csr], dir);
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.cert,
      '-CAkey',
      ca.key,
      '-set_serial',
      randomSerial(),
      '-days',
      // openssl x509 takes a negative count: notAfter lands that many days before notBefore (now).
      String(days),
      '-sha256',
      '-extfile',
      extFile,
      '-out',
      cert,
    ],
    dir,
  );
  return { cert, key };
}

/**
 * A client certificate of `ca` in `dir` with this openssl `-subj` (kube-apiserver reads CN as the
 * user name and each O as a group): `<name>.pem` and `<name>-key.pem`.
 */
export function makeClientCert(
  dir: string,
  name: string,
  ca: { cert: string; key: string },
  subject: string,
): Promise<{ cert: string; key: string }> {
  const extensions = 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n';
  return makeLeaf(dir, name, ca, extensions, 2, subject);
}

export async function generateTestCerts(dir: string, options: TestCertOptions = {}): Promise<TestCerts> {
  const [ca, wrongCa] = await Promise.all([makeTestCa(dir, 'ca', { keyType: options.caKeyType }), makeTestCa(dir, 'wrong-ca')]);
  const extraNames = (options.serverNames ?? []).map((name) => `,DNS:${name}`).join('');
  const clientExtensions = 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n';
  const [server, client, wrongClient, expiredClient] = await Promise.all([
    makeLeaf(
      dir,
      'server',
      ca,
      `basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost${extraNames}\n`,
    ),
    makeLeaf(dir, 'client', ca, clientExtensions),
    makeLeaf(dir, 'wrong-client', wrongCa, clientExtensions),
    makeLeaf(dir, 'expired-client', ca, clientExtensions, -1),
  ]);
  return {
    dir,
    caFile: ca.cert,
    caKeyFile: ca.key,
    serverCertFile: server.cert,
    serverKeyFile: server.key,
    certFile: client.cert,
    keyFile: client.key,
    wrongCaFile: wrongCa.cert,
    wrongCertFile: wrongClient.cert,
    wrongKeyFile: wrongClient.key,
    expiredCertFile: expiredClient.cert,
    expiredKeyFile: expiredClient.key,
  };
}
