// The runtime the suite and the CLI run on. package.json's engines asks for a supported LTS (Node
// 22+); a machine may have an older node preinstalled, so `npm ci` installs Node 22 as the
// devDependency `node`, and npm scripts (`npm test`, `npm run demo`) find it first on the PATH
// (node_modules/.bin). These fail when a worker or the CLI runs on anything older.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};
const minimumMajor = Number(/^>=(\d+)$/.exec(packageJson.engines.node)?.[1]);
const major = (version: string) => Number(/^v(\d+)\./.exec(version)?.[1]);

describe('the Node runtime', () => {
  it('is asked for as a supported LTS (22 or later) and installed by npm ci as a devDependency', () => {
    expect(minimumMajor).toBeGreaterThanOrEqual(22);
    expect(packageJson.devDependencies.node).toMatch(new RegExp(`^\\^${minimumMajor}\\.`));
  });

  it('runs the vitest workers', () => {
    console.info(`vitest worker: node ${process.version} (${process.execPath})`);
    expect(major(process.version)).toBeGreaterThanOrEqual(minimumMajor);
  });

  it('runs the CLI started through its #! line, as npm scripts and users start it', () => {
    const run = spawnSync('bin/etcd-guard.mjs', ['--version'], {
      cwd: new URL('../..', import.meta.url),
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, NODE_OPTIONS: '--import=data:text/javascript,process.stderr.write(process.version)' },
    });
    expect(run.status, run.stderr).toBe(0);
    console.info(`CLI bin: node ${run.stderr.trim()}; ${run.stdout.trim()}`);
    expect(major(run.stderr.trim())).toBeGreaterThanOrEqual(minimumMajor);
  });

  it('has the module compile cache the CLI enables', () => {
    const run = spawnSync(process.execPath, ['-e', "process.stdout.write(typeof require('node:module').enableCompileCache)"], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.stdout).toBe('function');
  });
});
