// Runs the real Serverless Framework (print, invoke local) on serverless.yml: the esbuild bundle,
// the banner and the handlers are exercised as Lambda would load them, against a real etcd.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { ConfigError, parseGuardConfig, type GuardConfig } from '../../functions/domain/config.js';
import { evaluationSchema, parseEvaluationJson } from '../../functions/domain/evaluation-document.js';
import {
  createEvaluateHandler,
  createEvaluateHttpHandler,
  type HandlerFactoryOptions,
} from '../../functions/entrypoints/handlers.js';
import type { ScheduledDeps } from '../../functions/usecases/scheduled-run.js';
import { makeEvaluation } from '../harness/evaluation-fixture.js';
import { freePorts } from '../harness/free-port.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { runProcess, type ProcessRun } from '../harness/process.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TOKEN = 'serverless-test-token-51c2';
const SERVERLESS_DEADLINE_MS = 90_000;

/**
 * serverless-esbuild zips through a scratch dir in the OS temp dir that it does not always remove
 * (it leaked `/tmp/etcd-guard-<pid>-<ms>-<hex>/` per run); every run here gets a TMPDIR of its own,
 * removed after the file's tests, so the suite leaves nothing in /tmp.
 */
const serverlessTmp = mkdtempSync(path.join(os.tmpdir(), 'etcd-guard-serverless-tmp-'));
afterAll(() => rmSync(serverlessTmp, { recursive: true, force: true }));

const SERVERLESS_ENV: Record<string, string> = {
  TMPDIR: serverlessTmp,
  SLS_TELEMETRY_DISABLED: '1',
  SLS_NOTIFICATIONS_MODE: 'off',
  SLS_DEPRECATION_DISABLE: '*',
  // Dummy credentials: print, package, invoke local and offline never call AWS, but some code paths look.
  AWS_ACCESS_KEY_ID: 'AKIAETCDGUARDTEST000',
  AWS_SECRET_ACCESS_KEY: 'not-a-real-secret',
  AWS_REGION: 'us-east-1',
  ETCD_GUARD_CONFIG: '',
  ETCD_GUARD_CONFIG_JSON: '',
  ETCD_GUARD_TOKEN: '',
  LOG_LEVEL: 'info',
};

/** Runs `serverless ARGS` in the repo; SIGKILLs the whole process group if it overruns. */
function runServerless(args: string[], env: Record<string, string> = {}): Promise<ProcessRun> {
  return runProcess(path.join(REPO, 'node_modules', '.bin', 'serverless'), args, {
    cwd: REPO,
    env: { ...process.env, ...SERVERLESS_ENV, ...env },
    timeoutMs: SERVERLESS_DEADLINE_MS,
    processGroup: true,
    settleOn: 'exit',
  });
}

/**
 * The handler's return value as `invoke local` prints it (JSON indented by 4), after any log
 * lines the handler wrote (one-line JSON each).
 */
function invokeResult(stdout: string): unknown {
  // `invoke local` pretty-prints the handler's result ("{" and "}" alone on their lines); the
  // handler's pino log lines are one-line JSON and may come before or after it.
  const lines = stdout.split('\n');
  const start = lines.lastIndexOf('{');
  const end = start < 0 ? -1 : lines.indexOf('}', start);
  if (start < 0 || end < 0) throw new Error(`no handler result in the output:\n${stdout}`);
  return JSON.parse(lines.slice(start, end + 1).join('\n'));
}

function logLines(stdout: string): Array<Record<string, unknown>> {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{"'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('serverless.yml', () => {
  it('resolves with both functions, the one-minute schedule and GET/POST /evaluations/{target}', async () => {
    const run = await runServerless(['print', '--format', 'json']);
    console.info(`serverless print took ${Math.round(run.wallMs)} ms`);
    expect(run.code, run.stderr).toBe(0);
    const printed = JSON.parse(run.stdout.slice(run.stdout.indexOf('{'))) as {
      frameworkVersion: string;
      provider: { runtime: string };
      functions: Record<string, { handler: string; timeout: number; events: Array<Record<string, unknown>> }>;
      custom: { esbuild: Record<string, unknown> };
    };
    expect(printed.frameworkVersion).toBe('3');
    expect(printed.provider.runtime).toBe('nodejs22.x');
    expect(printed.custom.esbuild).toMatchObject({ format: 'esm', platform: 'node', target: 'node22' });
    // v3's schema does not know nodejs22.x: that warning, and no other (the rest stays checked).
    const invalid = [...run.stderr.matchAll(/^\s+at '([^']+)': (.*)$/gm)].map((match) => match[1]);
    expect(invalid).toEqual(['provider.runtime']);
    expect(printed.functions.evaluate).toMatchObject({
      handler: 'functions/entrypoints/handlers.evaluate',
      events: [{ schedule: 'rate(1 minute)' }],
    });
    expect(printed.functions.evaluate?.timeout).toBeLessThanOrEqual(55);
    expect(printed.functions.evaluateHttp).toMatchObject({
      handler: 'functions/entrypoints/handlers.evaluateHttp',
      events: [
        { httpApi: { method: 'GET', path: '/evaluations/{target}' } },
        { httpApi: { method: 'POST', path: '/evaluations/{target}' } },
      ],
    });
  });

  // Issue 31: it deployed nodejs20.x, at its end of life. `invoke local` below runs the bundle in
  // this Node (v3 only checks the runtime starts with "nodejs"), so the runtime must be this
  // Node's major: a Node.js LTS, within package.json's engines and before its end of life.
  it('deploys a supported Node: an LTS line the engines allow, the one tested here, before its end of life', async () => {
    const yml = await readFile(path.join(REPO, 'serverless.yml'), 'utf8');
    const runtime = /^\s+runtime:\s*nodejs(\d+)\.x\s*$/m.exec(yml);
    const target = /^\s+target:\s*node(\d+)\s*$/m.exec(yml);
    const major = Number(runtime?.[1]);
    const packageJson = JSON.parse(await readFile(path.join(REPO, 'package.json'), 'utf8')) as { engines: { node: string } };
    const minimum = Number(/^>=\s*(\d+)$/.exec(packageJson.engines.node)?.[1]);
    // The Node.js release schedule's end-of-life dates of the LTS lines Lambda offers.
    const endOfLife: Record<number, string> = { 20: '2026-04-30', 22: '2027-04-30', 24: '2028-04-30' };
    expect(major).toBeGreaterThanOrEqual(minimum);
    expect(Number(target?.[1])).toBe(major);
    expect(Number(process.versions.node.split('.')[0])).toBe(major);
    expect(endOfLife[major], `nodejs${major}.x is not an LTS line Lambda offers`).toBeDefined();
    expect(Date.parse(endOfLife[major] ?? '')).toBeGreaterThan(Date.now());
  });

  describe('invoke local against a real 3-member etcd with the file store', () => {
    let cluster: EtcdTestCluster;
    let dir: string;
    let configJson: string;

    beforeAll(async () => {
      cluster = await startEtcdCluster({ name: 'sls' });
      dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-serverless-'));
      configJson = JSON.stringify({
        // invoke local runs the bundle from .esbuild/.build: every path must be absolute.
        store: { kind: 'file', dir: path.join(dir, 'store') },
        targets: [
          {
            name: 'main',
            endpoints: cluster.endpoints,
            tls: cluster.clientTls,
            timeout: '3s',
          },
        ],
      });
    });
    afterAll(async () => {
      await cluster?.destroy();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('evaluate stores the evaluation file and returns a summary with one structured log line', async () => {
      const run = await runServerless(['invoke', 'local', '-f', 'evaluate', '--data', '{}'], {
        ETCD_GUARD_CONFIG_JSON: configJson,
      });
      console.info(`serverless invoke local -f evaluate took ${Math.round(run.wallMs)} ms`);
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      expect(invokeResult(run.stdout)).toMatchObject({ targets: 1, passed: 1, notPassed: 0, failed: 0 });
      const stored = parseEvaluationJson(await readFile(path.join(dir, 'store', 'main.json'), 'utf8'), 'main.json');
      expect(stored).toMatchObject({ target: 'main', verdict: 'Healthy', passed: true });
      const lines = logLines(run.stdout).filter((line) => line.target === 'main');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ verdict: 'Healthy', passed: true, written: true, reasons: 0 });
    });

    it('evaluateHttp POST with the token returns a fresh evaluation that parses with the schema', async () => {
      const eventFile = path.join(dir, 'post-event.json');
      await writeFile(
        eventFile,
        JSON.stringify({
          version: '2.0',
          routeKey: 'POST /evaluations/{target}',
          rawPath: '/evaluations/main',
          headers: { authorization: `Bearer ${TOKEN}` },
          pathParameters: { target: 'main' },
          requestContext: { http: { method: 'POST', path: '/evaluations/main' } },
        }),
      );
      const run = await runServerless(['invoke', 'local', '-f', 'evaluateHttp', '--path', eventFile], {
        ETCD_GUARD_CONFIG_JSON: configJson,
        ETCD_GUARD_TOKEN: TOKEN,
      });
      console.info(`serverless invoke local -f evaluateHttp took ${Math.round(run.wallMs)} ms`);
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      const result = invokeResult(run.stdout) as { statusCode: number; headers: Record<string, string>; body: string };
      expect(result.statusCode).toBe(200);
      expect(result.headers['content-type']).toBe('application/json');
      const evaluation = evaluationSchema.parse(JSON.parse(result.body));
      expect(evaluation).toMatchObject({ target: 'main', verdict: 'Healthy' });
      const stored = parseEvaluationJson(await readFile(path.join(dir, 'store', 'main.json'), 'utf8'), 'main.json');
      expect(stored).toEqual(evaluation);
      expect(run.stdout + run.stderr).not.toContain(TOKEN);
    });

    it('evaluateHttp without the token is 401 and runs no evaluation', async () => {
      const storedFile = path.join(dir, 'store', 'main.json');
      const storedBefore = await readFile(storedFile, 'utf8');
      const run = await runServerless(
        [
          'invoke',
          'local',
          '-f',
          'evaluateHttp',
          '--data',
          JSON.stringify({ headers: {}, pathParameters: { target: 'main' }, requestContext: { http: { method: 'POST' } } }),
        ],
        { ETCD_GUARD_CONFIG_JSON: configJson, ETCD_GUARD_TOKEN: TOKEN },
      );
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      const result = invokeResult(run.stdout) as { statusCode: number; headers: Record<string, string> };
      expect(result.statusCode).toBe(401);
      expect(result.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(await readFile(storedFile, 'utf8')).toBe(storedBefore);
    });

    it('the packaged zip runs on its own (no node_modules, no package.json) and evaluates the cluster', async () => {
      const packageDir = path.join(dir, 'package');
      // serverless-esbuild reuses its build directory: a file left there by invoke local would
      // hide one that package.patterns no longer copies.
      await rm(path.join(REPO, '.esbuild'), { recursive: true, force: true });
      const run = await runServerless(['package', '--package', packageDir]);
      console.info(`serverless package took ${Math.round(run.wallMs)} ms`);
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      const unpacked = path.join(dir, 'unpacked');
      const unzip = await runProcess('unzip', ['-q', path.join(packageDir, 'etcd-guard.zip'), '-d', unpacked], {
        timeoutMs: SERVERLESS_DEADLINE_MS,
      });
      expect(unzip.code, unzip.stderr).toBe(0);
      // Outside the repo nothing can be resolved from node_modules: the bundle must be complete.
      const script =
        "const m = await import('./functions/entrypoints/handlers.js'); process.stdout.write(JSON.stringify(await m.evaluate({})));";
      const invoked = await runProcess(process.execPath, ['--input-type=module', '-e', script], {
        cwd: unpacked,
        timeoutMs: SERVERLESS_DEADLINE_MS,
        env: { ...process.env, ETCD_GUARD_CONFIG_JSON: configJson, LOG_LEVEL: 'silent', NODE_PATH: '' },
      });
      expect(invoked.code, invoked.stderr).toBe(0);
      expect(JSON.parse(invoked.stdout)).toMatchObject({ targets: 1, passed: 1, failed: 0 });
    });

    it('serverless offline serves POST and GET /evaluations/{target} over HTTP with bearer auth', async () => {
      const [httpPort, lambdaPort] = await freePorts(2);
      const child = spawn(
        path.join(REPO, 'node_modules', '.bin', 'serverless'),
        ['offline', '--host', '127.0.0.1', '--httpPort', String(httpPort), '--lambdaPort', String(lambdaPort)],
        {
          cwd: REPO,
          detached: true,
          stdio: ['ignore', 'pipe', 'pipe'],
          env: {
            ...process.env,
            ...SERVERLESS_ENV,
            ETCD_GUARD_CONFIG_JSON: configJson,
            ETCD_GUARD_TOKEN: TOKEN,
            LOG_LEVEL: 'silent',
          },
        },
      );
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      let output = '';
      const ready = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`serverless offline not ready within 60 s:\n${output}`)), 60_000);
        const onData = (chunk: Buffer) => {
          output += chunk.toString('utf8');
          if (output.includes('Server ready')) {
            clearTimeout(timer);
            resolve();
          }
        };
        child.stdout?.on('data', onData);
        child.stderr?.on('data', onData);
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`serverless offline exited (${String(code)}) before it was ready:\n${output}`));
        });
      });
      try {
        const started = performance.now();
        await ready;
        console.info(`serverless offline was ready after ${Math.round(performance.now() - started)} ms`);
        const url = `http://127.0.0.1:${httpPort}/evaluations/main`;
        const posted = await fetch(url, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}` },
          signal: AbortSignal.timeout(30_000),
        });
        expect(posted.status).toBe(200);
        const evaluation = evaluationSchema.parse(await posted.json());
        expect(evaluation).toMatchObject({ target: 'main', verdict: 'Healthy' });

        const unauthorized = await fetch(url, { signal: AbortSignal.timeout(30_000) });
        expect(unauthorized.status).toBe(401);
        expect(unauthorized.headers.get('www-authenticate')).toMatch(/^Bearer/);

        const cached = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(30_000) });
        expect(cached.status).toBe(200);
        expect(evaluationSchema.parse(await cached.json())).toEqual(evaluation);
      } finally {
        if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, 'SIGKILL');
        await exited;
      }
    });

    it('evaluate with a bad config fails the invocation and names the field and value', async () => {
      const run = await runServerless(['invoke', 'local', '-f', 'evaluate', '--data', '{}'], {
        ETCD_GUARD_CONFIG_JSON: JSON.stringify({ targets: [{ name: 'main', endpoints: ['not-a-url'] }] }),
      });
      expect(run.code).not.toBe(0);
      expect(run.stdout + run.stderr).toContain('targets.0.endpoints.0');
      expect(run.stdout + run.stderr).toContain('not-a-url');
    });
  });
});

describe('handlers in-process (injected config and dependencies)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-handlers-'));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  function options(loadConfig: () => GuardConfig, env: Record<string, string> = {}) {
    let evaluations = 0;
    const built: HandlerFactoryOptions = {
      loadConfig,
      env,
      buildDeps: (config): ScheduledDeps => ({
        config,
        store: createStore(config.store),
        evaluate: async (target) => {
          evaluations += 1;
          return makeEvaluation({ target: target.name, evaluatedAt: new Date().toISOString() });
        },
        logger: { info: () => undefined, error: () => undefined },
      }),
    };
    return { built, evaluations: () => evaluations };
  }

  const goodConfig = () =>
    parseGuardConfig(
      { store: { kind: 'file', dir }, targets: [{ name: 'main', endpoints: ['https://127.0.0.1:2379'] }] },
      'test',
    );

  it('loads the config once per container however many invocations follow', async () => {
    let loads = 0;
    const { built } = options(() => {
      loads += 1;
      return goodConfig();
    });
    const evaluate = createEvaluateHandler(built);
    const evaluateHttp = createEvaluateHttpHandler(built);
    expect(loads).toBe(0);
    for (let round = 0; round < 3; round += 1) {
      await expect(evaluate({})).resolves.toMatchObject({ targets: 1, passed: 1 });
      const response = await evaluateHttp({ requestContext: { http: { method: 'GET' } }, pathParameters: { target: 'main' } });
      expect(response.statusCode).toBe(200);
    }
    // One load per handler: each is its own Lambda function, with its own containers.
    expect(loads).toBe(2);
  });

  it('throws the ConfigError on every invocation until the config loads, then works', async () => {
    let broken = true;
    const { built } = options(
      () => {
        if (broken) throw new ConfigError('ETCD_GUARD_CONFIG_JSON', ['targets: needs at least one target (got [])']);
        return goodConfig();
      },
      { LOG_LEVEL: 'silent' },
    );
    const evaluate = createEvaluateHandler(built);
    const evaluateHttp = createEvaluateHttpHandler(built);
    await expect(evaluate({})).rejects.toThrow('needs at least one target');
    await expect(
      evaluateHttp({ requestContext: { http: { method: 'GET' } }, pathParameters: { target: 'main' } }),
    ).rejects.toBeInstanceOf(ConfigError);
    broken = false;
    await expect(evaluate({})).resolves.toMatchObject({ targets: 1 });
  });

  it.each([
    { case: 'no method', event: { pathParameters: { target: 'main' } }, message: 'requestContext.http.method' },
    { case: 'no target', event: { requestContext: { http: { method: 'POST' } } }, message: 'pathParameters.target' },
    {
      case: 'null path parameters',
      event: { requestContext: { http: { method: 'POST' } }, pathParameters: null },
      message: 'pathParameters.target',
    },
  ])('a malformed event ($case) is 400 naming the missing field', async ({ event, message }) => {
    const { built, evaluations } = options(goodConfig);
    const response = await createEvaluateHttpHandler(built)(event);
    expect(response.statusCode).toBe(400);
    expect(response.headers['content-type']).toBe('application/json');
    expect(JSON.parse(response.body)).toEqual({ error: expect.stringContaining(message) });
    expect(evaluations()).toBe(0);
  });

  it.each(['authorization', 'Authorization', 'AUTHORIZATION'])('reads the bearer token from the %s header', async (header) => {
    const { built } = options(goodConfig, { ETCD_GUARD_TOKEN: TOKEN });
    const response = await createEvaluateHttpHandler(built)({
      requestContext: { http: { method: 'POST' } },
      pathParameters: { target: 'main' },
      headers: { [header]: `Bearer ${TOKEN}` },
    });
    expect(response.statusCode).toBe(200);
    expect(evaluationSchema.parse(JSON.parse(response.body))).toMatchObject({ target: 'main' });
  });
});
