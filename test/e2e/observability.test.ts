// The observability pack against the product: a running webhook (real HTTPS admission port, real
// 3-member etcd evaluated by the scheduled run into a file store) scraped on its metrics port;
// every metric the shipped alerts and dashboard use is exported, and the promtool unit tests feed
// series of the same shape; promtool checks and tests the shipped rules; each runbook_url points
// at a section of docs/operations.md that exists.
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import type { GuardConfig } from '../../functions/domain/config.js';
import { CHECK_NAMES, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { createWebhookMetrics, INLINE_REFRESH_RESULTS, TARGET_DECISIONS_AT_ZERO } from '../../webhook/server/metrics.js';
import type { TestCerts } from '../harness/certs.js';
import type { EtcdTestCluster } from '../harness/etcd-cluster.js';
import { startEtcdWebhook, type EtcdWebhook } from '../harness/etcd-webhook.js';
import { makeEvaluation } from '../harness/evaluation-fixture.js';
import { httpRequest } from '../harness/https-client.js';
import { commandExists, ROOT, run } from '../harness/manifests.js';
import { admissionFixture } from '../harness/reviews.js';
import { waitFor } from '../harness/wait.js';
import type { TestWebhook } from '../harness/webhook.js';

const RULE_FILE = path.join(ROOT, 'manifests/components/observability/prometheusrule.yaml');
const DASHBOARD_FILE = path.join(ROOT, 'manifests/components/observability/etcd-guard-dashboard.json');
const PROMTOOL_TESTS = path.join(ROOT, 'test/fixtures/prometheus/etcd-guard-rules.test.yaml');
const OPERATIONS_DOC = path.join(ROOT, 'docs/operations.md');
/** Labels Prometheus adds to every scraped series (target labels of the ServiceMonitor), not the webhook. */
const SCRAPE_LABELS = new Set(['job', 'namespace', 'instance', 'pod', 'service', 'endpoint', 'container']);
/** Series Prometheus makes itself for every scrape. */
const PROMETHEUS_SERIES = new Set(['up']);

interface Rule {
  alert: string;
  expr: string;
  annotations: Record<string, string>;
}

function shippedRules(): Rule[] {
  const doc = parseYaml(readFileSync(RULE_FILE, 'utf8')) as { spec: { groups: { rules: Rule[] }[] } };
  return doc.spec.groups.flatMap((group) => group.rules);
}

/** Every PromQL expression of the dashboard's panels and variables. */
function dashboardExpressions(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as {
    panels: { targets?: { expr: string }[] }[];
    templating: { list: { definition?: string }[] };
  };
  return [
    ...dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr)),
    ...dashboard.templating.list.flatMap((variable) => (variable.definition ? [variable.definition] : [])),
  ];
}

/** Metric names in PromQL, histogram suffixes folded into their family. */
function metricNames(expressions: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const expr of expressions) {
    for (const [name] of expr.matchAll(/\betcd_guard_[a-z_]+|\bup\b(?=\{)/g)) names.add(name.replace(/_(bucket|count|sum)$/, ''));
  }
  return names;
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text format as samples, and the families its TYPE lines declare. */
function parseExposition(text: string): { samples: Sample[]; families: Set<string> } {
  const samples: Sample[] = [];
  const families = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) /.exec(line);
    if (type?.[1]) families.add(type[1]);
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!sample?.[1] || line.startsWith('#')) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (sample[2] ?? '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[key ?? ''] = value ?? '';
    samples.push({ name: sample[1], labels, value: Number(sample[3]) });
  }
  return { samples, families };
}

function valueOf(samples: readonly Sample[], name: string, labels: Record<string, string>): number | undefined {
  return samples.find(
    (sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  )?.value;
}

describe('metrics port of a running webhook fed by a real etcd cluster', () => {
  let e2e: EtcdWebhook;
  let cluster: EtcdTestCluster;
  let certs: TestCerts;
  let config: GuardConfig;
  let webhook: TestWebhook;
  let healthy: Evaluation;

  async function scrape(): Promise<{ text: string; samples: Sample[]; families: Set<string> }> {
    const answer = await httpRequest(`${String(webhook.metricsUrl)}/metrics`);
    expect(answer.status, answer.text).toBe(200);
    return { text: answer.text, ...parseExposition(answer.text) };
  }

  const scheduledEvaluation = () => e2e.scheduledEvaluation();

  beforeAll(async () => {
    e2e = await startEtcdWebhook({
      name: 'obs',
      target: 'prod',
      timeout: '3s',
      // Never evaluated: exported as evaluated 0 and nothing else.
      otherTargets: [{ name: 'never', endpoints: ['https://127.0.0.1:9'], timeout: '1s', match: { clusterName: 'never' } }],
      webhook: { metricsPort: true, agent: { keepAlive: false } },
    });
    ({ cluster, certs, config, webhook } = e2e);
    await cluster.waitHealthy();
    // On a loaded machine a member can miss the deadline once; the test needs a passing evaluation to start from.
    await waitFor('a passing evaluation of the healthy cluster', 60_000, async () => {
      healthy = await scheduledEvaluation();
      return healthy.passed && healthy.cluster.healthyVoting === 3;
    });
    // One admission decision, so the decision counter has a series to show.
    await webhook.postReview(admissionFixture('kcp-scale-up-3-to-5.json'), { query: '', timeoutMs: 10_000 });
  }, 120_000);

  afterAll(async () => {
    await e2e?.close();
  });

  it('serves only GET /metrics on the metrics port, and no /metrics on the admission port', async () => {
    expect((await httpRequest(`${String(webhook.metricsUrl)}/validate`, { method: 'POST' })).status).toBe(404);
    expect((await httpRequest(`${String(webhook.metricsUrl)}/evaluations`)).status).toBe(404);
    const admission = await webhook.request('GET', '/metrics', { timeoutMs: 10_000 });
    expect(admission.status).toBe(404);
    expect(admission.text).not.toContain('prod');
  });

  it("exports the stored evaluation's health per target, as the scheduled run wrote it", async () => {
    const { samples } = await scrape();
    const prod = { target: 'prod' };
    expect(valueOf(samples, 'etcd_guard_target_evaluated', prod)).toBe(1);
    expect(valueOf(samples, 'etcd_guard_target_evaluated', { target: 'never' })).toBe(0);
    // Beside the counters at 0 that every judged target has (issue 31), nothing but "not evaluated".
    expect(samples.filter((sample) => sample.labels.target === 'never').map((sample) => sample.name)).toEqual([
      ...TARGET_DECISIONS_AT_ZERO.map(() => 'etcd_guard_admission_decisions_total'),
      ...INLINE_REFRESH_RESULTS.map(() => 'etcd_guard_inline_refresh_total'),
      'etcd_guard_cache_feed_errors_total',
      'etcd_guard_target_evaluated',
    ]);
    expect(valueOf(samples, 'etcd_guard_target_verdict', { ...prod, verdict: healthy.verdict })).toBe(1);
    expect(
      samples.filter((sample) => sample.name === 'etcd_guard_target_verdict' && sample.labels.target === 'prod'),
    ).toHaveLength(3);
    expect(valueOf(samples, 'etcd_guard_target_voting_members', prod)).toBe(3);
    // What a loaded machine makes of the members (a slow one may time out) is the evaluation's
    // business; the metrics must say exactly what it says.
    expect(valueOf(samples, 'etcd_guard_target_healthy_voting_members', prod)).toBe(healthy.cluster.healthyVoting);
    expect(valueOf(samples, 'etcd_guard_target_learners', prod)).toBe(0);
    expect(valueOf(samples, 'etcd_guard_target_fault_tolerance', prod)).toBe(healthy.cluster.faultTolerance);
    expect(valueOf(samples, 'etcd_guard_target_quorum', prod)).toBe(2);
    const largestDb = Math.max(...healthy.members.map((member) => member.dbSizeBytes ?? 0));
    expect(largestDb).toBeGreaterThan(0);
    expect(valueOf(samples, 'etcd_guard_target_db_size_bytes', prod)).toBe(largestDb);
    expect(valueOf(samples, 'etcd_guard_target_db_quota_bytes', prod)).toBe(config.targets[0]?.quotaBackendBytes);
    const evaluatedAt = Date.parse(healthy.evaluatedAt) / 1000;
    expect(valueOf(samples, 'etcd_guard_target_evaluation_timestamp_seconds', prod)).toBe(evaluatedAt);
    expect(valueOf(samples, 'etcd_guard_target_last_passed_timestamp_seconds', prod)).toBe(evaluatedAt);
    expect(valueOf(samples, 'etcd_guard_target_evaluation_duration_seconds', prod)).toBe(healthy.durationMs / 1000);
    expect(valueOf(samples, 'etcd_guard_evaluation_max_age_seconds', {})).toBe(60);
    const checks = samples.filter(
      (sample) => sample.name === 'etcd_guard_target_check_status' && sample.labels.target === 'prod',
    );
    expect(checks.map((sample) => sample.labels.check)).toEqual(
      CHECK_NAMES.filter((name) => healthy.checks.some((check) => check.name === name)),
    );
    for (const check of healthy.checks) {
      expect(valueOf(samples, 'etcd_guard_target_check_status', { ...prod, check: check.name }), check.name).toBe(
        { pass: 0, warn: 1, fail: 2 }[check.status],
      );
    }
  });

  it("exports the serving certificate's notAfter", async () => {
    const { samples } = await scrape();
    const notAfter = Date.parse(new X509Certificate(readFileSync(certs.serverCertFile)).validTo) / 1000;
    expect(valueOf(samples, 'etcd_guard_webhook_certificate_expiry_timestamp_seconds', {})).toBe(notAfter);
  });

  it('exports every metric the shipped alerts and dashboard use', async () => {
    const { samples, families } = await scrape();
    const used = metricNames([...shippedRules().map((rule) => rule.expr), ...dashboardExpressions()]);
    expect(used.size).toBeGreaterThan(15);
    const missing = [...used].filter((name) => !PROMETHEUS_SERIES.has(name) && !families.has(name));
    expect(missing, 'used by an alert or the dashboard but not exported').toEqual([]);
    // Counters of events that have not happened yet have samples too, at 0 (issue 31).
    const withoutSamples = [...used].filter(
      (name) => !PROMETHEUS_SERIES.has(name) && !samples.some((sample) => sample.name.startsWith(name)),
    );
    expect(withoutSamples, 'exported without a sample').toEqual([]);
  });

  it('the promtool unit tests feed series with the label names the webhook really exports', async () => {
    const { samples, families } = await scrape();
    const tests = parseYaml(readFileSync(PROMTOOL_TESTS, 'utf8')) as { tests: { input_series: { series: string }[] }[] };
    const series = tests.tests.flatMap((test) => test.input_series.map((input) => input.series));
    expect(series.length).toBeGreaterThan(20);
    for (const text of series) {
      const [, name = '', labelText = ''] = /^([a-z_]+)\{(.*)\}$/.exec(text) ?? [];
      if (PROMETHEUS_SERIES.has(name)) continue;
      expect(families.has(name), `${name} is exported`).toBe(true);
      const labelNames = [...labelText.matchAll(/([a-z_]+)="/g)].map((match) => match[1] ?? '');
      const own = labelNames.filter((label) => !SCRAPE_LABELS.has(label)).sort();
      const exported = samples.filter((sample) => sample.name === name).map((sample) => Object.keys(sample.labels).sort());
      expect(exported, `${text}: label names as exported`).toContainEqual(own);
    }
  });

  it('a learner, then a dead member, show in the next scrape after the scheduled run', async () => {
    const learner = await cluster.addLearner();
    await learner.start();
    await scheduledEvaluation();
    let { samples } = await scrape();
    expect(valueOf(samples, 'etcd_guard_target_learners', { target: 'prod' })).toBe(1);
    expect(valueOf(samples, 'etcd_guard_target_check_status', { target: 'prod', check: 'learners' })).toBeGreaterThan(0);
    await cluster.etcdctl(['member', 'remove', learner.memberId]);
    await cluster.kill(2);
    const unhealthy = await scheduledEvaluation();
    ({ samples } = await scrape());
    expect(unhealthy.verdict).toBe('Unhealthy');
    expect(valueOf(samples, 'etcd_guard_target_verdict', { target: 'prod', verdict: 'Unhealthy' })).toBe(1);
    expect(unhealthy.cluster.healthyVoting).toBeLessThanOrEqual(2);
    expect(valueOf(samples, 'etcd_guard_target_healthy_voting_members', { target: 'prod' })).toBe(
      unhealthy.cluster.healthyVoting,
    );
    expect(valueOf(samples, 'etcd_guard_target_fault_tolerance', { target: 'prod' })).toBe(0);
    expect(valueOf(samples, 'etcd_guard_target_check_status', { target: 'prod', check: 'reachable' })).toBe(2);
    // The last passing evaluation is still the healthy one.
    expect(valueOf(samples, 'etcd_guard_target_last_passed_timestamp_seconds', { target: 'prod' })).toBeGreaterThanOrEqual(
      Date.parse(healthy.evaluatedAt) / 1000,
    );
    expect(valueOf(samples, 'etcd_guard_target_last_passed_timestamp_seconds', { target: 'prod' })).toBeLessThan(
      Date.parse(unhealthy.evaluatedAt) / 1000,
    );
  }, 60_000);
});

describe('the shipped alerting rules under promtool', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-promtool-'));
    const doc = parseYaml(readFileSync(RULE_FILE, 'utf8')) as { spec: unknown };
    // promtool reads plain rule files: the PrometheusRule's spec is one.
    writeFileSync(path.join(dir, 'etcd-guard.rules.yaml'), JSON.stringify(doc.spec));
    copyFileSync(PROMTOOL_TESTS, path.join(dir, 'etcd-guard-rules.test.yaml'));
  });

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('promtool is installed (scripts/ensure-etcd.sh installs Debian prometheus, which has it)', () => {
    expect(commandExists('promtool'), 'promtool not found: run scripts/ensure-etcd.sh (installs Debian package prometheus)').toBe(
      true,
    );
  });

  it('promtool check rules passes', async () => {
    const checked = await run('promtool', ['check', 'rules', path.join(dir, 'etcd-guard.rules.yaml')]);
    expect(checked.code, checked.stdout + checked.stderr).toBe(0);
    expect(checked.stdout).toContain(`SUCCESS: ${shippedRules().length} rules found`);
  });

  it('promtool test rules passes', async () => {
    const tested = await run('promtool', ['test', 'rules', path.join(dir, 'etcd-guard-rules.test.yaml')]);
    expect(tested.code, tested.stdout + tested.stderr).toBe(0);
    expect(tested.stdout).toContain('SUCCESS');
  });

  it('the unit tests fire every alert and then resolve it', () => {
    const tests = parseYaml(readFileSync(PROMTOOL_TESTS, 'utf8')) as {
      tests: { alert_rule_test: { alertname: string; eval_time: string; exp_alerts: unknown[] }[] }[];
    };
    for (const { alert } of shippedRules()) {
      const firesThenResolves = tests.tests.some((test) => {
        const checks = test.alert_rule_test.filter((check) => check.alertname === alert);
        const firing = checks.findIndex((check) => check.exp_alerts.length > 0);
        return firing >= 0 && checks.slice(firing + 1).some((check) => check.exp_alerts.length === 0);
      });
      expect(firesThenResolves, alert).toBe(true);
    }
  });

  it("every alert's runbook_url points at a section of docs/operations.md that exists", () => {
    const doc = readFileSync(OPERATIONS_DOC, 'utf8');
    // GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
    const anchors = new Set(
      [...doc.matchAll(/^#{1,6} (.+)$/gm)].map((match) =>
        (match[1] ?? '')
          .trim()
          .toLowerCase()
          .replace(/[^\p{L}\p{N}\- ]/gu, '')
          .replace(/ /g, '-'),
      ),
    );
    for (const rule of shippedRules()) {
      const url = new URL(rule.annotations.runbook_url ?? '');
      expect(url.pathname, rule.alert).toMatch(/\/docs\/operations\.md$/);
      expect(anchors, `${rule.alert}: ${url.hash}`).toContain(url.hash.slice(1));
    }
  });
});

/**
 * evaluated, 3 verdicts, 9 evaluation gauges, quota, last passed, age: 16, plus one per check,
 * plus the counters every judged target has from the start (inline refreshes by result, feed errors).
 */
const SERIES_PER_TARGET = 16 + CHECK_NAMES.length + INLINE_REFRESH_RESULTS.length + 1;

describe('per-target series are bounded and follow the target set', () => {
  /** An evaluation carrying every check, as the engine writes them. */
  function fullEvaluation(target: string): Evaluation {
    return makeEvaluation({
      target,
      evaluatedAt: new Date().toISOString(),
      checks: CHECK_NAMES.map((name) => ({ name, status: 'pass' as const, message: 'ok' })),
    });
  }

  function metricsOver(targets: string[]) {
    const metrics = createWebhookMetrics();
    const held = new Map(targets.map((target) => [target, fullEvaluation(target)]));
    const judged = { list: targets.map((name) => ({ name, quotaBackendBytes: 2 ** 31 })) };
    metrics.observeTargets({ targets: () => judged.list, get: (target) => held.get(target) ?? null, maxAgeSeconds: 120 });
    return { metrics, judged };
  }

  it.each([1, 10, 100, 1000])('%i targets: the same series per target, whatever the request count', async (count) => {
    const targets = Array.from({ length: count }, (_unused, index) => `target-${index}`);
    const { metrics } = metricsOver(targets);
    // Decisions are counted per target too, but by what happened: 100 requests, one series.
    for (let index = 0; index < 100; index += 1) {
      metrics.recordDecision({ target: 'target-0', decision: 'denied', mode: 'enforce', reason: 'unhealthy' }, 0.001);
    }
    await metrics.render();
    const started = performance.now();
    const text = await metrics.render();
    const renderMs = performance.now() - started;
    const { samples } = parseExposition(text);
    const health = samples.filter((sample) => sample.name !== 'etcd_guard_admission_decisions_total');
    const perTarget = health.filter((sample) => sample.labels.target === 'target-0').length;
    expect(perTarget).toBe(SERIES_PER_TARGET);
    expect(health.filter((sample) => sample.labels.target !== undefined)).toHaveLength(perTarget * count);
    // Each target's two decisions known in advance (the counted one among them), and the
    // fail-closed series at 0.
    const decisions = samples.filter((sample) => sample.name === 'etcd_guard_admission_decisions_total');
    expect(decisions).toHaveLength(TARGET_DECISIONS_AT_ZERO.length * count + 1);
    expect(decisions.filter((sample) => sample.value !== 0)).toEqual([
      expect.objectContaining({ labels: expect.objectContaining({ target: 'target-0', reason: 'unhealthy' }), value: 100 }),
    ]);
    console.info(
      `metrics: ${count} targets, ${perTarget} series per target, ${samples.length} samples, ` +
        `${text.length} bytes, rendered in ${renderMs.toFixed(1)} ms`,
    );
  });

  it("makes a target's decision series at 0 in its own mode, and again when the mode changes", async () => {
    const metrics = createWebhookMetrics();
    let list: { name: string; quotaBackendBytes: number; enforcement?: 'enforce' | 'warn' | 'audit' }[] = [
      { name: 'own', quotaBackendBytes: 2 ** 31, enforcement: 'audit' },
      { name: 'default', quotaBackendBytes: 2 ** 31 },
    ];
    metrics.observeTargets({ targets: () => list, get: () => null, maxAgeSeconds: 120, enforcement: 'warn' });
    const modes = async () =>
      parseExposition(await metrics.render())
        .samples.filter((sample) => sample.name === 'etcd_guard_admission_decisions_total' && sample.labels.target !== '')
        .map((sample) => `${sample.labels.target} ${sample.labels.decision} ${sample.labels.mode} ${sample.value}`)
        .sort();
    expect(await modes()).toEqual([
      'default allowed warn 0',
      'default denied warn 0',
      'own allowed audit 0',
      'own denied audit 0',
    ]);
    list = [{ name: 'own', quotaBackendBytes: 2 ** 31, enforcement: 'enforce' }, list[1] as (typeof list)[number]];
    expect(await modes()).toEqual([
      'default allowed warn 0',
      'default denied warn 0',
      'own allowed enforce 0',
      'own denied enforce 0',
    ]);
  });

  it('drops every series of a target that is no longer judged', async () => {
    const { metrics, judged } = metricsOver(['stays', 'goes']);
    const everySeries = SERIES_PER_TARGET + TARGET_DECISIONS_AT_ZERO.length;
    expect((await metrics.render()).match(/target="goes"/g)?.length).toBe(everySeries);
    judged.list = judged.list.filter((target) => target.name !== 'goes');
    const text = await metrics.render();
    expect(text).not.toContain('target="goes"');
    expect(text.match(/target="stays"/g)?.length).toBe(everySeries);
  });
});
