// The webhook's shortcuts past express's generic steps must be invisible: sendJson puts on the
// wire exactly what res.status(...).json(...) does in the webhook's app (x-powered-by off, no
// ETag), and the query parser gives what express's extended (qs) parser gives.
import express from 'express';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiserverQueryParser, type QueryParser } from './app.js';
import { sendJson } from './send-json.js';
import { rawHttpExchange } from '../../test/harness/raw-http.js';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/admission/kcp-scale-up-3-to-5.json');
const review = JSON.parse(readFileSync(FIXTURE, 'utf8')) as { request: { uid: string } };

const BODIES: Record<string, unknown> = {
  'an allow': {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid: review.request.uid,
      allowed: true,
      auditAnnotations: { decision: 'allowed', reason: 'healthy', enforcement: 'enforce', target: 'bench' },
    },
  },
  'a denial with non-ASCII text': {
    response: { uid: 'u', allowed: false, status: { code: 403, message: `ünïcødé ✓ 😀 ${'x'.repeat(300)}` } },
  },
  'just under 1000 characters, multi-byte': { text: `${'é'.repeat(985)}` },
  'exactly 1000 characters': { text: 'a'.repeat(990) },
  'over 1000 characters, multi-byte': { text: '😀'.repeat(800), warnings: Array.from({ length: 10 }, () => 'w'.repeat(119)) },
  'characters JSON escapes': { text: '"\\\n\t\u2028<>&' },
};

let server: http.Server;
let port: number;

beforeAll(async () => {
  const app = express();
  // As createWebhookApp sets them: sendJson relies on both.
  app.disable('x-powered-by');
  app.set('etag', false);
  app.post('/express/:body', (req, res) => {
    res.status(200).json(BODIES[req.params.body ?? '']);
  });
  app.post('/direct/:body', (req, res) => {
    sendJson(res, 200, BODIES[req.params.body ?? '']);
  });
  server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

/** The raw response to one POST, its Date header blanked (the only part that may differ). */
function rawPost(requestPath: string): Promise<string> {
  return rawHttpExchange(port, `POST ${requestPath} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
}

describe('sendJson', () => {
  it.each(Object.keys(BODIES))('sends %s byte for byte as res.json does', async (name) => {
    const viaExpress = await rawPost(`/express/${encodeURIComponent(name)}`);
    const direct = await rawPost(`/direct/${encodeURIComponent(name)}`);
    expect(viaExpress).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(direct).toBe(viaExpress);
  });
});

describe('the query parser', () => {
  const extended = express().get('query parser fn') as QueryParser;
  const parse = apiserverQueryParser(extended);
  it.each([
    'timeout=10s',
    'timeout=1m30s',
    'timeout=0.5s',
    'timeout=720h',
    'timeout=',
    'timeout=10s&timeout=20s',
    'timeout[]=10s',
    'timeout[a]=10s',
    'timeout.a=1s',
    'timeout=10%73',
    'timeout=1+s',
    'timeout=%C2%B5s',
    'Timeout=10s',
    'timeout=10s&dryRun=true',
    '__proto__=1',
    'hasOwnProperty=1',
    `timeout=${'1'.repeat(64)}s`,
    `timeout=${'1'.repeat(64)}`,
    '',
    null,
    undefined,
  ])('parses %s as express does', (query) => {
    const ours = parse(query);
    const theirs = extended(query);
    expect(ours).toStrictEqual(theirs);
    expect(Object.getPrototypeOf(ours)).toBe(Object.getPrototypeOf(theirs));
  });
});
