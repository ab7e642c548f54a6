import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileStore } from './file-store.js';
import { createStore } from './store-factory.js';
import { parseEvaluationJson } from '../domain/evaluation-document.js';
import { makeEvaluation, makeEvaluationAt, makeMembers } from '../../test/harness/evaluation-fixture.js';
import { captureStoreError } from '../../test/harness/store-error.js';

let root: string;
let dir: string;

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'file-store-'));
  // A directory that does not exist yet: the store must create it.
  dir = path.join(root, 'nested', 'cache');
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('FileStore', () => {
  it('returns null for a target never written', async () => {
    expect(await new FileStore(dir).read('prod')).toBeNull();
  });

  it('replaces a Healthy evaluation stamped in the future with a present one (a skewed writer cannot shadow the truth)', async () => {
    const store = new FileStore(dir);
    const future = makeEvaluation({ target: 'prod', evaluatedAt: new Date(Date.now() + 100_000).toISOString() });
    expect(await store.write(future)).toEqual({ written: true });
    const present = makeEvaluation({ target: 'prod', verdict: 'Unhealthy', evaluatedAt: new Date().toISOString() });
    expect(await store.write(present)).toEqual({ written: true });
    expect((await store.read('prod'))?.verdict).toBe('Unhealthy');
    const skewedAgain = makeEvaluation({ target: 'prod', evaluatedAt: new Date(Date.now() + 100_000).toISOString() });
    expect(await store.write(skewedAgain)).toEqual({ written: false, keptEvaluatedAt: present.evaluatedAt });
  });

  it('creates the directory and round-trips DIR/<target>.json', async () => {
    const store = new FileStore(dir);
    const evaluation = makeEvaluationAt(10, { target: 'prod' });
    expect(await store.write(evaluation)).toEqual({ written: true });
    const file = path.join(dir, 'prod.json');
    expect(parseEvaluationJson(readFileSync(file, 'utf8'), file)).toEqual(evaluation);
    expect(await store.read('prod')).toEqual(evaluation);
    expect(readdirSync(dir)).toEqual(['prod.json']); // no temp files left behind
    expect(store.describe()).toBe(`file:${dir}`);
  });

  it.each([
    {
      name: 'older',
      first: 20,
      second: 10,
      expected: { written: false, keptEvaluatedAt: makeEvaluationAt(20).evaluatedAt },
      winner: 20,
    },
    {
      name: 'equally old',
      first: 20,
      second: 20,
      expected: { written: false, keptEvaluatedAt: makeEvaluationAt(20).evaluatedAt },
      winner: 20,
    },
    { name: 'newer', first: 20, second: 30, expected: { written: true }, winner: 30 },
  ])('a second write that is $name gives $expected.written', async ({ first, second, expected, winner }) => {
    const store = new FileStore(dir);
    await store.write(makeEvaluationAt(first, { durationMs: 1 }));
    expect(await store.write(makeEvaluationAt(second, { durationMs: 2 }))).toEqual(expected);
    expect((await store.read('prod'))?.evaluatedAt).toBe(makeEvaluationAt(winner).evaluatedAt);
  });

  it('concurrent writes in random order leave the newest, even from two store instances in one process', async () => {
    const a = new FileStore(dir);
    const b = new FileStore(dir);
    const order = Array.from({ length: 40 }, (_unused, index) => index).sort(() => Math.random() - 0.5);
    const outcomes = await Promise.all(order.map((second, index) => (index % 2 === 0 ? a : b).write(makeEvaluationAt(second))));
    expect(outcomes.filter((outcome) => outcome.written).length).toBeGreaterThan(0);
    expect((await new FileStore(dir).read('prod'))?.evaluatedAt).toBe(makeEvaluationAt(39).evaluatedAt);
  });

  it('a reader racing 100 writes never sees a torn document', async () => {
    const store = new FileStore(dir);
    await store.write(makeEvaluationAt(0, { members: makeMembers(5) }));
    const file = path.join(dir, 'prod.json');
    let writesDone = false;
    let reads = 0;
    const seen = new Set<string>();
    const reader = (async () => {
      while (!writesDone) {
        const text = await readFile(file, 'utf8');
        // Throws (failing the test) on a torn or half-written document.
        const evaluation = parseEvaluationJson(text, file);
        seen.add(evaluation.evaluatedAt);
        reads += 1;
      }
    })();
    for (let second = 1; second <= 100; second += 1) {
      // Large-ish documents (many members) make a torn read likelier if writes were not atomic.
      await store.write(makeEvaluationAt(second, { members: makeMembers(1 + (second % 7)) }));
    }
    writesDone = true;
    await reader;
    expect(reads).toBeGreaterThan(0);
    expect(seen.size).toBeGreaterThan(1); // the reader really overlapped the writes
    expect((await store.read('prod'))?.evaluatedAt).toBe(makeEvaluationAt(100).evaluatedAt);
    expect(readdirSync(dir)).toEqual(['prod.json']);
  });

  it.each([
    { name: 'non-JSON', content: '{"schemaVersion": "etcd-guard.io/v1", "targ', expectInMessage: 'not JSON' },
    {
      name: 'JSON failing the schema',
      content: JSON.stringify({ ...makeEvaluation(), verdict: 'Fine', cluster: 3 }),
      expectInMessage: 'verdict',
    },
    { name: 'another target', content: JSON.stringify(makeEvaluation({ target: 'staging' })), expectInMessage: '"staging"' },
  ])('a $name file is reported as corrupt, naming the path', async ({ content, expectInMessage }) => {
    const store = new FileStore(dir);
    await store.write(makeEvaluationAt(1));
    const file = path.join(dir, 'prod.json');
    writeFileSync(file, content);
    const error = await captureStoreError(store.read('prod'));
    expect(error.kind).toBe('corrupt');
    expect(error.message).toContain(file);
    expect(error.message).toContain(expectInMessage);
  });

  it.each([
    {
      name: 'a FIFO',
      make: (file: string) => execFileSync('mkfifo', [file]),
      expectInMessage: 'is not a regular file',
    },
    {
      name: 'a symlink to /dev/zero',
      make: (file: string) => symlinkSync('/dev/zero', file),
      expectInMessage: 'is not a regular file',
    },
    {
      name: 'a 50 MB file',
      make: (file: string) => writeFileSync(file, Buffer.alloc(50 * 1024 * 1024, 0x20)),
      expectInMessage: 'over the 1048576 bytes (1 MiB)',
    },
  ])('refuses $name in place of DIR/<target>.json at once, and a write replaces it', async ({ make, expectInMessage }) => {
    const store = new FileStore(dir);
    await store.write(makeEvaluationAt(1));
    const file = path.join(dir, 'prod.json');
    rmSync(file);
    make(file);
    const started = performance.now();
    const error = await captureStoreError(store.read('prod'));
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(error.kind).toBe('corrupt');
    expect(error.message).toContain(`${file} `);
    expect(error.message).toContain(expectInMessage);
    expect(await store.write(makeEvaluationAt(2))).toEqual({ written: true });
    expect((await store.read('prod'))?.evaluatedAt).toBe(makeEvaluationAt(2).evaluatedAt);
  });

  it('a write replaces a corrupt file', async () => {
    const store = new FileStore(dir);
    await store.write(makeEvaluationAt(1));
    writeFileSync(path.join(dir, 'prod.json'), 'garbage');
    expect(await store.write(makeEvaluationAt(2))).toEqual({ written: true });
    expect((await store.read('prod'))?.evaluatedAt).toBe(makeEvaluationAt(2).evaluatedAt);
  });

  it.each(['../x', '../../etc/passwd', 'a/b', '..', '.', '', 'Prod', '/abs', 'x\u0000y', 'a'.repeat(64)])(
    'refuses target name %j as invalid without touching the disk',
    async (target) => {
      const store = new FileStore(dir);
      const readError = await captureStoreError(store.read(target));
      expect(readError.kind).toBe('invalid');
      expect(readError.message).toContain(JSON.stringify(target));
      // Bypass the schema (target.min(1) is the only rule there) to reach the path check.
      const writeError = await captureStoreError(store.write({ ...makeEvaluation(), target }));
      expect(writeError.kind).toBe('invalid');
      expect(readdirSync(root)).toEqual([]);
    },
  );

  it('refuses to write an evaluation that fails the schema', async () => {
    const store = new FileStore(dir);
    const error = await captureStoreError(store.write({ ...makeEvaluation(), passed: false }));
    expect(error.kind).toBe('invalid');
    expect(error.message).toContain('passed');
  });

  it('makes the directory again when it was removed after a write', async () => {
    const store = new FileStore(dir);
    expect(await store.write(makeEvaluationAt(10, { target: 'prod' }))).toEqual({ written: true });
    rmSync(dir, { recursive: true });
    const later = makeEvaluationAt(20, { target: 'prod' });
    expect(await store.write(later)).toEqual({ written: true });
    expect(await store.read('prod')).toEqual(later);
    expect(readdirSync(dir)).toEqual(['prod.json']);
  });

  it('reports a directory replaced by a file after a write as a StoreError naming it', async () => {
    const store = new FileStore(dir);
    await store.write(makeEvaluationAt(10, { target: 'prod' }));
    rmSync(path.dirname(dir), { recursive: true });
    writeFileSync(path.dirname(dir), 'not a directory');
    const error = await captureStoreError(store.write(makeEvaluationAt(20, { target: 'prod' })));
    expect(error.message).toContain(path.dirname(dir));
  });

  it('reports an unwritable directory as a StoreError naming the path', async () => {
    // A regular file where the directory should be: mkdir fails with EEXIST/ENOTDIR for any user.
    const blocked = path.join(root, 'blocked');
    writeFileSync(blocked, 'not a directory');
    const store = new FileStore(path.join(blocked, 'cache'));
    const error = await captureStoreError(store.write(makeEvaluation()));
    expect(error.message).toContain(blocked);
  });

  it('createStore builds a FileStore for { kind: file }', async () => {
    const store = createStore({ kind: 'file', dir });
    await store.write(makeEvaluationAt(5));
    expect((await store.read('prod'))?.evaluatedAt).toBe(makeEvaluationAt(5).evaluatedAt);
    expect(store.describe()).toBe(`file:${dir}`);
  });
});
