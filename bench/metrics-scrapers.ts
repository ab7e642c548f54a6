// Issue 30, item 6: do scrapes of a large fleet hold up admission? The webhook runs as its own
// process (`etcd-guard webhook --metrics-listen`) judging 1,000 targets, each with a stored
// evaluation; the admission p99 of sequential reviews is measured without scrapers, then while 32
// scrapers (another process, from 4 loopback addresses) GET /metrics in a loop, then without
// again. Printed: the p99 with scrapers over the mean of the two p99s without (target 0.8-1.2).
//
//   npx tsx bench/metrics-scrapers.ts [--smoke]
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CHECK_NAMES } from '../functions/domain/evaluation-document.js';
import { fixtureReview } from '../test/harness/reviews.js';
import { startWebhookProcess } from '../test/harness/webhook-process.js';
import { percentile } from './lib.js';
import { writeCachedConfig } from '../test/harness/cached-config.js';

const smoke = process.argv.includes('--smoke');
const TARGETS = 1_000;
const SCRAPERS = 32;
const SCRAPER_ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];
const REVIEWS = smoke ? 200 : 3_000;

/** A child that keeps SCRAPERS GETs of /metrics going until killed, and counts the answers. */
const SCRAPER_CHILD = `
const http = require('node:http');
const [url, count, addresses] = [process.argv[1], Number(process.argv[2]), process.argv[3].split(',')];
let ok = 0, other = 0;
const loop = (localAddress) => {
  const req = http.get(url, { localAddress, agent: false }, (res) => {
    res.on('data', () => undefined);
    res.on('end', () => { if (res.statusCode === 200) ok += 1; else other += 1; setImmediate(() => loop(localAddress)); });
  });
  req.on('error', () => { other += 1; setTimeout(() => loop(localAddress), 10); });
};
for (let i = 0; i < count; i += 1) loop(addresses[i % addresses.length]);
process.on('SIGTERM', () => { process.stdout.write(JSON.stringify({ ok, other })); process.exit(0); });
`;

async function main(): Promise<void> {
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-bench-scrapers-'));
  try {
    const names = Array.from({ length: TARGETS }, (_unused, index) => (index === 0 ? 'prod' : `fleet-${index}`));
    const checks = CHECK_NAMES.map((name) => ({ name, status: 'pass' as const, message: 'ok' }));
    const configFile = await writeCachedConfig(
      workDir,
      names.map((name, index) => ({
        name,
        match: index === 0 ? '{}' : `{ namespaces: [${name}] }`,
        evaluation: { evaluatedAt: new Date().toISOString(), checks },
      })),
    );
    const webhook = await startWebhookProcess({ configFile, insecureHttp: true, metricsPort: true, startTimeoutMs: 60_000 });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const review = JSON.stringify(fixtureReview('kcp-scale-up-3-to-5.json'));
      const once = () =>
        new Promise<number>((resolve, reject) => {
          const started = performance.now();
          const req = http.request(
            `${webhook.url}/validate?timeout=10s`,
            { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
            (res) => {
              res.on('data', () => undefined);
              res.on('end', () => resolve(performance.now() - started));
            },
          );
          req.on('error', reject);
          req.end(review);
        });
      let resets = 0;
      const p99 = async () => {
        const samples: number[] = [];
        for (let index = 0; index < REVIEWS; index += 1) {
          // A keep-alive connection the server closed as it was reused: counted, and the review sent again.
          samples.push(
            await once().catch((error: unknown) => {
              resets += 1;
              if ((error as NodeJS.ErrnoException).code !== 'ECONNRESET') throw error;
              return once();
            }),
          );
        }
        return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
      };
      // Every target's evaluation is in the cache once a scrape shows the last one.
      await p99();
      const before = await p99();
      const scrapers = spawn(
        process.execPath,
        ['-e', SCRAPER_CHILD, `${String(webhook.metricsUrl)}/metrics`, String(SCRAPERS), SCRAPER_ADDRESSES.join(',')],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let counts = '';
      scrapers.stdout.setEncoding('utf8').on('data', (chunk: string) => (counts += chunk));
      const during = await p99();
      const ended = new Promise((resolve) => scrapers.once('exit', resolve));
      scrapers.kill('SIGTERM');
      await ended;
      const after = await p99();
      const baseline = (before.p99 + after.p99) / 2;
      const ratio = during.p99 / baseline;
      const answered = JSON.parse(counts || '{"ok":0,"other":0}') as { ok: number; other: number };
      console.log(
        `admission p99 with ${SCRAPERS} looping scrapers of ${TARGETS} targets: ${during.p99.toFixed(2)} ms ` +
          `(p50 ${during.p50.toFixed(2)}); without: ${before.p99.toFixed(2)} / ${after.p99.toFixed(2)} ms ` +
          `(p50 ${before.p50.toFixed(2)} / ${after.p50.toFixed(2)}); scrapes answered 200: ${answered.ok}, other: ${answered.other}; reviews re-sent after a reset: ${resets}`,
      );
      console.log(
        `ratio ${ratio.toFixed(2)} vs baseline (target 0.80-1.20${smoke ? ', not judged in --smoke' : ''})` +
          `${smoke ? '' : ratio >= 0.8 && ratio <= 1.2 ? ': met' : ': NOT met'}`,
      );
    } finally {
      agent.destroy();
      await webhook.stop();
    }
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

await main();
