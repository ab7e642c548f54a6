// Waiting on a condition with a deadline: the condition is polled every 50 ms (a poll interval,
// not synchronisation) and the wait fails naming what it waited for once the deadline passes.
const POLL_INTERVAL_MS = 50;

/** Resolves once `condition` holds; rejects after `timeoutMs`, naming `what`. */
export async function waitFor(what: string, timeoutMs: number, condition: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() >= deadline) throw new Error(`gave up after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
  }
}
