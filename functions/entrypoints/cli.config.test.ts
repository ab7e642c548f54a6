// `etcd-guard evaluate --config FILE`: the CronJob's form. Every target of a real guard config is
// evaluated against a real 3-member etcd and written to the config's store; `--every` repeats the
// round until SIGTERM. Usage mistakes exit 2 naming the flag or the config field.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from './cli.js';
import { evaluationSchema, parseEvaluationJson } from '../domain/evaluation-document.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { waitFor } from '../../test/harness/wait.js';

const BIN = path.resolve(import.meta.dirname, '../../bin/etcd-guard.mjs');

interface Captured {
  code: number;
  stdout: string;
  stderr: string;
}

async function runInProcess(args: string[]): Promise<Captured> {
  let stdout = '';
  let stderr = '';
  const code = await main(
    args,
    { LOG_LEVEL: 'silent' },
    { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) },
  );
  return { code, stdout, stderr };
}

let cluster: EtcdTestCluster;
let dir: string;
let configFile: string;
let storeDir: string;

beforeAll(async () => {
  cluster = await startEtcdCluster({ name: 'cliconf' });
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-cli-config-'));
  storeDir = path.join(dir, 'store');
  configFile = path.join(dir, 'guard.yaml');
  const tls = `{ caFile: ${cluster.tls.caFile}, certFile: ${cluster.tls.certFile}, keyFile: ${cluster.tls.keyFile} }`;
  await writeFile(
    configFile,
    [
      `store: { kind: file, dir: ${storeDir} }`,
      'targets:',
      `  - name: alpha`,
      `    endpoints: [${cluster.endpoints[0]}]`,
      `    tls: ${tls}`,
      `    timeout: 2s`,
      `  - name: beta`,
      `    endpoints: [${cluster.endpoints.join(', ')}]`,
      `    tls: ${tls}`,
      `    timeout: 2s`,
    ].join('\n'),
  );
});

afterAll(async () => {
  await cluster?.destroy();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('evaluate --config', () => {
  it('evaluates every target, prints them as a JSON array and writes each to the store', async () => {
    const run = await runInProcess(['evaluate', '--config', configFile, '--output', 'json']);
    expect(run.stderr).not.toContain('error');
    expect(run.code).toBe(0);
    const printed = evaluationSchema.array().parse(JSON.parse(run.stdout));
    expect(printed.map((evaluation) => evaluation.target)).toEqual(['alpha', 'beta']);
    for (const evaluation of printed) {
      expect(evaluation.verdict).toBe('Healthy');
      expect(evaluation.members).toHaveLength(3);
      const stored = parseEvaluationJson(
        await readFile(path.join(storeDir, `${evaluation.target}.json`), 'utf8'),
        evaluation.target,
      );
      expect(stored.evaluatedAt).toBe(evaluation.evaluatedAt);
    }
  });

  it("with --store none prints the evaluations and leaves the config's store untouched", async () => {
    const configStore = path.join(dir, 'none-store');
    const noneConfig = path.join(dir, 'none.yaml');
    await writeFile(noneConfig, (await readFile(configFile, 'utf8')).replace(storeDir, configStore));
    const run = await runInProcess(['evaluate', '--config', noneConfig, '--store', 'none']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('alpha');
    expect(run.stdout).toContain('beta');
    await expect(readFile(path.join(configStore, 'alpha.json'))).rejects.toThrow(/ENOENT/);
  });

  it.each([
    { args: ['--endpoints', 'https://127.0.0.1:2379'], names: '--endpoints cannot be combined with --config' },
    { args: ['--target', 'x'], names: '--target cannot be combined with --config' },
    { args: ['--every', '10ms'], names: '--every: want a duration of at least 1s' },
  ])('exits 2 naming the flag: $names', async ({ args, names }) => {
    const run = await runInProcess(['evaluate', '--config', configFile, ...args]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(names);
    expect(run.stdout).toBe('');
  });

  it('exits 2 for --every without --config', async () => {
    const run = await runInProcess(['evaluate', '--endpoints', 'https://127.0.0.1:2379', '--every', '5s']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--every needs --config');
  });

  it('exits 2 naming the config field and value when the file is invalid', async () => {
    const bad = path.join(dir, 'bad.yaml');
    await writeFile(bad, 'maxAgeSeconds: -5\ntargets:\n  - name: ok\n    endpoints: [ftp://x]\n');
    const run = await runInProcess(['evaluate', '--config', bad]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('maxAgeSeconds');
    expect(run.stderr).toContain('-5');
    expect(run.stderr).toContain('targets.0.endpoints.0');
    expect(run.stderr).toContain('ftp://x');
  });

  it('exits 0 when a target is Unhealthy but was evaluated and stored (the run did its work)', async () => {
    const deadStore = path.join(dir, 'dead-store');
    const deadTarget = path.join(dir, 'dead.yaml');
    await writeFile(
      deadTarget,
      `store: { kind: file, dir: ${deadStore} }\ntargets:\n  - name: gone\n    endpoints: [https://127.0.0.1:1]\n    timeout: 500ms\n`,
    );
    const run = await runInProcess(['evaluate', '--config', deadTarget, '--output', 'json']);
    expect(run.code).toBe(0);
    const [evaluation] = evaluationSchema.array().parse(JSON.parse(run.stdout));
    expect(evaluation?.verdict).toBe('Unhealthy');
    expect(evaluation?.reasons.join(' ')).toContain('https://127.0.0.1:1');
    const stored = parseEvaluationJson(await readFile(path.join(deadStore, 'gone.json'), 'utf8'), 'gone.json');
    expect(stored.evaluatedAt).toBe(evaluation?.evaluatedAt);
  });

  it('exits 1 when an evaluation cannot be stored', async () => {
    // The store directory is a regular file, so every write fails.
    const blocked = path.join(dir, 'blocked-store');
    await writeFile(blocked, 'not a directory');
    const blockedConfig = path.join(dir, 'blocked.yaml');
    await writeFile(blockedConfig, (await readFile(configFile, 'utf8')).replace(storeDir, blocked));
    const run = await runInProcess(['evaluate', '--config', blockedConfig, '--output', 'json']);
    expect(run.code).toBe(1);
    expect(
      evaluationSchema
        .array()
        .parse(JSON.parse(run.stdout))
        .map((evaluation) => evaluation.verdict),
    ).toEqual(['Healthy', 'Healthy']);
  });

  it('with --every repeats rounds until SIGTERM, then exits 0', async () => {
    const loopStore = path.join(dir, 'loop-store');
    const loopConfig = path.join(dir, 'loop.yaml');
    await writeFile(loopConfig, (await readFile(configFile, 'utf8')).replace(storeDir, loopStore));
    const child = spawn(process.execPath, [BIN, 'evaluate', '--config', loopConfig, '--every', '1s', '--output', 'json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'silent' },
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const seen = new Set<string>();
      await waitFor('two rounds for target alpha', 20_000, async () => {
        try {
          seen.add(parseEvaluationJson(await readFile(path.join(loopStore, 'alpha.json'), 'utf8'), 'alpha').evaluatedAt);
        } catch {
          // Not written yet.
        }
        return seen.size >= 2;
      });
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});
