// What caches know TLS material by: the same fields give the same digest however they were read,
// and any difference in a field (its bytes, its type, where the bytes sit) gives another one.
import { describe, expect, it } from 'vitest';
import { tlsMaterialDigest } from './tls-digest.js';

const pem = (text: string) => Buffer.from(text);

describe('tlsMaterialDigest', () => {
  it('gives the same digest for the same bytes read again into new buffers', () => {
    const fields = () => ({ ca: pem('CA'), cert: pem('CERT'), key: pem('KEY'), rejectUnauthorized: true });
    expect(tlsMaterialDigest(fields())).toBe(tlsMaterialDigest(fields()));
    expect(tlsMaterialDigest(fields())).toMatch(/^[0-9a-f]{64}$/);
  });

  it.each([
    ['bytes moved from one field to the next', { ca: pem('CAC'), cert: pem('ERT') }, { ca: pem('CA'), cert: pem('CERT') }],
    ['a field absent and a field empty', { ca: undefined }, { ca: pem('') }],
    ['a string and a buffer of its bytes', { servername: 'etcd-0' }, { servername: pem('etcd-0') }],
    ['a list and its items run together', { ca: [pem('A'), pem('B')] }, { ca: [pem('AB')] }],
    ['items moved between nested lists', { ca: [[pem('A')], pem('B')] }, { ca: [[pem('A'), pem('B')]] }],
    ['the same value under another name', { cert: pem('X') }, { key: pem('X') }],
    ['true and the string "true"', { rejectUnauthorized: true }, { rejectUnauthorized: 'true' }],
    ['one key changed', { key: pem('KEY-1') }, { key: pem('KEY-2') }],
  ])('tells apart %s', (_case, one, other) => {
    expect(tlsMaterialDigest(one)).not.toBe(tlsMaterialDigest(other));
  });
});
