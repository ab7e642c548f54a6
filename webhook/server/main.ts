// The `etcd-guard webhook` entrypoint: wires config, store, cache, on-demand service and the
// express app into an HTTPS (or, when asked, plain HTTP) server, and shuts it down gracefully.
import { stat } from 'node:fs/promises';
import http from 'node:http';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { TLSSocket } from 'node:tls';
import { ConfigError, type GuardConfig } from '../../functions/domain/config.js';
import { loadGuardConfigFile } from '../../functions/entrypoints/config-file.js';
import { createStore } from '../../functions/adapters/store-factory.js';
import type { MachineReader } from '../../functions/adapters/capi-machines.js';
import type { AccessReviewer } from '../../functions/adapters/kube-access-review.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { EvaluationContext } from '../../functions/usecases/evaluate-target.js';
import type { WarmConnections } from '../../functions/usecases/warm-connections.js';
import type { EvaluationStore } from '../../functions/domain/store.js';
import { OnDemandEvaluations, readTokenFile, resolveBearerToken } from '../../functions/usecases/on-demand-service.js';
import { describeGuarded, type Target } from '../../functions/domain/targets.js';
import { TargetRegistry } from '../../functions/usecases/live-target-set.js';
import { createWebhookApp } from './app.js';
import { EventRecorder, lazyKubeEventSink, reportingInstance } from '../../functions/usecases/event-recorder.js';
import { Deadline } from '../../functions/domain/deadline.js';
import type { ParentObjectRef } from '../domain/contract.js';
import { requiredLabels } from '../domain/match-target.js';
import { createParentReader, type ParentObjectGetter, type ParentReader } from './parent-labels.js';
import { EvaluationCache } from './cache.js';
import { UsageError } from '../../functions/shared/errors.js';
import { createLogger, type Logger } from '../../functions/shared/logger.js';
import { createWebhookMetrics, type WebhookMetrics } from './metrics.js';
import { startMetricsServer } from './metrics-server.js';
import { createReloadingHttpsServer, TlsFilesError } from './tls.js';
import { limitConnections, MAX_CONNECTIONS_PER_PEER } from './connections.js';

export const DEFAULT_LISTEN = '0.0.0.0:8443';
/** In-flight requests get this long to finish on shutdown before their connections are cut. */
export const SHUTDOWN_GRACE_MS = 10_000;

export interface WebhookServerOptions {
  config: GuardConfig;
  host: string;
  port: number;
  /** HTTPS with these files; null serves plain HTTP (--insecure-http). */
  tls: { certFile: string; keyFile: string } | null;
  /** Where GET /metrics is served (plain HTTP, nothing else there); null or absent: nowhere. */
  metricsListen?: { host: string; port: number } | null;
  /** Bearer token for /evaluations; null leaves them open. */
  token: string | null;
  /** The file the token came from: re-read when it changes (rotation without restart). */
  tokenFile?: string;
  /** Period of the token file's stat check; default 10 s, as for the TLS files. */
  tokenStatIntervalMs?: number;
  logger?: Logger;
  store?: EvaluationStore;
  evaluate?: (target: Target, context?: EvaluationContext) => Promise<Evaluation>;
  /** The targets (static and discovered); built from the config's discovery section by default. */
  registry?: TargetRegistry;
  metrics?: WebhookMetrics;
  now?: () => Date;
  pollIntervalMs?: number;
  storeReadTimeoutMs?: number;
  tlsStatIntervalMs?: number;
  /** Reads a KCP's Machines; by default through the kubeconfig (in-cluster service account). */
  readMachines?: MachineReader;
  /** Passed to OnDemandEvaluations: how long a settled run is reused. */
  onDemandMinIntervalMs?: number;
  /** Open connections of the whole server; default MAX_CONNECTIONS (see connections.ts for who gives way). */
  maxConnections?: number;
  /** Asks SubjectAccessReviews for overrides; by default through the kubeconfig. */
  reviewAccess?: AccessReviewer;
  /** Open connections from one peer beyond this are dropped on accept; default MAX_CONNECTIONS_PER_PEER. */
  maxConnectionsPerPeer?: number;
  /** Kubeconfig for reading the parent of a /scale request; else KUBECONFIG, in-cluster, ~/.kube/config. */
  kubeconfigFile?: string;
  /** Deadline of that read and how long its answer is reused (webhook/server/parent-labels.ts defaults). */
  parentReadTimeoutMs?: number;
  parentCacheTtlMs?: number;
  /** Records the webhook's Events; by default one writing through the kubeconfig (config `events`). */
  eventRecorder?: EventRecorder;
  /**
   * Whether a Kubernetes API is there to write Events to (kubeconfigFile, KUBECONFIG or in-cluster;
   * the command reads the environment): the Event writer's client is then loaded at start.
   */
  kubernetesApi?: boolean;
}

/** KUBECONFIG or a pod's service environment: the webhook can reach a Kubernetes API. */
export function kubernetesApiInEnv(env: Readonly<Record<string, string | undefined>>): boolean {
  return Boolean(env.KUBECONFIG?.trim() || env.KUBERNETES_SERVICE_HOST?.trim());
}

/** Events are reported as coming from this controller (events.k8s.io/v1 reportingController). */
export const WEBHOOK_EVENT_CONTROLLER = 'etcd-guard.io/webhook';

/**
 * Bounds on what one client can hold. The apiserver sends a ClientHello at once, its headers right
 * after, and its own timeout is at most 30 s; a socket that does less is an attack or a fault and
 * is cut. Checked every second, so a bound is exceeded by at most a second.
 */
export const CONNECTION_BOUNDS = {
  handshakeTimeout: 5_000,
  headersTimeout: 10_000,
  requestTimeout: 30_000,
  keepAliveTimeout: 5_000,
  connectionsCheckingInterval: 1_000,
} as const;
/** Far below the fd limit of a pod (1024 soft in many images), far above what apiservers open. */
export const MAX_CONNECTIONS = 512;

export interface RunningWebhookServer {
  /** e.g. https://127.0.0.1:8443 */
  url: string;
  port: number;
  /** e.g. http://127.0.0.1:9090 (GET /metrics), or null when no metrics port was asked for. */
  metricsUrl: string | null;
  cache: EvaluationCache;
  metrics: WebhookMetrics;
  onDemand: OnDemandEvaluations;
  /** The connections kept open between evaluations now; null before the first evaluation or with `connections.keep` off. */
  connections(): { channels: number; idleChannels: number; capiAccesses: number } | null;
  /** Stops accepting, lets in-flight requests finish (bounded), stops polling. Idempotent. */
  close(): Promise<void>;
}

/**
 * Re-reads the bearer token file when its stat signature changes (a rotated Secret). A file that
 * is not a small regular file, or holds no usable token, keeps the previous token and logs why.
 */
function watchTokenFile(file: string, onDemand: OnDemandEvaluations, logger: Logger, intervalMs: number): () => void {
  let signature: string | null = null;
  const check = async () => {
    const info = await stat(file).catch(() => null);
    const now = info === null ? 'missing' : `${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}`;
    if (signature === null || now === signature) {
      signature = now;
      return;
    }
    signature = now;
    try {
      if (info === null || !info.isFile() || info.size > 64 * 1024) throw new Error('not a regular file of at most 64 KiB');
      onDemand.setToken(readTokenFile(file));
      logger.info({ tokenFile: file }, 'bearer token reloaded');
    } catch (error) {
      logger.error(
        { tokenFile: file, err: (error as Error).message },
        'token file changed but cannot be used; keeping the previous token',
      );
    }
  };
  void check();
  const timer = setInterval(() => void check(), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

let etcdEngine: Promise<typeof import('../../functions/usecases/reach-target.js')> | undefined;

/** Loads the etcd engine (etcd3 + gRPC) on first use only, so servers given their own `evaluate` never load it. */
function loadEtcdEngine(): Promise<typeof import('../../functions/usecases/reach-target.js')> {
  const loading = (etcdEngine ??= import('../../functions/usecases/reach-target.js'));
  loading.catch(() => {
    if (etcdEngine === loading) etcdEngine = undefined;
  });
  return loading;
}

/**
 * Evaluations through the etcd engine, with the connections the config keeps open between them
 * (built with the engine, on first use); close() closes those.
 */
function etcdEvaluator(config: GuardConfig): {
  evaluate: (target: Target, context?: EvaluationContext) => Promise<Evaluation>;
  counts: () => ReturnType<WarmConnections['counts']> | null;
  close: () => void;
} {
  let warm: WarmConnections | null | undefined;
  let closed = false;
  return {
    counts: () => warm?.counts() ?? null,
    evaluate: async (target, context) => {
      const engine = await loadEtcdEngine();
      if (warm === undefined && !closed) warm = engine.createWarmConnections(config);
      return engine.evaluateResolvedTarget(target, { ...context, warm: warm ?? null });
    },
    close: () => {
      closed = true;
      warm?.close();
    },
  };
}

/** The registry a server builds for itself: discovery rounds logged, the cache following the target set. */
function defaultRegistry(config: GuardConfig, logger: Logger, follow: (names: string[]) => void): TargetRegistry {
  let lastProblems = '';
  return new TargetRegistry(config, {
    onChange: (targets) => follow(targets.map((target) => target.name)),
    onRound: ({ problems, failures }) => {
      for (const failure of failures) logger.warn({ source: failure.source, err: failure.message }, 'discovery could not list');
      const text = JSON.stringify(problems);
      if (text !== lastProblems && problems.length > 0) {
        logger.warn(
          { problems: problems.map((problem) => `${describeGuarded(problem.object)}: ${problem.message}`) },
          'discovery skipped objects',
        );
      }
      lastProblems = text;
    },
  });
}

/** Lists a KCP's Machines; like lazyObjectGetter, the Kubernetes client loads on first use only. */
function lazyMachineReader(kubeconfigFile: string | undefined): MachineReader {
  let reader: Promise<MachineReader> | undefined;
  return async (query, deadline) => {
    const loading = (reader ??= Promise.all([
      import('../../functions/adapters/capi-machines.js'),
      import('../../functions/adapters/kube.js'),
    ]).then(([machines, kube]) => machines.createMachineReader(() => kube.loadKubeConfig(kubeconfigFile))));
    return (await loading)(query, deadline);
  };
}

/** SubjectAccessReviews for overrides; like lazyMachineReader, the client loads on first use only. */
function lazyAccessReviewer(kubeconfigFile: string | undefined): AccessReviewer {
  let reviewer: Promise<AccessReviewer> | undefined;
  return async (question, deadline) => {
    const loading = (reviewer ??= Promise.all([
      import('../../functions/adapters/kube-access-review.js'),
      import('../../functions/adapters/kube.js'),
    ]).then(([review, kube]) => review.createAccessReviewer(kube.loadKubeConfig(kubeconfigFile))));
    loading.catch(() => {
      if (reviewer === loading) reviewer = undefined;
    });
    return (await loading)(question, deadline);
  };
}

/**
 * GETs the object a /scale request scales. The Kubernetes client is loaded on first use (or by
 * warm()), so a webhook whose targets never match by labels never pays for it; a failed load is
 * retried. The GET's deadline starts once the client is loaded: loading reads local files only.
 */
function lazyObjectGetter(kubeconfigFile: string | undefined): { get: ParentObjectGetter; warm: () => void } {
  let getter: Promise<(ref: ParentObjectRef, deadline: Deadline) => Promise<unknown>> | undefined;
  const load = () => {
    const loading = (getter ??= import('../../functions/adapters/kube.js').then((kube) =>
      kube.createObjectGetter(kube.loadKubeConfig(kubeconfigFile)),
    ));
    loading.catch(() => {
      if (getter === loading) getter = undefined;
    });
    return loading;
  };
  return {
    get: async (ref, timeoutMs) => (await load())(ref, Deadline.after(timeoutMs)),
    warm: () => void load().catch(() => undefined),
  };
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return host === '::' ? '[::1]' : '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

interface ServerParts {
  options: WebhookServerOptions;
  logger: Logger;
  metrics: WebhookMetrics;
  store: EvaluationStore;
  registry: TargetRegistry;
}

/** The cache of every target's evaluation, fed from the store and counting its feed errors. */
function createCache(parts: ServerParts): EvaluationCache {
  const { options, metrics } = parts;
  return new EvaluationCache({
    store: parts.store,
    targets: parts.registry.names(),
    logger: parts.logger,
    onFeedError: (target) => metrics.recordCacheFeedError(target),
    onTaken: (evaluation) => metrics.noteEvaluationHeld(evaluation),
    ...(options.now ? { now: options.now } : {}),
    ...(options.pollIntervalMs === undefined ? {} : { pollIntervalMs: options.pollIntervalMs }),
    ...(options.storeReadTimeoutMs === undefined ? {} : { readTimeoutMs: options.storeReadTimeoutMs }),
  });
}

/** On-demand and inline evaluations; every fresh one goes into the cache. */
function createOnDemand(
  parts: ServerParts,
  cache: EvaluationCache,
  evaluate: (target: Target, context?: EvaluationContext) => Promise<Evaluation>,
): OnDemandEvaluations {
  const { options, logger, registry } = parts;
  return new OnDemandEvaluations({
    config: options.config,
    store: parts.store,
    evaluate: options.evaluate ?? evaluate,
    ...(options.evaluate === undefined ? { prepare: loadEtcdEngine } : {}),
    targets: () => registry.all(),
    token: options.token,
    onFresh: (evaluation) => cache.put(evaluation),
    previous: (target) => cache.get(target),
    onBackgroundStoreError: (target, error) =>
      logger.error(
        { target, err: error instanceof Error ? error.message : String(error) },
        'storing an inline evaluation failed',
      ),
    ...(options.now ? { now: options.now } : {}),
    ...(options.onDemandMinIntervalMs === undefined ? {} : { minIntervalMs: options.onDemandMinIntervalMs }),
  });
}

/** Reads a /scale request's parent object (its labels, its kind's removal fields) through the kubeconfig. */
function createParentLabels(options: WebhookServerOptions): ParentReader {
  const parentGetter = lazyObjectGetter(options.kubeconfigFile);
  // A target that matches by labels will need the parent read on the first /scale: load now.
  if (options.config.targets.some((target) => Object.keys(requiredLabels(target.match ?? {})).length > 0)) {
    parentGetter.warm();
  }
  return createParentReader({
    get: parentGetter.get,
    ...(options.parentReadTimeoutMs === undefined ? {} : { timeoutMs: options.parentReadTimeoutMs }),
    ...(options.parentCacheTtlMs === undefined ? {} : { cacheTtlMs: options.parentCacheTtlMs }),
  });
}

/** The recorder of denial, would-be denial and override Events, or null when the config turns Events off. */
function createEventRecorder(parts: ServerParts): EventRecorder | null {
  const { options, logger, metrics } = parts;
  if (!options.config.events) return null;
  if (options.eventRecorder) return options.eventRecorder;
  const sink = lazyKubeEventSink(options.kubeconfigFile);
  // Loaded now, not at the first denial: the Kubernetes client imported while requests are being
  // answered left every later denial dearer in CPU (bench/profile-events.ts; BENCHMARKS.md,
  // "Events on vs off"). A failed load here is retried by the first write. Without any Kubernetes
  // API (a local run on the file store) it stays lazy: no Event can be written there anyway.
  if (options.kubeconfigFile !== undefined || options.kubernetesApi === true) void sink.warm();
  return new EventRecorder({
    sink,
    reportingController: WEBHOOK_EVENT_CONTROLLER,
    reportingInstance: reportingInstance(process.env, hostname()),
    onWrite: (result) => metrics.recordEventWrite(result),
    onError: (message, event) =>
      logger.warn(
        { reason: event.reason, object: `${event.regarding.namespace}/${event.regarding.name}`, err: message },
        'writing an Event failed',
      ),
  });
}

/** HTTPS with reloading key pair (or plain HTTP when asked), with the connection bounds. */
async function createServer(
  options: WebhookServerOptions,
  app: http.RequestListener,
  logger: Logger,
  metrics: WebhookMetrics,
): Promise<http.Server> {
  let server: http.Server;
  if (options.tls) {
    const reloading = await createReloadingHttpsServer({
      certFile: options.tls.certFile,
      keyFile: options.tls.keyFile,
      handler: app,
      logger,
      serverOptions: CONNECTION_BOUNDS,
      ...(options.tlsStatIntervalMs === undefined ? {} : { statIntervalMs: options.tlsStatIntervalMs }),
    });
    server = reloading.server;
    metrics.observeCertificate(() => reloading.certificateNotAfter());
  } else {
    server = http.createServer(CONNECTION_BOUNDS, app);
  }
  const limits = {
    maxConnections: options.maxConnections ?? MAX_CONNECTIONS,
    maxPerPeer: options.maxConnectionsPerPeer ?? MAX_CONNECTIONS_PER_PEER,
  };
  limitConnections(server, limits, (peer, why) =>
    logger.debug(
      { peer },
      why === 'peer-limit'
        ? 'connection refused: its peer holds its share of the connections'
        : 'connection refused: the server is full and its peer holds the most',
    ),
  );
  return server;
}

/** Listens (rejecting on e.g. EADDRINUSE), then logs server errors and cuts faulty clients. */
async function listen(server: http.Server, host: string, port: number, logger: Logger): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', (error) => logger.error({ err: error.message }, 'server error'));
  server.on('clientError', (error, socket) => {
    // A TLS socket gets no plaintext answer: before its handshake the write would queue behind a
    // ClientHello that may never come and the socket would never be freed. Plain HTTP gets its 400.
    if (socket instanceof TLSSocket || !socket.writable) socket.destroy();
    else socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n', () => socket.destroy());
    logger.debug({ err: error.message }, 'client error');
  });
}

/** Idempotent shutdown: stop accepting, let busy requests finish within the grace, stop polling. */
function gracefulClose(
  server: http.Server,
  stopTokenWatch: () => void,
  background: { stop(): Promise<void> | void }[],
  metricsServer: http.Server | null,
): () => Promise<void> {
  let closing: Promise<void> | null = null;
  return () => {
    closing ??= (async () => {
      stopTokenWatch();
      // Scrapes are short: the metrics port closes at once, so Prometheus sees the pod go.
      metricsServer?.close();
      metricsServer?.closeAllConnections();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // close() stops accepting and drops idle keep-alive sockets (Node ≥ 19); busy ones finish first.
      server.closeIdleConnections();
      const grace = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
      try {
        await Promise.all([closed, ...background.map((part) => part.stop())]);
      } finally {
        clearTimeout(grace);
      }
    })();
    return closing;
  };
}

export async function startWebhookServer(options: WebhookServerOptions): Promise<RunningWebhookServer> {
  const { config } = options;
  const logger = options.logger ?? createLogger();
  const metrics = options.metrics ?? createWebhookMetrics(options.now ? { now: options.now } : {});
  const store = options.store ?? createStore(config.store);
  // The cache follows the target set once it exists (the first round runs before it does).
  let followTargets: (names: string[]) => void = () => undefined;
  const registry = options.registry ?? defaultRegistry(config, logger, (names) => followTargets(names));
  // The first discovery round (bounded by its own deadline) runs before the server listens, so a
  // discovered KCP is never denied as "no target" just because the webhook has not looked yet.
  await registry.refresh();
  const parts: ServerParts = { options, logger, metrics, store, registry };
  const cache = createCache(parts);
  followTargets = (names) => cache.setTargets(names);
  const evaluator = etcdEvaluator(config);
  metrics.observeConnections(evaluator.counts);
  const onDemand = createOnDemand(parts, cache, evaluator.evaluate);
  const parent = createParentLabels(options);
  const events = createEventRecorder(parts);
  const stopEvents = events?.start() ?? (() => undefined);
  const app = createWebhookApp({
    config,
    cache,
    onDemand,
    metrics,
    logger,
    parentLabels: (ref) => parent.labels(ref),
    readParent: (ref, query) => parent.object(ref, query),
    readMachines: options.readMachines ?? lazyMachineReader(options.kubeconfigFile),
    reviewAccess: options.reviewAccess ?? lazyAccessReviewer(options.kubeconfigFile),
    targets: () => registry.all(),
    ...(events === null ? {} : { recordEvent: (event) => events.record(event) }),
    fleet: () => registry.fleet(),
    ...(options.now ? { now: options.now } : {}),
  });

  const server = await createServer(options, app, logger, metrics);
  await listen(server, options.host, options.port, logger);
  let metricsServer: http.Server | null = null;
  if (options.metricsListen) {
    metricsServer = await startMetricsServer(metrics, options.metricsListen, logger).catch((error: unknown) => {
      server.close();
      throw error;
    });
  }
  cache.start();
  const stopTokenWatch = options.tokenFile
    ? watchTokenFile(options.tokenFile, onDemand, logger, options.tokenStatIntervalMs ?? 10_000)
    : () => undefined;
  registry.start();

  const address = server.address() as AddressInfo;
  const url = `${options.tls ? 'https' : 'http'}://${urlHost(options.host)}:${address.port}`;
  const close = gracefulClose(
    server,
    stopTokenWatch,
    [cache, registry, { stop: stopEvents }, { stop: () => onDemand.settle().then(evaluator.close) }],
    metricsServer,
  );
  const metricsAddress = metricsServer?.address() as AddressInfo | undefined;
  const metricsUrl = metricsAddress ? `http://${urlHost(options.metricsListen?.host ?? '')}:${metricsAddress.port}` : null;
  return { url, port: address.port, metricsUrl, cache, metrics, onDemand, connections: evaluator.counts, close };
}

export interface WebhookCommandOptions {
  configFile: string;
  /** HOST:PORT, default 0.0.0.0:8443. */
  listen: string;
  /** HOST:PORT of the metrics port; empty or absent: no metrics served. */
  metricsListen?: string;
  tlsCertFile?: string;
  tlsKeyFile?: string;
  insecureHttp: boolean;
}

/** Splits HOST:PORT ("0.0.0.0:8443", "[::1]:8443", ":8443"); throws UsageError naming the value. */
export function parseListenAddress(listen: string, flag = '--listen'): { host: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(listen.trim());
  const port = match ? Number(match[3]) : Number.NaN;
  if (!match || !(port >= 0 && port <= 65_535)) {
    throw new UsageError(`${flag}: invalid address ${JSON.stringify(listen)} (want HOST:PORT, e.g. 0.0.0.0:8443)`);
  }
  const host = match[1] ?? match[2] ?? '';
  return { host: host === '' ? '0.0.0.0' : host, port };
}

function tlsFilesFrom(options: WebhookCommandOptions): { certFile: string; keyFile: string } | null {
  const cert = options.tlsCertFile?.trim() ? options.tlsCertFile : undefined;
  const key = options.tlsKeyFile?.trim() ? options.tlsKeyFile : undefined;
  if (options.insecureHttp) {
    if (cert || key) throw new UsageError(`${cert ? '--tls-cert' : '--tls-key'} cannot be combined with --insecure-http`);
    return null;
  }
  if (!cert) throw new UsageError('--tls-cert is required (or pass --insecure-http to serve plain HTTP)');
  if (!key) throw new UsageError('--tls-key is required (or pass --insecure-http to serve plain HTTP)');
  return { certFile: cert, keyFile: key };
}

export interface CommandIo {
  stderr?: (line: string) => void;
  logger?: Logger;
  /** Resolves when the command should shut down; SIGTERM/SIGINT by default. */
  shutdownSignal?: Promise<unknown>;
  /** Called once listening (the demo and tests learn the URL from it). */
  onListening?: (server: RunningWebhookServer) => void;
}

function waitForSignal(): { promise: Promise<NodeJS.Signals>; dispose: () => void } {
  let handler: ((signal: NodeJS.Signals) => void) | undefined;
  const promise = new Promise<NodeJS.Signals>((resolve) => {
    handler = (signal) => resolve(signal);
    process.once('SIGTERM', handler);
    process.once('SIGINT', handler);
  });
  return {
    promise,
    dispose: () => {
      if (handler) {
        process.off('SIGTERM', handler);
        process.off('SIGINT', handler);
      }
    },
  };
}

/**
 * `etcd-guard webhook`: 0 after a clean shutdown, 1 when the server cannot start (e.g. port in
 * use), 2 for usage or configuration errors (stderr names the flag or field).
 */
export async function runWebhookCommand(
  options: WebhookCommandOptions,
  env: Record<string, string | undefined>,
  io: CommandIo = {},
): Promise<number> {
  const stderr = io.stderr ?? ((line: string) => process.stderr.write(`${line}\n`));
  let config: GuardConfig;
  let listen: { host: string; port: number };
  let metricsListen: { host: string; port: number } | null;
  let tls: { certFile: string; keyFile: string } | null;
  let token: string | null;
  try {
    if (!options.configFile?.trim()) throw new UsageError('--config is required (a YAML or JSON guard config file)');
    listen = parseListenAddress(options.listen?.trim() ? options.listen : DEFAULT_LISTEN);
    metricsListen = options.metricsListen?.trim() ? parseListenAddress(options.metricsListen, '--metrics-listen') : null;
    tls = tlsFilesFrom(options);
    config = loadGuardConfigFile(options.configFile);
    token = resolveBearerToken(config, env);
  } catch (error) {
    if (error instanceof UsageError || error instanceof ConfigError) {
      stderr(`etcd-guard webhook: ${error.message}`);
      if (error instanceof UsageError) stderr('run with --help for usage');
      return 2;
    }
    throw error;
  }

  const logger = io.logger ?? createLogger({ env, buffered: true });
  const signal = io.shutdownSignal ? null : waitForSignal();
  let running: RunningWebhookServer;
  try {
    // A token from the environment is fixed; one from the config's file follows that file.
    const tokenFile = env.ETCD_GUARD_TOKEN?.trim() ? undefined : config.auth.tokenFile;
    running = await startWebhookServer({
      config,
      host: listen.host,
      port: listen.port,
      tls,
      metricsListen,
      token,
      logger,
      ...(tokenFile === undefined ? {} : { tokenFile }),
      kubernetesApi: kubernetesApiInEnv(env),
    });
  } catch (error) {
    signal?.dispose();
    if (error instanceof TlsFilesError) {
      stderr(`etcd-guard webhook: --tls-cert/--tls-key: ${error.message}`);
      return 2;
    }
    stderr(`etcd-guard webhook: cannot start: ${(error as Error).message}`);
    return 1;
  }
  logger.info(
    {
      url: running.url,
      metricsUrl: running.metricsUrl,
      tls: tls !== null,
      targets: config.targets.map((target) => target.name),
      store: config.store.kind,
      auth: token !== null,
    },
    'etcd-guard webhook listening',
  );
  io.onListening?.(running);

  const reason = await (io.shutdownSignal ?? signal?.promise);
  signal?.dispose();
  logger.info({ signal: typeof reason === 'string' ? reason : 'shutdown' }, 'shutting down: finishing in-flight requests');
  await running.close();
  logger.info({}, 'etcd-guard webhook stopped');
  return 0;
}
