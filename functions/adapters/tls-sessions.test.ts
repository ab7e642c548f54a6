// The probe's TLS session cache on its own (test/e2e/tls-resumption.test.ts has it against real etcd):
// what is offered when, what is evicted first, and which targets can share a key.
import { describe, expect, it } from 'vitest';
import { sessionKey, TlsSessionCache } from './tls-sessions.js';

const T0 = Date.parse('2026-12-01T12:00:00Z');
const session = (label: string) => Buffer.from(label);

describe('TlsSessionCache.offer', () => {
  const cases: Array<{ name: string; basis: { verifiedAt: number; notAfter: number }; at: number; offered: boolean }> = [
    { name: 'right after the full verification', basis: { verifiedAt: T0, notAfter: T0 + 86_400_000 }, at: T0, offered: true },
    { name: 'just inside the TTL', basis: { verifiedAt: T0, notAfter: T0 + 86_400_000 }, at: T0 + 59_999, offered: true },
    { name: 'at the TTL', basis: { verifiedAt: T0, notAfter: T0 + 86_400_000 }, at: T0 + 60_000, offered: false },
    {
      name: 'at the certificate’s notAfter, inside the TTL',
      basis: { verifiedAt: T0, notAfter: T0 + 1_000 },
      at: T0 + 1_000,
      offered: false,
    },
    {
      name: 'with the clock set back before the verification',
      basis: { verifiedAt: T0, notAfter: T0 + 86_400_000 },
      at: T0 - 1,
      offered: false,
    },
  ];
  it.each(cases)('offers a kept session $name: $offered', ({ basis, at, offered }) => {
    let now = T0;
    const cache = new TlsSessionCache({ ttlMs: 60_000, now: () => now });
    cache.keep('k', session('s'), basis);
    now = at;
    expect(cache.offer('k')?.session.toString()).toBe(offered ? 's' : undefined);
  });

  it('forgets a session once it was too old to offer, even if the clock comes back', () => {
    let now = T0;
    const cache = new TlsSessionCache({ ttlMs: 60_000, now: () => now });
    cache.keep('k', session('s'), { verifiedAt: T0, notAfter: T0 + 86_400_000 });
    now = T0 + 60_000;
    expect(cache.offer('k')).toBeUndefined();
    now = T0;
    expect(cache.offer('k')).toBeUndefined();
  });

  it('never keeps a session whose certificate expiry could not be read', () => {
    const cache = new TlsSessionCache({ now: () => T0 });
    cache.keep('k', session('s'), { verifiedAt: T0, notAfter: Number.NaN });
    expect(cache.offer('k')).toBeUndefined();
  });

  it('drops a key on request', () => {
    const cache = new TlsSessionCache({ now: () => T0 });
    cache.keep('k', session('s'), { verifiedAt: T0, notAfter: T0 + 1_000 });
    cache.drop('k');
    expect(cache.offer('k')).toBeUndefined();
  });

  it('evicts the least recently used key when full; an offer counts as a use', () => {
    const cache = new TlsSessionCache({ capacity: 2, now: () => T0 });
    const basis = { verifiedAt: T0, notAfter: T0 + 1_000 };
    cache.keep('a', session('a'), basis);
    cache.keep('b', session('b'), basis);
    expect(cache.offer('a')).toBeDefined();
    cache.keep('c', session('c'), basis);
    expect([cache.offer('a'), cache.offer('b'), cache.offer('c')].map((kept) => kept?.session.toString())).toEqual([
      'a',
      undefined,
      'c',
    ]);
  });
});

describe('sessionKey', () => {
  const direct = { name: 'etcd-0.example', host: 'etcd-0.example', port: 2379 };
  const base = sessionKey('scope', direct);

  it.each([
    { name: 'another scope (CA/certificate/key bytes or mode)', key: sessionKey('scope2', direct) },
    { name: 'another name verified', key: sessionKey('scope', { ...direct, name: 'etcd-1.example' }) },
    { name: 'another host', key: sessionKey('scope', { ...direct, host: '10.0.0.1' }) },
    { name: 'another port', key: sessionKey('scope', { ...direct, port: 2380 }) },
    { name: 'the same name through a relay', key: sessionKey('scope', { ...direct, relayedName: 'etcd-0.example' }) },
  ])('differs for $name', ({ key }) => {
    expect(key).toBeDefined();
    expect(key).not.toBe(base);
  });

  it('keys a relayed member by its name alone: the relay’s port is new each evaluation', () => {
    const relayed = (port: number) => sessionKey('scope', { relayedName: 'cp-0', name: 'cp-0', host: '127.0.0.1', port });
    expect(relayed(40_001)).toBe(relayed(40_002));
    expect(sessionKey('scope', { relayedName: 'cp-1', name: 'cp-1', host: '127.0.0.1', port: 40_001 })).not.toBe(relayed(40_001));
  });

  it('gives no key for a direct connection without a port', () => {
    expect(sessionKey('scope', { ...direct, port: undefined })).toBeUndefined();
  });
});
