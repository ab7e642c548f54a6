// What every evaluation store (file, ConfigMap) offers. Adapters implement it and turn their
// library's errors into StoreError, so callers never see a Kubernetes or fs error shape.
import type { Evaluation } from './evaluation.js';

export type WriteOutcome =
  | { written: true }
  /** The store already held an evaluation at least as new; it was kept. */
  | { written: false; keptEvaluatedAt: string };

export interface EvaluationStore {
  /** The stored evaluation for a target, or null when there is none. Throws StoreError. */
  read(target: string): Promise<Evaluation | null>;
  /** Writes unless the store holds a newer evaluation for the same target. Throws StoreError. */
  write(evaluation: Evaluation): Promise<WriteOutcome>;
  /** Human-readable location, e.g. "file:/var/lib/etcd-guard" or "configmap:etcd-guard". */
  describe(): string;
}

export type StoreErrorKind = 'corrupt' | 'forbidden' | 'too-large' | 'conflict' | 'unavailable' | 'invalid';

export class StoreError extends Error {
  constructor(
    readonly kind: StoreErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StoreError';
  }
}
