// Per-target health in the Prometheus text format, read from what the webhook's cache holds at
// scrape time. The CronJob that writes the evaluations is never scraped: this process exports what
// the store says. Every scrape is built from the current target set, so the series of a target
// that disappears (discovery dropped it, the config lost it) are gone at the next scrape.
//
// Written as text rather than through prom-client gauges: 33 series per target through
// Gauge.set (label validation and hashing per call) cost CPU per target on every scrape, on the
// event loop that also answers admission requests; building the lines directly is a small part
// of that (test/e2e/observability.test.ts reports both the size and the time).
import type { EnforcementMode } from '../../functions/domain/config.js';
import { evaluationAgeMs, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { checkSamples, EVALUATION_GAUGES, verdictSamples } from '../domain/target-series.js';

/** A target as the metrics need it: its name, the backend quota its members run with, its own enforcement. */
export interface TargetMetricInfo {
  name: string;
  quotaBackendBytes: number;
  enforcement?: EnforcementMode;
}

/** What the per-target series read at scrape time: the targets the webhook judges and what it holds for each. */
export interface TargetHealthSource {
  targets(): readonly TargetMetricInfo[];
  get(target: string): Evaluation | null;
  /** The config's maxAgeSeconds: older evaluations are stale (the staleness alert compares with it). */
  maxAgeSeconds: number;
  /** The config's enforcement, for targets that name none; `enforce` when absent. */
  enforcement?: EnforcementMode;
}

/** Only the evaluation times: what a bare cache offers before the judged targets are known. */
export interface EvaluatedAtSource {
  targets(): readonly string[];
  evaluatedAt(target: string): string | null;
}

interface Held {
  target: TargetMetricInfo;
  evaluation: Evaluation;
}

interface Family {
  name: string;
  help: string;
  lines: string[];
}

/** Label values in the text format: backslash, double quote and line feed escaped. */
function escapeLabel(value: string): string {
  if (!/[\\"\n]/.test(value)) return value;
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function sample(name: string, labels: Record<string, string>, value: number): string {
  const text = Object.entries(labels)
    .map(([key, labelValue]) => `${key}="${escapeLabel(labelValue)}"`)
    .join(',');
  return `${name}${text === '' ? '' : `{${text}}`} ${String(value)}`;
}

function renderFamilies(families: readonly Family[]): string {
  return families
    .map(
      (family) =>
        `# HELP ${family.name} ${family.help}\n# TYPE ${family.name} gauge\n${family.lines.length === 0 ? '' : `${family.lines.join('\n')}\n`}`,
    )
    .join('\n');
}

/** A target's health lines as last built, reused while what they are built from is the same. */
interface BuiltLines {
  evaluation: Evaluation;
  quotaBackendBytes: number;
  lastPassed: number | undefined;
  /** One array per health family, in healthFamilies' order. */
  lines: string[][];
}

export class TargetMetrics {
  /**
   * Per target, its health lines: rebuilt only when its evaluation, quota or last pass changed, so
   * a scrape of a large fleet costs joining text, not formatting every sample of every target.
   */
  private readonly built = new Map<string, BuiltLines>();
  /** The health families' text as last built, and the per-target lines it was built from. */
  private health: { perTarget: readonly string[][][]; text: Buffer } | null = null;
  private source: TargetHealthSource | null = null;
  private cacheSource: EvaluatedAtSource | null = null;
  /** Newest evaluatedAt (Unix ms) of a passing evaluation held per target since this process started. */
  private readonly lastPassed = new Map<string, number>();

  observeTargets(source: TargetHealthSource): void {
    this.source = source;
  }

  observeCache(source: EvaluatedAtSource): void {
    this.cacheSource = source;
  }

  /** Notes an evaluation the cache took, so a passing one between two scrapes is not missed. */
  noteHeld(evaluation: Evaluation): void {
    if (!evaluation.passed) return;
    const at = Date.parse(evaluation.evaluatedAt);
    if (at > (this.lastPassed.get(evaluation.target) ?? -Infinity)) this.lastPassed.set(evaluation.target, at);
  }

  /** The text of every per-target family (and the two target-independent gauges of the same source). */
  render(now: Date): string {
    return this.renderChunks(now)
      .map((chunk) => (typeof chunk === 'string' ? chunk : chunk.toString('utf8')))
      .join('');
  }

  /**
   * The same text in chunks, to be written one after the other. The health families, most of the
   * text, come as one Buffer rebuilt only when a target's lines changed: a scrape of an unchanged
   * fleet formats only the evaluated and age families and copies the rest.
   */
  renderChunks(now: Date): (string | Buffer)[] {
    const source = this.source;
    if (source === null) return [this.renderAgesOnly(now)];
    const targets = source.targets();
    const held: Held[] = targets.flatMap((target) => {
      const evaluation = source.get(target.name);
      return evaluation === null ? [] : [{ target, evaluation }];
    });
    const judged = new Set(targets.map((target) => target.name));
    // The only state kept across scrapes; it follows the target set like the series do.
    for (const name of this.lastPassed.keys()) if (!judged.has(name)) this.lastPassed.delete(name);
    for (const name of this.built.keys()) if (!judged.has(name)) this.built.delete(name);
    for (const { evaluation } of held) this.noteHeld(evaluation);
    const head = renderFamilies([
      {
        name: 'etcd_guard_target_evaluated',
        help: 'Every target the webhook judges: 1 when it holds an evaluation of it, 0 when it holds none.',
        lines: targets.map((target) =>
          sample('etcd_guard_target_evaluated', { target: target.name }, source.get(target.name) ? 1 : 0),
        ),
      },
      {
        name: 'etcd_guard_evaluation_max_age_seconds',
        help: 'The configured maxAgeSeconds: an evaluation older than this is stale and cannot pass a change.',
        lines: [sample('etcd_guard_evaluation_max_age_seconds', {}, source.maxAgeSeconds)],
      },
      ageFamily(
        held.map(({ target, evaluation }) => [target.name, evaluation.evaluatedAt]),
        now,
      ),
    ]);
    return [head, '\n', this.healthText(held)];
  }

  /** The health families' text, reused while every target's lines are the ones it was built from. */
  private healthText(held: readonly Held[]): Buffer {
    const perTarget = held.map((entry) => this.linesOf(entry));
    const previous = this.health;
    if (
      previous?.perTarget.length === perTarget.length &&
      perTarget.every((lines, index) => previous.perTarget[index] === lines)
    ) {
      return previous.text;
    }
    const text = Buffer.from(
      renderFamilies(
        HEALTH_FAMILIES.map((family, index) => ({
          name: family.name,
          help: family.help,
          lines: perTarget.flatMap((lines) => lines[index] ?? []),
        })),
      ),
    );
    this.health = { perTarget, text };
    return text;
  }

  /** The target's lines of every health family, from the memo while their inputs are unchanged. */
  private linesOf(entry: Held): string[][] {
    const name = entry.target.name;
    const lastPassed = this.lastPassed.get(name);
    const memo = this.built.get(name);
    if (
      memo !== undefined &&
      memo.evaluation === entry.evaluation &&
      memo.quotaBackendBytes === entry.target.quotaBackendBytes &&
      memo.lastPassed === lastPassed
    ) {
      return memo.lines;
    }
    const lines = HEALTH_FAMILIES.map((family) => family.lines(entry, lastPassed));
    this.built.set(name, { evaluation: entry.evaluation, quotaBackendBytes: entry.target.quotaBackendBytes, lastPassed, lines });
    return lines;
  }

  /** Before the judged targets are known (a cache used on its own): the evaluation age of what it holds. */
  private renderAgesOnly(now: Date): string {
    const cache = this.cacheSource;
    if (cache === null) return '';
    const times = cache.targets().flatMap((target) => {
      const evaluatedAt = cache.evaluatedAt(target);
      return evaluatedAt === null ? [] : [[target, evaluatedAt] as [string, string]];
    });
    return renderFamilies([ageFamily(times, now)]);
  }
}

interface HealthFamily {
  name: string;
  help: string;
  /** The family's lines for one target (`lastPassed`: Unix ms of its newest passing evaluation held). */
  lines(entry: Held, lastPassed: number | undefined): string[];
}

/** One sample of `name` for the target, or none when the value is absent or not finite. */
function perTarget(
  name: string,
  help: string,
  value: (entry: Held, lastPassed: number | undefined) => number | null,
): HealthFamily {
  return {
    name,
    help,
    lines: (entry, lastPassed) => {
      const result = value(entry, lastPassed);
      return result === null || !Number.isFinite(result) ? [] : [sample(name, { target: entry.target.name }, result)];
    },
  };
}

const HEALTH_FAMILIES: readonly HealthFamily[] = [
  {
    name: 'etcd_guard_target_verdict',
    help: 'Verdict of the newest evaluation: 1 for the current verdict, 0 for the other two.',
    lines: ({ target, evaluation }) =>
      verdictSamples(evaluation).map(({ verdict, value }) =>
        sample('etcd_guard_target_verdict', { target: target.name, verdict }, value),
      ),
  },
  ...EVALUATION_GAUGES.map((gauge) => perTarget(gauge.name, gauge.help, ({ evaluation }) => gauge.value(evaluation))),
  perTarget(
    'etcd_guard_target_db_quota_bytes',
    "Backend quota the target's members run with (the target's quotaBackendBytes).",
    ({ target }) => target.quotaBackendBytes,
  ),
  perTarget(
    'etcd_guard_target_last_passed_timestamp_seconds',
    'Unix time of the newest passing (Healthy or Degraded) evaluation this webhook process has held; absent until it held one.',
    (_entry, lastPassed) => (lastPassed === undefined ? null : lastPassed / 1000),
  ),
  {
    name: 'etcd_guard_target_check_status',
    help: 'Status of each check in the newest evaluation: 0 pass, 1 warn, 2 fail.',
    lines: ({ target, evaluation }) =>
      checkSamples(evaluation).map(({ check, value }) =>
        sample('etcd_guard_target_check_status', { target: target.name, check }, value),
      ),
  },
];

function ageFamily(times: readonly [string, string][], now: Date): Family {
  const name = 'etcd_guard_evaluation_age_seconds';
  return {
    name,
    help: 'Age of the newest evaluation the webhook holds per target, computed at scrape time.',
    lines: times.map(([target, evaluatedAt]) => sample(name, { target }, evaluationAgeMs({ evaluatedAt }, now) / 1000)),
  };
}
