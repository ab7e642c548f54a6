// The shared door to @kubernetes/client-node: it loads a KubeConfig, bounds a call with a
// deadline, and turns the library's errors (ApiException, node-fetch errors) into StoreErrors
// whose message names the verb, resource, name and namespace, so a log line says what failed.
// Not the only importer: the other Kubernetes adapters (kube-*.ts, capi-*.ts, druid-etcd-access.ts,
// store-factory.ts) import the library's API classes too; eslint keeps every importer in adapters/.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  Observable,
  type ConfigurationOptions,
  type ObservableMiddleware,
  type RequestContext,
} from '@kubernetes/client-node';
import { withDeadline, type Deadline } from '../domain/deadline.js';
import { StoreError, type StoreErrorKind } from '../domain/store.js';
import { processKubeAgents, retryingHttpLibrary, type KeptKubeAgents } from './kube-agents.js';

// Callers outside the adapters name the client by this re-export, never by importing client-node.
export type { CoreV1Api };

/** What a Kubernetes call does, for error messages: `update configmaps "x" in namespace "y"`. */
export interface KubeOperation {
  verb: 'get' | 'list' | 'create' | 'update' | 'patch' | 'delete' | 'watch';
  resource: string;
  name?: string;
  namespace?: string;
}

export function describeOperation(operation: KubeOperation): string {
  const subject = operation.name !== undefined ? `${operation.resource} ${JSON.stringify(operation.name)}` : operation.resource;
  const scope = operation.namespace !== undefined ? ` in namespace ${JSON.stringify(operation.namespace)}` : '';
  return `${operation.verb} ${subject}${scope}`;
}

/** A StoreError that still knows the HTTP status and Status reason, for callers that branch on them. */
export class KubeApiError extends StoreError {
  constructor(
    kind: StoreErrorKind,
    message: string,
    readonly operation: KubeOperation,
    /** HTTP status from the apiserver; null for network errors and timeouts. */
    readonly status: number | null,
    /** `reason` of the apiserver's Status body (NotFound, Conflict, Forbidden, ...), when given. */
    readonly reason: string | null,
    options?: { cause?: unknown },
  ) {
    super(kind, message, options);
    this.name = 'KubeApiError';
  }

  get isNotFound(): boolean {
    return this.status === 404;
  }

  get timedOut(): boolean {
    return this.status === null && this.reason === 'Timeout';
  }
}

/**
 * A failure of the API server or of our access to it (no answer, 5xx, throttled, our credentials
 * refused), as opposed to an answer about the object (not found, invalid).
 */
export function isApiServerOutage(error: unknown): boolean {
  return error instanceof KubeApiError && (error.kind === 'unavailable' || error.kind === 'forbidden');
}

export class KubeConfigLoadError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('invalid', message, options);
    this.name = 'KubeConfigLoadError';
  }
}

/**
 * A KubeConfig whose API clients send every request on a kept keep-alive agent (kube-agents.ts)
 * instead of the new agent client-node builds per request; credentials and headers are still
 * applied per request by client-node, so rotated tokens and certificates take effect as before.
 */
class KeptAgentKubeConfig extends KubeConfig {
  constructor(private readonly agents: KeptKubeAgents) {
    super();
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const built = context.getAgent();
    if (built !== undefined) context.setAgent(this.agents.keptFor(built));
  }
}

/**
 * Loads a KubeConfig: the explicit file, else $KUBECONFIG, else the in-cluster service account,
 * else ~/.kube/config. Unlike client-node's loadFromDefault it never falls back to an
 * unauthenticated http://localhost:8080, which would only produce confusing connection errors.
 * Its API clients keep their connections in `agents` (the process's by default).
 */
export function loadKubeConfig(
  kubeconfigFile?: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
  agents: KeptKubeAgents = processKubeAgents,
): KubeConfig {
  const kubeConfig = new KeptAgentKubeConfig(agents);
  const source =
    kubeconfigFile !== undefined
      ? kubeconfigFile
      : env.KUBECONFIG
        ? `KUBECONFIG=${env.KUBECONFIG}`
        : env.KUBERNETES_SERVICE_HOST
          ? 'in-cluster service account'
          : path.join(homedir(), '.kube', 'config');
  try {
    if (kubeconfigFile !== undefined) {
      kubeConfig.loadFromFile(kubeconfigFile);
    } else if (env.KUBECONFIG) {
      const files = env.KUBECONFIG.split(path.delimiter).filter((file) => file !== '');
      const [first, ...rest] = files;
      if (first === undefined) throw new Error('KUBECONFIG names no file');
      kubeConfig.loadFromFile(first);
      for (const file of rest) {
        const extra = new KubeConfig();
        extra.loadFromFile(file);
        kubeConfig.mergeConfig(extra);
      }
    } else if (env.KUBERNETES_SERVICE_HOST) {
      kubeConfig.loadFromCluster();
    } else if (existsSync(source)) {
      kubeConfig.loadFromFile(source);
    } else {
      throw new Error('no kubeconfig found: pass a kubeconfig file, set KUBECONFIG, or run in a cluster');
    }
  } catch (error) {
    throw new KubeConfigLoadError(`cannot load the Kubernetes client configuration from ${source}: ${errorText(error)}`, {
      cause: error,
    });
  }
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) {
    throw new KubeConfigLoadError(
      `cannot load the Kubernetes client configuration from ${source}: current context ${JSON.stringify(kubeConfig.getCurrentContext())} names no cluster`,
    );
  }
  return kubeConfig;
}

export function createCoreV1Api(kubeconfigFile?: string, agents?: KeptKubeAgents): CoreV1Api {
  return loadKubeConfig(kubeconfigFile, process.env, agents).makeApiClient(CoreV1Api);
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

interface ApiExceptionLike {
  code: number;
  body: unknown;
}

function isApiException(error: unknown): error is ApiExceptionLike {
  return error instanceof Error && typeof (error as { code?: unknown }).code === 'number' && 'body' in error;
}

/** The apiserver's Status message and reason out of an ApiException body (a string or object). */
function statusFromBody(body: unknown): { message: string | null; reason: string | null } {
  let parsed: unknown = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      const text = body.trim();
      return { message: text === '' ? null : text.slice(0, 300), reason: null };
    }
  }
  if (parsed !== null && typeof parsed === 'object') {
    const { message, reason } = parsed as { message?: unknown; reason?: unknown };
    return {
      message: typeof message === 'string' ? message : null,
      reason: typeof reason === 'string' ? reason : null,
    };
  }
  return { message: null, reason: null };
}

function kindForStatus(status: number, message: string | null): { kind: StoreErrorKind; label: string } {
  switch (status) {
    case 401:
      return { kind: 'forbidden', label: 'unauthorized' };
    case 403:
      return { kind: 'forbidden', label: 'forbidden' };
    case 404:
      return { kind: 'invalid', label: 'not found' };
    case 409:
      return { kind: 'conflict', label: 'conflict' };
    case 413:
      return { kind: 'too-large', label: 'too large' };
    case 422:
      return message !== null && /too long|too large|must have at most/i.test(message)
        ? { kind: 'too-large', label: 'too large' }
        : { kind: 'invalid', label: 'invalid' };
    case 400:
      return { kind: 'invalid', label: 'bad request' };
    default:
      return { kind: 'unavailable', label: status === 429 ? 'throttled' : `HTTP ${status}` };
  }
}

/** Turns whatever the client threw into a KubeApiError naming the operation. */
export function translateKubeError(error: unknown, operation: KubeOperation): KubeApiError {
  if (error instanceof KubeApiError) return error;
  const what = describeOperation(operation);
  if (isApiException(error)) {
    const { message, reason } = statusFromBody(error.body);
    const { kind, label } = kindForStatus(error.code, message);
    const detail = message ?? `HTTP ${error.code} with no Status message`;
    return new KubeApiError(kind, `${label}: cannot ${what}: ${detail}`, operation, error.code, reason, { cause: error });
  }
  // node-fetch FetchError (ECONNREFUSED, ECONNRESET, ...) and anything else: the apiserver is
  // not answering usefully, which callers treat as unavailable.
  const code = (error as { code?: unknown } | null)?.code;
  const detail = typeof code === 'string' ? `${code}: ${errorText(error)}` : errorText(error);
  return new KubeApiError('unavailable', `unavailable: cannot ${what}: ${detail}`, operation, null, null, { cause: error });
}

/**
 * Middleware that hands the request an AbortSignal, the only per-call cancel client-node 1.x
 * offers, and reports the answer's Date header (the API server's clock) to `serverDate`.
 */
function abortMiddleware(signal: AbortSignal, serverDate?: (ms: number) => void): ObservableMiddleware {
  return {
    pre: (context) => {
      context.setSignal(signal);
      return new Observable(Promise.resolve(context));
    },
    post: (context) => {
      const date = serverDate === undefined ? undefined : context.headers.date;
      const ms = typeof date === 'string' && date.length <= 64 ? Date.parse(date) : Number.NaN;
      // An HTTP date has whole seconds: the middle of that second is the best guess of "now".
      if (Number.isFinite(ms)) serverDate?.(ms + 500);
      return new Observable(Promise.resolve(context));
    },
  };
}

/**
 * Runs one client call with a hard deadline. The AbortSignal (set through per-call middleware)
 * cancels the HTTP request; the deadline race also covers the parts before the request is sent
 * (auth plugins, file reads), so no call outlives `deadline` whatever hangs.
 */
export async function callKube<T>(
  operation: KubeOperation,
  deadline: Deadline,
  call: (options: ConfigurationOptions) => Promise<T>,
  observe: { serverDate?: (ms: number) => void } = {},
): Promise<T> {
  const controller = new AbortController();
  const timeoutError = () =>
    new KubeApiError(
      'unavailable',
      `timed out: ${describeOperation(operation)} got no answer within ${Math.round(deadline.timeoutMs)}ms`,
      operation,
      null,
      'Timeout',
    );
  const options: ConfigurationOptions = {
    httpApi: retryingHttpLibrary,
    middleware: [abortMiddleware(controller.signal, observe.serverDate)],
    middlewareMergeStrategy: 'append',
  };
  try {
    return await withDeadline(call(options), deadline, () => {
      controller.abort();
      return timeoutError();
    });
  } catch (error) {
    if (controller.signal.aborted) throw timeoutError();
    throw translateKubeError(error, operation);
  }
}

/** A namespaced object by group, version, plural resource, namespace and name. */
export interface NamespacedObjectRef {
  group: string;
  version: string;
  resource: string;
  namespace: string;
  name: string;
}

/**
 * GETs any namespaced object of a named API group (a KubeadmControlPlane, an etcd-druid Etcd, an
 * apps/v1 StatefulSet) before `deadline`; rejects with a KubeApiError naming the object.
 */
export function createObjectGetter(kubeConfig: KubeConfig): (ref: NamespacedObjectRef, deadline: Deadline) => Promise<unknown> {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  return (ref, deadline) =>
    callKube(
      { verb: 'get', resource: `${ref.resource}.${ref.group}`, name: ref.name, namespace: ref.namespace },
      deadline,
      (options) =>
        api.getNamespacedCustomObject(
          { group: ref.group, version: ref.version, namespace: ref.namespace, plural: ref.resource, name: ref.name },
          options,
        ) as Promise<unknown>,
    );
}
