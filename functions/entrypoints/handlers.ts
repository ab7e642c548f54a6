// Serverless entrypoints (AWS Lambda through the Serverless Framework). Thin: they load the config
// once per container, wire the real adapters and hand over to runScheduledEvaluation and
// OnDemandEvaluations. Only a configuration error makes an invocation fail; a sick etcd target is
// a result, not an exception.
import { createLogger } from '../shared/logger.js';
import { ConfigError, type GuardConfig } from '../domain/config.js';
import { loadGuardConfigFromEnv } from './config-file.js';
import { OnDemandEvaluations, resolveBearerToken } from '../usecases/on-demand-service.js';
import { createWarmConnections, type WarmConnections } from '../usecases/warm-connections.js';
import {
  buildScheduledDeps,
  runScheduledEvaluation,
  type ScheduledDeps,
  type ScheduledResult,
} from '../usecases/scheduled-run.js';

type Env = Readonly<Record<string, string | undefined>>;

/** The fields of an EventBridge schedule event we look at (none are needed to run). */
export interface ScheduleEvent {
  source?: string;
  time?: string;
  'detail-type'?: string;
}

/** API Gateway HTTP API (payload format 2.0) request, the fields the handler reads. */
export interface HttpApiEvent {
  requestContext?: { http?: { method?: string; path?: string } };
  pathParameters?: Record<string, string | undefined> | null;
  headers?: Record<string, string | undefined> | null;
}

export interface HttpApiResult {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

export interface ScheduledSummary {
  targets: number;
  /** Evaluated and stored, verdict Healthy or Degraded. */
  passed: number;
  /** Evaluated and stored, verdict Unhealthy. */
  notPassed: number;
  /** No evaluation, or one that could not be stored. */
  failed: number;
  results: ScheduledResult[];
}

export interface HandlerFactoryOptions {
  /** Called once per container (on the first invocation); throws ConfigError on bad config. */
  loadConfig: () => GuardConfig;
  env: Env;
  /** Wires evaluate/store/logger for a config; the real adapters unless a test injects others. */
  buildDeps?: (config: GuardConfig, env: Env) => ScheduledDeps;
}

/**
 * Runs `load` on first use and keeps its value; a failure is logged (naming the config issues)
 * and not kept, so a fixed env can recover on the next invocation.
 */
function once<T>(env: Env, load: () => T): () => T {
  let loaded: { value: T } | null = null;
  return () => {
    try {
      if (loaded === null) loaded = { value: load() };
    } catch (error) {
      logConfigError(env, error);
      throw error;
    }
    return loaded.value;
  };
}

/**
 * The connections a container keeps between its warm invocations (a Lambda process is reused
 * while warm), as `connections` says. A container is frozen between invocations: no timer runs
 * and no keepalive goes out, so the idle timeout is counted from the end of the last invocation
 * when the next one begins, and one idle longer than that starts on fresh connections.
 */
class InvocationConnections {
  private warm: WarmConnections | null | undefined;
  private lastEndedMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly config: GuardConfig,
    private readonly nowMs: () => number = () => Date.now(),
  ) {}

  /** What this invocation's evaluations use (begin() decided: the kept ones, or new ones). */
  current(): WarmConnections | null {
    return this.warm ?? null;
  }

  begin(): void {
    if (this.warm && this.nowMs() - this.lastEndedMs >= this.config.connections.idleTimeout) {
      this.warm.close();
      this.warm = undefined;
    }
    this.warm ??= createWarmConnections(this.config);
  }

  end(): void {
    this.lastEndedMs = this.nowMs();
  }
}

/** The real adapters for `config`, with connections kept between the container's invocations. */
function keptDeps(config: GuardConfig, env: Env): { deps: ScheduledDeps; connections: InvocationConnections | null } {
  const connections = new InvocationConnections(config);
  return { deps: buildScheduledDeps(config, env, { warm: () => connections.current() }), connections };
}

/** Wires a config: the injected builder as it is, or the real adapters with kept connections. */
function wire(options: HandlerFactoryOptions, config: GuardConfig) {
  return options.buildDeps === undefined
    ? keptDeps(config, options.env)
    : { deps: options.buildDeps(config, options.env), connections: null };
}

/** Runs one invocation with the container's kept connections (none for injected deps). */
async function invocation<T>(connections: InvocationConnections | null, run: () => Promise<T>): Promise<T> {
  connections?.begin();
  try {
    return await run();
  } finally {
    connections?.end();
  }
}

export function summarize(results: ScheduledResult[]): ScheduledSummary {
  return {
    targets: results.length,
    passed: results.filter((result) => result.ok && result.passed).length,
    notPassed: results.filter((result) => result.ok && !result.passed).length,
    failed: results.filter((result) => !result.ok).length,
    results,
  };
}

function logConfigError(env: Env, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  const issues = error instanceof ConfigError ? error.issues : [];
  createLogger({ env, name: 'etcd-guard-functions' }).error({ issues }, message);
}

export function createEvaluateHandler(options: HandlerFactoryOptions): (event?: ScheduleEvent) => Promise<ScheduledSummary> {
  const wired = once(options.env, () => wire(options, options.loadConfig()));
  return async () => {
    const { deps, connections } = wired();
    return summarize(await invocation(connections, () => runScheduledEvaluation(deps)));
  };
}

function headerValue(headers: HttpApiEvent['headers'], name: string): string | undefined {
  if (headers === null || headers === undefined) return undefined;
  // HTTP API lowercases header names; serverless-offline and hand-made events may not.
  const key = Object.keys(headers).find((candidate) => candidate.toLowerCase() === name);
  return key === undefined ? undefined : headers[key];
}

function jsonResult(status: number, body: unknown, headers: Record<string, string> = {}): HttpApiResult {
  return {
    statusCode: status,
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  };
}

export function createEvaluateHttpHandler(options: HandlerFactoryOptions): (event: HttpApiEvent) => Promise<HttpApiResult> {
  const onDemand = once(options.env, () => {
    const config = options.loadConfig();
    const { deps, connections } = wire(options, config);
    const { store, evaluate } = deps;
    const evaluations = new OnDemandEvaluations({ config, store, evaluate, token: resolveBearerToken(config, options.env) });
    return { evaluations, connections };
  });
  return async (event) => {
    const { evaluations, connections } = onDemand();
    const method = event?.requestContext?.http?.method;
    const target = event?.pathParameters?.target;
    if (typeof method !== 'string' || method === '') {
      return jsonResult(400, { error: 'malformed event: requestContext.http.method is missing' });
    }
    if (typeof target !== 'string' || target === '') {
      return jsonResult(400, { error: 'malformed event: pathParameters.target is missing' });
    }
    const response = await invocation(connections, () =>
      evaluations.handle({ method, target, authorization: headerValue(event.headers, 'authorization') }),
    );
    return jsonResult(response.status, response.body, response.headers);
  };
}

const processOptions: HandlerFactoryOptions = {
  loadConfig: () => loadGuardConfigFromEnv(process.env),
  env: process.env,
};

/** `schedule: rate(1 minute)` entrypoint. */
export const evaluate = createEvaluateHandler(processOptions);

/** `httpApi` GET/POST /evaluations/{target} entrypoint. */
export const evaluateHttp = createEvaluateHttpHandler(processOptions);
