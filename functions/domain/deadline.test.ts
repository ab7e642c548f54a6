// The one deadline primitive: an instant on the monotonic clock, what is left of it, and the race
// that settles work by it.
import { describe, expect, it } from 'vitest';
import { Deadline, DeadlineExceededError, monotonicNowMs, withDeadline, withTimeout } from './deadline.js';

const never = () => new Promise<never>(() => undefined);

describe('Deadline', () => {
  it('counts down from its timeout on the monotonic clock and never goes negative', () => {
    const start = monotonicNowMs();
    const deadline = Deadline.after(1_000, start);
    expect(deadline.atMs).toBe(start + 1_000);
    expect(deadline.timeoutMs).toBe(1_000);
    expect(deadline.remainingMs()).toBeGreaterThan(900);
    expect(deadline.expired()).toBe(false);
    const past = Deadline.after(10, start - 1_000);
    expect(past.remainingMs()).toBe(0);
    expect(past.expired()).toBe(true);
  });

  it.each([
    { name: 'a shorter step keeps its own timeout', whole: 1_000, step: 100, wantTimeout: 100 },
    { name: 'a longer step is cut to what is left of the whole', whole: 200, step: 5_000, wantTimeout: 200 },
  ])('within: $name', ({ whole, step, wantTimeout }) => {
    const inner = Deadline.after(whole).within(step);
    expect(Math.abs(inner.timeoutMs - wantTimeout)).toBeLessThanOrEqual(5);
    expect(inner.remainingMs()).toBeLessThanOrEqual(Math.min(whole, step));
  });

  it('extendedBy moves the end later by the grace and toDate gives the same instant on the wall clock', () => {
    const deadline = Deadline.after(500);
    expect(deadline.extendedBy(25).atMs).toBe(deadline.atMs + 25);
    expect(Math.abs(deadline.toDate().getTime() - (Date.now() + deadline.remainingMs()))).toBeLessThanOrEqual(5);
  });
});

describe('withDeadline', () => {
  it('settles like the work when it finishes first', async () => {
    await expect(withDeadline(Promise.resolve('done'), Deadline.after(1_000), () => new Error('late'))).resolves.toBe('done');
    await expect(withDeadline(Promise.reject(new Error('own')), Deadline.after(1_000), () => new Error('late'))).rejects.toThrow(
      'own',
    );
  });

  it('rejects with what onTimeout returns once the deadline passes, and calls it once', async () => {
    let calls = 0;
    const started = monotonicNowMs();
    await expect(
      withDeadline(never(), Deadline.after(50), () => {
        calls += 1;
        return new Error('gave up');
      }),
    ).rejects.toThrow('gave up');
    expect(calls).toBe(1);
    expect(monotonicNowMs() - started).toBeGreaterThanOrEqual(45);
  });

  it('withTimeout names the work and the length in its DeadlineExceededError', async () => {
    const error = await withTimeout(never(), 30, 'reading x').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect((error as DeadlineExceededError).message).toBe('reading x did not finish within 30 ms');
  });
});
