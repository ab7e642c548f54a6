// `etcd-guard targets` and the scheduled run with discovery, against the stand-in apiserver.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { main } from './cli.js';
import { parseGuardConfig } from '../domain/config.js';
import type { Target } from '../domain/targets.js';
import { resolveTargets } from '../usecases/resolve-targets.js';
import { runScheduledEvaluation, type ScheduledLogger } from '../usecases/scheduled-run.js';
import { makeEvaluation } from '../../test/harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../../test/harness/fake-kube-apiserver.js';

const object = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../test/fixtures/discovery/${name}.json`, import.meta.url), 'utf8')) as FakeObject;

let fake: FakeKubeApiServer;
let dir: string;

beforeEach(async () => {
  fake = await startFakeKubeApiServer();
  fake.putObject('kubeadmcontrolplanes', object('kcp-v1beta1'));
  fake.putObject('clusters', object('cluster-prod'));
  fake.putObject('kubeadmcontrolplanes', object('kcp-external-etcd'));
  fake.putObject('etcds', object('etcd-druid'));
  dir = mkdtempSync(path.join(tmpdir(), 'targets-command-'));
});

afterEach(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

function writeConfig(extra: object = {}): string {
  const file = path.join(dir, 'guard.yaml');
  const config = {
    targets: [{ name: 'local', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'legacy' } }],
    discovery: { capi: {}, druid: {}, kubeconfigFile: fake.kubeconfigFile },
    ...extra,
  };
  writeFileSync(file, JSON.stringify(config));
  return file;
}

async function run(args: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await main(args, {}, { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) });
  return { code, stdout, stderr };
}

describe('etcd-guard targets', () => {
  it('lists static and discovered targets with source, guarded object and reach; skipped objects on stderr', async () => {
    const result = await run(['targets', '--config', writeConfig()]);
    expect(result.code).toBe(0);
    const rows = result.stdout.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| NAME'));
    expect(
      rows.map((row) =>
        row
          .split('|')
          .map((cell) => cell.trim())
          .slice(1, 3),
      ),
    ).toEqual([
      ['local', 'static'],
      ['capi-fleet-prod', 'capi'],
      [expect.stringMatching(/^druid-shoot-dev-alpha-etcd-mai--[0-9a-f]{16}$/), 'druid'],
    ]);
    expect(result.stdout).toContain('KubeadmControlPlane fleet/prod-control-plane');
    expect(result.stdout).toContain('Cluster fleet/prod (port-forward)');
    expect(result.stderr).toBe(
      'skipped KubeadmControlPlane fleet/legacy-control-plane (capi): it uses external etcd: not discovered (add a static target that names it)\n',
    );
  });

  it('--output json carries targets, problems and failures; a provider that cannot list exits 1', async () => {
    fake.forbid('list', 'etcds');
    const result = await run(['targets', '--config', writeConfig(), '--output', 'json']);
    expect(result.code).toBe(1);
    const body = JSON.parse(result.stdout) as { targets: Target[]; problems: unknown[]; failures: { source: string }[] };
    expect(body.targets.map((target) => target.source)).toEqual(['static', 'capi']);
    expect(body.failures.map((failure) => failure.source)).toEqual(['druid']);
    expect(result.stderr).toMatch(/discovery druid could not list: forbidden: cannot list etcds/);
  });

  it.each([
    [['targets'], /--config is required/],
    [['targets', '--config', '/nonexistent/guard.yaml'], /cannot read the file/],
    [['targets', '--config', 'X', '--output', 'wide'], /--output: want table or json/],
  ])('%j is a usage error (exit 2)', async (args, message) => {
    const file = writeConfig();
    const result = await run(args.map((arg) => (arg === 'X' ? file : arg)));
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
  });
});

describe('scheduled run with discovery', () => {
  const silent: ScheduledLogger = { info: () => undefined, error: () => undefined };

  it('evaluates every resolved target, and reports a provider that could not list as a result of its own', async () => {
    fake.forbid('list', 'etcds');
    const config = parseGuardConfig(JSON.parse(readFileSync(writeConfig(), 'utf8')) as unknown, 'test');
    const evaluated: string[] = [];
    const results = await runScheduledEvaluation({
      config,
      store: { read: async () => null, write: async () => ({ written: true }), describe: () => 'memory' },
      evaluate: (target) => {
        evaluated.push(`${target.source}:${target.name}`);
        return Promise.resolve(makeEvaluation({ target: target.name }));
      },
      resolveTargets: (timeoutMs) => resolveTargets(config, { timeoutMs }),
      logger: silent,
    });
    expect(evaluated).toEqual(['static:local', 'capi:capi-fleet-prod']);
    expect(results.map((result) => `${result.target} ${result.ok ? 'ok' : result.stage}`)).toEqual([
      'discovery:druid discover',
      'local ok',
      'capi-fleet-prod ok',
    ]);
  });
});
