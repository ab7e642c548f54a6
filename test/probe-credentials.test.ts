// probeCredentialsProblem remembers triples that made a TLS context (so each evaluation does not
// build a second one); a remembered triple must never vouch for other bytes.
// @peculiar/x509 resolves its services through tsyringe, which needs the metadata polyfill first.
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { cryptoProvider, PemConverter, X509CertificateGenerator } from '@peculiar/x509';
import { beforeAll, describe, expect, it } from 'vitest';
import { probeCredentialsProblem, type ProbeCredentials } from '../functions/adapters/etcd-member-probe.js';

cryptoProvider.set(webcrypto as unknown as Parameters<typeof cryptoProvider.set>[0]);

/** A self-signed ECDSA certificate and its key, made in memory (no openssl process: a unit suite). */
async function selfSigned(name: string): Promise<{ cert: Buffer; key: Buffer }> {
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const cert = await X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: `CN=${name}`,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
    keys,
    signingAlgorithm: algorithm,
  });
  const key = PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY');
  return { cert: Buffer.from(cert.toString('pem')), key: Buffer.from(key) };
}

let good: ProbeCredentials = {};
let otherKey: Buffer = Buffer.alloc(0);

beforeAll(async () => {
  const [mine, other] = await Promise.all([selfSigned('etcd-guard-client'), selfSigned('someone-else')]);
  good = { ca: mine.cert, cert: mine.cert, key: mine.key };
  otherKey = other.key;
});

describe('probeCredentialsProblem after a usable triple was checked', () => {
  it('still finds the usable triple usable, read again into new buffers', () => {
    expect(probeCredentialsProblem(good)).toBeNull();
    expect(
      probeCredentialsProblem({
        ca: Buffer.from(good.ca ?? ''),
        cert: Buffer.from(good.cert ?? ''),
        key: Buffer.from(good.key ?? ''),
      }),
    ).toBeNull();
  });

  const cases: Array<{ name: string; credentials: () => ProbeCredentials }> = [
    { name: 'the same certificate with a key that does not match', credentials: () => ({ ...good, key: otherKey }) },
    { name: 'certificate and key swapped', credentials: () => ({ ca: good.ca, cert: good.key, key: good.cert }) },
    { name: 'a key that is not PEM', credentials: () => ({ ...good, key: Buffer.from('not a key') }) },
  ];
  for (const { name, credentials } of cases) {
    it(`reports ${name} as unusable`, () => {
      expect(probeCredentialsProblem(good)).toBeNull();
      expect(probeCredentialsProblem(credentials())).toEqual(expect.any(String));
    });
  }
});
