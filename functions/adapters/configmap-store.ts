// Evaluations cached in ConfigMaps: `etcd-guard-<target>` holds the document under
// `evaluation.json`, labelled and annotated so `kubectl get cm -L` shows target and verdict.
// Writes are optimistic (resourceVersion) and monotonic: a newer stored evaluation always wins.
// Each accepted write sets annotation etcd-guard.io/sequence to the previous value + 1 under the
// same resourceVersion precondition, so two writers can never both claim one number and readers
// order documents by write, not by a writer's wall clock.
import type { CoreV1Api, V1ConfigMap } from '@kubernetes/client-node';
import { Deadline } from '../domain/deadline.js';
import { isDnsLabel } from '../shared/names.js';
import type { Evaluation } from '../domain/evaluation-document.js';
import {
  invalidEvaluationError,
  parseSequence,
  parseStoredEvaluation,
  StoreError,
  nextSequence,
  writeDecision,
  type EvaluationStore,
  type SequencedEvaluation,
  type StoredEvaluations,
  type WriteOutcome,
} from '../domain/store.js';
import { callKube, createCoreV1Api, KubeApiError, type KubeOperation } from './kube.js';

export const CONFIGMAP_DATA_KEY = 'evaluation.json';
export const CONFIGMAP_NAME_PREFIX = 'etcd-guard-';
export const LABEL_APP_NAME = 'app.kubernetes.io/name';
export const LABEL_TARGET = 'etcd-guard.io/target';
export const ANNOTATION_VERDICT = 'etcd-guard.io/verdict';
export const ANNOTATION_EVALUATED_AT = 'etcd-guard.io/evaluated-at';
export const ANNOTATION_SEQUENCE = 'etcd-guard.io/sequence';

/** Kubernetes rejects a ConfigMap whose data (keys included) exceeds this many bytes. */
export const CONFIGMAP_LIMIT_BYTES = 1_048_576;
/** What we allow ourselves: the limit minus headroom for the key and anything else in `data`. */
export const MAX_DOCUMENT_BYTES = CONFIGMAP_LIMIT_BYTES - 8 * 1024;

/** Items per page of the labelled LIST behind readAll. */
const LIST_PAGE_SIZE = 250;

/** Kubernetes' limit on an object name (a DNS subdomain). */
const MAX_OBJECT_NAME_LENGTH = 253;

export interface ConfigMapStoreOptions {
  namespace: string;
  /** Kubeconfig to use; else KUBECONFIG, in-cluster, ~/.kube/config (see loadKubeConfig). */
  kubeconfigFile?: string;
  /** A ready client, instead of loading one from kubeconfigFile. */
  api?: CoreV1Api;
  /** Timeout of each API call. */
  callTimeoutMs?: number;
  /** Timeout of a whole write, conflict retries included; each call gets what is left. */
  writeTimeoutMs?: number;
  /** How many read-compare-write rounds a write may take when others keep writing (409). */
  maxAttempts?: number;
  /** Refuse documents larger than this before sending; tests raise it to reach the apiserver's 422. */
  maxDocumentBytes?: number;
  /** The writer's clock (tests set a skewed one); the API server's Date header is the store's. */
  now?: () => Date;
}

export function configMapNameFor(target: string): string {
  return `${CONFIGMAP_NAME_PREFIX}${target}`;
}

export class ConfigMapStore implements EvaluationStore {
  private readonly namespace: string;
  private readonly callTimeoutMs: number;
  private readonly writeTimeoutMs: number;
  private readonly maxAttempts: number;
  private readonly maxDocumentBytes: number;
  private readonly kubeconfigFile: string | undefined;
  private readonly now: () => Date;
  private api: CoreV1Api | undefined;

  constructor(options: ConfigMapStoreOptions) {
    if (!isDnsLabel(options.namespace)) {
      throw new StoreError(
        'invalid',
        `invalid namespace ${JSON.stringify(options.namespace)} for the ConfigMap store (want a DNS label)`,
      );
    }
    this.namespace = options.namespace;
    this.callTimeoutMs = options.callTimeoutMs ?? 5_000;
    this.writeTimeoutMs = options.writeTimeoutMs ?? 10_000;
    this.maxAttempts = options.maxAttempts ?? 6;
    this.maxDocumentBytes = options.maxDocumentBytes ?? MAX_DOCUMENT_BYTES;
    this.kubeconfigFile = options.kubeconfigFile;
    this.now = options.now ?? (() => new Date());
    this.api = options.api;
  }

  describe(): string {
    return `configmap:${this.namespace}`;
  }

  async read(target: string): Promise<Evaluation | null> {
    return (await this.readSequenced(target))?.evaluation ?? null;
  }

  async readSequenced(target: string): Promise<SequencedEvaluation | null> {
    const name = this.nameFor(target);
    const configMap = await this.get(name, Deadline.after(this.callTimeoutMs));
    if (configMap === null) return null;
    const stored = this.parseStored(configMap, name, target);
    if (stored instanceof StoreError) throw stored;
    return stored;
  }

  /**
   * Every evaluation ConfigMap of the namespace in one labelled LIST (app.kubernetes.io/name=
   * etcd-guard), all pages under one deadline. A ConfigMap counts only when its name is the one its
   * etcd-guard.io/target label implies (etcd-guard-config and anything relabelled are skipped).
   * Needs `list` on configmaps in the namespace; RBAC cannot narrow that by name or label.
   */
  async readAll(): Promise<StoredEvaluations> {
    const api = this.client();
    const deadline = Deadline.after(this.callTimeoutMs);
    const result: StoredEvaluations = { evaluations: [], problems: [] };
    let continueToken: string | undefined;
    do {
      const page = await callKube(this.operation('list'), deadline, (options) =>
        api.listNamespacedConfigMap(
          {
            namespace: this.namespace,
            labelSelector: `${LABEL_APP_NAME}=etcd-guard`,
            limit: LIST_PAGE_SIZE,
            _continue: continueToken,
          },
          options,
        ),
      );
      for (const configMap of page.items) {
        const target = configMap.metadata?.labels?.[LABEL_TARGET];
        const name = configMap.metadata?.name ?? '';
        if (target === undefined || !isDnsLabel(target) || name !== configMapNameFor(target)) continue;
        const stored = this.parseStored(configMap, name, target);
        if (stored instanceof StoreError) result.problems.push(stored.message);
        else result.evaluations.push(stored);
      }
      continueToken = page.metadata?._continue || undefined;
    } while (continueToken !== undefined);
    return result;
  }

  async write(evaluation: Evaluation): Promise<WriteOutcome> {
    const invalid = invalidEvaluationError(evaluation);
    if (invalid !== null) throw invalid;
    const name = this.nameFor(evaluation.target);
    const text = JSON.stringify(evaluation);
    const size = Buffer.byteLength(text) + CONFIGMAP_DATA_KEY.length;
    if (size > this.maxDocumentBytes) {
      throw new StoreError(
        'too-large',
        `evaluation for target ${JSON.stringify(evaluation.target)} is ${size} bytes, over the ${this.maxDocumentBytes}-byte limit of ConfigMap ${JSON.stringify(name)} in namespace ${JSON.stringify(this.namespace)}; nothing was written`,
      );
    }

    const deadline = Deadline.after(this.writeTimeoutMs);
    for (let attempt = 1; attempt <= this.maxAttempts; attempt += 1) {
      const clocks: { writerNowMs: number; storeNowMs?: number } = { writerNowMs: this.now().getTime() };
      const current = await this.get(name, deadline, (ms) => (clocks.storeNowMs = ms));
      const stored = current === null ? null : this.parseStored(current, name, evaluation.target);
      // A corrupt document is never trusted, so it cannot block a valid write: we replace it.
      const held = stored instanceof StoreError ? null : (stored?.evaluation ?? null);
      const decision = writeDecision(evaluation, held, clocks);
      // Refused only in favour of a held document, so `held` is there.
      if (!decision.write) return { written: false, keptEvaluatedAt: held?.evaluatedAt ?? '' };
      const written = decision.evaluation;
      const body = written === evaluation ? text : JSON.stringify(written);
      try {
        if (current === null) await this.create(name, written, body, deadline);
        else await this.replace(name, current, written, body, deadline, nextSequence(this.sequenceOf(current, name)));
        return decision.stampCorrectedByMs === undefined
          ? { written: true }
          : { written: true, stampCorrectedByMs: decision.stampCorrectedByMs };
      } catch (error) {
        // Someone created or changed it since our GET: go round and compare with theirs.
        if (error instanceof KubeApiError && error.status === 409) {
          await backoff(attempt);
          continue;
        }
        throw error;
      }
    }
    throw new StoreError(
      'conflict',
      `gave up writing ConfigMap ${JSON.stringify(name)} in namespace ${JSON.stringify(this.namespace)} after ${this.maxAttempts} attempts: it kept changing between read and write (409 Conflict)`,
    );
  }

  private nameFor(target: string): string {
    const name = configMapNameFor(target);
    if (!isDnsLabel(target, MAX_OBJECT_NAME_LENGTH - CONFIGMAP_NAME_PREFIX.length)) {
      throw new StoreError(
        'invalid',
        `invalid target name ${JSON.stringify(target)}: it must be a DNS label to become ConfigMap ${JSON.stringify(name)}`,
      );
    }
    return name;
  }

  private client(): CoreV1Api {
    this.api ??= createCoreV1Api(this.kubeconfigFile);
    return this.api;
  }

  private operation(verb: KubeOperation['verb'], name?: string): KubeOperation {
    return { verb, resource: 'configmaps', ...(name !== undefined ? { name } : {}), namespace: this.namespace };
  }

  /** A call's deadline: its own timeout, cut short by the whole operation's deadline. */
  private budget(deadline: Deadline): Deadline {
    return deadline.within(this.callTimeoutMs);
  }

  private async get(name: string, deadline: Deadline, serverDate?: (ms: number) => void): Promise<V1ConfigMap | null> {
    const api = this.client();
    try {
      return await callKube(
        this.operation('get', name),
        this.budget(deadline),
        (options) => api.readNamespacedConfigMap({ name, namespace: this.namespace }, options),
        serverDate === undefined ? {} : { serverDate },
      );
    } catch (error) {
      if (error instanceof KubeApiError && error.isNotFound) return null;
      throw error;
    }
  }

  private where(name: string): string {
    return `ConfigMap ${JSON.stringify(name)} in namespace ${JSON.stringify(this.namespace)}`;
  }

  /** The stored evaluation and sequence, or a 'corrupt' StoreError saying exactly what is wrong. */
  private parseStored(configMap: V1ConfigMap, name: string, target: string): SequencedEvaluation | StoreError {
    const where = this.where(name);
    const text = configMap.data?.[CONFIGMAP_DATA_KEY];
    if (text === undefined) {
      return new StoreError('corrupt', `${where} has no ${JSON.stringify(CONFIGMAP_DATA_KEY)} key; not using it`);
    }
    const sequence = parseSequence(configMap.metadata?.annotations?.[ANNOTATION_SEQUENCE], where);
    if (sequence instanceof StoreError) return sequence;
    const evaluation = parseStoredEvaluation(text, target, { source: `${where} (key ${CONFIGMAP_DATA_KEY})`, holder: where });
    return evaluation instanceof StoreError ? evaluation : { evaluation, sequence };
  }

  /** The sequence `current` carries; 0 when it has none we can trust (the next write restarts at 1). */
  private sequenceOf(current: V1ConfigMap, name: string): number {
    const sequence = parseSequence(current.metadata?.annotations?.[ANNOTATION_SEQUENCE], this.where(name));
    return sequence instanceof StoreError ? 0 : sequence;
  }

  private labels(target: string): Record<string, string> {
    return { [LABEL_APP_NAME]: 'etcd-guard', [LABEL_TARGET]: target };
  }

  private annotations(evaluation: Evaluation, sequence: number): Record<string, string> {
    return {
      [ANNOTATION_VERDICT]: evaluation.verdict,
      [ANNOTATION_EVALUATED_AT]: evaluation.evaluatedAt,
      [ANNOTATION_SEQUENCE]: String(sequence),
    };
  }

  private async create(name: string, evaluation: Evaluation, text: string, deadline: Deadline): Promise<void> {
    const api = this.client();
    const body: V1ConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name,
        namespace: this.namespace,
        labels: this.labels(evaluation.target),
        annotations: this.annotations(evaluation, 1),
      },
      data: { [CONFIGMAP_DATA_KEY]: text },
    };
    await callKube(this.operation('create', name), this.budget(deadline), (options) =>
      api.createNamespacedConfigMap({ namespace: this.namespace, body }, options),
    );
  }

  private async replace(
    name: string,
    current: V1ConfigMap,
    evaluation: Evaluation,
    text: string,
    deadline: Deadline,
    sequence: number,
  ): Promise<void> {
    const api = this.client();
    // Keep what others put on the object (extra labels, annotations, keys); own only ours.
    const body: V1ConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        ...current.metadata,
        name,
        namespace: this.namespace,
        labels: { ...current.metadata?.labels, ...this.labels(evaluation.target) },
        annotations: { ...current.metadata?.annotations, ...this.annotations(evaluation, sequence) },
      },
      data: { ...current.data, [CONFIGMAP_DATA_KEY]: text },
    };
    if (current.binaryData) body.binaryData = current.binaryData;
    await callKube(this.operation('update', name), this.budget(deadline), (options) =>
      api.replaceNamespacedConfigMap({ name, namespace: this.namespace, body }, options),
    );
  }
}

/** Jittered pause before re-reading after a conflict, so two writers stop colliding in lockstep. */
function backoff(attempt: number): Promise<void> {
  const ms = Math.floor(Math.random() * 10 * attempt);
  return new Promise((resolve) => setTimeout(resolve, ms));
}
