// Issue 30, item 5: "the connection cap is shared". Four addresses, each at its per-peer limit
// (128), together held the whole global cap (512), and the apiserver's reviews got no answer. The
// webhook runs as its own process (`etcd-guard webhook`), over plain HTTP and over HTTPS; the
// attackers hold silent sockets and re-open each one as soon as it is cut.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_CONNECTIONS_PER_PEER } from './connections.js';
import { MAX_CONNECTIONS } from './main.js';
import { generateTestCerts, type TestCerts } from '../../test/harness/certs.js';
import { holdConnections, type HeldConnections } from '../../test/harness/hostile-connections.js';
import { startWebhookProcess, type WebhookProcess } from '../../test/harness/webhook-process.js';
import { waitFor } from '../../test/harness/wait.js';
import { writeCachedConfig } from '../../test/harness/cached-config.js';

const ATTACKER_ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];
const APISERVER_ADDRESS = '127.0.0.1';
/** Long enough to span the handshake and headers timeouts, when the cap is contested again. */
const REVIEWING_MS = 11_000;
const REVIEW_PACE_MS = 20;

let workDir: string;
let certs: TestCerts;
let configFile: string;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-cap-sharing-'));
  certs = await generateTestCerts(workDir);
  // What the reviews are judged on does not matter here, only that they are answered.
  configFile = await writeCachedConfig(workDir, [{ name: 'prod' }]);
}, 60_000);

afterAll(async () => {
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

const scaleFixture = readFileSync(new URL('../../test/fixtures/admission/kcp-scale-up-3-to-5.json', import.meta.url), 'utf8');
let reviewCounter = 0;

/** One AdmissionReview on a new connection from the apiserver's address: answered when its uid comes back. */
function review(webhook: WebhookProcess, ca: Buffer): Promise<boolean> {
  reviewCounter += 1;
  const uid = `cap-sharing-${reviewCounter}`;
  const body = scaleFixture.replace('7c0f3a9e-1d2b-4c5e-8f6a-0b1c2d3e4f51', uid);
  const secure = webhook.url.startsWith('https:');
  return new Promise((resolve) => {
    const options = {
      method: 'POST',
      localAddress: APISERVER_ADDRESS,
      agent: false as const,
      headers: { 'content-type': 'application/json' },
      timeout: 5_000,
      ...(secure ? { ca } : {}),
    };
    const url = `${webhook.url}/validate?timeout=10s`;
    const onResponse = (res: http.IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', () => resolve(false));
      res.on('end', () => {
        try {
          const answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { response?: { uid?: string } };
          resolve(res.statusCode === 200 && answer.response?.uid === uid);
        } catch {
          resolve(false);
        }
      });
    };
    const req = secure ? https.request(url, options, onResponse) : http.request(url, options, onResponse);
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', () => resolve(false));
    req.end(body);
  });
}

describe(`issue 30 item 5: ${ATTACKER_ADDRESSES.length} addresses × ${MAX_CONNECTIONS_PER_PEER} connections do not take the shared cap`, () => {
  it.each([
    { transport: 'plain HTTP', insecureHttp: true },
    { transport: 'TLS', insecureHttp: false },
  ])(
    `$transport: while ${ATTACKER_ADDRESSES.length} × ${MAX_CONNECTIONS_PER_PEER} silent connections are held and re-opened, every review from another address is answered`,
    async ({ insecureHttp }) => {
      expect(ATTACKER_ADDRESSES.length * MAX_CONNECTIONS_PER_PEER).toBeGreaterThanOrEqual(MAX_CONNECTIONS);
      const webhook = await startWebhookProcess(
        insecureHttp
          ? { configFile, insecureHttp }
          : { configFile, certFile: certs.serverCertFile, keyFile: certs.serverKeyFile },
      );
      const ca = readFileSync(certs.caFile);
      const attackers: HeldConnections[] = [];
      try {
        expect(await review(webhook, ca)).toBe(true);
        for (const address of ATTACKER_ADDRESSES) {
          attackers.push(holdConnections({ host: '127.0.0.1', port: webhook.port }, address, MAX_CONNECTIONS_PER_PEER));
        }
        const held = () => attackers.reduce((sum, attacker) => sum + attacker.alive(), 0);
        await waitFor('the attackers to hold the whole cap', 20_000, () => held() >= MAX_CONNECTIONS);
        const outcomes: boolean[] = [];
        const started = performance.now();
        while (outcomes.length < 20 || performance.now() - started < REVIEWING_MS) {
          outcomes.push(await review(webhook, ca));
          // Paced like an apiserver's reviews, not a flood of our own (the cores are shared).
          await new Promise((resolve) => setTimeout(resolve, REVIEW_PACE_MS));
        }
        const answered = outcomes.filter(Boolean).length;
        console.log(
          `cap sharing (${insecureHttp ? 'HTTP' : 'TLS'}): attackers opened ${attackers.map((a) => a.opened()).join('+')} ` +
            `connections, ${attackers.reduce((sum, a) => sum + a.cut(), 0)} cut, ${held()} held at the end; ` +
            `${answered} of ${outcomes.length} reviews answered`,
        );
        expect(answered, `${answered} of ${outcomes.length} answered`).toBe(outcomes.length);
        expect(webhook.output()).not.toMatch(/"level":"(error|fatal)"/);
      } finally {
        for (const attacker of attackers) attacker.stop();
        await webhook.stop();
      }
    },
    90_000,
  );
});
