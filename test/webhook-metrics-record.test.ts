// recordDecision counts decisions without prom-client's per-call label handling; what /metrics
// exports must be exactly what prom-client's own inc() and observe() would have made of the same
// requests.
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  ADMISSION_DURATION,
  createWebhookMetrics,
  INTERNAL_ERROR_DECISION,
  type DecisionLabels,
} from '../webhook/server/metrics.js';

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
