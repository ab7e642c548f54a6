// One byte formatter, binary units named as such, for the CLI table and the evaluation's reasons.
import { describe, expect, it } from 'vitest';
import { formatBytes } from './bytes.js';

describe('formatBytes', () => {
  it.each([
    [0, '0 B'],
    [1023, '1023 B'],
    [1024, '1 KiB'],
    [20 * 1024 + 100, '20 KiB'],
    [1024 * 1024, '1.0 MiB'],
    [85 * 1024 * 1024, '85.0 MiB'],
    [2 * 1024 * 1024 * 1024, '2.0 GiB'],
    [8 * 1024 * 1024 * 1024 + 512 * 1024 * 1024, '8.5 GiB'],
  ])('%i bytes reads %j', (bytes, expected) => {
    expect(formatBytes(bytes)).toBe(expected);
  });
});
