// bin/etcd-guard.mjs in the layouts it serves: a source checkout runs the bundle only while it is
// newer than every source (else the TypeScript through tsx), and the image's layout (dist/ and
// bin/, no sources) runs the bundle under plain node. Real child processes, a real esbuild bundle.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
// Inside node_modules, so packages resolve from the layout as they do from the image's /app.
const LAYOUTS = path.join(ROOT, 'node_modules/.cache', `etcd-guard-image-layout-test-${process.pid}`);
const BUNDLE_MARKER = 'the marker bundle ran';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], timeoutMs = 30_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: ROOT, timeout: timeoutMs }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
      resolve({ code, stdout, stderr });
    });
  });
}

/** package.json and bin/ as the Dockerfile's final stage copies them. */
function layout(name: string): string {
  const dir = path.join(LAYOUTS, name);
  mkdirSync(dir, { recursive: true });
  cpSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  cpSync(path.join(ROOT, 'bin'), path.join(dir, 'bin'), { recursive: true });
  return dir;
}

function copySources(dir: string): void {
  for (const source of ['functions', 'webhook', 'package-lock.json'])
    cpSync(path.join(ROOT, source), path.join(dir, source), { recursive: true });
}

/** A bundle whose CLI only says it ran, stamped as built at `builtAt`. */
function writeMarkerBundle(dir: string, builtAt: Date): void {
  mkdirSync(path.join(dir, 'dist/cli'), { recursive: true });
  writeFileSync(
    path.join(dir, 'dist/cli/etcd-guard.mjs'),
    `export async function main(_args, _env, io) { io.stdout(${JSON.stringify(`${BUNDLE_MARKER}\n`)}); return 0; }\n`,
  );
  writeFileSync(path.join(dir, 'dist/cli/BUILD'), `${builtAt.toISOString()}\n`);
  utimesSync(path.join(dir, 'dist/cli/BUILD'), builtAt, builtAt);
}

afterAll(() => rmSync(LAYOUTS, { recursive: true, force: true }));

describe('bin/etcd-guard.mjs picks what to run from the layout on disk', () => {
  it('in a source checkout runs a bundle built after the last source change', async () => {
    const dir = layout('checkout-current');
    copySources(dir);
    writeMarkerBundle(dir, new Date(Date.now() + 60_000));
    const result = await run([path.join(dir, 'bin/etcd-guard.mjs'), '--help']);
    expect(result.stdout).toBe(`${BUNDLE_MARKER}\n`);
    expect(result.code).toBe(0);
  });

  it('in a source checkout runs the sources through tsx when a source is newer than the bundle', async () => {
    const dir = layout('checkout-stale');
    copySources(dir);
    writeMarkerBundle(dir, new Date(Date.now() - 60_000));
    const edited = path.join(dir, 'webhook/domain/rules.ts');
    utimesSync(edited, new Date(), new Date());
    const result = await run([path.join(dir, 'bin/etcd-guard.mjs'), '--help']);
    expect(result.stdout).not.toContain(BUNDLE_MARKER);
    expect(result.stdout).toMatch(/etcd-guard evaluate --endpoints/);
    expect(result.code).toBe(0);
  });

  it('without sources runs the bundle (no tsx needed)', async () => {
    const dir = layout('bundle-only');
    writeMarkerBundle(dir, new Date(Date.now() - 60_000));
    const result = await run([path.join(dir, 'bin/etcd-guard.mjs'), '--help']);
    expect(result.stdout).toBe(`${BUNDLE_MARKER}\n`);
    expect(result.code).toBe(0);
  });

  // Issue 31: tsx and esbuild are dev dependencies now, so a checkout installed with --omit=dev
  // has no bundle (prepare cannot build one) and no tsx. Outside node_modules, so nothing resolves.
  it('in a source checkout without tsx (installed with --omit=dev) exits 2 saying to run npm ci', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'etcd-guard-no-dev-'));
    try {
      cpSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
      cpSync(path.join(ROOT, 'bin'), path.join(dir, 'bin'), { recursive: true });
      copySources(dir);
      const result = await run([path.join(dir, 'bin/etcd-guard.mjs'), '--help']);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/no current bundle and no tsx .*run `npm ci`/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('with neither exits 2 and says to run npm run build', async () => {
    const dir = layout('empty');
    const result = await run([path.join(dir, 'bin/etcd-guard.mjs'), '--help']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/dist\/cli\/etcd-guard\.mjs.*npm run build/);
  });
});

describe('the image layout: the esbuild bundle under plain node', () => {
  it('resolves every import and runs a real evaluation: an unreachable member is Unhealthy, exit 1', async () => {
    const dir = layout('image');
    const build = await run([path.join(ROOT, 'scripts/build.mjs'), '--outdir', path.join(dir, 'dist')], 120_000);
    expect(build.code, build.stderr).toBe(0);
    // The Dockerfile's ENTRYPOINT flag included: the process must start with it.
    const result = await run([
      '--max-semi-space-size=2',
      path.join(dir, 'bin/etcd-guard.mjs'),
      'evaluate',
      '--endpoints',
      'http://127.0.0.1:1',
      '--timeout',
      '500ms',
      '--output',
      'json',
      '--store',
      'none',
    ]);
    expect(result.code, result.stderr).toBe(1);
    const evaluation = JSON.parse(result.stdout) as { verdict?: unknown; passed?: unknown };
    expect(evaluation.verdict).toBe('Unhealthy');
    expect(evaluation.passed).toBe(false);
    expect(result.stderr).toBe('');
  }, 150_000);
});
