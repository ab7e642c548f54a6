// scripts/ensure-etcd-go.sh without a build: its usage, the cache it reuses, and what it says
// when Go or the module proxy is missing (the build itself runs in .ci/run, which uses its output).
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
const SCRIPT = path.join(ROOT, 'scripts/ensure-etcd-go.sh');
const pins = Object.fromEntries(
  [...readFileSync(path.join(ROOT, 'scripts/versions.env'), 'utf8').matchAll(/^(ETCD3[67]_VERSION)=(\S+)$/gm)].map((match) => [
    match[1],
    match[2],
  ]),
);
const tempDirs: string[] = [];
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'etcd-guard-ensure-go-'));
  tempDirs.push(dir);
  return dir;
}

/** PATH with the system's tools but no `go` (it lives in /usr/local/go/bin or ~/go/bin, not these). */
const PATH_WITHOUT_GO = '/usr/bin:/bin';

function runScript(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', [SCRIPT, ...args], { env: { ...process.env, ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      const raw = (error as { code?: unknown } | null)?.code;
      resolve({ code: error ? (typeof raw === 'number' ? raw : 1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** A cache dir holding stand-ins for built binaries that print the given versions. */
function fakeBuilt(version: string, etcdctlVersion = version): { cacheRoot: string; bin: string } {
  const cacheRoot = tempDir();
  const bin = path.join(cacheRoot, version, 'bin');
  mkdirSync(bin, { recursive: true });
  const plain = version.replace(/^v/, '');
  const ctlPlain = etcdctlVersion.replace(/^v/, '');
  // Long output after the version line: a check that pipes it into `grep -q` under pipefail
  // fails whenever grep quits first (the writer dies of SIGPIPE); this makes that every time.
  const tail = 'seq 1 200000';
  writeFileSync(path.join(bin, 'etcd'), `#!/bin/sh\necho "etcd Version: ${plain}"\n${tail}\n`);
  writeFileSync(path.join(bin, 'etcdctl'), `#!/bin/sh\necho "etcdctl version: ${ctlPlain}"\n${tail}\n`);
  chmodSync(path.join(bin, 'etcd'), 0o755);
  chmodSync(path.join(bin, 'etcdctl'), 0o755);
  return { cacheRoot, bin };
}

describe('scripts/ensure-etcd-go.sh', () => {
  it('pins an etcd 3.6 and an etcd 3.7 in scripts/versions.env', () => {
    expect(pins.ETCD36_VERSION).toMatch(/^v3\.6\.\d+$/);
    expect(pins.ETCD37_VERSION).toMatch(/^v3\.7\.\d+$/);
  });

  it.each([
    { args: [], why: 'no version' },
    { args: ['3.9'], why: 'a minor it does not pin' },
    { args: ['latest'], why: 'not a version' },
  ])('refuses $why with its usage', async ({ args }) => {
    const result = await runScript(args, { ETCD_GUARD_ETCD_GO_DIR: tempDir() });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/usage: .*ensure-etcd-go\.sh 3\.6\|3\.7\|vX\.Y\.Z/);
    expect(result.stdout).toBe('');
  });

  it.each([
    { arg: '3.6', pin: 'ETCD36_VERSION' },
    { arg: '3.7', pin: 'ETCD37_VERSION' },
  ])('$arg: reuses the pinned build in its cache dir without Go', async ({ arg, pin }) => {
    const { cacheRoot, bin } = fakeBuilt(String(pins[pin]));
    const result = await runScript([arg], { ETCD_GUARD_ETCD_GO_DIR: cacheRoot, PATH: PATH_WITHOUT_GO });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${bin}\n`);
  });

  it.each([
    { why: 'an etcd of another version', etcd: 'v3.6.1', etcdctl: 'v3.6.16' },
    { why: 'an etcdctl of another version', etcd: 'v3.6.16', etcdctl: 'v3.6.1' },
  ])('rebuilds over $why in the cache dir, and says Go is missing', async ({ etcd, etcdctl }) => {
    const { cacheRoot } = fakeBuilt(etcd, etcdctl);
    // Both stand-ins live under the etcd's version; ask for that one.
    const result = await runScript([etcd], { ETCD_GUARD_ETCD_GO_DIR: cacheRoot, PATH: PATH_WITHOUT_GO });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(
      new RegExp(`etcd-guard: building etcd ${etcd.replace(/\./g, '\\.')} needs Go .*no \`go\` on PATH`),
    );
  });

  it('names the module proxy and both modules when they cannot be fetched', async () => {
    const cacheRoot = tempDir();
    // An empty module cache and no proxy: nothing can be fetched, whatever this machine holds.
    const result = await runScript(['3.6'], {
      ETCD_GUARD_ETCD_GO_DIR: cacheRoot,
      GOPROXY: 'off',
      GOMODCACHE: path.join(cacheRoot, 'modcache'),
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    const version = String(pins.ETCD36_VERSION);
    expect(result.stderr).toContain(
      `cannot fetch go.etcd.io/etcd/server/v3@${version} go.etcd.io/etcd/etcdctl/v3@${version} through the Go module proxy (GOPROXY=off)`,
    );
    expect(result.stderr).toMatch(/module lookup disabled by GOPROXY=off/);
  });
});
