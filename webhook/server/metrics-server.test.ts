// Issue 30, item 6: "the metrics port starves and blocks". 32 idle connections took the metrics
// port's whole cap and 0 of 17 scrapes were answered. The webhook runs as its own process with
// --metrics-listen; idle sockets are held from other loopback addresses and re-opened when cut.
// (The other half of the item, scrapes of 1,000 targets holding up admission, is a performance
// target: bench/metrics-scrapers.ts prints admission p99 with scrapers against without.)
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METRICS_MAX_CONNECTIONS } from './metrics-server.js';
import { holdConnections, type HeldConnections } from '../../test/harness/hostile-connections.js';
import { httpRequest } from '../../test/harness/https-client.js';
import { startWebhookProcess, type WebhookProcess } from '../../test/harness/webhook-process.js';
import { waitFor } from '../../test/harness/wait.js';
import { writeCachedConfig } from '../../test/harness/cached-config.js';

const SCRAPES = 17;

let workDir: string;
let webhook: WebhookProcess;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-metrics-starvation-'));
  const configFile = await writeCachedConfig(workDir, [{ name: 'prod' }]);
  webhook = await startWebhookProcess({ configFile, insecureHttp: true, metricsPort: true });
}, 60_000);

afterAll(async () => {
  await webhook?.stop();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** One scrape on a new connection: answered when it is a 200 carrying the per-target series. */
async function scrape(): Promise<boolean> {
  try {
    const answer = await httpRequest(`${String(webhook.metricsUrl)}/metrics`, { timeoutMs: 3_000 });
    return answer.status === 200 && answer.text.includes('etcd_guard_target_verdict{target="prod"');
  } catch {
    return false;
  }
}

describe(`issue 30 item 6: ${METRICS_MAX_CONNECTIONS} idle connections on the metrics port`, () => {
  it.each([
    { holders: 'one address', addresses: ['127.0.0.2'] },
    { holders: 'four addresses', addresses: ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'] },
  ])(
    `held from $holders and re-opened when cut, leave every one of ${SCRAPES} scrapes answered`,
    async ({ addresses }) => {
      const port = Number(new URL(String(webhook.metricsUrl)).port);
      const perAddress = Math.ceil(METRICS_MAX_CONNECTIONS / addresses.length);
      const holders: HeldConnections[] = addresses.map((address) =>
        holdConnections({ host: '127.0.0.1', port }, address, perAddress),
      );
      try {
        const opened = () => holders.reduce((sum, held) => sum + held.opened(), 0);
        await waitFor('the idle connections to be opened', 20_000, () => opened() >= METRICS_MAX_CONNECTIONS);
        const outcomes: boolean[] = [];
        for (let index = 0; index < SCRAPES; index += 1) outcomes.push(await scrape());
        const answered = outcomes.filter(Boolean).length;
        console.log(
          `metrics port: ${opened()} idle connections opened from ${addresses.length} address(es), ` +
            `${holders.reduce((sum, held) => sum + held.alive(), 0)} held at the end; ${answered} of ${SCRAPES} scrapes answered`,
        );
        expect(answered).toBe(SCRAPES);
      } finally {
        for (const held of holders) held.stop();
      }
    },
    60_000,
  );
});
