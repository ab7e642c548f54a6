// probeCredentialsProblem remembers triples that made a TLS context (so each evaluation does not
// build a second one); a remembered triple must never vouch for other bytes.
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeCredentialsProblem, type ProbeCredentials } from '../functions/adapters/etcd-member-probe.js';
import { generateTestCerts } from './harness/certs.js';

let dir = '';
let good: ProbeCredentials = {};
let otherKey = Buffer.alloc(0);

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-probe-credentials-'));
  const certs = await generateTestCerts(dir);
  const [ca, cert, key, wrongKey] = await Promise.all(
    [certs.caFile, certs.certFile, certs.keyFile, certs.wrongKeyFile].map((file) => readFile(file)),
  );
  good = { ca, cert, key };
  otherKey = wrongKey ?? Buffer.alloc(0);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
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
