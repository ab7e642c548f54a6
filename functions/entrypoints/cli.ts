// The etcd-guard command line: `evaluate` (one on-demand evaluation, exit 0 passed / 1 not passed
// / 2 usage or configuration error) and `webhook` (hands its flags to the webhook server).
import type { Target } from '../domain/targets.js';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, storeConfigSchema, targetSchema, type StoreConfig, type TargetConfig } from '../domain/config.js';
import type { Evaluation } from '../domain/evaluation-document.js';
import type { EvaluationContext } from '../usecases/evaluate-target.js';
import type { EvaluationStore } from '../domain/store.js';
import { parseShardSpec, type ShardSpec } from '../domain/shard.js';
import type { ScheduledResult } from '../usecases/scheduled-run.js';
import packageJson from '../../package.json' with { type: 'json' };
import { COMMAND_OPTIONS, COMMANDS, parseArgsOptions, renderCommandHelp, renderUsage } from './cli-flags.js';
import { formatEvaluationTable, formatEvaluationWide } from './format-table.js';
import { settleCleanups } from '../shared/cleanups.js';
import { parseDurationMs } from '../shared/duration.js';
import { UsageError } from '../shared/errors.js';
import { formatZodIssues } from '../shared/zod-issues.js';

export const EXIT_PASSED = 0;
export const EXIT_NOT_PASSED = 1;
export const EXIT_USAGE = 2;

/**
 * How long `evaluate` waits, once it has its answer, for cleanups still running (a watch probe
 * key deleted after its round trip's deadline) before the bin exits and abandons them. Taken from
 * the hard bound's 250 ms beyond --timeout (SPEC): a delete through a healthy member takes a few
 * ms, so this is spent only when that member hangs as well, and the key then stays either way.
 */
const EXIT_CLEANUP_WAIT_MS = 100;

export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const defaultIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

export const USAGE = renderUsage();

const EVALUATE_OPTIONS = parseArgsOptions(COMMANDS.evaluate.flags);
const WEBHOOK_OPTIONS = parseArgsOptions(COMMANDS.webhook.flags);

/** Flags of the scheduled form only (a whole config round). */
const CONFIG_ONLY_FLAGS = ['every', 'shard', 'shard-count', 'budget'] as const;

/** Flags that describe one target on the command line and so make no sense with --config. */
const SINGLE_TARGET_FLAGS = ['endpoints', 'cacert', 'cert', 'key', 'timeout', 'target', 'quota-backend-bytes'] as const;

export { COMMAND_OPTIONS };

/** util.parseArgs, with its errors reworded to name the flag ("unknown flag --x"). */
function parseFlags<T extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const code = (error as { code?: string }).code;
    const flag = /'(-{1,2}[^' ]+)/.exec(message)?.[1];
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(`unknown flag ${flag ?? message}`);
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
      throw new UsageError(
        /argument missing/.test(message) ? `flag ${flag ?? '?'} needs a value` : `flag ${flag ?? '?'} takes no value`,
      );
    }
    if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      throw new UsageError(`unexpected argument ${/'([^']*)'/.exec(message)?.[1] ?? message}`);
    }
    throw new UsageError(message);
  }
}

/** Which flag a target-schema field came from, so errors name what the user typed. */
const FLAG_FOR_FIELD: Record<string, string> = {
  name: '--target',
  endpoints: '--endpoints',
  timeout: '--timeout',
  quotaBackendBytes: '--quota-backend-bytes',
  'tls.caFile': '--cacert',
  'tls.certFile': '--cert',
  'tls.keyFile': '--key',
  tls: '--cert/--key',
};

function flagFor(field: string): string {
  const exact = FLAG_FOR_FIELD[field];
  if (exact) return exact;
  const prefix = Object.keys(FLAG_FOR_FIELD)
    .sort((a, b) => b.length - a.length)
    .find((candidate) => field.startsWith(`${candidate}.`));
  return prefix ? (FLAG_FOR_FIELD[prefix] ?? field) : field;
}

/** "field.path: message" lines from ConfigError/formatZodIssues, with the field named as its flag. */
function renameFields(issues: readonly string[]): string[] {
  return issues.map((issue) => {
    const match = /^([\w.]+): (.*)$/s.exec(issue);
    if (!match?.[1] || match[2] === undefined) return issue;
    return `${flagFor(match[1])}: ${match[2]}`;
  });
}

function parseStore(value: string | undefined): StoreConfig | null {
  if (value === undefined || value === 'none') return null;
  let raw: unknown;
  if (value.startsWith('file:')) raw = { kind: 'file', dir: value.slice('file:'.length) };
  else if (value === 'configmap') raw = { kind: 'configmap' };
  else if (value.startsWith('configmap:')) raw = { kind: 'configmap', namespace: value.slice('configmap:'.length) };
  else throw new UsageError(`--store: want none, file:DIR, configmap or configmap:NAMESPACE (got ${JSON.stringify(value)})`);
  const parsed = storeConfigSchema.safeParse(raw);
  if (!parsed.success)
    throw new UsageError(
      `--store: invalid ${JSON.stringify(value)}: ${formatZodIssues(parsed.error, { input: raw }).join('; ')}`,
    );
  return parsed.data;
}

function parseQuota(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value.trim()) || Number(value) <= 0 || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`--quota-backend-bytes: want a positive whole number of bytes (got ${JSON.stringify(value)})`);
  }
  return Number(value);
}

interface EvaluateCommand {
  kind: 'single';
  target: TargetConfig;
  output: OutputFormat;
  store: StoreConfig | null;
}

interface EvaluateConfigCommand {
  kind: 'config';
  /** Read by runEvaluateConfig: only a config round loads the YAML parser. */
  configFile: string;
  output: OutputFormat;
  /** undefined: the config's own store; null: --store none. */
  store: StoreConfig | null | undefined;
  everyMs: number | null;
  shard: ShardSpec | undefined;
  /** undefined: the config's runBudget. */
  budgetMs: number | undefined;
}

type OutputFormat = 'table' | 'wide' | 'json';

function parseOutput(value: string | undefined): OutputFormat {
  const output = value ?? 'table';
  if (output !== 'table' && output !== 'wide' && output !== 'json')
    throw new UsageError(`--output: want table, wide or json (got ${JSON.stringify(output)})`);
  return output;
}

/** One evaluation as --output asks for it. */
function render(evaluation: Evaluation, output: OutputFormat): string {
  if (output === 'json') return `${JSON.stringify(evaluation, null, 2)}\n`;
  return `${output === 'wide' ? formatEvaluationWide(evaluation) : formatEvaluationTable(evaluation)}\n`;
}

type EvaluateFlags = ReturnType<typeof parseFlags<typeof EVALUATE_OPTIONS>>;

/** --shard INDEX/COUNT, or --shard-count N with INDEX from an Indexed Job's JOB_COMPLETION_INDEX. */
function parseShard(flags: EvaluateFlags, env: Record<string, string | undefined>): ShardSpec | undefined {
  if (flags.shard !== undefined && flags['shard-count'] !== undefined)
    throw new UsageError('--shard and --shard-count cannot be combined (--shard-count takes INDEX from JOB_COMPLETION_INDEX)');
  if (flags.shard !== undefined) {
    const parsed = parseShardSpec(flags.shard);
    if (!parsed.ok) throw new UsageError(`--shard: ${parsed.message}`);
    return parsed.shard;
  }
  const count = flags['shard-count'];
  if (count === undefined) return undefined;
  const index = env.JOB_COMPLETION_INDEX;
  if (index === undefined || index.trim() === '')
    throw new UsageError('--shard-count needs JOB_COMPLETION_INDEX (set by an Indexed Job); elsewhere use --shard INDEX/COUNT');
  const parsed = parseShardSpec(`${index}/${count}`);
  if (!parsed.ok) throw new UsageError(`--shard-count with JOB_COMPLETION_INDEX: ${parsed.message}`);
  return parsed.shard;
}

function parseDurationFlag(flag: string, value: string | undefined, minMs: number): number | undefined {
  if (value === undefined) return undefined;
  const ms = parseDurationMs(value);
  if (ms === null || ms < minMs)
    throw new UsageError(`${flag}: want a duration of at least ${minMs / 1000}s, e.g. 30s (got ${JSON.stringify(value)})`);
  return ms;
}

function parseConfigCommand(
  flags: EvaluateFlags,
  configFile: string,
  env: Record<string, string | undefined>,
): EvaluateConfigCommand {
  const clash = SINGLE_TARGET_FLAGS.find((flag) => flags[flag] !== undefined);
  if (clash !== undefined)
    throw new UsageError(`--${clash} cannot be combined with --config (the config file names the targets)`);
  const output = parseOutput(flags.output);
  const store = flags.store === undefined ? undefined : parseStore(flags.store);
  const everyMs = parseDurationFlag('--every', flags.every, 1000) ?? null;
  const budgetMs = parseDurationFlag('--budget', flags.budget, 1000);
  const shard = parseShard(flags, env);
  return { kind: 'config', configFile, output, store, everyMs, shard, budgetMs };
}

function parseEvaluateCommand(
  args: string[],
  env: Record<string, string | undefined>,
): EvaluateCommand | EvaluateConfigCommand | 'help' {
  const flags = parseFlags(args, EVALUATE_OPTIONS);
  if (flags.help) return 'help';
  if (flags.config !== undefined) return parseConfigCommand(flags, flags.config, env);
  const configOnly = CONFIG_ONLY_FLAGS.find((flag) => flags[flag] !== undefined);
  if (configOnly !== undefined) throw new UsageError(`--${configOnly} needs --config (it applies to a whole config round)`);
  if (flags.endpoints === undefined || flags.endpoints.trim() === '')
    throw new UsageError('--endpoints is required (e.g. --endpoints https://127.0.0.1:2379)');
  const output = parseOutput(flags.output);
  const store = parseStore(flags.store);
  const quotaBackendBytes = parseQuota(flags['quota-backend-bytes']);

  const raw: Record<string, unknown> = {
    name: flags.target ?? 'default',
    endpoints: flags.endpoints
      .split(',')
      .map((endpoint) => endpoint.trim())
      .filter((endpoint) => endpoint !== ''),
  };
  if (flags.timeout !== undefined) raw.timeout = flags.timeout;
  if (quotaBackendBytes !== undefined) raw.quotaBackendBytes = quotaBackendBytes;
  if (flags.cacert !== undefined || flags.cert !== undefined || flags.key !== undefined) {
    const tls: Record<string, string> = {};
    if (flags.cacert !== undefined) tls.caFile = flags.cacert;
    if (flags.cert !== undefined) tls.certFile = flags.cert;
    if (flags.key !== undefined) tls.keyFile = flags.key;
    raw.tls = tls;
  }
  const parsed = targetSchema.safeParse(raw);
  if (!parsed.success) throw new UsageError(renameFields(formatZodIssues(parsed.error, { input: raw })).join('; '));
  return { kind: 'single', target: parsed.data, output, store };
}

async function storeEvaluation(store: StoreConfig, evaluation: Evaluation, io: CliIo): Promise<boolean> {
  try {
    // Imported only when asked for, so `evaluate` without --store never loads the Kubernetes client.
    const { createStore } = await import('../adapters/store-factory.js');
    const evaluationStore = createStore(store);
    const outcome = await evaluationStore.write(evaluation);
    if (!outcome.written) {
      io.stderr(
        `etcd-guard: ${evaluationStore.describe()} already holds a newer evaluation (${outcome.keptEvaluatedAt}); kept it\n`,
      );
    }
    return true;
  } catch (error) {
    io.stderr(
      `etcd-guard: could not store the evaluation (--store ${store.kind}): ${error instanceof Error ? error.message : String(error)}\n`,
    );
    return false;
  }
}

async function runEvaluate(args: string[], env: Record<string, string | undefined>, io: CliIo): Promise<number> {
  const command = parseEvaluateCommand(args, env);
  if (command === 'help') {
    io.stdout(renderCommandHelp('evaluate'));
    return EXIT_PASSED;
  }
  if (command.kind === 'config') return runEvaluateConfig(command, env, io);
  let evaluation: Evaluation;
  try {
    // Loaded here, not at the top: `etcd-guard webhook` must not carry etcd3, gRPC and the etcd
    // protos (a large share of its heap) before it needs them; webhook/server/main.ts loads them
    // lazily too.
    // --timeout is the budget for talking to etcd: evaluateTarget counts it from the first call.
    const { evaluateTarget } = await import('../usecases/evaluate-target.js');
    evaluation = await evaluateTarget(command.target);
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(renameFields(error.issues).join('; '));
    throw error;
  }
  io.stdout(render(evaluation, command.output));
  if (command.store !== null && !(await storeEvaluation(command.store, evaluation, io))) return EXIT_NOT_PASSED;
  return evaluation.passed ? EXIT_PASSED : EXIT_NOT_PASSED;
}

/** A store for `--store none`: evaluations are printed, not kept. */
const DISCARD_STORE: EvaluationStore = {
  read: async () => null,
  write: async (evaluation) => ({ written: false, keptEvaluatedAt: evaluation.evaluatedAt }),
  describe: () => 'none',
};

/**
 * `evaluate --config`: the scheduled evaluation (the same code path as the serverless schedule
 * handler and the CronJob), once or every `--every`. Log lines go to stderr; stdout carries the
 * evaluations. Exit 0 when every target was evaluated and stored, whatever its verdict; 1 when
 * one could not be.
 */
async function runEvaluateConfig(
  command: EvaluateConfigCommand,
  env: Record<string, string | undefined>,
  io: CliIo,
): Promise<number> {
  const { loadGuardConfigForCommand } = await import('./config-file.js');
  const config = loadGuardConfigForCommand(command.configFile);
  const [{ buildScheduledDeps, runScheduledEvaluation, runScheduledLoop }, { createLogger }, { createStore }, { default: pino }] =
    await Promise.all([
      import('../usecases/scheduled-run.js'),
      import('../shared/logger.js'),
      import('../adapters/store-factory.js'),
      import('pino'),
    ]);
  // Every log line of the run goes to stderr, whatever --output says: stdout is the evaluations.
  const logger = createLogger({ env, name: 'etcd-guard-evaluate', destination: pino.destination(2) });
  const wired = buildScheduledDeps(config, env, { logger });
  const latest = new Map<string, Evaluation>();
  const deps = {
    ...wired,
    ...(command.shard === undefined ? {} : { shard: command.shard }),
    ...(command.budgetMs === undefined ? {} : { budgetMs: command.budgetMs }),
    store: command.store === undefined ? wired.store : command.store === null ? DISCARD_STORE : createStore(command.store),
    evaluate: async (target: Target, context?: EvaluationContext) => {
      const evaluation = await wired.evaluate(target, context);
      latest.set(target.name, evaluation);
      return evaluation;
    },
  };
  const report = (results: ScheduledResult[]): boolean => {
    const evaluations = results.flatMap((result) => latest.get(result.target) ?? []);
    latest.clear();
    if (command.output === 'json') io.stdout(`${JSON.stringify(evaluations, null, 2)}\n`);
    else for (const evaluation of evaluations) io.stdout(render(evaluation, command.output));
    const unfinished = results.filter((result) => !result.ok && result.stage === 'budget').map((result) => result.target);
    if (unfinished.length > 0)
      io.stderr(
        `etcd-guard evaluate: ${unfinished.length} target(s) not finished within the run budget: ${unfinished.join(', ')}\n`,
      );
    // The scheduled form judges its own work, not etcd: an Unhealthy verdict that was evaluated and
    // stored is a success (a CronJob must not fail every minute while etcd is sick); a target that
    // could not be evaluated or stored is not. With --store none nothing is written on purpose.
    return results.every((result) => result.ok);
  };
  if (command.everyMs === null) return report(await runScheduledEvaluation(deps)) ? EXIT_PASSED : EXIT_NOT_PASSED;

  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  try {
    await runScheduledLoop({
      ...deps,
      intervalMs: command.everyMs,
      signal: stop.signal,
      onRound: (results) => void report(results),
    });
    return EXIT_PASSED;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

async function runWebhook(args: string[], env: Record<string, string | undefined>, io: CliIo): Promise<number> {
  const flags = parseFlags(args, WEBHOOK_OPTIONS);
  if (flags.help) {
    io.stdout(renderCommandHelp('webhook'));
    return EXIT_PASSED;
  }
  // runWebhookCommand checks the webhook's flags (config, listen address, TLS pairing) itself, the
  // one place they are checked, and prints a UsageError as main() would.
  const { runWebhookCommand } = await import('../../webhook/server/main.js');
  return runWebhookCommand(
    {
      configFile: flags.config ?? '',
      listen: flags.listen ?? '',
      ...(flags['metrics-listen'] !== undefined ? { metricsListen: flags['metrics-listen'] } : {}),
      ...(flags['tls-cert'] !== undefined ? { tlsCertFile: flags['tls-cert'] } : {}),
      ...(flags['tls-key'] !== undefined ? { tlsKeyFile: flags['tls-key'] } : {}),
      insecureHttp: flags['insecure-http'] === true,
    },
    env,
    { stderr: (line) => io.stderr(`${line}\n`) },
  );
}

async function runTargets(args: string[], io: CliIo): Promise<number> {
  const flags = parseFlags(args, COMMAND_OPTIONS.targets);
  if (flags.help) {
    io.stdout(renderCommandHelp('targets'));
    return EXIT_PASSED;
  }
  const { runTargetsCommand } = await import('./cli-targets.js');
  return runTargetsCommand(flags, io);
}

export async function main(argv: string[], env: Record<string, string | undefined>, io: CliIo = defaultIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'evaluate': {
        const code = await runEvaluate(rest, env, io);
        await settleCleanups(EXIT_CLEANUP_WAIT_MS);
        return code;
      }
      case 'webhook':
        return await runWebhook(rest, env, io);
      case 'targets':
        return await runTargets(rest, io);
      case '--help':
      case '-h':
      case 'help':
        io.stdout(USAGE);
        return EXIT_PASSED;
      case '--version':
      case 'version':
        io.stdout(`etcd-guard ${packageJson.version}\n`);
        return EXIT_PASSED;
      case undefined:
        throw new UsageError('missing command: evaluate, webhook or targets');
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)} (want evaluate, webhook or targets)`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`etcd-guard ${command ?? ''}: ${error.message}\n`.replace('etcd-guard : ', 'etcd-guard: '));
      if (!/^(unknown command|missing command)/.test(error.message)) io.stderr(`run etcd-guard ${command} --help for usage\n`);
      else io.stderr(USAGE);
      return EXIT_USAGE;
    }
    io.stderr(`etcd-guard ${command ?? ''}: unexpected error: ${error instanceof Error ? error.message : String(error)}\n`);
    return EXIT_NOT_PASSED;
  }
}
