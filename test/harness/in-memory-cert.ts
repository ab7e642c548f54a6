// A self-signed ECDSA certificate and its key, made in memory (no openssl process): for unit
// suites that need PEM a TLS context accepts, not a PKI a server serves.
import { generateKeyPairSync } from 'node:crypto';
import { certificatePem, commonNameOnly, signCertificate } from '../../functions/adapters/x509-mint.js';

export function selfSigned(name: string): { cert: Buffer; key: Buffer } {
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
