// The DNS label rule every object, file and namespace name built from user input goes through.
import { describe, expect, it } from 'vitest';
import { DNS_LABEL_MAX_LENGTH, isDnsLabel } from './names.js';

describe('DNS labels', () => {
  it.each([
    ['prod', true],
    ['a', true],
    ['0', true],
    ['etcd-1', true],
    ['a'.repeat(DNS_LABEL_MAX_LENGTH), true],
    ['a'.repeat(DNS_LABEL_MAX_LENGTH + 1), false],
    ['', false],
    ['-prod', false],
    ['prod-', false],
    ['Prod', false],
    ['my_cluster', false],
    ['a.b', false],
    ['../etc', false],
    ['a/b', false],
  ])('%j is a DNS label: %s', (name, expected) => {
    expect(isDnsLabel(name)).toBe(expected);
  });

  it('honours a shorter limit', () => {
    expect(isDnsLabel('a'.repeat(48), 48)).toBe(true);
    expect(isDnsLabel('a'.repeat(49), 48)).toBe(false);
  });
});
