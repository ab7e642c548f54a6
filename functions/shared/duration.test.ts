// The user's duration form (config file, --timeout, --every) against Go's form (?timeout=): the
// same text can be one and not the other.
import { describe, expect, it } from 'vitest';
import { parseDurationMs, parseGoDurationMs } from './duration.js';

describe('durations as users write them', () => {
  it.each([
    ['250ms', 250],
    ['2s', 2_000],
    ['1.5s', 1_500],
    ['1m', 60_000],
    [' 30s ', 30_000],
    ['0.0004s', null],
    ['0s', null],
    ['2h', null],
    ['1m0s', null],
    ['10', null],
    ['-1s', null],
    ['', null],
  ])('reads %j as %s ms', (text, expected) => {
    expect(parseDurationMs(text)).toBe(expected);
  });

  it.each([
    ['1m0s', 60_000],
    ['2h', 7_200_000],
    ['1500us', 1.5],
  ])('leaves Go-only %j to parseGoDurationMs (%s ms)', (text, expected) => {
    expect(parseDurationMs(text)).toBeNull();
    expect(parseGoDurationMs(text)).toBe(expected);
  });
});
