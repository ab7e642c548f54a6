// The `etcd-guard webhook` command: flag and config errors exit 2 naming the problem, and a
// running server shuts down gracefully — new connections refused, in-flight requests finished.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGuardConfig } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { createLogger } from '../../functions/shared/logger.js';
import { parseListenAddress, runWebhookCommand, startWebhookServer, type RunningWebhookServer } from './main.js';
import { generateTestCerts, type TestCerts } from '../../test/harness/certs.js';
import { makeEvaluation } from '../../test/harness/evaluation-fixture.js';
import { waitFor } from '../../test/harness/wait.js';

let workDir: string;
let certs: TestCerts;
let configFile: string;
const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-webhook-main-'));
  certs = await generateTestCerts(workDir);
  configFile = path.join(workDir, 'guard.yaml');
  await writeFile(
    configFile,
    ['store: { kind: file, dir: ./store }', 'targets:', '  - name: local', '    endpoints: [https://127.0.0.1:2379]', ''].join(
      '\n',
    ),
  );
});

afterAll(async () => {
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

function get(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject);
  });
}

describe('runWebhookCommand exit codes', () => {
  it.each([
    { case: 'neither TLS flags nor --insecure-http', options: {}, message: /--tls-cert is required/ },
    { case: 'only --tls-cert', options: { tlsCertFile: 'x.pem' }, message: /--tls-key is required/ },
    {
      case: '--tls-key with --insecure-http',
      options: { tlsKeyFile: 'k.pem', insecureHttp: true },
      message: /--tls-key cannot be combined with --insecure-http/,
    },
    {
      case: 'a listen address without a port',
      options: { listen: 'localhost', insecureHttp: true },
      message: /--listen: invalid address "localhost"/,
    },
    {
      case: 'a port out of range',
      options: { listen: '127.0.0.1:70000', insecureHttp: true },
      message: /--listen: invalid address "127.0.0.1:70000"/,
    },
    {
      case: 'a missing config file',
      options: { configFile: '/nonexistent/guard.yaml', insecureHttp: true },
      message: /\/nonexistent\/guard.yaml: cannot read the file: ENOENT/,
    },
    {
      case: 'a TLS certificate that does not exist',
      options: { tlsCertFile: '/nonexistent/tls.crt', tlsKeyFile: '/nonexistent/tls.key', listen: '127.0.0.1:0' },
      message: /--tls-cert\/--tls-key: cannot read TLS certificate file \/nonexistent\/tls.crt: ENOENT/,
    },
  ])('exits 2 for $case, naming it on stderr', async ({ options, message }) => {
    const lines: string[] = [];
    const code = await runWebhookCommand(
      { configFile, listen: '127.0.0.1:0', insecureHttp: false, ...options },
      {},
      { stderr: (line) => lines.push(line), logger: silent, shutdownSignal: Promise.resolve() },
    );
    expect(code).toBe(2);
    expect(lines.join('\n')).toMatch(message);
  });

  it('exits 2 naming the field for an invalid config', async () => {
    const bad = path.join(workDir, 'bad.yaml');
    await writeFile(bad, 'maxAgeSeconds: -5\ntargets: []\n');
    const lines: string[] = [];
    const code = await runWebhookCommand(
      { configFile: bad, listen: '127.0.0.1:0', insecureHttp: true },
      {},
      { stderr: (line) => lines.push(line), logger: silent },
    );
    expect(code).toBe(2);
    expect(lines.join('\n')).toMatch(/maxAgeSeconds.*got -5/);
    expect(lines.join('\n')).toMatch(/targets/);
  });

  it('serves HTTPS until told to stop, then exits 0', async () => {
    let stop: () => void = () => undefined;
    const shutdownSignal = new Promise<void>((resolve) => (stop = resolve));
    let url = '';
    const exitCodes: number[] = [];
    const listening = new Promise<void>((resolve) => {
      void runWebhookCommand(
        {
          configFile,
          listen: '127.0.0.1:0',
          insecureHttp: false,
          tlsCertFile: certs.serverCertFile,
          tlsKeyFile: certs.serverKeyFile,
        },
        {},
        {
          logger: silent,
          shutdownSignal,
          onListening: (server) => {
            url = server.url;
            resolve();
          },
        },
      ).then((code) => exitCodes.push(code));
    });
    await listening;
    expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const status = await new Promise<number>((resolve, reject) => {
      https
        .get(`${url}/healthz`, { ca: readFileSync(certs.caFile), agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on('error', reject);
    });
    expect(status).toBe(200);
    stop();
    await expect.poll(() => exitCodes, { timeout: 5_000 }).toEqual([0]);
  });
});

describe('graceful shutdown', () => {
  let running: RunningWebhookServer | undefined;
  afterAll(async () => {
    await running?.close();
  });

  it('refuses new connections but finishes a request already in flight', async () => {
    let finishEvaluation: (evaluation: Evaluation) => void = () => undefined;
    let startedResolve: () => void = () => undefined;
    const evaluationStarted = new Promise<void>((started) => (startedResolve = started));
    const config = parseGuardConfig(
      {
        store: { kind: 'file', dir: path.join(workDir, 'shutdown-store') },
        targets: [{ name: 'local', endpoints: ['https://127.0.0.1:2379'] }],
      },
      'shutdown test',
    );
    running = await startWebhookServer({
      config,
      host: '127.0.0.1',
      port: 0,
      tls: null,
      token: null,
      logger: silent,
      evaluate: () =>
        new Promise<Evaluation>((resolve) => {
          finishEvaluation = resolve;
          startedResolve();
        }),
    });
    const inFlight = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${running?.url}/evaluations/local`, { method: 'POST', agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      });
      req.on('error', reject);
      req.end();
    });
    await evaluationStarted;
    const url = running.url;
    const closed = running.close();
    await expect(get(`${url}/healthz`)).rejects.toThrow(/ECONNREFUSED/);
    finishEvaluation(makeEvaluation({ target: 'local', evaluatedAt: new Date().toISOString() }));
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.body) as Evaluation).target).toBe('local');
    await closed;
    running = undefined;
  });
});

describe('parseListenAddress', () => {
  it.each([
    ['0.0.0.0:8443', { host: '0.0.0.0', port: 8443 }],
    [':9443', { host: '0.0.0.0', port: 9443 }],
    ['[::1]:8443', { host: '::1', port: 8443 }],
    ['localhost:0', { host: 'localhost', port: 0 }],
  ])('reads %s', (text, expected) => {
    expect(parseListenAddress(text)).toEqual(expected);
  });
});

describe('the webhook as a process', () => {
  it('on SIGTERM stops accepting, finishes the in-flight request and exits 0', async () => {
    // An etcd "member" that accepts TCP and never answers: the evaluation is in flight until its timeout.
    const hungPeer = net.createServer(() => undefined);
    const peerConnected = new Promise<void>((resolve) => hungPeer.once('connection', () => resolve()));
    await new Promise<void>((resolve) => hungPeer.listen(0, '127.0.0.1', resolve));
    const peerPort = (hungPeer.address() as AddressInfo).port;
    const processConfig = path.join(workDir, 'process.yaml');
    await writeFile(
      processConfig,
      [
        'store: { kind: file, dir: ./process-store }',
        'targets:',
        '  - name: hung',
        `    endpoints: [http://127.0.0.1:${peerPort}]`,
        '    timeout: 1s',
        '',
      ].join('\n'),
    );
    const runner = path.join(workDir, 'runner.mts');
    const mainModule = pathToFileURL(
      path.join(path.dirname(fileURLToPath(import.meta.url)), '../..', 'webhook', 'server', 'main.ts'),
    ).href;
    await writeFile(
      runner,
      [
        `import { runWebhookCommand } from ${JSON.stringify(mainModule)};`,
        `const code = await runWebhookCommand({ configFile: process.argv[2], listen: '127.0.0.1:0', insecureHttp: true }, process.env);`,
        'process.exit(code);',
      ].join('\n'),
    );
    const tsx = path.join(path.dirname(fileURLToPath(import.meta.url)), '../..', 'node_modules', '.bin', 'tsx');
    const child = spawn(tsx, [runner, processConfig], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'info' },
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no listening line within 20 s; stderr: ${stderr}`)), 20_000);
        child.stdout.on('data', (chunk: Buffer) => {
          stdout += chunk.toString('utf8');
          const match = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(stdout);
          if (match?.[1]) {
            clearTimeout(timer);
            resolve(match[1]);
          }
        });
        void exited.then((code) => reject(new Error(`exited ${code} before listening; stderr: ${stderr}`)));
      });
      const inFlight = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(`${url}/evaluations/hung`, { method: 'POST', agent: false }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        });
        req.on('error', reject);
        req.end();
      });
      await peerConnected;
      child.kill('SIGTERM');
      const answer = await inFlight;
      expect(answer.status, answer.body).toBe(200);
      expect((JSON.parse(answer.body) as Evaluation).verdict).toBe('Unhealthy');
      const timeout = new Promise<string>((resolve) => setTimeout(() => resolve('still running'), 15_000));
      expect(await Promise.race([exited, timeout])).toBe(0);
      expect(stdout).toMatch(/"msg":"shutting down: finishing in-flight requests"/);
      expect(stdout).toMatch(/"signal":"SIGTERM"/);
    } finally {
      child.kill('SIGKILL');
      hungPeer.close();
    }
  });
});

describe('bearer token rotation', () => {
  it('re-reads the token file when it changes (rotation without restart)', async () => {
    const tokenFile = path.join(workDir, 'token');
    await writeFile(tokenFile, 'token-a\n');
    const config = parseGuardConfig(
      {
        store: { kind: 'file', dir: path.join(workDir, 'rotation-store') },
        targets: [{ name: 'local', endpoints: ['https://127.0.0.1:2379'] }],
      },
      'rotation config',
    );
    const running = await startWebhookServer({
      config,
      host: '127.0.0.1',
      port: 0,
      tls: null,
      token: 'token-a',
      tokenFile,
      tokenStatIntervalMs: 50,
      logger: silent,
      evaluate: () => Promise.reject(new Error('never evaluates')),
    });
    const statusWith = (token: string) =>
      new Promise<number>((resolve, reject) => {
        http
          .get(`${running.url}/evaluations/local`, { agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          })
          .on('error', reject);
      });
    try {
      expect(await statusWith('token-a')).toBe(404); // authorized; nothing stored yet
      expect(await statusWith('token-b')).toBe(401);
      await writeFile(tokenFile, 'token-b\n');
      await waitFor('the rotated token to be accepted', 5_000, async () => (await statusWith('token-b')) === 404);
      expect(await statusWith('token-a')).toBe(401);
    } finally {
      await running.close();
    }
  });
});
