// Picks the EvaluationStore a StoreConfig describes. Entrypoints import only this.
import type { StoreConfig } from '../domain/config.js';
import type { Evaluation } from '../domain/evaluation-document.js';
import {
  StoreError,
  type EvaluationStore,
  type SequencedEvaluation,
  type StoredEvaluations,
  type WriteOutcome,
} from '../domain/store.js';
import type { ConfigMapStore, ConfigMapStoreOptions } from './configmap-store.js';
import { FileStore } from './file-store.js';
import { isDnsLabel } from '../shared/names.js';

export interface CreateStoreOptions {
  /** Kubeconfig for the configmap store; else KUBECONFIG, in-cluster, ~/.kube/config. */
  kubeconfigFile?: string;
  /** Deadline of each Kubernetes API call made by the configmap store. */
  callTimeoutMs?: number;
  /** Deadline of a whole configmap write, conflict retries included. */
  writeTimeoutMs?: number;
}

/**
 * Builds the store. It does not touch the network or disk: a missing kubeconfig or an
 * unreachable apiserver shows up as a StoreError on the first read or write.
 * Throws StoreError('invalid') for a namespace that cannot exist.
 */
export function createStore(config: StoreConfig, options: CreateStoreOptions = {}): EvaluationStore {
  switch (config.kind) {
    case 'file':
      return new FileStore(config.dir);
    case 'configmap':
      return new LazyConfigMapStore({
        namespace: config.namespace,
        ...(options.kubeconfigFile !== undefined ? { kubeconfigFile: options.kubeconfigFile } : {}),
        ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
        ...(options.writeTimeoutMs !== undefined ? { writeTimeoutMs: options.writeTimeoutMs } : {}),
      });
  }
}

/**
 * A ConfigMapStore whose module (and so @kubernetes/client-node, large once loaded: BENCHMARKS.md)
 * is imported on first use: a webhook or CLI on the file store never pays for the Kubernetes
 * client. The namespace is still checked at once, as ConfigMapStore's constructor does.
 */
class LazyConfigMapStore implements EvaluationStore {
  private loading: Promise<ConfigMapStore> | undefined;

  constructor(private readonly options: ConfigMapStoreOptions) {
    if (!isDnsLabel(options.namespace)) {
      throw new StoreError(
        'invalid',
        `invalid namespace ${JSON.stringify(options.namespace)} for the ConfigMap store (want a DNS label)`,
      );
    }
  }

  private store(): Promise<ConfigMapStore> {
    this.loading ??= import('./configmap-store.js').then(
      (module) => new module.ConfigMapStore(this.options),
      (error: unknown) => {
        this.loading = undefined;
        throw new StoreError(
          'unavailable',
          `cannot load the ConfigMap store: ${error instanceof Error ? error.message : String(error)}`,
        );
      },
    );
    return this.loading;
  }

  describe(): string {
    return `configmap:${this.options.namespace}`;
  }

  async read(target: string): Promise<Evaluation | null> {
    return (await this.store()).read(target);
  }

  async readSequenced(target: string): Promise<SequencedEvaluation | null> {
    return (await this.store()).readSequenced(target);
  }

  async write(evaluation: Evaluation): Promise<WriteOutcome> {
    return (await this.store()).write(evaluation);
  }

  async readAll(): Promise<StoredEvaluations> {
    return (await this.store()).readAll();
  }
}
