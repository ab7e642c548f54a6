// Prometheus metrics for the webhook, on a registry of its own so tests (and several servers in
// one process) never share counters through prom-client's global registry.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EnforcementMode } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { HOOK_OUTCOMES, UPGRADE_HOOKS, type HookOutcome, type UpgradeHook } from '../domain/runtime-hooks.js';
import { TargetMetrics, type EvaluatedAtSource, type TargetHealthSource } from './target-health-metrics.js';

/** What the age gauge needs from the cache: read at scrape time, so the age keeps growing while the feed is silent. */
export type { EvaluatedAtSource };

/**
 * The labels of one admission decision. `decision` is what the guard concluded; `mode` is how it
 * was applied: a `denied` decision under `warn` or `audit` was let through (a would-be denial).
 * `target` is empty for requests no target owns. Every value comes from a bounded set: the
 * targets (config and discovery), three decisions, three modes, the core's short reason words.
 */
export interface DecisionLabels {
  target: string;
  decision: 'allowed' | 'denied' | 'overridden';
  mode: EnforcementMode;
  reason: string;
}

export const INLINE_REFRESH_RESULTS = ['success', 'error', 'skipped'] as const;
export type InlineRefreshResult = (typeof INLINE_REFRESH_RESULTS)[number];

/** The decision of a request that failed inside the webhook (denied, fail closed): PrometheusRule's internal-error alert. */
export const INTERNAL_ERROR_DECISION: DecisionLabels = {
  target: '',
  decision: 'denied',
  mode: 'enforce',
  reason: 'internal-error',
};

export interface WebhookMetrics {
  readonly registry: Registry;
  recordDecision(labels: DecisionLabels, durationSeconds: number): void;
  recordInlineRefresh(target: string, result: InlineRefreshResult): void;
  /** The age of the evaluation a guarded decision rested on (live or cached evidence), at the decision. */
  recordEvidenceAge(evidence: 'live' | 'cached', ageSeconds: number): void;
  recordCacheFeedError(target: string): void;
  /** One answer of a Runtime SDK upgrade hook (webhook/server/runtime-extension.ts). */
  recordHookAnswer(hook: UpgradeHook, outcome: HookOutcome): void;
  /** The admission decision an upgrade hook's answer rested on, labelled as admission decisions are. */
  recordHookDecision(hook: UpgradeHook, labels: DecisionLabels): void;
  /** One Event write attempt (or an Event dropped by the rate limit or the full queue). */
  recordEventWrite(result: 'created' | 'patched' | 'failed' | 'dropped'): void;
  /** Connects the evaluation-age gauge to its source; until then it reports nothing. */
  observeCache(source: EvaluatedAtSource): void;
  /**
   * Connects the per-target health series (webhook/server/target-health-metrics.ts) to the targets the webhook
   * judges; from then on the age gauge, too, follows that set instead of whatever the cache lists.
   */
  observeTargets(source: TargetHealthSource): void;
  /** Called for every evaluation the cache takes (feed, inline refresh, on demand). */
  noteEvaluationHeld(evaluation: Evaluation): void;
  /** Connects the serving certificate's expiry gauge; the function returns its notAfter, or null without TLS. */
  observeCertificate(notAfter: () => Date | null): void;
  /** Connects the kept-connections gauge; the function returns what is open now, or null when nothing is kept. */
  observeConnections(counts: () => KeptConnectionCounts | null): void;
  /** Prometheus text exposition. */
  render(): Promise<string>;
  /** The same text in chunks to write one after the other (the per-target part is mostly reused, see target-health-metrics.ts). */
  renderChunks(): Promise<(string | Buffer)[]>;
  readonly contentType: string;
}

/** What the webhook keeps open between evaluations (warm-connections.ts counts). */
export interface KeptConnectionCounts {
  channels: number;
  idleChannels: number;
  capiAccesses: number;
}

/** etcd_guard_admission_duration_seconds: what it is, for the metrics and the test that compares observers. */
export const ADMISSION_DURATION: Readonly<{ name: string; help: string; buckets: readonly number[] }> = {
  name: 'etcd_guard_admission_duration_seconds',
  help: 'Time to answer one /validate request, including any inline refresh.',
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
};

/** etcd_guard_decision_evidence_age_seconds: live evidence stays under decisionMaxAgeMs, cached spreads up to maxAgeSeconds. */
export const EVIDENCE_AGE = {
  name: 'etcd_guard_decision_evidence_age_seconds',
  help:
    'Age of the evaluation a guarded admission decision rested on, from its start to the decision; evidence="live" ' +
    '(started within decisionMaxAgeMs of the request) or "cached" (no live evaluation could run).',
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
} as const;

export interface MetricsOptions {
  now?: () => Date;
}

export function createWebhookMetrics(options: MetricsOptions = {}): WebhookMetrics {
  const now = options.now ?? (() => new Date());
  const registry = new Registry();
  const targetMetrics = new TargetMetrics();
  let certificateNotAfter: (() => Date | null) | null = null;

  const { count: countDecision, counter: decisions } = decisionCounter(registry);
  const duration = new Histogram({ ...ADMISSION_DURATION, buckets: [...ADMISSION_DURATION.buckets], registers: [registry] });
  registerCertificateExpiry(registry, () => certificateNotAfter?.() ?? null);
  const inlineRefreshes = new Counter({
    name: 'etcd_guard_inline_refresh_total',
    help: 'Live evaluations run from /validate because no evaluation at hand started within decisionMaxAgeMs (or skipped: no budget).',
    labelNames: ['target', 'result'] as const,
    registers: [registry],
  });
  const evidenceAge = new Histogram({
    name: EVIDENCE_AGE.name,
    help: EVIDENCE_AGE.help,
    buckets: [...EVIDENCE_AGE.buckets],
    labelNames: ['evidence'] as const,
    registers: [registry],
  });
  // Both series from the start, so a dashboard tells "no cached decisions" from "not scraped yet".
  evidenceAge.zero({ evidence: 'live' });
  evidenceAge.zero({ evidence: 'cached' });
  const feedErrors = new Counter({
    name: 'etcd_guard_cache_feed_errors_total',
    help: 'Failed or timed-out reads of a target from the evaluation store.',
    labelNames: ['target'] as const,
    registers: [registry],
  });
  const targetCounters = targetCountersAtZero(inlineRefreshes, feedErrors, decisions);
  const eventWrites = new Counter({
    name: 'etcd_guard_event_writes_total',
    help: 'Kubernetes Event writes: created, patched (a series count), failed, or dropped by the rate limit.',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const [hookAnswers, hookDecisions] = [hookAnswerCounter(registry), hookDecisionCounter(registry)];

  const renderChunks = chunkedRender(registry, targetMetrics, now, () => targetCounters.zeroNewTargets());
  return {
    registry,
    contentType: registry.contentType,
    recordDecision(labels, durationSeconds) {
      countDecision(labels);
      duration.observe(durationSeconds);
    },
    recordInlineRefresh(target, result) {
      inlineRefreshes.inc({ target, result });
    },
    recordEvidenceAge(evidence, ageSeconds) {
      evidenceAge.observe({ evidence }, Math.max(0, ageSeconds));
    },
    recordCacheFeedError(target) {
      feedErrors.inc({ target });
    },
    recordHookAnswer: (hook, outcome) => hookAnswers.inc({ hook, outcome }),
    recordHookDecision: (hook, labels) => hookDecisions.inc({ hook, ...labels }),
    recordEventWrite(result) {
      eventWrites.inc({ result });
    },
    observeCache(source) {
      targetMetrics.observeCache(source);
    },
    observeTargets(source) {
      targetCounters.observe(source);
      targetMetrics.observeTargets(source);
    },
    noteEvaluationHeld(evaluation) {
      targetMetrics.noteHeld(evaluation);
    },
    observeCertificate(notAfter) {
      certificateNotAfter = notAfter;
    },
    observeConnections: registerKeptConnections(registry),
    render: async () => (await renderChunks()).map((chunk) => chunk.toString()).join(''),
    renderChunks,
  };
}

/** The exposition in chunks: prom-client's metrics, then the per-target families built at scrape time (target-health-metrics.ts). */
function chunkedRender(
  registry: Registry,
  targetMetrics: TargetMetrics,
  now: () => Date,
  beforeRender: () => void,
): () => Promise<(string | Buffer)[]> {
  return async () => {
    beforeRender();
    const registered = await registry.metrics();
    const perTarget = targetMetrics.renderChunks(now()).filter((chunk) => chunk.length > 0);
    return perTarget.length === 0 ? [registered] : [registered, '\n', ...perTarget];
  };
}

/**
 * The decisions of a target known before its first request: a guarded change allowed on a Healthy
 * evaluation and one denied on an Unhealthy one, in the target's mode. A decision's other reasons
 * are open-ended; these two are what the per-target panel and the denial alert read first.
 */
export const TARGET_DECISIONS_AT_ZERO: readonly Pick<DecisionLabels, 'decision' | 'reason'>[] = [
  { decision: 'allowed', reason: 'healthy' },
  { decision: 'denied', reason: 'unhealthy' },
];

/**
 * Labelled counters exist from the first scrape at 0 for every label value known in advance, so a
 * new install's dashboard shows 0 rather than "No data", and rate() sees each series' first
 * increment (a series born at 1 loses it). Targets become known when the webhook reports what it
 * judges (and are dropped when it no longer does); of the decisions, those of
 * TARGET_DECISIONS_AT_ZERO per target and the fail-closed series the internal-error alert watches
 * (INTERNAL_ERROR_DECISION).
 */
function targetCountersAtZero(
  inlineRefreshes: Counter<'target' | 'result'>,
  feedErrors: Counter<'target'>,
  decisions: Counter<'target' | 'decision' | 'mode' | 'reason'>,
): { observe(source: TargetHealthSource): void; zeroNewTargets(): void } {
  /** Target name to the mode its decision series were made in. */
  const zeroed = new Map<string, EnforcementMode>();
  let judged: TargetHealthSource | null = null;
  const decisionSeries = (target: string, mode: EnforcementMode) =>
    TARGET_DECISIONS_AT_ZERO.map(({ decision, reason }) => ({ target, decision, mode, reason }));
  const drop = (name: string, mode: EnforcementMode) => {
    zeroed.delete(name);
    for (const result of INLINE_REFRESH_RESULTS) inlineRefreshes.remove({ target: name, result });
    feedErrors.remove({ target: name });
    for (const labels of decisionSeries(name, mode)) decisions.remove(labels);
  };
  return {
    observe(source) {
      judged = source;
    },
    zeroNewTargets() {
      const fallback = judged?.enforcement ?? 'enforce';
      const current = new Map((judged?.targets() ?? []).map((target) => [target.name, target.enforcement ?? fallback]));
      // A target no longer judged loses these series as it loses its health series, so discovery
      // churn cannot grow them without bound; were it judged again it would start over at 0. One
      // whose mode changed starts over in the new mode.
      for (const [name, mode] of zeroed) if (current.get(name) !== mode) drop(name, mode);
      for (const [name, mode] of current) {
        if (zeroed.has(name)) continue;
        zeroed.set(name, mode);
        for (const result of INLINE_REFRESH_RESULTS) inlineRefreshes.inc({ target: name, result }, 0);
        feedErrors.inc({ target: name }, 0);
        for (const labels of decisionSeries(name, mode)) decisions.inc(labels, 0);
      }
    },
  };
}

/** etcd_guard_runtime_hook_decisions_total: as etcd_guard_admission_decisions_total, per hook (reasons are open-ended: no series at 0). */
function hookDecisionCounter(registry: Registry): Counter<'hook' | 'target' | 'decision' | 'mode' | 'reason'> {
  return new Counter({
    name: 'etcd_guard_runtime_hook_decisions_total',
    help:
      'The decisions upgrade hook answers rested on, per hook and target: decision (allowed, denied), the enforcement mode ' +
      'it was applied in (denied with mode warn or audit proceeded: a would-be retry) and a short reason.',
    labelNames: ['hook', 'target', 'decision', 'mode', 'reason'] as const,
    registers: [registry],
  });
}

/** etcd_guard_runtime_hook_answers_total, every hook and outcome present at 0 from the start. */
function hookAnswerCounter(registry: Registry): Counter<'hook' | 'outcome'> {
  const counter = new Counter({
    name: 'etcd_guard_runtime_hook_answers_total',
    help:
      'Answers to Cluster API upgrade hooks: proceed (retryAfterSeconds 0), retry (the target does not pass yet) ' +
      'or failure (a request the extension could not judge).',
    labelNames: ['hook', 'outcome'] as const,
    registers: [registry],
  });
  for (const hook of UPGRADE_HOOKS) for (const outcome of HOOK_OUTCOMES) counter.inc({ hook, outcome }, 0);
  return counter;
}

/**
 * etcd_guard_admission_decisions_total, counted cheaply: prom-client sorts, hashes and validates
 * the four labels on every inc(); a decision only adds to a map here, and the counter takes what
 * was added when it is read (a scrape): the same series, in the same order, with the same values.
 */
function decisionCounter(registry: Registry): {
  count: (labels: DecisionLabels) => void;
  counter: Counter<'target' | 'decision' | 'mode' | 'reason'>;
} {
  const counts = new Map<string, { labels: DecisionLabels; count: number }>();
  const counter = new Counter({
    name: 'etcd_guard_admission_decisions_total',
    help:
      'Admission decisions per target: decision (allowed, denied, overridden), the enforcement mode it was applied in ' +
      '(denied with mode warn or audit was allowed: a would-be denial) and a short reason.',
    labelNames: ['target', 'decision', 'mode', 'reason'] as const,
    registers: [registry],
    collect() {
      for (const entry of counts.values()) {
        if (entry.count === 0) continue;
        this.inc({ ...entry.labels }, entry.count);
        entry.count = 0;
      }
    },
  });
  // The decision series no target owns known in advance (targetCountersAtZero says why it exists at 0).
  counter.inc({ ...INTERNAL_ERROR_DECISION }, 0);
  // Most requests repeat the previous one's labels: four comparisons, no key string to build.
  let last: { labels: DecisionLabels; count: number } | undefined;
  const count = (labels: DecisionLabels) => {
    if (
      last !== undefined &&
      last.labels.target === labels.target &&
      last.labels.decision === labels.decision &&
      last.labels.mode === labels.mode &&
      last.labels.reason === labels.reason
    ) {
      last.count += 1;
      return;
    }
    const key = `${labels.target}\u0000${labels.decision}\u0000${labels.mode}\u0000${labels.reason}`;
    let entry = counts.get(key);
    if (entry === undefined) {
      const { target, decision, mode, reason } = labels;
      entry = { labels: { target, decision, mode, reason }, count: 0 };
      counts.set(key, entry);
    }
    entry.count += 1;
    last = entry;
  };
  return { count, counter };
}

/** notAfter of the serving certificate, read at scrape time so a reloaded certificate shows at once. */
function registerCertificateExpiry(registry: Registry, notAfter: () => Date | null): void {
  new Gauge({
    name: 'etcd_guard_webhook_certificate_expiry_timestamp_seconds',
    help: "Unix time the admission port's serving certificate expires (its notAfter), as currently loaded.",
    registers: [registry],
    collect() {
      this.reset();
      const at = notAfter();
      if (at !== null) this.set(at.getTime() / 1000);
    },
  });
}

/**
 * The member channels and Cluster API port-forward accesses kept open between evaluations, read at
 * scrape time. Every series from the start, at 0 when nothing is kept (yet, or `connections.keep`
 * off), so an alert on sockets that never return to baseline has a series to watch. Returns how
 * to connect what it reads.
 */
function registerKeptConnections(registry: Registry): (counts: () => KeptConnectionCounts | null) => void {
  let source: () => KeptConnectionCounts | null = () => null;
  new Gauge({
    name: 'etcd_guard_kept_connections',
    help: 'Connections kept open between evaluations: member gRPC channels (all, and idle ones) and Cluster API port-forward accesses.',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      const now = source() ?? { channels: 0, idleChannels: 0, capiAccesses: 0 };
      this.set({ kind: 'member-channel' }, now.channels);
      this.set({ kind: 'idle-member-channel' }, now.idleChannels);
      this.set({ kind: 'capi-access' }, now.capiAccesses);
    },
  });
  return (counts) => {
    source = counts;
  };
}
