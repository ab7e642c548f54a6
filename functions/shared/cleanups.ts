// Work that outlives the call that started it and should finish before the process exits: a watch
// probe's key delete that runs in the background once its round trip's deadline is spent. A
// long-lived process (the webhook, an `--every` loop) lets it finish anyway; the CLI exits right
// after main returns, so it waits here first, within a bound that keeps its own time bound.

const pending = new Set<Promise<unknown>>();

/** Remembers `work` until it settles (it is never awaited here, and a rejection is its owner's). */
export function trackCleanup(work: Promise<unknown>): void {
  pending.add(work);
  const forget = () => void pending.delete(work);
  work.then(forget, forget);
}

/** Waits until every tracked cleanup has settled or `withinMs` have passed; resolves with how many are left. */
export async function settleCleanups(withinMs: number): Promise<number> {
  if (pending.size === 0) return 0;
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, withinMs))));
  await Promise.race([Promise.allSettled([...pending]), bound]);
  clearTimeout(timer);
  return pending.size;
}
