// Untrusted JSON read by field: the wrong shape reads as absent, never as a throw.
import { describe, expect, it } from 'vitest';
import { at, record, text } from './records.js';

describe('record', () => {
  it('returns a plain object as it is', () => {
    const object = { a: 1 };
    expect(record(object)).toBe(object);
  });

  it.each([
    ['null', null],
    ['absent', undefined],
    ['an array', [{ a: 1 }]],
    ['a string', 'a'],
    ['a number', 1],
    ['a boolean', true],
  ])('reads %s as an empty object', (_case, value) => {
    expect(record(value)).toEqual({});
  });
});

describe('text', () => {
  it('returns a non-empty string', () => {
    expect(text('etcd-0')).toBe('etcd-0');
  });

  it.each([
    ['empty', ''],
    ['absent', undefined],
    ['null', null],
    ['a number', 3],
    ['an object', { name: 'a' }],
  ])('reads %s as absent', (_case, value) => {
    expect(text(value)).toBeUndefined();
  });
});

describe('at', () => {
  const object = { metadata: { name: 'kcp', labels: ['not', 'an', 'object'] } };

  it('follows a path of objects', () => {
    expect(at(object, 'metadata', 'name')).toBe('kcp');
  });

  it('returns the object itself for an empty path', () => {
    expect(at(object)).toBe(object);
  });

  it.each([
    ['a missing key', ['metadata', 'namespace']],
    ['a step through an array', ['metadata', 'labels', '0']],
    ['a step through a string', ['metadata', 'name', 'length']],
    ['a step below a missing key', ['spec', 'replicas']],
  ])('reads %s as absent', (_case, path) => {
    expect(at(object, ...path)).toBeUndefined();
  });
});
