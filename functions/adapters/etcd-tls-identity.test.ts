// probeCredentialsProblem remembers triples that made a TLS context (so each evaluation does not
// build a second one); a remembered triple must never vouch for other bytes.
import { beforeAll, describe, expect, it } from 'vitest';
import { credentialsDigest, probeCredentialsProblem } from './etcd-tls-identity.js';
import { type ProbeCredentials } from '../ports/etcd-access.js';
import { selfSigned } from '../../test/harness/in-memory-cert.js';

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

describe('credentialsDigest, remembered by the Buffers it digested', () => {
  it('gives the same digest for the same Buffers and for the same bytes read again', () => {
    const first = credentialsDigest(good);
    expect(credentialsDigest({ ...good })).toBe(first);
    expect(
      credentialsDigest({ ca: Buffer.from(good.ca ?? ''), cert: Buffer.from(good.cert ?? ''), key: Buffer.from(good.key ?? '') }),
    ).toBe(first);
  });

  it.each<{ name: string; credentials: () => ProbeCredentials }>([
    { name: 'the same key Buffer with another certificate', credentials: () => ({ ...good, cert: otherKey }) },
    { name: 'the same key Buffer without a CA', credentials: () => ({ cert: good.cert, key: good.key }) },
    { name: 'the same key Buffer with another CA', credentials: () => ({ ...good, ca: otherKey }) },
  ])('gives another digest for $name', ({ credentials }) => {
    const first = credentialsDigest(good);
    expect(credentialsDigest(credentials())).not.toBe(first);
    expect(credentialsDigest(good)).toBe(first);
  });
});
