// Errors both deployables raise the same way.

/** A command line the user must correct; the message names the flag (and the value). Exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * Our own way to the cluster failed, not the cluster: the management API server did not answer
 * (or refused our service account) while we read what reaching etcd takes. That is no verdict
 * about etcd, so no evaluation is made: nothing is stored, a scheduled run reports the target as
 * not evaluated, and admission treats it as a missing evaluation (it denies, saying so).
 */
export class NotEvaluatedError extends Error {
  constructor(reason: string) {
    super(`not evaluated: ${reason}`);
    this.name = 'NotEvaluatedError';
  }
}
