// Which metadata.uid values an Event's `regarding` may carry: the API server's UUIDs and short
// runs of letters and digits joined by '-'; anything else (untrusted: the listed object or the
// AdmissionReview says it) is no uid.
import { describe, expect, it } from 'vitest';
import { MAX_OBJECT_UID_LENGTH, objectUid } from './object-uid.js';

describe('objectUid', () => {
  it.each([
    ['a lowercase UUID', '2f7c6a1e-0b1d-4c53-9f55-3e0f0b8d2a11'],
    ['an uppercase UUID', '2F7C6A1E-0B1D-4C53-9F55-3E0F0B8D2A11'],
    ['one character', 'a'],
    ['letters and digits joined by "-"', 'A1b2-C3'],
    [`${MAX_OBJECT_UID_LENGTH} characters`, 'a'.repeat(MAX_OBJECT_UID_LENGTH)],
  ])('takes %s', (_case, uid) => {
    expect(objectUid(uid)).toBe(uid);
  });

  it.each([
    ['absent', undefined],
    ['null', null],
    ['a number', 42],
    ['an array', ['2f7c6a1e-0b1d-4c53-9f55-3e0f0b8d2a11']],
    ['an object', { uid: 'a' }],
    ['empty', ''],
    [`${MAX_OBJECT_UID_LENGTH + 1} characters`, 'a'.repeat(MAX_OBJECT_UID_LENGTH + 1)],
    ['a megabyte', 'a'.repeat(2 ** 20)],
    ['a leading "-"', '-abc'],
    ['a trailing "-"', 'abc-'],
    ['only "-"', '-'],
    ['a space', '2f7c6a1e 0b1d'],
    ['a newline', '2f7c6a1e-0b1d\n'],
    ['a NUL', 'abc\u0000'],
    ['a path', '../etc/passwd'],
    ['a "." or "/"', 'a.b/c'],
    ['a quote', 'a"b'],
    ['non-ASCII letters', 'ünïcode'],
    ['non-ASCII digits', '١٢٣'],
    ['an emoji', 'a😀b'],
  ])('leaves out %s', (_case, uid) => {
    expect(objectUid(uid)).toBeUndefined();
  });
});
