// grpc-secure-credentials-shim.ts puts our identity check into grpc-js's secure channel
// credentials and reuses their OpenSSL context. The shapes it relies on are asserted here on the
// installed grpc-js, so a release that moves one fails this suite instead of quietly falling back
// to Node's own identity check (and ignoring chain-only) or a new context per session.
import type { PeerCertificate } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { credentialsAround, rememberSecureContext, withIdentityCheck } from './grpc-secure-credentials-shim.js';
import { etcd3TlsCredentials, grpcTarget } from '../../test/harness/etcd3-credentials.js';

type Check = (hostname: string, cert: PeerCertificate) => Error | undefined;
interface SecureCredentialsShape {
  verifyOptions: { checkServerIdentity?: Check };
  secureContext: unknown;
  constructor: { createFromSecureContext?: unknown };
  _createSecureConnector: (...args: unknown[]) => { connectionOptions: { checkServerIdentity?: unknown }; destroy(): void };
}

const closers: Array<() => void> = [];
function credentials(): SecureCredentialsShape {
  const made = etcd3TlsCredentials();
  closers.push(made.close);
  return made.credentials as SecureCredentialsShape;
}
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

const OTHER_NAMES = { subjectaltname: 'DNS:etcd-9.example', subject: { CN: 'etcd-9' } } as unknown as PeerCertificate;

describe("grpc-js's secure credentials as the shim expects them", () => {
  it('hold verify options without an identity check, the OpenSSL context, and createFromSecureContext', () => {
    const made = credentials();
    expect(made.verifyOptions).toEqual(expect.any(Object));
    expect(made.verifyOptions.checkServerIdentity).toBeUndefined();
    expect(made.secureContext).toEqual(expect.any(Object));
    expect(typeof made.constructor.createFromSecureContext).toBe('function');
  });

  it("pass the verify options' identity check on to each connection", () => {
    const made = credentials();
    withIdentityCheck(made, 'full');
    const connector = made._createSecureConnector(grpcTarget('127.0.0.1:2379'), {}, null);
    expect(connector.connectionOptions.checkServerIdentity).toBe(made.verifyOptions.checkServerIdentity);
    connector.destroy();
  });
});

describe('withIdentityCheck', () => {
  it('installs our check, worded as TLS identity naming both sides', () => {
    const made = credentials();
    withIdentityCheck(made, 'full');
    expect(made.verifyOptions.checkServerIdentity?.('10.0.0.1', OTHER_NAMES)?.message).toBe(
      'TLS identity: the server certificate does not name 10.0.0.1; it names DNS:etcd-9.example',
    );
  });

  it('with chain-only lets any name pass', () => {
    const made = credentials();
    withIdentityCheck(made, 'chain-only');
    expect(made.verifyOptions.checkServerIdentity?.('10.0.0.1', OTHER_NAMES)).toBeUndefined();
  });
});

describe('rememberSecureContext and credentialsAround', () => {
  it('make new credentials around the same OpenSSL context', () => {
    const made = credentials();
    rememberSecureContext('shim-test-digest', made);
    const again = credentialsAround('shim-test-digest') as SecureCredentialsShape | undefined;
    expect(again).not.toBe(made);
    expect(again?.secureContext).toBe(made.secureContext);
    expect(again?.verifyOptions).toEqual(expect.any(Object));
  });

  it('have nothing for a digest never remembered', () => {
    expect(credentialsAround('shim-test-never')).toBeUndefined();
  });
});
