// Issue 30 item 11: `evaluate --output json` in a fleet run printed log lines ("writing an Event
// failed") on stdout, which broke the documented JSON output. Through the real bin: a fleet run
// (a static target and a discovered one, stored as ConfigMaps) whose Event writes are refused, so
// the run has errors to log; in every output mode stdout carries only the evaluations and every
// log line is on stderr.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluationSchema } from '../domain/evaluation-document.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../../test/harness/fake-kube-apiserver.js';
import { runProcess } from '../../test/harness/process.js';

const BIN = path.resolve(import.meta.dirname, '../../bin/etcd-guard.mjs');
const fixture = async (name: string) =>
  JSON.parse(await readFile(new URL(`../../test/fixtures/discovery/${name}.json`, import.meta.url), 'utf8')) as FakeObject;

let fake: FakeKubeApiServer;
let dir: string;

/** A config whose store is its own namespace: its first run sees no stored verdict, so it records a transition. */
async function configFor(namespace: string): Promise<string> {
  const file = path.join(dir, `${namespace}.json`);
  await writeFile(
    file,
    JSON.stringify({
      store: { kind: 'configmap', namespace },
      // Nothing listens on port 1: the static target is evaluated Unhealthy at once.
      targets: [{ name: 'gone', endpoints: ['https://127.0.0.1:1'], timeout: '1s' }],
      discovery: { capi: {}, kubeconfigFile: fake.kubeconfigFile },
    }),
  );
  return file;
}

beforeAll(async () => {
  fake = await startFakeKubeApiServer();
  fake.putObject('kubeadmcontrolplanes', await fixture('kcp-v1beta1'));
  fake.putObject('clusters', await fixture('cluster-prod'));
  fake.forbid('create', 'events');
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-cli-streams-'));
});

afterAll(async () => {
  await fake?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A pino line: one JSON object with a level and a msg. */
const isLogLine = (line: string): boolean => {
  try {
    const parsed = JSON.parse(line) as { level?: unknown; msg?: unknown };
    return parsed.level !== undefined && typeof parsed.msg === 'string';
  } catch {
    return false;
  }
};

describe('evaluate --config logs on stderr in every output mode (issue 30 item 11)', () => {
  it.each(['json', 'table', 'wide'])('--output %s: stdout has no log line, stderr has the Event error', async (output) => {
    const configFile = await configFor(`etcd-guard-${output}`);
    const run = await runProcess(process.execPath, [BIN, 'evaluate', '--config', configFile, '--output', output], {
      env: { PATH: process.env.PATH, HOME: dir, KUBECONFIG: fake.kubeconfigFile, LOG_LEVEL: 'info' },
    });
    expect(run.uncaught).toBeNull();
    expect(run.stdout.split('\n').filter(isLogLine)).toEqual([]);
    expect(run.stderr).toMatch(/writing an Event failed/);
    expect(run.stderr.split('\n').filter(isLogLine).length).toBeGreaterThan(0);
    if (output === 'json') {
      const evaluations = (JSON.parse(run.stdout) as unknown[]).map((item) => evaluationSchema.parse(item));
      expect(evaluations.map((evaluation) => evaluation.target).sort()).toEqual(['capi-fleet-prod', 'gone']);
    } else {
      expect(run.stdout).toMatch(/gone/);
    }
  });
});
