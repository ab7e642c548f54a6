// The image's command line (the Dockerfile's ENTRYPOINT flags, then bin/etcd-guard.mjs) in a real
// memory-limited cgroup, as in the manifests' pods: V8's heap follows the limit, the process is
// the one that was started (bin/ re-executes nothing), and it prints nothing of its own about it.
// What node makes of the flags across limits is table-tested in node-flags.test.ts.
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestCerts, type TestCerts } from '../harness/certs.js';
import { imageNodeFlags, memoryQuantityBytes } from '../harness/image-node-flags.js';
import { createMemoryCgroup, type MemoryCgroup } from '../harness/memory-cgroup.js';
import { runProcess } from '../harness/process.js';
import { startWebhookProcess } from '../harness/webhook-process.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const BIN = path.join(ROOT, 'bin/etcd-guard.mjs');
const IMAGE_FLAGS = imageNodeFlags(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
const LIMIT_MIB = 384;
/** Half the limit, plus V8's young generation (3 semi-spaces of the image's 2 MiB). */
const HEAP_RANGE_MIB = [LIMIT_MIB / 2, LIMIT_MIB / 2 + 16] as const;
const EVALUATE = ['evaluate', '--endpoints', 'http://127.0.0.1:1', '--timeout', '300ms', '--output', 'json', '--store', 'none'];
let dir: string;
let certs: TestCerts;
let configFile: string;
let heapReport: string;
let cgroup: MemoryCgroup;

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
  // Preloaded through NODE_OPTIONS: reports the heap limit node started with (fixed at start).
  heapReport = path.join(dir, 'heap-report.cjs');
  await writeFile(
    heapReport,
    "process.stderr.write(`heap_size_limit_mib=${Math.round(require('node:v8').getHeapStatistics().heap_size_limit / 1048576)}\\n`);\n",
  );
  cgroup = await createMemoryCgroup('etcd-guard-launcher', memoryQuantityBytes(`${LIMIT_MIB}Mi`));
}, 60_000);

afterAll(async () => {
  await cgroup?.remove();
  await rm(dir, { recursive: true, force: true });
});

function heapLimitMiB(output: string): number {
  const match = /heap_size_limit_mib=(\d+)/.exec(output);
  if (!match?.[1]) throw new Error(`no heap report in: ${output}`);
  return Number(match[1]);
}

describe(`the image's command line in a ${LIMIT_MIB}Mi container`, () => {
  it('the webhook runs as started, with half the limit as its heap and the small young generation', async () => {
    const webhook = await startWebhookProcess({
      configFile,
      certFile: certs.serverCertFile,
      keyFile: certs.serverKeyFile,
      nodeArgs: IMAGE_FLAGS,
      wrap: cgroup.wrap,
      env: { NODE_OPTIONS: `--require ${heapReport}` },
    });
    try {
      const argv = readFileSync(`/proc/${webhook.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
      // The ENTRYPOINT's flags and nothing added: no re-exec with flags of its own.
      expect(argv.slice(1, IMAGE_FLAGS.length + 2)).toEqual([...IMAGE_FLAGS, BIN]);
      expect(argv.filter((word) => word.startsWith('--max-'))).toEqual(IMAGE_FLAGS.filter((flag) => flag.startsWith('--max-')));
      expect(readFileSync(`/proc/${webhook.pid}/cgroup`, 'utf8')).toContain(path.basename(cgroup.dir));
      const limit = heapLimitMiB(webhook.output());
      expect(limit).toBeGreaterThanOrEqual(HEAP_RANGE_MIB[0]);
      expect(limit).toBeLessThan(HEAP_RANGE_MIB[1]);
    } finally {
      await webhook.stop();
    }
  }, 60_000);

  it('evaluate gets the same heap, and prints nothing but its answer (no ExperimentalWarning)', async () => {
    const [command, args] = cgroup.wrap(process.execPath, [...IMAGE_FLAGS, BIN, ...EVALUATE]);
    const run = await runProcess(command, args, {
      env: { ...process.env, NODE_OPTIONS: `--require ${heapReport}` },
      timeoutMs: 60_000,
    });
    expect(run.uncaught).toBeNull();
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr.trim()).toMatch(/^heap_size_limit_mib=\d+$/);
    expect((JSON.parse(run.stdout) as { verdict?: unknown }).verdict).toBe('Unhealthy');
    const limit = heapLimitMiB(run.stderr);
    expect(limit).toBeGreaterThanOrEqual(HEAP_RANGE_MIB[0]);
    expect(limit).toBeLessThan(HEAP_RANGE_MIB[1]);
  }, 60_000);

  it("without the ENTRYPOINT's flags nothing lowers node's own sizing (at least 256 MiB): the flags do it", async () => {
    const [command, args] = cgroup.wrap(process.execPath, [BIN, ...EVALUATE]);
    const run = await runProcess(command, args, {
      env: { ...process.env, NODE_OPTIONS: `--require ${heapReport}` },
      timeoutMs: 60_000,
    });
    expect(run.code, run.stderr).toBe(1);
    expect(heapLimitMiB(run.stderr)).toBeGreaterThanOrEqual(256);
  }, 60_000);
});
