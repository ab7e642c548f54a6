// bin/etcd-guard.mjs in the two layouts it serves: a source checkout runs the TypeScript through
// tsx (a stale dist/ next to it is never used), and the image's layout (dist/ and bin/, no sources)
// runs the compiled JavaScript under plain node. Real child processes, real tsc output.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
// Inside node_modules, so packages resolve from the layout as they do from the image's /app.
const LAYOUTS = path.join(ROOT, 'node_modules/.cache', `etcd-guard-image-layout-test-${process.pid}`);
const STALE_MARKER = 'stale dist/functions/cli.js ran';

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

/** A dist/ whose CLI only says it ran: stands for a build older than the sources. */
function writeStaleDist(dir: string): void {
  mkdirSync(path.join(dir, 'dist/functions'), { recursive: true });
  writeFileSync(
    path.join(dir, 'dist/functions/cli.js'),
    `export async function main(_args, _env, io) { io.stdout(${JSON.stringify(`${STALE_MARKER}\n`)}); return 0; }\n`,
  );
}

afterAll(() => rmSync(LAYOUTS, { recursive: true, force: true }));

describe('bin/etcd-guard.mjs picks what to run from the layout on disk', () => {
  it('in a source checkout runs the sources through tsx, even with a stale dist/ next to them', async () => {
    const dir = layout('checkout');
    cpSync(path.join(ROOT, 'functions'), path.join(dir, 'functions'), { recursive: true });
    cpSync(path.join(ROOT, 'webhook'), path.join(dir, 'webhook'), { recursive: true });
    writeStaleDist(dir);
    const result = await run([path.join(dir, 'bin/etcd-guard.mjs'), '--help']);
    expect(result.stdout).not.toContain(STALE_MARKER);
    expect(result.stdout).toMatch(/etcd-guard evaluate --endpoints/);
    expect(result.code).toBe(0);
  });

  it('without sources runs dist/ (no tsx needed)', async () => {
    const dir = layout('dist-only');
    writeStaleDist(dir);
    const result = await run([path.join(dir, 'bin/etcd-guard.mjs'), '--help']);
    expect(result.stdout).toBe(`${STALE_MARKER}\n`);
    expect(result.code).toBe(0);
  });

  it('with neither exits 2 and says to run npm run build', async () => {
    const dir = layout('empty');
    const result = await run([path.join(dir, 'bin/etcd-guard.mjs'), '--help']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/dist\/functions\/cli\.js.*npm run build/);
  });
});

describe('the image layout: tsc -p tsconfig.build.json output under plain node', () => {
  it('resolves every import and runs a real evaluation: an unreachable member is Unhealthy, exit 1', async () => {
    const dir = layout('image');
    const compile = await run(
      [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', path.join(dir, 'dist')],
      120_000,
    );
    expect(compile.stdout, 'tsc output').toBe('');
    expect(compile.code).toBe(0);
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
  }, 150_000);
});
