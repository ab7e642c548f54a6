// The evaluation slots: HTTP callers never take more than their share, so the apiserver's inline
// refreshes always find room; excess HTTP callers are shed at once; a wait has a deadline; and a
// waiting HTTP run that an admission request joins is moved up.
import { describe, expect, it } from 'vitest';
import { OverloadError, RunSlots } from './run-slots.js';

const LIMITS = { total: 3, http: 1, httpQueue: 1, queueWaitMs: 200 };

/** Whether the promise has settled by the time already-queued work has run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('RunSlots', () => {
  it('keeps the slots beyond the HTTP share for admission runs', async () => {
    const slots = new RunSlots(LIMITS);
    const http = slots.acquire('http');
    await http.slot;
    const waitingHttp = slots.acquire('http');
    expect(await settled(waitingHttp.slot)).toBe(false);
    // Two admission runs still get the two slots HTTP may not use.
    await slots.acquire('admission').slot;
    await slots.acquire('admission').slot;
    expect(slots.load()).toEqual({ running: 3, runningHttp: 1, waiting: 1 });
    waitingHttp.slot.catch(() => undefined);
  });

  it('sheds an HTTP run at once when its queue is full, saying it was not evaluated', async () => {
    const slots = new RunSlots(LIMITS);
    await slots.acquire('http').slot;
    const queued = slots.acquire('http');
    queued.slot.catch(() => undefined);
    const shed = slots.acquire('http').slot;
    await expect(shed).rejects.toBeInstanceOf(OverloadError);
    await expect(shed).rejects.toThrow(/not evaluated/);
    await expect(shed).rejects.toMatchObject({ retryAfterSeconds: 1 });
  });

  it('gives up a wait after queueWaitMs with OverloadError, and frees its place', async () => {
    const slots = new RunSlots(LIMITS);
    await slots.acquire('http').slot;
    const waiting = slots.acquire('http').slot;
    await expect(waiting).rejects.toThrow(/no evaluation slot became free within 200 ms/);
    expect(slots.load().waiting).toBe(0);
  });

  it('hands a released slot to the next waiter that fits', async () => {
    const slots = new RunSlots(LIMITS);
    const release = await slots.acquire('http').slot;
    const next = slots.acquire('http').slot;
    release();
    release(); // a second release of the same slot is a no-op
    await next;
    expect(slots.load()).toEqual({ running: 1, runningHttp: 1, waiting: 0 });
  });

  it('moves a waiting HTTP run up when an admission request joins it', async () => {
    const slots = new RunSlots(LIMITS);
    await slots.acquire('http').slot;
    const joined = slots.acquire('http');
    expect(await settled(joined.slot)).toBe(false);
    joined.promote();
    await joined.slot;
    expect(slots.load()).toEqual({ running: 2, runningHttp: 1, waiting: 0 });
  });

  it.each([
    { total: 0, http: 0 },
    { total: 2, http: 3 },
    { total: 2, http: 1.5 },
  ])('refuses limits total=$total http=$http', ({ total, http }) => {
    expect(() => new RunSlots({ total, http, httpQueue: 1, queueWaitMs: 100 })).toThrow(RangeError);
  });
});
