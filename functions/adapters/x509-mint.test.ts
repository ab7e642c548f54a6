// The etcd client certificate the CAPI minter writes with its own DER encoder: checked by Node's
// X509Certificate, by `openssl verify -purpose sslclient`, against the field list of certificates
// the previous minter (@peculiar/x509) wrote, and by real etcd members trusting the CA.
//
// test/fixtures/x509-mint/peculiar-minted-*.pem were minted once by the @peculiar/x509 code
// (functions/adapters/capi-credentials.ts at 8022761) with openssl-made CAs of each key type
// (CN rsa-ca, ec-ca, p384-ca, p521-ca). Serial, times, keys and key ids differ from ours by nature;
// every other field must be the same.
import { execFile } from 'node:child_process';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientCertificateMinter, parseEtcdCa } from './capi-credentials.js';
import {
  derElement,
  derLength,
  derObjectIdentifier,
  derTime,
  derUnsignedInteger,
  issuerOf,
  readDerElement,
} from './x509-mint.js';
import { EtcdAccessError } from '../ports/etcd-access.js';
import { makeTestCa, type CaKeyType } from '../../test/harness/certs.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';

const execFileAsync = promisify(execFile);
const hex = (buffer: Buffer) => buffer.toString('hex');

describe('DER primitives', () => {
  it.each([
    { length: 0, encoded: '00' },
    { length: 127, encoded: '7f' },
    { length: 128, encoded: '8180' },
    { length: 255, encoded: '81ff' },
    { length: 256, encoded: '820100' },
    { length: 65_535, encoded: '82ffff' },
    { length: 65_536, encoded: '83010000' },
    { length: 0xffffff, encoded: '83ffffff' },
  ])('writes length $length in its minimal form ($encoded)', ({ length, encoded }) => {
    expect(hex(derLength(length))).toBe(encoded);
    const element = derElement(0x04, Buffer.alloc(length));
    expect(hex(element.subarray(1, 1 + encoded.length / 2))).toBe(encoded);
    expect(readDerElement(element, 0, element.length)).toMatchObject({
      tag: 0x04,
      contentStart: 1 + encoded.length / 2,
      end: element.length,
    });
  });

  it.each([-1, 1.5, Number.NaN])('refuses length %s', (length) => {
    expect(() => derLength(length)).toThrow(RangeError);
  });

  it.each([
    { magnitude: '7f', encoded: '02017f' },
    { magnitude: '80', encoded: '02020080' },
    { magnitude: 'ff01', encoded: '020300ff01' },
    { magnitude: '000012', encoded: '020112' },
    { magnitude: '0080', encoded: '02020080' },
    { magnitude: '0000', encoded: '020100' },
    { magnitude: '', encoded: '020100' },
  ])('writes the non-negative INTEGER $magnitude as $encoded', ({ magnitude, encoded }) => {
    expect(hex(derUnsignedInteger(Buffer.from(magnitude, 'hex')))).toBe(encoded);
  });

  it.each([
    { oid: '1.2.840.113549.1.1.11', encoded: '06092a864886f70d01010b' },
    { oid: '1.2.840.10045.4.3.3', encoded: '06082a8648ce3d040303' },
    { oid: '2.5.29.37', encoded: '0603551d25' },
    { oid: '1.3.6.1.5.5.7.3.2', encoded: '06082b06010505070302' },
  ])('writes OBJECT IDENTIFIER $oid', ({ oid, encoded }) => {
    expect(hex(derObjectIdentifier(oid))).toBe(encoded);
  });

  it.each(['3.1', '1.40', '1', '1.2.x', '1..2'])('refuses the object identifier %j', (oid) => {
    expect(() => derObjectIdentifier(oid)).toThrow(RangeError);
  });

  it.each([
    { at: '1950-01-01T00:00:00.000Z', tag: 0x17, text: '500101000000Z' },
    { at: '2049-12-31T23:59:59.999Z', tag: 0x17, text: '491231235959Z' },
    { at: '2050-01-01T00:00:00.000Z', tag: 0x18, text: '20500101000000Z' },
    { at: '2126-07-04T12:30:05.000Z', tag: 0x18, text: '21260704123005Z' },
  ])('writes $at as $text (UTCTime through 2049, GeneralizedTime from 2050)', ({ at, tag, text }) => {
    const encoded = derTime(new Date(at));
    expect(encoded[0]).toBe(tag);
    expect(encoded.subarray(2).toString('latin1')).toBe(text);
  });

  it.each(['1949-12-31T23:59:59Z', 'not a date'])('refuses the time %j', (at) => {
    expect(() => derTime(new Date(at))).toThrow(RangeError);
  });

  it.each([
    { name: 'an indefinite length', der: '3080' },
    { name: 'a long form for a short length', der: '04810500000000' },
    { name: 'a long form with a leading zero', der: '0482008000' },
    { name: 'content running past the end', der: '040500' },
    { name: 'a truncated header', der: '04' },
    { name: 'a length of more than four octets', der: '0485010000000000' },
  ])('reads no element with $name', ({ der }) => {
    const bytes = Buffer.from(der, 'hex');
    expect(() => readDerElement(bytes, 0, bytes.length)).toThrow(/DER/);
  });
});

/** The fields of a certificate's tbsCertificate, read with the module's strict reader. */
function tbsFields(der: Buffer): Array<{ tag: number; bytes: Buffer }> {
  const certificate = readDerElement(der, 0, der.length);
  const tbs = readDerElement(der, certificate.contentStart, certificate.end);
  const fields: Array<{ tag: number; bytes: Buffer }> = [];
  for (let offset = tbs.contentStart; offset < tbs.end;) {
    const field = readDerElement(der, offset, tbs.end);
    fields.push({ tag: field.tag, bytes: der.subarray(field.start, field.end) });
    offset = field.end;
  }
  return fields;
}

const FIELD = { version: 0, serial: 1, signature: 2, issuer: 3, validity: 4, subject: 5, spki: 6, extensions: 7 } as const;

let dir = '';
const secretOf = async (ca: { cert: string; key: string }) => ({
  'tls.crt': (await readFile(ca.cert)).toString('base64'),
  'tls.key': (await readFile(ca.key)).toString('base64'),
});

async function openssl(args: string[]): Promise<string> {
  const { stdout } = await execFileAsync('openssl', args, { cwd: dir, timeout: 30_000 });
  return stdout;
}

/** `openssl x509 -text` without what differs by nature: serial, times, issuer (checked byte for byte elsewhere), key and signature bytes. */
async function fieldList(certFile: string): Promise<string[]> {
  const text = await openssl(['x509', '-in', certFile, '-noout', '-text']);
  return text
    .split('\n')
    .filter((line) => !/^\s*([0-9A-Fa-f]{2}:)*[0-9A-Fa-f]{2}:?\s*$/.test(line) && line.trim() !== '')
    .map((line) =>
      line
        .replace(/(Serial Number:).*/, '$1')
        .replace(/(Not (Before|After) ?:).*/, '$1 <time>')
        .replace(/(Issuer:).*/, '$1 <the CA subject>'),
    );
}

async function mintFor(ca: { cert: string; key: string }, minter = new ClientCertificateMinter()) {
  const parsed = parseEtcdCa(await secretOf(ca), 'ns/c-etcd');
  const minted = await minter.certificateFor({ namespace: 'ns', clusterName: path.basename(ca.cert) }, parsed);
  const certFile = path.join(dir, `minted-${path.basename(ca.cert)}`);
  await writeFile(certFile, minted.cert);
  return { ...minted, certFile, x509: new X509Certificate(minted.cert), caX509: new X509Certificate(await readFile(ca.cert)) };
}

const KEY_TYPES: Array<{ keyType: CaKeyType; fixture: string; curve: string | undefined }> = [
  { keyType: 'rsa', fixture: 'rsa', curve: undefined },
  { keyType: 'ec', fixture: 'ec-p256', curve: 'prime256v1' },
  { keyType: 'ec-p384', fixture: 'ec-p384', curve: 'secp384r1' },
  { keyType: 'ec-p521', fixture: 'ec-p521', curve: 'secp521r1' },
];
const cas = new Map<string, { cert: string; key: string }>();
const caOf = (name: string) => {
  const ca = cas.get(name);
  if (ca === undefined) throw new Error(`no test CA ${name}`);
  return ca;
};
const NON_ASCII_SUBJECT = '/C=DE/O=Zürich Grüße GmbH/OU=etcd+CN=日本 CA';
const UNSUPPORTED: Array<{ keyType: CaKeyType; named: string }> = [
  { keyType: 'rsa-pss', named: 'rsa-pss' },
  { keyType: 'ed25519', named: 'ed25519' },
  { keyType: 'ed448', named: 'ed448' },
  { keyType: 'ec-secp256k1', named: 'ec (curve secp256k1)' },
];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'x509-mint-'));
  const made = await Promise.all([
    ...KEY_TYPES.map(async ({ keyType }) => [keyType, await makeTestCa(dir, `ca-${keyType}`, { keyType })] as const),
    ...UNSUPPORTED.map(async ({ keyType }) => [keyType, await makeTestCa(dir, `ca-${keyType}`, { keyType })] as const),
    (async () => ['names', await makeTestCa(dir, 'ca-names', { keyType: 'ec', subject: NON_ASCII_SUBJECT })] as const)(),
    (async () =>
      ['no-key-id', await makeTestCa(dir, 'ca-no-key-id', { keyType: 'rsa', subjectKeyIdentifier: false })] as const)(),
  ]);
  for (const [name, ca] of made) cas.set(name, ca);
}, 120_000);

afterAll(async () => {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

describe('a client certificate minted with each supported CA key type', () => {
  it.each(KEY_TYPES)('$keyType: is issued by the CA, verifies, and is a client certificate', async ({ keyType, curve }) => {
    const ca = caOf(keyType);
    const minted = await mintFor(ca);
    expect(minted.x509.checkIssued(minted.caX509)).toBe(true);
    expect(minted.x509.verify(minted.caX509.publicKey)).toBe(true);
    expect(minted.x509.checkPrivateKey(createPrivateKey(minted.key))).toBe(true);
    expect(minted.x509.subject).toBe('CN=etcd-guard');
    expect(minted.x509.issuer).toBe(minted.caX509.subject);
    expect(minted.x509.ca).toBe(false);
    expect(minted.x509.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
    expect(minted.x509.publicKey.asymmetricKeyType).toBe(curve === undefined ? 'rsa' : 'ec');
    expect(minted.x509.publicKey.asymmetricKeyDetails?.namedCurve).toBe(curve);
    expect(Date.parse(minted.x509.validTo) - Date.parse(minted.x509.validFrom)).toBe(65 * 60 * 1000);
    expect(await openssl(['verify', '-CAfile', ca.cert, '-purpose', 'sslclient', minted.certFile])).toMatch(/: OK\n$/);
  });

  it.each(KEY_TYPES)(
    '$keyType: has the same fields and extensions as the @peculiar/x509 minter wrote',
    async ({ keyType, fixture }) => {
      const minted = await mintFor(caOf(keyType));
      const before = await fieldList(
        path.join(import.meta.dirname, '../../test/fixtures', 'x509-mint', `peculiar-minted-${fixture}.pem`),
      );
      const after = await fieldList(minted.certFile);
      expect(after).toEqual(before);
      expect(after).toEqual(expect.arrayContaining([expect.stringMatching(/X509v3 Authority Key Identifier/)]));
    },
  );

  it.each(KEY_TYPES)('$keyType: the authority key identifier is the CA subject key identifier', async ({ keyType }) => {
    const ca = caOf(keyType);
    const minted = await mintFor(ca);
    const keyIdOf = async (file: string, extension: string) => {
      const text = await openssl(['x509', '-in', file, '-noout', '-ext', extension]);
      return text
        .split('\n')[1]
        ?.trim()
        .replace(/^keyid:/, '');
    };
    const caKeyId = await keyIdOf(ca.cert, 'subjectKeyIdentifier');
    expect(caKeyId).toMatch(/^([0-9A-F]{2}:)+[0-9A-F]{2}$/);
    expect(await keyIdOf(minted.certFile, 'authorityKeyIdentifier')).toBe(caKeyId);
  });
});

describe('names and identifiers copied from the CA', () => {
  it('copies a CA subject with UTF8String values and a multi-valued RDN byte for byte as the issuer', async () => {
    const ca = caOf('names');
    const minted = await mintFor(ca);
    const caDer = minted.caX509.raw;
    const caSubject = issuerOf(caDer).subject;
    expect(caSubject.includes(Buffer.from('Zürich Grüße GmbH', 'utf8'))).toBe(true);
    expect(hex(tbsFields(minted.x509.raw)[FIELD.issuer]?.bytes ?? Buffer.alloc(0))).toBe(hex(caSubject));
    expect(hex(caSubject)).toBe(hex(tbsFields(caDer)[FIELD.subject]?.bytes ?? Buffer.alloc(1)));
    expect(minted.x509.checkIssued(minted.caX509)).toBe(true);
    expect(await openssl(['verify', '-CAfile', ca.cert, '-purpose', 'sslclient', minted.certFile])).toMatch(/: OK\n$/);
  });

  it('leaves out the authority key identifier when the CA has no subject key identifier', async () => {
    const ca = caOf('no-key-id');
    const minted = await mintFor(ca);
    expect(issuerOf(minted.caX509.raw).subjectKeyId).toBeUndefined();
    const fields = await fieldList(minted.certFile);
    expect(fields.join('\n')).not.toMatch(/Key Identifier/);
    expect(fields.join('\n')).toMatch(/Extended Key Usage/);
    expect(await openssl(['verify', '-CAfile', ca.cert, '-purpose', 'sslclient', minted.certFile])).toMatch(/: OK\n$/);
  });

  it('writes a positive serial of at most 16 octets in its minimal form, 50 mints', async () => {
    const ca = parseEtcdCa(await secretOf(caOf('ec')), 'ns/c-etcd');
    const minter = new ClientCertificateMinter();
    for (let run = 0; run < 50; run += 1) {
      const minted = await minter.certificateFor({ namespace: 'ns', clusterName: `serial-${run}` }, ca);
      const serial = tbsFields(new X509Certificate(minted.cert).raw)[FIELD.serial]?.bytes ?? Buffer.alloc(0);
      const content = serial.subarray(2);
      expect(serial[0]).toBe(0x02);
      expect(content.length).toBeLessThanOrEqual(16);
      expect((content[0] ?? 0x80) & 0x80).toBe(0);
      if (content.length > 1) expect(content[0] !== 0 || (content[1] ?? 0) >= 0x80).toBe(true);
    }
  });
});

describe('validity around 2050', () => {
  it.each([
    { now: '2049-06-01T12:00:00Z', tags: [0x17, 0x17], from: 'Jun  1 11:55:00 2049 GMT', to: 'Jun  1 13:00:00 2049 GMT' },
    { now: '2049-12-31T23:30:00Z', tags: [0x17, 0x18], from: 'Dec 31 23:25:00 2049 GMT', to: 'Jan  1 00:30:00 2050 GMT' },
    { now: '2050-01-01T00:02:00Z', tags: [0x17, 0x18], from: 'Dec 31 23:57:00 2049 GMT', to: 'Jan  1 01:02:00 2050 GMT' },
    { now: '2050-01-01T00:06:00.750Z', tags: [0x18, 0x18], from: 'Jan  1 00:01:00 2050 GMT', to: 'Jan  1 01:06:00 2050 GMT' },
  ])('minted at $now: UTCTime before 2050, GeneralizedTime from 2050', async ({ now, tags, from, to }) => {
    const minted = await mintFor(caOf('ec'), new ClientCertificateMinter(() => Date.parse(now)));
    const validity = tbsFields(minted.x509.raw)[FIELD.validity]?.bytes ?? Buffer.alloc(0);
    const notBefore = readDerElement(validity, 2, validity.length);
    const notAfter = readDerElement(validity, notBefore.end, validity.length);
    expect([notBefore.tag, notAfter.tag]).toEqual(tags);
    expect([minted.x509.validFrom, minted.x509.validTo]).toEqual([from, to]);
    expect(minted.x509.verify(minted.caX509.publicKey)).toBe(true);
    const text = await openssl(['x509', '-in', minted.certFile, '-noout', '-dates']);
    expect(text).toBe(`notBefore=${from}\nnotAfter=${to}\n`);
  });
});

describe('CA Secrets the minter refuses', () => {
  it('refuses a CA key that does not belong to the CA certificate, with the same error as before', async () => {
    const secret = { 'tls.crt': (await secretOf(caOf('rsa')))['tls.crt'], 'tls.key': (await secretOf(caOf('ec')))['tls.key'] };
    expect(() => parseEtcdCa(secret, 'ns/c-etcd')).toThrow(
      new EtcdAccessError('Secret ns/c-etcd: "tls.key" does not belong to the certificate in "tls.crt"'),
    );
  });

  it.each(UNSUPPORTED)('refuses a $keyType CA key, naming the type', async ({ keyType, named }) => {
    const secret = await secretOf(caOf(keyType));
    let refused: unknown;
    try {
      parseEtcdCa(secret, 'ns/c-etcd');
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(EtcdAccessError);
    expect((refused as Error).message).toBe(
      `Secret ns/c-etcd: CA key type ${named} is not supported (RSA, or ECDSA on P-256, P-384 or P-521)`,
    );
  });
});

/** GET /health on a member with the given client credentials: etcd's client port demands a certificate its CA issued. */
function health(member: string, ca: Buffer, cert: Buffer, key: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(`${member}/health`, { ca, cert, key, signal: AbortSignal.timeout(10_000) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve(`${res.statusCode} ${Buffer.concat(chunks).toString('utf8')}`));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('real etcd members trusting the CA', () => {
  const clusters = new Map<string, EtcdTestCluster>();
  beforeAll(async () => {
    const started = await Promise.all(
      (['ec-p384', 'ec-p521'] as const).map(
        async (keyType) => [keyType, await startEtcdCluster({ size: 1, caKeyType: keyType })] as const,
      ),
    );
    for (const [keyType, cluster] of started) clusters.set(keyType, cluster);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([...clusters.values()].map((cluster) => cluster.destroy()));
  });

  it.each([
    { cluster: 'ec-p384', signer: 'ec-p384', accepted: true },
    { cluster: 'ec-p521', signer: 'ec-p521', accepted: true },
    { cluster: 'ec-p384', signer: 'ec-p521', accepted: false },
  ])(
    'a $cluster etcd given a client certificate minted by its $signer CA: accepted $accepted',
    async ({ cluster, signer, accepted }) => {
      const etcd = clusters.get(cluster);
      const signerEtcd = clusters.get(signer);
      if (etcd === undefined || signerEtcd === undefined) throw new Error('cluster not started');
      const minted = await mintFor({ cert: signerEtcd.tls.caFile, key: signerEtcd.tls.caKeyFile });
      const answer = health(etcd.endpoints[0] ?? '', await readFile(etcd.tls.caFile), minted.cert, minted.key);
      if (accepted) await expect(answer).resolves.toMatch(/^200 .*"health":"true"/);
      else await expect(answer).rejects.toThrow();
    },
  );
});
