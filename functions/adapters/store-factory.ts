// Picks the EvaluationStore a StoreConfig describes. Entrypoints import only this.
import type { StoreConfig } from '../config.js';
import type { EvaluationStore } from '../core/store.js';
import { ConfigMapStore } from './configmap-store.js';
import { FileStore } from './file-store.js';

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
      return new ConfigMapStore({
        namespace: config.namespace,
        ...(options.kubeconfigFile !== undefined ? { kubeconfigFile: options.kubeconfigFile } : {}),
        ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
        ...(options.writeTimeoutMs !== undefined ? { writeTimeoutMs: options.writeTimeoutMs } : {}),
      });
  }
}
