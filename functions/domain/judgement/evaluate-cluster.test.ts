// The pure judgement, table-driven: each row builds what the probes saw and states the verdict,
// the failing or warning check, and the member the reason must name.
import { describe, expect, it } from 'vitest';
import { evaluateCluster } from './evaluate-cluster.js';
import {
  type ControlPlaneInventory,
  type DiscoveredMember,
  type EndpointProbe,
  type MemberStatus,
  type Outcome,
  type WatchOutcome,
} from '../../ports/etcd-probe.js';
import { type EvaluationInput } from './input.js';
import type { ProbeFailureKind } from '../probe-failure.js';
import { evaluationSchema, type Evaluation, type Verdict } from '../evaluation-document.js';

const MIB = 1024 * 1024;
const QUOTA = 100 * MIB;

interface MemberSpec {
  id: string;
  name: string;
  learner?: boolean;
  /** Overrides of what Status answers; `false` = Status failed with this error. */
  status?: Partial<MemberStatus> | { error: string; kind: ProbeFailureKind };
  read?: Outcome<null>;
  alarms?: Outcome<Array<{ memberId: string; alarm: string }>>;
  latencyMs?: number;
  /** The watch round trip's outcome, when the watch probe ran. */
  watch?: WatchOutcome;
  /** No probe at all for this member (e.g. not started). */
  unprobed?: boolean;
  clientUrls?: string[];
  peerHost?: string;
}

function endpointOf(spec: MemberSpec): string {
  return spec.clientUrls?.[0] ?? `https://10.0.0.${spec.id}:2379`;
}

function build(specs: MemberSpec[], extra: Partial<EvaluationInput> = {}): EvaluationInput {
  const leaderId = specs[0]?.id ?? '0';
  const memberList: DiscoveredMember[] = specs.map((spec) => ({
    id: spec.id,
    name: spec.name,
    peerUrls: [`http://${spec.peerHost?.includes(':') ? `[${spec.peerHost}]` : (spec.peerHost ?? `10.0.0.${spec.id}`)}:2380`],
    clientUrls: spec.clientUrls ?? [endpointOf(spec)],
    isLearner: spec.learner === true,
  }));
  const probes: EndpointProbe[] = specs
    .filter((spec) => !spec.unprobed && (spec.clientUrls === undefined || spec.clientUrls.length > 0))
    .map((spec) => {
      const endpoint = endpointOf(spec);
      const statusSpec = spec.status ?? {};
      const status: Outcome<MemberStatus> =
        'error' in statusSpec
          ? { ok: false, kind: statusSpec.kind, error: statusSpec.error }
          : {
              ok: true,
              value: {
                memberId: spec.id,
                leaderId,
                raftIndex: 5000,
                raftTerm: 2,
                dbSizeBytes: 20 * MIB,
                dbSizeInUseBytes: 10 * MIB,
                version: '3.5.17',
                isLearner: spec.learner === true,
                ...statusSpec,
              },
            };
      return {
        endpoint,
        status,
        alarms: spec.alarms ?? { ok: true, value: [] },
        linearizableRead:
          spec.read ??
          (spec.learner
            ? { ok: false, kind: 'other', error: `${endpoint}: etcdserver: rpc not supported for learner` }
            : { ok: true, value: null }),
        latencyMs: status.ok ? (spec.latencyMs ?? 3) : null,
        ...(spec.watch !== undefined && { watch: spec.watch }),
      };
    });
  return {
    target: 'prod',
    endpoints: probes.slice(0, 1).map((probe) => probe.endpoint),
    memberList: { ok: true, value: memberList },
    probes,
    quotaBackendBytes: QUOTA,
    evaluatedAt: '2026-01-02T03:04:05.000Z',
    durationMs: 12,
    ...extra,
  };
}

const three: MemberSpec[] = [
  { id: '1', name: 'etcd-a' },
  { id: '2', name: 'etcd-b' },
  { id: '3', name: 'etcd-c' },
];

const withLearner: MemberSpec[] = [...three, { id: '4', name: 'etcd-d', learner: true }];

/** One inventory entry per member of `three`, matched by name. */
const threeNodes = three.map((spec) => ({ name: spec.name, addresses: [] }));

function withMember(index: number, change: Partial<MemberSpec>, base: MemberSpec[] = three): MemberSpec[] {
  return base.map((spec, position) => (position === index ? { ...spec, ...change } : spec));
}

const timedOut = (endpoint: string) => ({
  ok: false as const,
  kind: 'timeout' as const,
  budgetMs: 2000,
  error: `${endpoint}: timed out after 2000 ms`,
});

function judged(input: EvaluationInput): Evaluation {
  const evaluation = evaluateCluster(input);
  // Every evaluation the core produces must satisfy the shared schema.
  return evaluationSchema.parse(evaluation);
}

interface Row {
  behaviour: string;
  input: EvaluationInput;
  verdict: Verdict;
  check?: string;
  status?: 'warn' | 'fail';
  /** Text the check message and one reason must contain. */
  names?: string;
}

/** Every probed endpoint's own list: the cluster's (id 42) unless `differ` says otherwise for that member id. */
function withLists(
  input: EvaluationInput,
  differ: Record<string, { members?: string[]; clusterId?: string }> = {},
): EvaluationInput {
  const cluster = input.memberList.ok ? input.memberList.value : [];
  const memberLists = input.probes.map((probe) => {
    const memberId = probe.status.ok ? probe.status.value.memberId : '';
    const change = differ[memberId] ?? {};
    const members = change.members
      ? change.members.map(
          (id) =>
            cluster.find((member) => member.id === id) ?? {
              id,
              name: `etcd-${id}`,
              peerUrls: [],
              clientUrls: [],
              isLearner: false,
            },
        )
      : cluster;
    return {
      endpoint: probe.endpoint,
      answer: { ok: true as const, value: { clusterId: change.clusterId ?? '42', memberId, members } },
    };
  });
  return { ...input, memberLists };
}

/** Three members, plus a fourth that was removed but still runs and answers the old list of four. */
function removedMemberInput(): EvaluationInput {
  const four = build([...three, { id: '4', name: 'etcd-d', status: { leaderId: '0' } }]);
  const listOfThree = four.memberList.ok ? four.memberList.value.filter((member) => member.id !== '4') : [];
  const base: EvaluationInput = { ...four, memberList: { ok: true, value: listOfThree } };
  // The stale member answers first, with its old view of four members.
  const lists = withLists(base).memberLists ?? [];
  const stale = {
    endpoint: 'https://10.0.0.4:2379',
    answer: {
      ok: true as const,
      value: { clusterId: '42', memberId: '4', members: four.memberList.ok ? four.memberList.value : [] },
    },
  };
  return {
    ...base,
    memberList: stale.answer.ok ? { ok: true, value: stale.answer.value.members } : base.memberList,
    memberLists: [stale, ...lists.filter((entry) => entry.endpoint !== stale.endpoint)],
  };
}

const delivered = (ms: number): WatchOutcome => ({ ok: true, value: ms });
const watchedThree: MemberSpec[] = three.map((spec, index) => ({ ...spec, watch: delivered(4 + index) }));

const rows: Row[] = [
  { behaviour: 'three healthy members that agree on the leader are Healthy', input: build(three), verdict: 'Healthy' },
  {
    behaviour: 'three members whose watches all delivered a write are Healthy',
    input: build(watchedThree),
    verdict: 'Healthy',
  },
  {
    behaviour: 'a member whose watch stalls while its Status answers fails watch, naming it and the deadline',
    input: build(withMember(1, { watch: timedOut('https://10.0.0.2:2379') }, watchedThree)),
    verdict: 'Unhealthy',
    check: 'watch',
    status: 'fail',
    names: 'watch on member etcd-b (https://10.0.0.2:2379) delivered nothing within 2000 ms',
  },
  {
    behaviour: 'a watch the member cancelled fails watch with the cause',
    input: build(
      withMember(
        2,
        { watch: { ok: false, kind: 'other', error: 'https://10.0.0.3:2379: watch cancelled by etcd: permission denied' } },
        watchedThree,
      ),
    ),
    verdict: 'Unhealthy',
    check: 'watch',
    status: 'fail',
    names: 'member etcd-c watch delivered nothing: https://10.0.0.3:2379: watch cancelled by etcd: permission denied',
  },
  {
    behaviour: 'a watch whose write never got through (no leader for it) warns that the member was not tested',
    input: build(
      withMember(
        0,
        {
          watch: {
            ok: false,
            kind: 'other',
            writeFailed: true,
            error:
              'https://10.0.0.1:2379: the write through another member failed: https://10.0.0.2:2379: timed out after 2000 ms',
          },
        },
        watchedThree,
      ),
    ),
    verdict: 'Degraded',
    check: 'watch',
    status: 'warn',
    names:
      'watch on member etcd-a (https://10.0.0.1:2379) not tested: https://10.0.0.1:2379: the write through another member failed',
  },
  {
    behaviour: 'an unreachable voting member fails reachable, naming it',
    input: build(withMember(2, { status: { kind: 'refused' as const, error: 'https://10.0.0.3:2379: connection refused' } })),
    verdict: 'Unhealthy',
    check: 'reachable',
    status: 'fail',
    names: 'member etcd-c unreachable: https://10.0.0.3:2379: connection refused',
  },
  {
    behaviour: 'a member that answers Status but not a linearizable read fails linearizable-read',
    input: build(withMember(1, { read: timedOut('https://10.0.0.2:2379') })),
    verdict: 'Unhealthy',
    check: 'linearizable-read',
    status: 'fail',
    names: 'etcd-b did not answer a linearizable read',
  },
  {
    behaviour: 'members naming different leaders fail the leader check',
    input: build(withMember(2, { status: { leaderId: '3' } })),
    verdict: 'Unhealthy',
    check: 'leader',
    status: 'fail',
    names: 'members disagree on the leader',
  },
  {
    behaviour: 'a member still naming the leader of an older term (leadership moved mid-probe) passes the leader check',
    input: build(withMember(2, { status: { leaderId: '3', raftTerm: 1 } })),
    verdict: 'Healthy',
  },
  {
    behaviour: 'members naming different leaders at the newest term fail the leader check',
    input: build(withMember(2, { status: { leaderId: '3', raftTerm: 3 } }, withMember(1, { status: { raftTerm: 3 } }))),
    verdict: 'Unhealthy',
    check: 'leader',
    status: 'fail',
    names: 'members disagree on the leader',
  },
  {
    behaviour: 'members that know no leader fail the leader check',
    input: build(three.map((spec) => ({ ...spec, status: { leaderId: '0' } }))),
    verdict: 'Unhealthy',
    check: 'leader',
    status: 'fail',
    names: 'no leader',
  },
  // Issue 30 item 13: right after the leader hangs, its followers still name it (and their reads
  // may already go to the leader they elect next).
  {
    behaviour: 'a leader that hangs while the others still name it is no leader (Status timed out)',
    input: build(withMember(0, { status: timedOut('https://10.0.0.1:2379') })),
    verdict: 'Unhealthy',
    check: 'leader',
    status: 'fail',
    names: 'no leader: etcd-a, named leader by all 2 reachable members, does not answer',
  },
  {
    behaviour: 'a leader that answers Status but not the linearizable read is no leader',
    input: build(withMember(0, { read: timedOut('https://10.0.0.1:2379') })),
    verdict: 'Unhealthy',
    check: 'leader',
    status: 'fail',
    names: 'etcd-a, named leader by all 3 reachable members, does not answer (https://10.0.0.1:2379: timed out',
  },
  {
    behaviour: 'the newest term’s leader that hangs is no leader either',
    input: build(
      withMember(2, { status: { leaderId: '3', raftTerm: 1 } }, withMember(0, { status: timedOut('https://10.0.0.1:2379') })),
    ),
    verdict: 'Unhealthy',
    check: 'leader',
    status: 'fail',
    names: 'no leader: etcd-a, named leader by all 2 reachable members, does not answer',
  },
  {
    behaviour: 'Status still naming a leader after quorum loss does not count as a leader',
    input: build(
      [
        three[0] as MemberSpec,
        { ...(three[1] as MemberSpec), read: timedOut('https://10.0.0.2:2379'), alarms: timedOut('https://10.0.0.2:2379') },
        { ...(three[2] as MemberSpec), status: { kind: 'refused' as const, error: 'https://10.0.0.3:2379: connection refused' } },
      ].map((spec, index) =>
        index === 0 ? { ...spec, read: timedOut('https://10.0.0.1:2379'), alarms: timedOut('https://10.0.0.1:2379') } : spec,
      ),
    ),
    verdict: 'Unhealthy',
    check: 'leader',
    status: 'fail',
    names: 'no leader: quorum lost (0 of 3',
  },
  {
    behaviour: 'a NOSPACE alarm fails, naming the member and the alarm',
    input: build(three.map((spec) => ({ ...spec, alarms: { ok: true as const, value: [{ memberId: '2', alarm: 'NOSPACE' }] } }))),
    verdict: 'Unhealthy',
    check: 'alarms',
    status: 'fail',
    names: 'alarm NOSPACE raised on member etcd-b',
  },
  {
    behaviour: 'a CORRUPT alarm fails, naming the member and the alarm',
    input: build(withMember(0, { alarms: { ok: true, value: [{ memberId: '3', alarm: 'CORRUPT' }] } })),
    verdict: 'Unhealthy',
    check: 'alarms',
    status: 'fail',
    names: 'alarm CORRUPT raised on member etcd-c',
  },
  // A learner is a join in progress (issue 17): Degraded within its grace, Unhealthy past it.
  {
    behaviour: 'a learner first seen by this evaluation is joining, Degraded',
    input: build(withLearner),
    verdict: 'Degraded',
    check: 'learners',
    status: 'warn',
    names: 'learner etcd-d joining, age unknown (first seen by this evaluation)',
  },
  {
    behaviour: 'a learner an earlier evaluation saw 40 s ago is joining for 40s, Degraded',
    input: build(withLearner, { learnersFirstSeen: { '4': '2026-01-02T03:03:25.000Z' } }),
    verdict: 'Degraded',
    check: 'learners',
    status: 'warn',
    names: 'membership change in progress: learner etcd-d joining for 40s',
  },
  {
    behaviour: 'a learner not promoted 7 min after it was first seen fails past the 5 min grace',
    input: build(withLearner, { learnersFirstSeen: { '4': '2026-01-02T02:57:05.000Z' } }),
    verdict: 'Unhealthy',
    check: 'learners',
    status: 'fail',
    names: 'learner etcd-d not promoted for 7m (grace 5m)',
  },
  {
    behaviour: 'a learner is dated by its Node’s creation, earlier than its first sighting',
    input: build(withLearner, {
      learnersFirstSeen: { '4': '2026-01-02T03:03:55.000Z' },
      controlPlaneNodes: [...threeNodes, { name: 'etcd-d', addresses: [], createdAt: '2026-01-02T03:03:25Z' }],
    }),
    verdict: 'Degraded',
    check: 'learners',
    status: 'warn',
    names: 'learner etcd-d joining for 40s',
  },
  {
    behaviour: 'a Node dated later than the first sighting never makes a learner younger than seen',
    input: build(withLearner, {
      learnersFirstSeen: { '4': '2026-01-02T02:57:05.000Z' },
      controlPlaneNodes: [...threeNodes, { name: 'etcd-d', addresses: [], createdAt: '2026-01-02T03:03:25Z' }],
    }),
    verdict: 'Unhealthy',
    check: 'learners',
    status: 'fail',
    names: 'learner etcd-d not promoted for 7m (grace 5m)',
  },
  {
    behaviour: 'a configured learner grace of 30 s fails a learner joining for 40 s',
    input: build(withLearner, {
      learnersFirstSeen: { '4': '2026-01-02T03:03:25.000Z' },
      thresholds: { learnerGraceMs: 30_000 },
    }),
    verdict: 'Unhealthy',
    check: 'learners',
    status: 'fail',
    names: 'learner etcd-d not promoted for 40s (grace 30s)',
  },
  {
    behaviour: 'a learner added but not started (no name, no client URL) within its grace is Degraded',
    input: build([...three, { id: '4', name: '', learner: true, clientUrls: [] }], {
      learnersFirstSeen: { '4': '2026-01-02T03:03:25.000Z' },
      controlPlaneNodes: threeNodes,
    }),
    verdict: 'Degraded',
    check: 'learners',
    status: 'warn',
    names: 'learner id 4 (not started) joining for 40s',
  },
  {
    behaviour: 'a learner added but never started fails past its grace',
    input: build([...three, { id: '4', name: '', learner: true, clientUrls: [] }], {
      learnersFirstSeen: { '4': '2026-01-02T02:57:05.000Z' },
    }),
    verdict: 'Unhealthy',
    check: 'reachable',
    status: 'fail',
    names: 'learner id 4 unreachable: not started',
  },
  // Inventory as KCP reads it (issue 17).
  {
    behaviour: 'a provisioning Machine (no Node yet) is not compared: Healthy',
    input: build(three, { controlPlaneNodes: [...threeNodes, { name: 'cp-new-machine', addresses: [], provisioning: true }] }),
    verdict: 'Healthy',
  },
  {
    behaviour: 'a member matching no node while a Machine provisions is Degraded, not Unhealthy',
    input: build(withLearner, {
      controlPlaneNodes: [...threeNodes, { name: 'cp-new-machine', addresses: [], provisioning: true }],
    }),
    verdict: 'Degraded',
    check: 'inventory',
    status: 'warn',
    names: 'member etcd-d (https://10.0.0.4:2379) matches no control-plane node yet (1 Machine still provisioning)',
  },
  {
    behaviour: 'a member whose Machine is being deleted is a membership change in progress, Degraded',
    input: build(three, {
      controlPlaneNodes: [...threeNodes.slice(0, 2), { name: 'etcd-c', addresses: [], deleting: true }],
    }),
    verdict: 'Degraded',
    check: 'inventory',
    status: 'warn',
    names:
      'membership change in progress: member etcd-c (https://10.0.0.3:2379) runs on node etcd-c, whose Machine is being deleted',
  },
  {
    behaviour: 'an old node whose Machine is being deleted and whose member is gone is Degraded, not Unhealthy',
    input: build(three, {
      controlPlaneNodes: [...threeNodes, { name: 'cp-0', addresses: [], createdAt: '2025-12-01T00:00:00Z', deleting: true }],
    }),
    verdict: 'Degraded',
    check: 'node-members',
    status: 'warn',
    names: 'membership change in progress: node cp-0 runs no etcd member, its Machine is being deleted',
  },
  {
    behaviour: 'a DB at 80 % of the quota warns',
    input: build(withMember(0, { status: { dbSizeBytes: 0.85 * QUOTA } })),
    verdict: 'Degraded',
    check: 'db-size',
    status: 'warn',
    names: 'member etcd-a (https://10.0.0.1:2379) DB 85.0 MiB is 85% of quota 100.0 MiB',
  },
  {
    behaviour: 'a DB at 95 % of the quota fails',
    input: build(withMember(1, { status: { dbSizeBytes: 0.96 * QUOTA } })),
    verdict: 'Unhealthy',
    check: 'db-size',
    status: 'fail',
    names: 'etcd-b',
  },
  {
    behaviour: 'a member lagging the leader by more than 1000 entries warns',
    input: build(withMember(2, { status: { raftIndex: 3000 } })),
    verdict: 'Degraded',
    check: 'raft-index',
    status: 'warn',
    names: 'etcd-c (https://10.0.0.3:2379) lags 2000 raft entries',
  },
  {
    behaviour: 'different versions warn about skew',
    input: build(withMember(1, { status: { version: '3.4.23' } })),
    verdict: 'Degraded',
    check: 'version',
    status: 'warn',
    names: 'etcd-b run 3.4.23',
  },
  {
    behaviour: 'versions more than one minor apart warn that etcd upgrades one minor at a time',
    input: build(withMember(2, { status: { version: '3.6.5' } }, withMember(1, { status: { version: '3.4.23' } }))),
    verdict: 'Degraded',
    check: 'version',
    status: 'warn',
    names: 'version skew across more than one minor (3.4.23 to 3.6.5): etcd supports upgrading one minor at a time',
  },
  {
    behaviour: 'a slow member warns',
    input: build(withMember(0, { latencyMs: 900 })),
    verdict: 'Degraded',
    check: 'latency',
    status: 'warn',
    names: 'etcd-a (https://10.0.0.1:2379) slow: status took 900 ms',
  },
  {
    behaviour: 'an even number of voting members warns',
    input: build([...three, { id: '4', name: 'etcd-d' }]),
    verdict: 'Degraded',
    check: 'member-count',
    status: 'warn',
    names: 'even number of voting members (4): tolerates 1 failure, no more than 3 members would',
  },
  {
    behaviour: 'a listed member with no client URL (not started) is unreachable',
    input: build(withMember(2, { clientUrls: [] })),
    verdict: 'Unhealthy',
    check: 'reachable',
    status: 'fail',
    names: 'etcd-c unreachable: not started',
  },
  {
    behaviour: 'a listed member nobody probed is reported unhealthy with an error',
    input: build(withMember(2, { unprobed: true })),
    verdict: 'Unhealthy',
    check: 'reachable',
    status: 'fail',
    names: 'etcd-c (https://10.0.0.3:2379) unreachable: not probed',
  },
  {
    behaviour: 'no member list from any endpoint fails member-list',
    input: build(
      [{ id: '1', name: '', status: { kind: 'refused' as const, error: 'https://10.0.0.1:2379: connection refused' } }],
      {
        memberList: { ok: false, kind: 'refused', error: 'https://10.0.0.1:2379: connection refused' },
      },
    ),
    verdict: 'Unhealthy',
    check: 'member-list',
    status: 'fail',
    names: 'member list unavailable from every endpoint: https://10.0.0.1:2379: connection refused',
  },
  {
    behaviour: 'a member on no control-plane node fails the inventory check',
    input: build(three, {
      controlPlaneNodes: [
        { name: 'etcd-a', addresses: [] },
        { name: 'cp-2', addresses: ['10.0.0.2'] },
      ],
    }),
    verdict: 'Unhealthy',
    check: 'inventory',
    status: 'fail',
    names: 'member etcd-c (https://10.0.0.3:2379) matches no control-plane node',
  },
  {
    behaviour: 'a control-plane node without a member, younger than the 2 min grace, warns',
    input: build(three, {
      controlPlaneNodes: [
        { name: 'etcd-a', addresses: [] },
        { name: 'etcd-b', addresses: [] },
        { name: 'cp-3', addresses: ['10.0.0.3'] },
        { name: 'cp-4', addresses: ['10.0.0.44'], createdAt: '2026-01-02T03:03:25Z' },
      ],
    }),
    verdict: 'Degraded',
    check: 'node-members',
    status: 'warn',
    names: 'control-plane node cp-4 runs no etcd member yet (created 40s ago, grace 2m)',
  },
  {
    behaviour: 'a control-plane node without a member, older than the grace, fails',
    input: build(three, {
      controlPlaneNodes: [
        { name: 'etcd-a', addresses: [] },
        { name: 'etcd-b', addresses: [] },
        { name: 'cp-3', addresses: ['10.0.0.3'] },
        { name: 'cp-4', addresses: ['10.0.0.44'], createdAt: '2026-01-02T02:59:05Z' },
      ],
    }),
    verdict: 'Unhealthy',
    check: 'node-members',
    status: 'fail',
    names: 'control-plane node cp-4 runs no etcd member (created 5m ago, grace 2m)',
  },
  {
    behaviour: 'a member whose member list disagrees with the cluster’s fails, naming it',
    input: withLists(build(three), { '3': { members: ['1', '2', '3', '9'] } }),
    verdict: 'Unhealthy',
    check: 'member-list-agreement',
    status: 'fail',
    names: 'member etcd-c (https://10.0.0.3:2379) lists 4 members',
  },
  {
    behaviour: 'an endpoint of another cluster fails cluster-id, naming it',
    input: withLists(build(three), { '3': { clusterId: '77' } }),
    verdict: 'Unhealthy',
    check: 'cluster-id',
    status: 'fail',
    names: 'endpoint https://10.0.0.3:2379 answers for another cluster (4d, this cluster is 2a)',
  },
  {
    behaviour: 'a removed member still answering its stale list is "not a member of this cluster"',
    input: removedMemberInput(),
    verdict: 'Unhealthy',
    check: 'cluster-id',
    status: 'fail',
    names: 'endpoint https://10.0.0.4:2379 (member 4) is not a member of this cluster',
  },
  {
    behaviour: 'wrong client credentials on every member are "quorum unknown", not "quorum lost"',
    input: build(
      three.map((spec) => ({
        ...spec,
        status: {
          kind: 'tls' as const,
          error: `https://10.0.0.${spec.id}:2379: TLS rejected: client certificate missing or not accepted (alert bad certificate)`,
        },
      })),
    ),
    verdict: 'Unhealthy',
    check: 'quorum',
    status: 'fail',
    names: 'quorum unknown: 0 of 3 voting members healthy',
  },
  {
    behaviour: 'an election in progress (reads answer "leader changed") is "quorum unknown"',
    input: build(
      three.map((spec) => ({
        ...spec,
        read: { ok: false as const, kind: 'other' as const, error: `https://10.0.0.${spec.id}:2379: etcdserver: leader changed` },
      })),
    ),
    verdict: 'Unhealthy',
    check: 'quorum',
    status: 'fail',
    names: 'quorum unknown',
  },
  {
    behaviour: 'two of three refusing connections is "quorum lost"',
    input: build(
      [
        three[0] as MemberSpec,
        { ...(three[1] as MemberSpec), status: { kind: 'refused' as const, error: 'https://10.0.0.2:2379: connection refused' } },
        { ...(three[2] as MemberSpec), status: { kind: 'refused' as const, error: 'https://10.0.0.3:2379: connection refused' } },
      ].map((spec, index) => (index === 0 ? { ...spec, read: timedOut('https://10.0.0.1:2379') } : spec)),
    ),
    verdict: 'Unhealthy',
    check: 'quorum',
    status: 'fail',
    names: 'quorum lost: 0 of 3 voting members healthy',
  },
  {
    behaviour: 'an inventory that could not be listed fails the inventory check',
    input: build(three, { controlPlaneNodes: { error: 'list nodes: forbidden' } satisfies ControlPlaneInventory }),
    verdict: 'Unhealthy',
    check: 'inventory',
    status: 'fail',
    names: 'control-plane node inventory unavailable: list nodes: forbidden',
  },
];

/** Only the first member's own list, the others' vouched for by their linearizable reads (listsVouchedByRead). */
function firstListOnly(input: EvaluationInput): EvaluationInput {
  const [first, ...rest] = withLists(input).memberLists ?? [];
  // Each Status names its cluster, as etcd's header does (cluster 42 unless the row says otherwise).
  const probes = input.probes.map((probe) =>
    probe.status.ok ? { ...probe, status: { ...probe.status, value: { clusterId: '42', ...probe.status.value } } } : probe,
  );
  return {
    ...input,
    probes,
    memberLists: first === undefined ? [] : [first],
    listsVouchedByRead: rest.map((entry) => entry.endpoint),
  };
}

describe('member lists vouched for by a linearizable read', () => {
  it.each([
    {
      behaviour: 'three members, two of them vouched by their reads, all agree',
      input: firstListOnly(build(three)),
      message: '3 members agree on the member list (2 by their linearizable read, list not asked)',
    },
    {
      behaviour: 'a vouched member whose read failed does not count as agreeing',
      input: firstListOnly(build(withMember(2, { read: timedOut('https://10.0.0.3:2379') }))),
      message: '2 members agree on the member list (1 by its linearizable read, list not asked)',
    },
    {
      behaviour: 'a vouched member of another cluster does not count as agreeing',
      input: firstListOnly(build(withMember(2, { status: { clusterId: '77' } }), {})),
      message: '2 members agree on the member list (1 by its linearizable read, list not asked)',
    },
    {
      behaviour: 'every list asked: no member is counted by its read',
      input: withLists(build(three)),
      message: '3 members agree on the member list',
    },
  ])('$behaviour', ({ input, message }) => {
    const evaluation = judged(input);
    expect(evaluation.checks.find((entry) => entry.name === 'member-list-agreement')?.message).toBe(message);
  });
});

describe('evaluateCluster', () => {
  it.each(rows)('$behaviour', ({ input, verdict, check, status, names }) => {
    const evaluation = judged(input);
    expect(evaluation.verdict).toBe(verdict);
    expect(evaluation.passed).toBe(verdict !== 'Unhealthy');
    if (check === undefined) {
      expect(evaluation.reasons).toEqual([]);
      expect(evaluation.checks.every((entry) => entry.status === 'pass')).toBe(true);
      return;
    }
    const found = evaluation.checks.find((entry) => entry.name === check);
    expect(found?.status).toBe(status);
    expect(found?.message).toContain(names);
    expect(evaluation.reasons.some((reason) => reason.includes(names ?? '?'))).toBe(true);
  });

  it('summarises a healthy cluster: leader, quorum 2, fault tolerance 1, member rows', () => {
    const evaluation = judged(build(three));
    expect(evaluation.cluster).toEqual({
      leaderId: '1',
      votingMembers: 3,
      learners: 0,
      healthyVoting: 3,
      quorum: 2,
      faultTolerance: 1,
    });
    expect(evaluation.members.map((member) => [member.name, member.leader, member.healthy])).toEqual([
      ['etcd-a', true, true],
      ['etcd-b', false, true],
      ['etcd-c', false, true],
    ]);
    expect(evaluation).toMatchObject({ target: 'prod', evaluatedAt: '2026-01-02T03:04:05.000Z', durationMs: 12 });
  });

  it('reports a hung leader the others still name as no leader, and a hung follower’s leader as leader (issue 30 item 13)', () => {
    const hungLeader = judged(build(withMember(0, { status: timedOut('https://10.0.0.1:2379') })));
    expect(hungLeader.cluster.leaderId).toBeNull();
    expect(hungLeader.members.map((member) => [member.name, member.leader])).toEqual([
      ['etcd-a', false],
      ['etcd-b', false],
      ['etcd-c', false],
    ]);
    const hungFollower = judged(build(withMember(1, { status: timedOut('https://10.0.0.2:2379') })));
    expect(hungFollower.cluster.leaderId).toBe('1');
    expect(hungFollower.checks.find((entry) => entry.name === 'leader')).toMatchObject({
      status: 'pass',
      message: 'leader etcd-a agreed by all 2 reachable members',
    });
  });

  it('keeps quorum with one of three down: fault tolerance 0 and the leader still agreed', () => {
    const evaluation = judged(
      build(withMember(2, { status: { kind: 'refused' as const, error: 'https://10.0.0.3:2379: connection refused' } })),
    );
    expect(evaluation.cluster).toMatchObject({ leaderId: '1', healthyVoting: 2, quorum: 2, faultTolerance: 0 });
    expect(evaluation.checks.find((entry) => entry.name === 'quorum')?.status).toBe('pass');
    expect(evaluation.members[2]).toMatchObject({
      healthy: false,
      error: 'https://10.0.0.3:2379: connection refused',
      raftIndex: null,
    });
  });

  it('reports fault tolerance 0, never negative, when quorum is lost, and says quorum lost', () => {
    const refused = (host: string) => ({
      status: { kind: 'refused' as const, error: `https://${host}:2379: connection refused` },
    });
    const evaluation = judged(
      build(withMember(2, refused('10.0.0.3')).map((spec, index) => (index === 1 ? { ...spec, ...refused('10.0.0.2') } : spec))),
    );
    expect(evaluation.cluster).toMatchObject({ healthyVoting: 1, quorum: 2, faultTolerance: 0 });
    expect(evaluation.checks.find((entry) => entry.name === 'quorum')).toMatchObject({ status: 'fail' });
    expect(evaluation.reasons.join('\n')).toContain('quorum lost');
  });

  it('does not count a learner as voting nor fail it for refusing linearizable reads', () => {
    const evaluation = judged(build([...three, { id: '4', name: 'etcd-d', learner: true }]));
    expect(evaluation.cluster).toMatchObject({ votingMembers: 3, learners: 1, healthyVoting: 3, quorum: 2 });
    expect(evaluation.members.find((member) => member.name === 'etcd-d')).toMatchObject({ learner: true, healthy: true });
    expect(evaluation.checks.find((entry) => entry.name === 'linearizable-read')?.status).toBe('pass');
  });

  it('records when each learner’s join began, carrying an earlier sighting, and nothing on voting members', () => {
    const fresh = judged(build(withLearner));
    expect(fresh.members.find((member) => member.name === 'etcd-d')?.learnerSince).toBe('2026-01-02T03:04:05.000Z');
    const carried = judged(
      build(withLearner, { learnersFirstSeen: { '4': '2026-01-02T03:03:25.000Z', '9': '2026-01-01T00:00:00.000Z' } }),
    );
    expect(carried.members.map((member) => member.learnerSince)).toEqual([
      undefined,
      undefined,
      undefined,
      '2026-01-02T03:03:25.000Z',
    ]);
    // A stamp in the future (a skewed writer) dates nothing: the learner counts from now.
    const skewed = judged(build(withLearner, { learnersFirstSeen: { '4': '2026-01-02T04:00:00.000Z' } }));
    expect(skewed.members[3]?.learnerSince).toBe('2026-01-02T03:04:05.000Z');
    // The cluster block still says a learner exists, which the webhook reads.
    expect(carried.cluster.learners).toBe(1);
  });

  // Issue 30 item 10: a tenant lying about its own cluster re-points its target at another etcd.
  it.each<[string, EvaluationInput['clusterIdPin'], string, 'pass' | 'fail', string | null]>([
    ['pins the cluster ID on a target’s first evaluation', { pinned: null }, '42', 'pass', '42'],
    [
      'passes the cluster it was pinned to, keeping the pin',
      { pinned: { clusterId: '42', since: '2026-01-01T00:00:00.000Z' } },
      '42',
      'pass',
      '42',
    ],
    [
      'fails another cluster naming both IDs, and keeps the old pin',
      { pinned: { clusterId: '42', since: '2026-01-01T00:00:00.000Z' } },
      '99',
      'fail',
      '42',
    ],
    ['fails when the stored pin could not be read, pinning nothing', { pinned: 'unreadable' }, '42', 'fail', null],
    ['pins nothing for a target that does not pin (static)', undefined, '99', 'pass', null],
  ])('%s', (_name, clusterIdPin, clusterId, status, pinnedAfter) => {
    const differ = Object.fromEntries(three.map((spec) => [spec.id, { clusterId }]));
    const input = withLists(build(three), differ);
    const evaluation = judged(clusterIdPin === undefined ? input : { ...input, clusterIdPin });
    const check = evaluation.checks.find((entry) => entry.name === 'cluster-id');
    expect(check?.status, check?.message).toBe(status);
    expect(evaluation.clusterIdPin?.clusterId ?? null).toBe(pinnedAfter);
    if (status === 'fail' && clusterIdPin?.pinned !== 'unreadable') {
      expect(evaluation.verdict).toBe('Unhealthy');
      expect(evaluation.reasons.join('\n')).toMatch(
        /cluster ID changed: this target was pinned to cluster 2a .* now answers as cluster 63/,
      );
    }
  });

  // Issue 30 item 1: a wake-up from 0 is allowed only back to the size the evaluations last listed.
  it('records the voting size of a listed membership, and carries the stored one while no list answers', () => {
    const remembered = { votingMembers: 5, evaluatedAt: '2026-01-01T00:00:00.000Z' };
    const listed = judged(build(withLearner, { lastMembership: remembered }));
    expect(listed.lastMembership).toEqual({ votingMembers: 3, evaluatedAt: '2026-01-02T03:04:05.000Z' });
    const unlisted = (extra: Partial<EvaluationInput>) =>
      judged(build(three, { memberList: { ok: false, kind: 'refused', error: 'connection refused' }, probes: [], ...extra }));
    expect(unlisted({ lastMembership: remembered }).lastMembership).toEqual(remembered);
    expect(unlisted({}).lastMembership).toBeUndefined();
  });

  it('lists fails before warns in reasons, one line per finding', () => {
    const evaluation = judged(
      build(
        withMember(
          0,
          { latencyMs: 900 },
          withMember(2, { status: { kind: 'refused' as const, error: 'https://10.0.0.3:2379: connection refused' } }),
        ),
      ),
    );
    expect(evaluation.reasons).toEqual([
      'member etcd-c unreachable: https://10.0.0.3:2379: connection refused',
      'member etcd-a (https://10.0.0.1:2379) slow: status took 900 ms (limit 500 ms)',
    ]);
  });

  it('falls back to the given endpoints, judged as voting members, when no member list was obtained', () => {
    const input = build(three, { memberList: { ok: false, kind: 'timeout', error: 'all endpoints timed out' } });
    input.endpoints = input.probes.map((probe) => probe.endpoint);
    const evaluation = judged(input);
    expect(evaluation.members.map((member) => member.endpoint)).toEqual(input.endpoints);
    expect(evaluation.members.map((member) => member.id)).toEqual(['1', '2', '3']);
    expect(evaluation.verdict).toBe('Unhealthy');
  });

  it('matches inventory nodes by member name or by a URL host equal to a node address', () => {
    const evaluation = judged(
      build(withMember(2, { peerHost: 'fd00::3' }), {
        controlPlaneNodes: [
          { name: 'etcd-a', addresses: ['192.168.9.9'] },
          { name: 'cp-2', addresses: ['10.0.0.2'] },
          { name: 'cp-3', addresses: ['fd00::3'] },
        ],
      }),
    );
    expect(evaluation.checks.find((entry) => entry.name === 'inventory')?.status).toBe('pass');
  });

  it('judges a member by a given endpoint that answered as it when its advertised URL does not answer', () => {
    const input = build(three);
    const advertised = input.probes[2];
    if (!advertised || !advertised.status.ok) throw new Error('fixture: third probe missing');
    input.probes = [
      ...input.probes.slice(0, 2),
      {
        ...advertised,
        status: timedOut(advertised.endpoint),
        alarms: timedOut(advertised.endpoint),
        linearizableRead: timedOut(advertised.endpoint),
        latencyMs: null,
      },
      { ...advertised, endpoint: 'https://etcd-c.example:2379' },
    ];
    const evaluation = judged(input);
    expect(evaluation.members[2]).toMatchObject({ name: 'etcd-c', endpoint: 'https://etcd-c.example:2379', healthy: true });
    expect(evaluation.verdict).toBe('Healthy');
  });

  it('omits the watch check when the watch probe is off, and reports the slowest round trip when on', () => {
    expect(judged(build(three)).checks.map((entry) => entry.name)).not.toContain('watch');
    expect(judged(build(watchedThree)).checks.find((entry) => entry.name === 'watch')).toEqual({
      name: 'watch',
      status: 'pass',
      message: '3 watches delivered a write made through another member (slowest 6 ms)',
    });
  });

  it('omits the inventory check when no inventory is configured', () => {
    expect(judged(build(three)).checks.map((entry) => entry.name)).not.toContain('inventory');
  });
});
