// The webhook reads a static target's TLS files again only after TLS_FILE_REREAD_MS (issue 27:
// a live evaluation per guarded request must not cost three file reads each time). On real
// files, with a clock the test moves: within the window the bytes read first are used, after it
// a replaced file is read anew, and a failed read is never kept.
import { copyFile, mkdir, mkdtemp, readFile, rm, unlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../domain/config.js';
import { readTargetCredentials, TLS_FILE_REREAD_MS, TlsFileReuse } from './etcd-access.js';
import { generateTestCerts, type TestCerts } from '../../test/harness/certs.js';

let dir: string;
let certsA: TestCerts;
let certsB: TestCerts;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-tls-reuse-'));
  await Promise.all([mkdir(path.join(dir, 'a')), mkdir(path.join(dir, 'b'))]);
  [certsA, certsB] = await Promise.all([generateTestCerts(path.join(dir, 'a')), generateTestCerts(path.join(dir, 'b'))]);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('TLS files of a static target, read again only after the reuse window', () => {
  const cases = [
    { name: 'within the window the first bytes are used', advanceMs: TLS_FILE_REREAD_MS - 1, sees: 'A' },
    { name: 'once the window has passed the replaced file is read', advanceMs: TLS_FILE_REREAD_MS, sees: 'B' },
  ] as const;
  for (const { name, advanceMs, sees } of cases) {
    it(name, async () => {
      const caFile = path.join(dir, `${sees}-ca.pem`);
      await copyFile(certsA.caFile, caFile);
      let now = 1_000;
      const reuse = new TlsFileReuse(TLS_FILE_REREAD_MS, () => now);
      const target = { name: 'reuse', tls: { caFile } };
      const first = await readTargetCredentials(target, reuse);
      await copyFile(certsB.caFile, caFile);
      now += advanceMs;
      const second = await readTargetCredentials(target, reuse);
      const expected = await readFile(sees === 'A' ? certsA.caFile : certsB.caFile);
      expect(second.ca?.equals(expected)).toBe(true);
      expect(first.ca?.equals(second.ca ?? Buffer.alloc(0))).toBe(sees === 'A');
    });
  }

  it('a failed read is not kept: the file that appears afterwards is read at once', async () => {
    const caFile = path.join(dir, 'late-ca.pem');
    const reuse = new TlsFileReuse(TLS_FILE_REREAD_MS, () => 1_000);
    const target = { name: 'late', tls: { caFile } };
    await expect(readTargetCredentials(target, reuse)).rejects.toThrow(ConfigError);
    await expect(readTargetCredentials(target, reuse)).rejects.toThrow(/tls\.caFile: cannot read .*late-ca\.pem.*ENOENT/);
    await copyFile(certsA.caFile, caFile);
    expect((await readTargetCredentials(target, reuse)).ca?.length).toBeGreaterThan(0);
    await unlink(caFile);
  });

  it('without a reuse every read goes to the file', async () => {
    const caFile = path.join(dir, 'plain-ca.pem');
    await copyFile(certsA.caFile, caFile);
    const target = { name: 'plain', tls: { caFile } };
    await readTargetCredentials(target);
    await copyFile(certsB.caFile, caFile);
    const read = await readTargetCredentials(target);
    expect(read.ca?.equals(await readFile(certsB.caFile))).toBe(true);
  });
});
