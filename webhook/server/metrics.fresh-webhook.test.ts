// Issue 31: the labelled counters (etcd_guard_admission_decisions_total, …_inline_refresh_total,
// …_cache_feed_errors_total) were absent until their first event, so the shipped dashboard showed
// "No data" on a new install, and rate() lost each series' first increment. A fresh webhook,
// scraped before it has answered anything, has them at 0 for every label value known in advance:
// per target, and for decisions per target in that target's enforcement mode.
import path from 'node:path';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGuardConfig } from '../../functions/domain/config.js';
import { INLINE_REFRESH_RESULTS, TARGET_DECISIONS_AT_ZERO } from './metrics.js';
import { httpRequest } from '../../test/harness/https-client.js';
import { startTestWebhook, type TestWebhook } from '../../test/harness/webhook.js';

let dir: string;
let webhook: TestWebhook;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-fresh-metrics-'));
  const config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(dir, 'store') },
      targets: [
        { name: 'alpha', endpoints: ['https://127.0.0.1:9'], match: { clusterName: 'alpha' } },
        { name: 'beta', endpoints: ['https://127.0.0.1:9'], match: { clusterName: 'beta' }, enforcement: 'warn' },
      ],
    },
    'fresh webhook',
  );
  webhook = await startTestWebhook({ config, metricsPort: true, ready: true });
});

afterAll(async () => {
  await webhook?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The samples of one family: label text (as exported) to value. */
function samplesOf(text: string, name: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`).exec(line);
    if (match) samples.set(match[1] ?? '', Number(match[2]));
  }
  return samples;
}

describe('labelled counters on a fresh webhook (issue 31)', () => {
  it('exports each at 0 for its known label values before any event', async () => {
    const answer = await httpRequest(`${String(webhook.metricsUrl)}/metrics`);
    expect(answer.status).toBe(200);
    const inline = samplesOf(answer.text, 'etcd_guard_inline_refresh_total');
    const expected = ['alpha', 'beta'].flatMap((target) =>
      INLINE_REFRESH_RESULTS.map((result) => `{target="${target}",result="${result}"}`),
    );
    expect([...inline.keys()].sort()).toEqual(expected.sort());
    expect([...inline.values()].every((value) => value === 0)).toBe(true);
    expect(samplesOf(answer.text, 'etcd_guard_cache_feed_errors_total')).toEqual(
      new Map([
        ['{target="alpha"}', 0],
        ['{target="beta"}', 0],
      ]),
    );
    // A decision's reason is open-ended: known in advance are each target's allowed-healthy and
    // denied-unhealthy series in its own mode, and the fail-closed one the internal-error alert watches.
    expect(TARGET_DECISIONS_AT_ZERO).toEqual([
      { decision: 'allowed', reason: 'healthy' },
      { decision: 'denied', reason: 'unhealthy' },
    ]);
    expect(samplesOf(answer.text, 'etcd_guard_admission_decisions_total')).toEqual(
      new Map([
        ['{target="",decision="denied",mode="enforce",reason="internal-error"}', 0],
        ['{target="alpha",decision="allowed",mode="enforce",reason="healthy"}', 0],
        ['{target="alpha",decision="denied",mode="enforce",reason="unhealthy"}', 0],
        ['{target="beta",decision="allowed",mode="warn",reason="healthy"}', 0],
        ['{target="beta",decision="denied",mode="warn",reason="unhealthy"}', 0],
      ]),
    );
  });
});
