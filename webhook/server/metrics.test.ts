// recordDecision counts decisions without prom-client's per-call label handling; what /metrics
// exports must be exactly what prom-client's own inc() and observe() would have made of the same
// requests.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ADMISSION_DURATION, createWebhookMetrics, INTERNAL_ERROR_DECISION, type DecisionLabels } from './metrics.js';

const DECISIONS = 'etcd_guard_admission_decisions_total';

/** One metric family of a Prometheus text exposition (prom-client puts a blank line between them). */
function family(text: string, name: string): string {
  const block = text.split('\n\n').find((part) => part.startsWith(`# HELP ${name} `));
  if (block === undefined) throw new Error(`no family ${name} in the exposition`);
  return block.trim();
}

/** Durations on, just below and just above every bucket bound, beyond the last one, and zero. */
function durations(): number[] {
  const values = [0, 1e-9, 2, 30];
  for (const bound of ADMISSION_DURATION.buckets) values.push(bound, bound * 0.999, bound * 1.001);
  for (let index = 0; index < 200; index++) values.push(((index * 7919) % 1000) / 997);
  return values;
}

// Each set differs from the one before it in one label only, the last from the first in all four.
const LABEL_SETS: DecisionLabels[] = [
  { target: 'a', decision: 'allowed', mode: 'enforce', reason: 'healthy' },
  { target: 'a', decision: 'allowed', mode: 'enforce', reason: 'degraded' },
  { target: 'a', decision: 'allowed', mode: 'warn', reason: 'degraded' },
  { target: 'a', decision: 'denied', mode: 'warn', reason: 'degraded' },
  { target: 'b', decision: 'denied', mode: 'warn', reason: 'degraded' },
  { target: '', decision: 'overridden', mode: 'audit', reason: 'override' },
];

/** The same requests through prom-client's own inc() and observe(). */
function reference(): { registry: Registry; record: (labels: DecisionLabels, seconds: number) => void } {
  const registry = new Registry();
  // Registered in the order createWebhookMetrics registers them; only these two families are compared.
  const decisions = new Counter({
    name: DECISIONS,
    help:
      'Admission decisions per target: decision (allowed, denied, overridden), the enforcement mode it was applied in ' +
      '(denied with mode warn or audit was allowed: a would-be denial) and a short reason.',
    labelNames: ['target', 'decision', 'mode', 'reason'] as const,
    registers: [registry],
  });
  // The fail-closed series exists from the start at 0 (createWebhookMetrics makes it so).
  decisions.inc({ ...INTERNAL_ERROR_DECISION }, 0);
  const duration = new Histogram({ ...ADMISSION_DURATION, buckets: [...ADMISSION_DURATION.buckets], registers: [registry] });
  return {
    registry,
    record: (labels, seconds) => {
      decisions.inc({ ...labels });
      duration.observe(seconds);
    },
  };
}

describe('recordDecision exports what prom-client would', () => {
  it('gives the same decision and duration series, scrape after scrape, as inc() and observe()', async () => {
    const metrics = createWebhookMetrics();
    const stock = reference();
    const values = durations();
    // Runs of one label set (the common case) and changes between sets, with scrapes in between.
    for (let round = 0; round < 3; round++) {
      values.forEach((seconds, index) => {
        const labels = LABEL_SETS[Math.floor(index / (round + 3)) % LABEL_SETS.length] as DecisionLabels;
        metrics.recordDecision(labels, seconds);
        stock.record(labels, seconds);
      });
      const [ours, theirs] = [await metrics.render(), await stock.registry.metrics()];
      expect(family(ours, DECISIONS)).toBe(family(theirs, DECISIONS));
      expect(family(ours, ADMISSION_DURATION.name)).toBe(family(theirs, ADMISSION_DURATION.name));
      expect(family(ours, ADMISSION_DURATION.name)).toContain(`${ADMISSION_DURATION.name}_count ${values.length * (round + 1)}`);
    }
  });
});

describe('every metric the webhook registers has its row in docs/operations.md', () => {
  it('names each family, its type and its labels in the metrics table', async () => {
    const doc = readFileSync(path.join(import.meta.dirname, '../..', 'docs', 'operations.md'), 'utf8');
    const metrics = createWebhookMetrics();
    metrics.recordHookDecision('BeforeClusterUpgrade', { target: 'a', decision: 'denied', mode: 'enforce', reason: 'unhealthy' });
    const registered = await metrics.registry.getMetricsAsJSON();
    expect(registered.length).toBeGreaterThan(5);
    for (const metric of registered) {
      const row = doc.split('\n').find((line) => line.startsWith(`| \`${metric.name}\` |`));
      expect(row, metric.name).toBeDefined();
      expect(row?.split('|')[2]?.trim(), metric.name).toBe(String(metric.type));
    }
  });

  it('counts a hook decision with the hook and the admission decision labels', async () => {
    const metrics = createWebhookMetrics();
    metrics.recordHookDecision('BeforeControlPlaneUpgrade', {
      target: 'prod',
      decision: 'denied',
      mode: 'warn',
      reason: 'unhealthy',
    });
    expect(family(await metrics.render(), 'etcd_guard_runtime_hook_decisions_total')).toContain(
      'etcd_guard_runtime_hook_decisions_total{hook="BeforeControlPlaneUpgrade",target="prod",decision="denied",mode="warn",reason="unhealthy"} 1',
    );
  });
});
