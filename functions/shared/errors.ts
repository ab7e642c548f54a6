// Errors both deployables raise the same way.

/** A command line the user must correct; the message names the flag (and the value). Exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
