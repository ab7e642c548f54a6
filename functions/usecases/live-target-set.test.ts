import { describe, expect, it } from 'vitest';
import { parseGuardConfig } from '../domain/config.js';
import { staticTarget, type Target } from '../domain/targets.js';
import type { ResolvedTargets } from './resolve-targets.js';
import { TargetRegistry } from './live-target-set.js';

const config = parseGuardConfig(
  { targets: [{ name: 'local', endpoints: ['https://127.0.0.1:2379'] }], discovery: { capi: {}, druid: {} } },
  'test',
);

function discovered(source: 'capi' | 'druid', name: string): Target {
  return {
    ...staticTarget({ ...config.targets[0]!, name, endpoints: [] }),
    source,
    guards: { group: 'g', kind: 'K', namespace: 'ns', name },
    reach:
      source === 'capi' ? { kind: 'capi', namespace: 'ns', clusterName: name } : { kind: 'druid', namespace: 'ns', tls: null },
  };
}

function round(targets: Target[], failures: ResolvedTargets['failures'] = []): ResolvedTargets {
  return { targets: [staticTarget(config.targets[0]!), ...targets], problems: [], failures };
}

describe('TargetRegistry', () => {
  it('holds the static targets before any round, then what each round finds', async () => {
    const rounds = [
      round([discovered('capi', 'a'), discovered('druid', 'b')]),
      // capi could not list: its targets are unknown, not gone, so they stay.
      round([discovered('druid', 'b')], [{ source: 'capi', message: 'timed out' }]),
      // A successful round without a: a is gone and no longer evaluated.
      round([discovered('druid', 'b')]),
    ];
    const changes: string[][] = [];
    const registry = new TargetRegistry(config, {
      resolve: () => Promise.resolve(rounds.shift()!),
      onChange: (targets) => changes.push(targets.map((target) => target.name)),
    });
    expect(registry.names()).toEqual(['local']);
    await registry.refresh();
    expect(registry.names()).toEqual(['local', 'a', 'b']);
    expect(registry.get('a')?.source).toBe('capi');
    await registry.refresh();
    expect(registry.names()).toEqual(['local', 'b', 'a']);
    expect(registry.failures()).toEqual([{ source: 'capi', message: 'timed out' }]);
    await registry.refresh();
    expect(registry.names()).toEqual(['local', 'b']);
    expect(registry.get('a')).toBeUndefined();
    expect(changes).toEqual([
      ['local', 'a', 'b'],
      ['local', 'b', 'a'],
      ['local', 'b'],
    ]);
  });

  it('calls during a round share it; without discovery a refresh does nothing', async () => {
    let calls = 0;
    const registry = new TargetRegistry(config, {
      resolve: () => {
        calls += 1;
        return Promise.resolve(round([]));
      },
    });
    await Promise.all([registry.refresh(), registry.refresh(), registry.refresh()]);
    expect(calls).toBe(1);
    const staticOnly = parseGuardConfig({ targets: [{ name: 'local', endpoints: ['https://127.0.0.1:2379'] }] }, 'test');
    const idle = new TargetRegistry(staticOnly, { resolve: () => Promise.reject(new Error('must not run')) });
    await idle.refresh();
    expect(idle.names()).toEqual(['local']);
  });
});
