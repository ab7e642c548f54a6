// The logger's timestamp must be pino's isoTime to the character, whatever the millisecond.
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { isoTime } from './logger.js';

describe('isoTime', () => {
  const instants = [
    0,
    1,
    9,
    10,
    99,
    100,
    999,
    1000,
    1001,
    -1,
    -999,
    -1000,
    -1001,
    Date.UTC(2026, 11, 1, 23, 59, 59, 999),
    Date.UTC(2026, 11, 2, 0, 0, 0, 0),
    Date.UTC(2024, 1, 29, 12, 0, 0, 5),
    Date.UTC(9999, 11, 31, 23, 59, 59, 999),
    Date.UTC(10000, 0, 1, 0, 0, 0, 7),
    Date.UTC(-1, 0, 1, 0, 0, 0, 42),
  ];
  it.each(instants)('formats %d as pino does', (ms) => {
    vi.spyOn(Date, 'now').mockReturnValue(ms);
    try {
      expect(isoTime(ms)).toBe(pino.stdTimeFunctions.isoTime());
      expect(isoTime()).toBe(pino.stdTimeFunctions.isoTime());
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('formats every millisecond of a few seconds in a row as pino does', () => {
    const start = Date.UTC(2026, 11, 1, 18, 30, 58, 0);
    for (let ms = start; ms < start + 3_000; ms += 1) {
      vi.spyOn(Date, 'now').mockReturnValue(ms);
      expect(isoTime(ms)).toBe(pino.stdTimeFunctions.isoTime());
      vi.restoreAllMocks();
    }
  });
});
