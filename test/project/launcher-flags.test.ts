// bin/etcd-guard.mjs starts node with the memory flags derived from the container's limit (the
// derivation itself is table-tested in node-flags.test.ts): real child processes, the limit given
// as the downward API would (ETCD_GUARD_MEMORY_LIMIT), so the result does not depend on the cgroup
// this suite happens to run in.
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestCerts, type TestCerts } from '../harness/certs.js';
import { runProcess } from '../harness/process.js';
import { startWebhookProcess } from '../harness/webhook-process.js';

const BIN = path.resolve(import.meta.dirname, '../../bin/etcd-guard.mjs');
const LIMIT_384_MIB = String(384 * 1024 * 1024);
let dir: string;
let certs: TestCerts;
let configFile: string;
let heapReport: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-launcher-'));
  certs = await generateTestCerts(dir);
  await mkdir(path.join(dir, 'store'));
  configFile = path.join(dir, 'guard.json');
  await writeFile(
    configFile,
    JSON.stringify({
      store: { kind: 'file', dir: path.join(dir, 'store') },
      inlineRefresh: false,
      targets: [{ name: 'a', endpoints: ['https://127.0.0.1:1'], timeout: '1s' }],
    }),
  );
  // Preloaded through NODE_OPTIONS, which survives the re-exec: reports the heap limit node ran with.
  heapReport = path.join(dir, 'heap-report.cjs');
  await writeFile(
    heapReport,
    "process.on('exit', () => process.stderr.write(`heap_size_limit_mib=${Math.round(require('node:v8').getHeapStatistics().heap_size_limit / 1048576)}\\n`));\n",
  );
}, 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function heapLimitMiB(stderr: string): number {
  const match = /heap_size_limit_mib=(\d+)/.exec(stderr);
  if (!match?.[1]) throw new Error(`no heap report in: ${stderr}`);
  return Number(match[1]);
}

describe('the launcher applies the derived node flags', () => {
  it('the webhook under plain node replaces itself with one that has the heap cap and the small young generation', async () => {
    const webhook = await startWebhookProcess({
      configFile,
      certFile: certs.serverCertFile,
      keyFile: certs.serverKeyFile,
      env: { ETCD_GUARD_MEMORY_LIMIT: LIMIT_384_MIB },
    });
    try {
      const argv = readFileSync(`/proc/${webhook.pid}/cmdline`, 'utf8').split('\0');
      expect(argv).toContain('--max-semi-space-size=2');
      expect(argv).toContain('--max-old-space-size=192');
      expect(argv.filter((word) => word.startsWith('--max-old-space-size'))).toHaveLength(1);
    } finally {
      await webhook.stop();
    }
  }, 60_000);

  it.each([
    ['a 384Mi limit gives evaluate a 192 MiB old generation', { ETCD_GUARD_MEMORY_LIMIT: LIMIT_384_MIB }, 192],
    [
      'a cap the user set in NODE_OPTIONS wins over the limit',
      { ETCD_GUARD_MEMORY_LIMIT: LIMIT_384_MIB, extra: '--max-old-space-size=300' },
      300,
    ],
  ])(
    '%s',
    async (_case, given, oldSpaceMiB) => {
      const { extra, ...env } = { extra: '', ...given };
      const run = await runProcess(
        process.execPath,
        [BIN, 'evaluate', '--endpoints', 'http://127.0.0.1:1', '--timeout', '300ms', '--output', 'json', '--store', 'none'],
        { env: { ...process.env, ...env, NODE_OPTIONS: `--require ${heapReport} ${extra}`.trim() }, timeoutMs: 60_000 },
      );
      expect(run.uncaught).toBeNull();
      expect(run.code, run.stderr).toBe(1);
      // The re-exec is silent: nothing but the preload's report on stderr (no ExperimentalWarning).
      expect(run.stderr.trim()).toMatch(/^heap_size_limit_mib=\d+$/);
      expect((JSON.parse(run.stdout) as { verdict?: unknown }).verdict).toBe('Unhealthy');
      // V8's heap limit is the old generation plus the young one (a few MiB to a few tens).
      const limit = heapLimitMiB(run.stderr);
      expect(limit).toBeGreaterThanOrEqual(oldSpaceMiB);
      expect(limit).toBeLessThan(oldSpaceMiB + 64);
    },
    60_000,
  );
});
