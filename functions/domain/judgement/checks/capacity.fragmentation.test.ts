// The fragmentation check, pure: a member's free DB pages (dbSize − dbSizeInUse) against the share
// and the floor that warn, the hint naming that member alone, and never more than Degraded.
import { describe, expect, it } from 'vitest';
import { evaluateCluster } from '../evaluate-cluster.js';
import type { EvaluationThresholds } from '../input.js';
import { targetDefaults } from '../../kinds/discovery-common.js';
import { parseGuardConfig } from '../../config.js';
import { probedThree } from '../../../../test/harness/probe-input.js';

const MIB = 1024 * 1024;

/** Three answering members, member etcd-1 with the given sizes (the others 10 MiB, all in use). */
function judged(sizes: { dbSize: number; inUse: number }, thresholds: Partial<EvaluationThresholds> = {}) {
  const input = probedThree();
  input.probes.forEach((probe, index) => {
    if (!probe.status.ok) throw new Error('probedThree gave no status');
    probe.status.value.dbSizeBytes = index === 0 ? sizes.dbSize : 10 * MIB;
    probe.status.value.dbSizeInUseBytes = index === 0 ? sizes.inUse : 10 * MIB;
  });
  // A quota far above every size here: db-size stays out of the verdict.
  const evaluation = evaluateCluster({ ...input, quotaBackendBytes: 8192 * MIB, thresholds });
  return { evaluation, check: evaluation.checks.find((check) => check.name === 'fragmentation') };
}

describe('fragmentation check: free DB pages only a defrag returns', () => {
  it.each<[string, { dbSize: number; inUse: number }, Partial<EvaluationThresholds>, 'pass' | 'warn', string]>([
    [
      'warns when more than half the file and at least 100 MiB are free, naming the member, sizes and defrag',
      { dbSize: 400 * MIB, inUse: 100 * MIB },
      {},
      'warn',
      'member etcd-1 (https://10.0.0.1:2379) DB fragmented: 300.0 MiB of 400.0 MiB free (75%, 100.0 MiB in use); defragment one member at a time, it blocks the member while it runs: etcdctl defrag --endpoints=https://10.0.0.1:2379',
    ],
    [
      'passes a small DB that is mostly free (under the 100 MiB floor)',
      { dbSize: 60 * MIB, inUse: 2 * MIB },
      {},
      'pass',
      'no DB more than 50% and 100.0 MiB free',
    ],
    [
      'passes a large DB with much free space that is not more than half its file',
      { dbSize: 1000 * MIB, inUse: 500 * MIB },
      {},
      'pass',
      'no DB more than 50% and 100.0 MiB free',
    ],
    [
      'warns at the configured share and floor',
      { dbSize: 20 * MIB, inUse: 12 * MIB },
      { fragmentationWarnRatio: 0.3, fragmentationMinFreeBytes: 4 * MIB },
      'warn',
      'member etcd-1 (https://10.0.0.1:2379) DB fragmented: 8.0 MiB of 20.0 MiB free (40%',
    ],
    [
      'does not judge a member that reports no size in use (before etcd 3.4: 0)',
      { dbSize: 400 * MIB, inUse: 0 },
      {},
      'pass',
      'no DB more than 50% and 100.0 MiB free',
    ],
  ])('%s', (_name, sizes, thresholds, status, message) => {
    const { check } = judged(sizes, thresholds);
    expect(check?.status).toBe(status);
    expect(check?.message).toContain(message);
  });

  it('says no size is known when no member reports one in use', () => {
    const input = probedThree();
    for (const probe of input.probes) if (probe.status.ok) probe.status.value.dbSizeInUseBytes = 0;
    expect(evaluateCluster(input).checks.find((check) => check.name === 'fragmentation')).toEqual({
      name: 'fragmentation',
      status: 'pass',
      message: 'no DB size in use known',
    });
  });

  it('a fragmented DB leaves a serving etcd Degraded, never Unhealthy, and is one reason', () => {
    const { evaluation, check } = judged({ dbSize: 2048 * MIB, inUse: 10 * MIB });
    expect(check?.status).toBe('warn');
    expect(evaluation.verdict).toBe('Degraded');
    expect(evaluation.passed).toBe(true);
    expect(evaluation.reasons).toEqual([check?.message]);
  });
});

describe('fragmentation config: targets[].fragmentation and discovery.fragmentation', () => {
  const target = { name: 'prod', endpoints: ['https://10.0.0.1:2379'] };

  it('fills the defaults of a partly given target setting', () => {
    const config = parseGuardConfig({ targets: [{ ...target, fragmentation: { minFreeBytes: 1024 } }] }, 'test config');
    expect(config.targets[0]?.fragmentation).toEqual({ warnRatio: 0.5, minFreeBytes: 1024 });
  });

  it('carries the discovery-wide setting onto every discovered target', () => {
    const config = parseGuardConfig({ discovery: { capi: {}, fragmentation: { warnRatio: 0.7 } } }, 'test config');
    const fragmentation = config.discovery?.fragmentation;
    expect(fragmentation).toEqual({ warnRatio: 0.7, minFreeBytes: 100 * MIB });
    expect(targetDefaults({ timeout: 5000, ...(fragmentation && { fragmentation }) }).fragmentation).toEqual(fragmentation);
  });

  it.each([
    ['a share of 1 (nothing could exceed it)', { warnRatio: 1 }, 'targets.0.fragmentation.warnRatio'],
    ['a negative floor', { minFreeBytes: -1 }, 'targets.0.fragmentation.minFreeBytes'],
    ['an unknown key', { ratio: 0.5 }, 'targets.0.fragmentation'],
  ])('refuses %s, naming the key', (_name, fragmentation, key) => {
    expect(() => parseGuardConfig({ targets: [{ ...target, fragmentation }] }, 'test config')).toThrow(key);
  });
});
