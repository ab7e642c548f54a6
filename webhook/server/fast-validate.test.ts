// The /validate fast path must be invisible: every request is sent, byte for byte, to the
// webhook's listener (fast path in front of express) and to its express app alone, and the raw
// answers must match (only the Date header may differ). Each row also says which side took it, so
// a change that quietly sends the apiserver's requests back through express fails here too.
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig, type GuardConfig } from '../../functions/domain/config.js';
import { createLogger } from '../../functions/shared/logger.js';
import { OnDemandEvaluations } from '../../functions/usecases/on-demand-service.js';
import { BODY_LIMIT_BYTES, createWebhookRoutes } from './app.js';
import { EvaluationCache } from './cache.js';
import { fastValidateQuery, NOT_FAST, parseStrictJson, withFastValidate } from './fast-validate.js';
import { createWebhookMetrics } from './metrics.js';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';
import { rawHttpExchange } from '../../test/harness/raw-http.js';
import { kcpReplicasReview } from '../../test/harness/reviews.js';

const NOW = new Date();
let workDir: string;
let cache: EvaluationCache;
let viaFastPath: http.Server;
let viaExpress: http.Server;
let fallbacks = 0;

function review(namespace: string): string {
  const built = kcpReplicasReview(3, 5, { namespace, name: 'control-plane', clusterName: namespace });
  built.request.userInfo = { username: 'alice@example.com', groups: ['system:authenticated'] };
  return JSON.stringify(built);
}

async function listen(listener: http.RequestListener): Promise<http.Server> {
  const server = http.createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-fast-validate-'));
  const config: GuardConfig = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      maxAgeSeconds: 60,
      inlineRefresh: false,
      targets: ['healthy', 'unhealthy'].map((name) => ({
        name,
        endpoints: ['https://127.0.0.1:2379'],
        timeout: '2s',
        match: { namespaces: [name] },
      })),
    },
    'fast-validate test config',
  );
  const store = createStore(config.store);
  const evaluatedAt = new Date(NOW.getTime() - 5_000).toISOString();
  await store.write(makeEvaluation({ target: 'healthy', evaluatedAt }));
  await store.write(
    makeEvaluation({
      target: 'unhealthy',
      evaluatedAt,
      verdict: 'Unhealthy',
      members: [makeMember(0), makeMember(1, { healthy: false, error: 'connection refused' }), makeMember(2)],
      reasons: ['member etcd-1 is unreachable: connection refused'],
    }),
  );
  cache = new EvaluationCache({ store, targets: ['healthy', 'unhealthy'] });
  await cache.pollOnce();
  const onDemand = new OnDemandEvaluations({
    config,
    store,
    evaluate: () => Promise.reject(new Error('no evaluation in this test')),
    token: null,
  });
  const logger = createLogger({ env: { LOG_LEVEL: 'silent' } });
  const routes = createWebhookRoutes({ config, cache, onDemand, metrics: createWebhookMetrics(), logger, now: () => NOW });
  const countedExpress: http.RequestListener = (req, res) => {
    fallbacks++;
    routes.app(req, res);
  };
  viaFastPath = await listen(withFastValidate({ ...routes.fastValidate, fallback: countedExpress }));
  viaExpress = await listen(routes.app);
});

afterAll(async () => {
  for (const server of [viaFastPath, viaExpress]) {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  }
  await cache?.stop();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** One request on its own connection; the raw answer with its Date header blanked. */
function exchange(server: http.Server, head: string, body: Buffer): Promise<string> {
  const { port } = server.address() as AddressInfo;
  return rawHttpExchange(port, Buffer.concat([Buffer.from(`${head}\r\nHost: x\r\nConnection: close\r\n\r\n`, 'latin1'), body]));
}

const JSON_TYPE = 'Content-Type: application/json';
const post = (target: string, headers: string[], body: Buffer) =>
  [`POST ${target} HTTP/1.1\r\n${[...headers, `Content-Length: ${body.length}`].join('\r\n')}`, body] as const;
const text = (value: string) => Buffer.from(value, 'utf8');
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

interface Row {
  name: string;
  request: readonly [string, Buffer];
  fast: boolean;
  status: number;
}

const ROWS: Row[] = [
  {
    name: 'a cached allow as the apiserver sends it',
    request: post('/validate?timeout=10s', [JSON_TYPE], text(review('healthy'))),
    fast: true,
    status: 200,
  },
  { name: 'a denial', request: post('/validate?timeout=10s', [JSON_TYPE], text(review('unhealthy'))), fast: true, status: 200 },
  { name: 'no query', request: post('/validate', [JSON_TYPE], text(review('healthy'))), fast: true, status: 200 },
  {
    name: 'charset=utf-8',
    request: post('/validate', ['Content-Type: application/json; charset=utf-8'], text(review('healthy'))),
    fast: true,
    status: 200,
  },
  {
    name: 'upper-case type and charset',
    request: post('/validate', ['Content-Type: Application/JSON;charset=UTF-8'], text(review('healthy'))),
    fast: true,
    status: 200,
  },
  { name: 'no content type', request: post('/validate', [], text(review('healthy'))), fast: true, status: 200 },
  {
    name: 'a byte-order mark',
    request: post('/validate', [JSON_TYPE], Buffer.concat([BOM, text(review('healthy'))])),
    fast: true,
    status: 200,
  },
  { name: 'only a byte-order mark', request: post('/validate', [JSON_TYPE], BOM), fast: true, status: 400 },
  { name: 'an empty body', request: post('/validate', [JSON_TYPE], Buffer.alloc(0)), fast: true, status: 400 },
  { name: 'only whitespace', request: post('/validate', [JSON_TYPE], text(' \r\n\t ')), fast: true, status: 400 },
  {
    name: 'truncated JSON',
    request: post('/validate', [JSON_TYPE], text(review('healthy').slice(0, 120))),
    fast: true,
    status: 400,
  },
  { name: 'a top-level string', request: post('/validate', [JSON_TYPE], text('  "AdmissionReview"')), fast: true, status: 400 },
  { name: 'a top-level number', request: post('/validate', [JSON_TYPE], text('42')), fast: true, status: 400 },
  { name: 'a top-level null', request: post('/validate', [JSON_TYPE], text('\nnull')), fast: true, status: 400 },
  { name: 'a JSON array', request: post('/validate', [JSON_TYPE], text('[1,2,3]')), fast: true, status: 400 },
  {
    name: 'an object that is no AdmissionReview',
    request: post('/validate', [JSON_TYPE], text('{"hello":"world"}')),
    fast: true,
    status: 400,
  },
  {
    name: 'bytes that are not UTF-8 inside a string',
    request: post(
      '/validate',
      [JSON_TYPE],
      Buffer.concat([
        text(review('healthy').replace('alice@example.com', 'alice')).subarray(0, 40),
        Buffer.from([0xff, 0xc3]),
        text(review('healthy')).subarray(40),
      ]),
    ),
    fast: true,
    status: 400,
  },
  {
    name: 'a text/plain body',
    request: post('/validate', ['Content-Type: text/plain'], text(review('healthy'))),
    fast: false,
    status: 200,
  },
  {
    name: 'a latin1 charset',
    request: post('/validate', ['Content-Type: application/json; charset=latin1'], text(review('healthy'))),
    fast: false,
    status: 415,
  },
  {
    name: 'a gzip body',
    request: post('/validate', [JSON_TYPE, 'Content-Encoding: gzip'], gzipSync(review('healthy'))),
    fast: false,
    status: 200,
  },
  { name: 'a trailing slash', request: post('/validate/', [JSON_TYPE], text(review('healthy'))), fast: false, status: 200 },
  {
    name: 'another query parameter',
    request: post('/validate?timeout=10s&pretty=1', [JSON_TYPE], text(review('healthy'))),
    fast: false,
    status: 200,
  },
  {
    name: 'an escaped timeout',
    request: post('/validate?timeout=%31s', [JSON_TYPE], text(review('healthy'))),
    fast: false,
    status: 200,
  },
  { name: 'upper-case path', request: post('/VALIDATE', [JSON_TYPE], text(review('healthy'))), fast: false, status: 200 },
  {
    name: 'a chunked body',
    request: [
      `POST /validate HTTP/1.1\r\n${JSON_TYPE}\r\nTransfer-Encoding: chunked`,
      Buffer.concat([text(`${Buffer.byteLength(review('healthy')).toString(16)}\r\n${review('healthy')}\r\n0\r\n\r\n`)]),
    ],
    fast: false,
    status: 200,
  },
  { name: 'a GET', request: ['GET /validate HTTP/1.1', Buffer.alloc(0)], fast: false, status: 404 },
];

describe('POST /validate past express', () => {
  it.each(ROWS)('answers $name exactly as express does (fast path: $fast)', async ({ request, fast, status }) => {
    const [head, body] = request;
    const before = fallbacks;
    const fastAnswer = await exchange(viaFastPath, head, body);
    expect(fallbacks - before).toBe(fast ? 0 : 1);
    const expressAnswer = await exchange(viaExpress, head, body);
    expect(fastAnswer).toBe(expressAnswer);
    expect(fastAnswer.split('\r\n')[0]).toBe(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`);
  });

  it('keeps serving after a client leaves in the middle of a body', async () => {
    const { port } = viaFastPath.address() as AddressInfo;
    const before = fallbacks;
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.write(`POST /validate HTTP/1.1\r\nHost: x\r\n${JSON_TYPE}\r\nContent-Length: 5000\r\n\r\n{"apiVersion":`, () => {
          socket.destroy();
          resolve();
        });
      });
      socket.on('error', reject);
    });
    const [head, body] = post('/validate', [JSON_TYPE], text(review('healthy')));
    expect(await exchange(viaFastPath, head, body)).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*"allowed":true/);
    expect(fallbacks).toBe(before);
  });
});

describe('which requests the fast path takes', () => {
  const request = (method: string, url: string, headers: http.IncomingHttpHeaders) =>
    ({ method, url, headers }) as http.IncomingMessage;
  it.each([
    [
      'the apiserver request',
      'POST',
      '/validate?timeout=10s',
      { 'content-type': 'application/json', 'content-length': '900' },
      '10s',
    ],
    ['no timeout', 'POST', '/validate', { 'content-length': '900' }, undefined],
    ['a body at the limit', 'POST', '/validate', { 'content-length': String(BODY_LIMIT_BYTES) }, undefined],
    ['a body one byte over the limit', 'POST', '/validate', { 'content-length': String(BODY_LIMIT_BYTES + 1) }, NOT_FAST],
    ['an absurd length', 'POST', '/validate', { 'content-length': '99999999999999999999' }, NOT_FAST],
    ['no length', 'POST', '/validate', {}, NOT_FAST],
    ['a deflate body', 'POST', '/validate', { 'content-length': '9', 'content-encoding': 'deflate' }, NOT_FAST],
    ['identity spelled out', 'POST', '/validate', { 'content-length': '9', 'content-encoding': 'identity' }, NOT_FAST],
    ['a PUT', 'PUT', '/validate', { 'content-length': '9' }, NOT_FAST],
    ['a longer path', 'POST', '/validate2', { 'content-length': '9' }, NOT_FAST],
    ['an empty timeout', 'POST', '/validate?timeout=', { 'content-length': '9' }, NOT_FAST],
  ])('%s', (_name, method, url, headers, expected) => {
    expect(fastValidateQuery(request(method, url, headers), BODY_LIMIT_BYTES)).toBe(expected);
  });

  it.each([
    ['an object', '{"a":1}', { a: 1 }],
    ['an array after whitespace', ' \n[1]', [1]],
    ['nothing', '', {}],
    ['a string', '"x"', undefined],
    ['a leading form feed, which JSON does not allow', '\f{}', undefined],
  ])('parses %s as body-parser does', (_name, body, expected) => {
    expect(parseStrictJson(Buffer.from(body))).toEqual(expected);
  });
});
