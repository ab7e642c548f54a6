// Member names are sorted without ICU's collator where code-unit order is the collator's order:
// plain names (lowercase letters, digits, '.', '-') under the root or an English locale.
import { describe, expect, it } from 'vitest';
import { compareCodeUnits, compareNames, plainNamesCollateByCodeUnit } from './names.js';

describe('compareNames', () => {
  it('orders like localeCompare under this test run’s locale', () => {
    expect(plainNamesCollateByCodeUnit(process.env)).toBe(true);
    const alphabet = 'abcxyz0189.-_Aé';
    let seed = 20;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const name = () =>
      Array.from({ length: Math.floor(random() * 7) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
    for (let pair = 0; pair < 20_000; pair++) {
      const [a, b] = [name(), name()];
      expect(Math.sign(compareNames(a, b, true)), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`).toBe(
        Math.sign(a.localeCompare(b)),
      );
    }
  });

  it.each([
    ['cp-1', 'cp-2', -1],
    ['cp-10', 'cp-2', -1],
    ['etcd-0', 'etcd-0', 0],
    ['etcd', 'etcd-0', -1],
    ['master-b.example', 'master-a.example', 1],
    ['10501334649042878790', '9372538179322589801', -1],
  ])('puts %j before or after %j as localeCompare does', (a, b, sign) => {
    expect(Math.sign(compareNames(a, b, true))).toBe(sign);
    expect(Math.sign(a.localeCompare(b))).toBe(sign);
  });
});

describe('plainNamesCollateByCodeUnit', () => {
  it.each([
    [{}, true],
    [{ LANG: '' }, true],
    [{ LANG: 'C' }, true],
    [{ LANG: 'C.UTF-8' }, true],
    [{ LANG: 'POSIX' }, true],
    [{ LANG: 'en_US.UTF-8' }, true],
    [{ LANG: 'en_GB' }, true],
    [{ LANG: 'cs_CZ.UTF-8' }, false],
    [{ LANG: 'da_DK.UTF-8' }, false],
    [{ LC_MESSAGES: 'hu_HU.UTF-8', LANG: 'en_US.UTF-8' }, false],
    [{ LC_ALL: 'C.UTF-8', LANG: 'cs_CZ.UTF-8' }, true],
    [{ LC_ALL: 'lt_LT', LANG: 'en_US.UTF-8' }, false],
  ])('%j: %s', (env, expected) => {
    expect(plainNamesCollateByCodeUnit(env)).toBe(expected);
  });
});

describe('compareCodeUnits', () => {
  it.each([
    ['cp-1', 'cp-2', -1],
    ['cp-ch', 'cp-h', -1],
    ['etcd', 'etcd-0', -1],
    ['etcd-0', 'etcd-0', 0],
    ['Node-b', 'node-a', -1],
    ['node-é', 'node-f', 1],
  ])('puts %j before or after %j by code unit, whatever the locale', (a, b, sign) => {
    expect(Math.sign(compareCodeUnits(a, b))).toBe(sign);
    expect(Math.sign(compareCodeUnits(b, a))).toBe(-sign || 0);
  });
});
