// What the evaluation takes from newer etcd, against the etcd under test (3.4 by default; 3.5, 3.6
// and 3.7 in CI's further passes): on 3.5+ the membership comes from a linearizable MemberList
// (the committed list); on 3.4, which ignores the request's `linearizable` field, from the
// members' local lists as before. With quorum gone a 3.5 member cannot serve the committed list
// and the evaluation falls back to the local one, still naming the members. On 3.6+ the members'
// Status carries the fields etcd3's rpc.proto lacks (storageVersion, dbSizeQuota), read from the
// real members' response bytes; the db-size check then judges against the quota they report.
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdProbeSession } from '../../functions/adapters/etcd-member-probe.js';
import { statusExtras } from '../../functions/adapters/etcd-status-extras.js';
import { Deadline } from '../../functions/domain/deadline.js';
import { parseGuardConfig, type TargetConfig } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { etcdVersion, startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { rawStatus } from '../harness/raw-status.js';
import { waitFor } from '../harness/wait.js';

const MIB = 1024 * 1024;
/** The members' --quota-backend-bytes, and the (different) one the target's config names. */
const MEMBER_QUOTA = 64 * MIB;
const CONFIGURED_QUOTA = 2048 * MIB;

let cluster: EtcdTestCluster;
let target: TargetConfig;
let version: string;
let linearizableMemberList: boolean;
let reportsStatusExtras: boolean;

beforeAll(async () => {
  version = await etcdVersion();
  const [major, minor] = version.split('.').map(Number);
  const atLeast = (wanted: number) => (major ?? 0) > 3 || ((major ?? 0) === 3 && (minor ?? 0) >= wanted);
  linearizableMemberList = atLeast(5);
  reportsStatusExtras = atLeast(6);
  cluster = await startEtcdCluster({ size: 3, name: 'features', quotaBackendBytes: MEMBER_QUOTA });
  const config = parseGuardConfig(
    {
      targets: [
        {
          name: 'features',
          endpoints: cluster.endpoints,
          tls: cluster.clientTls,
          timeout: '2s',
          quotaBackendBytes: CONFIGURED_QUOTA,
        },
      ],
    },
    'test config',
  );
  const [only] = config.targets;
  if (!only) throw new Error('no target');
  target = only;
});

afterAll(async () => {
  await cluster?.destroy();
});

const memberListMessage = (evaluation: Evaluation) => evaluation.checks.find((check) => check.name === 'member-list')?.message;

describe('the 3.6 Status fields on real members', () => {
  it('a 3.6+ member reports its own --quota-backend-bytes and a storage version that reaches its minor; 3.4 and 3.5 neither', async () => {
    const [major, minor] = version.split('.');
    const own = `${major}.${minor}.0`;
    for (const endpoint of cluster.endpoints) {
      if (!reportsStatusExtras) {
        expect(statusExtras(await rawStatus(endpoint, cluster.clientTls)), endpoint).toEqual({});
        continue;
      }
      // A new cluster starts its db files at the 3.5 schema and raises them once its cluster
      // version has moved (etcd updates it "with delay"); a 3.7 member that has not written its
      // schema yet reports none at all. Every reading is one of those three.
      const seen = new Set<string>();
      await waitFor(`${endpoint} to report storage version ${own}`, 30_000, async () => {
        const extras = statusExtras(await rawStatus(endpoint, cluster.clientTls));
        expect(extras.dbSizeQuotaBytes, endpoint).toBe(MEMBER_QUOTA);
        seen.add(String(extras.storageVersion));
        return extras.storageVersion === own;
      });
      expect(
        [...seen].filter((reading) => reading !== own && reading !== '3.5.0' && reading !== 'undefined'),
        endpoint,
      ).toEqual([]);
    }
  });

  it('the probe takes the reported quota, and the db-size check judges against it over the configured one', async () => {
    const tls = cluster.clientTls;
    const [ca, cert, key] = await Promise.all([readFile(tls.caFile), readFile(tls.certFile), readFile(tls.keyFile)]);
    const session = new EtcdProbeSession({ ca, cert, key });
    try {
      for (const endpoint of cluster.endpoints) {
        const probe = await session.probe(endpoint, Deadline.after(5000));
        if (!probe.status.ok) throw new Error(`no status from ${endpoint}: ${probe.status.error}`);
        expect(probe.status.value.dbSizeQuotaBytes, endpoint).toBe(reportsStatusExtras ? MEMBER_QUOTA : undefined);
      }
    } finally {
      session.close();
    }
    const evaluation = await evaluateTarget(target);
    const dbSize = evaluation.checks.find((check) => check.name === 'db-size');
    expect(dbSize?.status).toBe('pass');
    expect(dbSize?.message).toBe(
      reportsStatusExtras
        ? 'every DB below 80% of quota 64.0 MiB (reported by the member)'
        : 'every DB below 80% of quota 2.0 GiB',
    );
  });
});

describe('the member list by etcd version', () => {
  it('is the committed (linearizable) list on etcd 3.5+, the local lists on 3.4', async () => {
    const evaluation = await evaluateTarget(target);
    expect(evaluation.verdict).not.toBe('Unhealthy');
    expect(memberListMessage(evaluation)).toBe(
      linearizableMemberList ? '3 members listed (linearizable: the committed membership)' : '3 members listed',
    );
  });

  it('falls back to the local lists when quorum is gone, still naming every member', async () => {
    await cluster.kill(1);
    await cluster.kill(2);
    try {
      const evaluation = await evaluateTarget({ ...target, timeout: 1000 });
      expect(evaluation.verdict).toBe('Unhealthy');
      expect(memberListMessage(evaluation)).toBe('3 members listed');
      expect(evaluation.members.map((member) => member.name).sort()).toEqual(cluster.members.map((member) => member.name).sort());
    } finally {
      await cluster.restart(1);
      await cluster.restart(2);
      await cluster.waitHealthy();
    }
  });
});
