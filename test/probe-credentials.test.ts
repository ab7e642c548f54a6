// probeCredentialsProblem remembers triples that made a TLS context (so each evaluation does not
// build a second one); a remembered triple must never vouch for other bytes.
import { generateKeyPairSync } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { probeCredentialsProblem } from '../functions/adapters/etcd-tls-identity.js';
import { type ProbeCredentials } from '../functions/ports/etcd-access.js';
import { certificatePem, commonNameOnly, signCertificate } from '../functions/adapters/x509-mint.js';

/** A self-signed ECDSA certificate and its key, made in memory (no openssl process: a unit suite). */
function selfSigned(name: string): { cert: Buffer; key: Buffer } {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const cert = signCertificate({
    serial: Buffer.from([1]),
    issuer: commonNameOnly(name),
    subject: commonNameOnly(name),
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
    publicKey,
    extensions: [],
    signingKey: privateKey,
  });
  return { cert: Buffer.from(certificatePem(cert)), key: Buffer.from(privateKey.export({ type: 'pkcs8', format: 'pem' })) };
}

let good: ProbeCredentials = {};
let otherKey: Buffer = Buffer.alloc(0);

beforeAll(() => {
  const [mine, other] = [selfSigned('etcd-guard-client'), selfSigned('someone-else')];
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
