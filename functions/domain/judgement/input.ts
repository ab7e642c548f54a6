// Everything the judgement reads: the probes' results, the thresholds and what earlier runs saw.
import type { EndpointMemberList, MemberListAnswer } from '../member-view.js';
import type { ControlPlaneInventory, DiscoveredMember, EndpointProbe, Outcome } from '../../ports/etcd-probe.js';
import type { CheckStatus, ClusterIdPin, LastMembership } from '../evaluation-document.js';

export interface EvaluationThresholds {
  /** DB size as a fraction of the backend quota that warns / fails. */
  dbWarnRatio: number;
  dbFailRatio: number;
  /** Raft entries a member may trail the leader's index before it counts as lagging. */
  raftLagWarnEntries: number;
  /** A Status round trip slower than this marks a slow member. */
  slowMemberMs: number;
  /** How long a new control-plane node may run no etcd member before that fails (KCP allows 2 min). */
  nodeMemberGraceMs: number;
  /** How long a learner may stay unpromoted (a join in progress) before that fails. */
  learnerGraceMs: number;
  /**
   * Raft term increases (elections) within leaderChangesWindowMs that warn: the etcd mixin's
   * etcdHighNumberOfLeaderChanges fires at 4 leader changes in 15 minutes.
   */
  leaderChangesWarn: number;
  leaderChangesWindowMs: number;
  /**
   * A member's DB warns as fragmented when more than this share of its file is free (dbSize −
   * dbSizeInUse: what a defrag gives back) and that free space is at least
   * fragmentationMinFreeBytes, so a small or fresh DB whose few pages are free does not warn.
   */
  fragmentationWarnRatio: number;
  fragmentationMinFreeBytes: number;
}

export const DEFAULT_THRESHOLDS: EvaluationThresholds = {
  dbWarnRatio: 0.8,
  dbFailRatio: 0.95,
  raftLagWarnEntries: 1000,
  slowMemberMs: 500,
  nodeMemberGraceMs: 120_000,
  learnerGraceMs: 300_000,
  leaderChangesWarn: 4,
  leaderChangesWindowMs: 900_000,
  // The etcd mixin's etcdDatabaseHighFragmentationRatio warns below 50% in use too.
  fragmentationWarnRatio: 0.5,
  fragmentationMinFreeBytes: 100 * 1024 * 1024,
};

/**
 * What an etcd-druid Etcd and its snapshot Leases say about its backup, read at evaluation time
 * (checks/backup.ts names the fields). Tenant-writable: every string is untrusted.
 */
export interface DruidBackupFacts {
  /** Why the Etcd could not be read; then nothing else is known. */
  unreadable?: string;
  /** spec.backup.store is set (druid takes snapshots only then). */
  storeConfigured: boolean;
  /** status.conditions[type=BackupReady], or null when absent. */
  condition: { status: string; reason: string; message: string } | null;
  /** spec.renewTime of the `<etcd>-full-snap` and `<etcd>-delta-snap` Leases (RFC 3339), or null. */
  fullSnapshotAt: string | null;
  deltaSnapshotAt: string | null;
  /** Why a snapshot Lease could not be read (its time is then null). */
  leaseProblems: string[];
  /** The last snapshot may be this old before the check warns. */
  maxSnapshotAgeMs: number;
}

/** A stored evaluation's consistency check and when its members were hashed. */
export interface CarriedConsistency {
  status: CheckStatus;
  message: string;
  measuredAt: string;
}

export interface EvaluationInput {
  target: string;
  /** The endpoints the caller was configured with (used when no member list was obtained). */
  endpoints: string[];
  /** The member list from the first endpoint that answered, or why none did. */
  memberList: Outcome<DiscoveredMember[]>;
  /**
   * Endpoints' own member lists with the cluster and member that answered. When given, the
   * cluster's view (member-view.ts) replaces `memberList` and the lists are compared.
   */
  memberLists?: EndpointMemberList[];
  /**
   * Probed endpoints whose own list was not asked because nothing gave a reason to: every Status
   * named the same cluster, raft term and leader, and each member's linearizable read succeeded.
   * etcd answers that read only once the member has applied everything committed before it,
   * membership changes included, so its local list is the one the others hold. Such a member
   * agrees when its Status says it is in the cluster's view and its read answered.
   */
  listsVouchedByRead?: string[];
  /**
   * A member list etcd 3.5+ served linearizably (the committed membership), when one answered:
   * it is the cluster's view. Never from a 3.4 member, which answers the same request locally.
   */
  linearizableMemberList?: MemberListAnswer & { endpoint: string };
  /** One probe per endpoint that was probed (member client URLs, or the given endpoints). */
  probes: EndpointProbe[];
  quotaBackendBytes: number;
  controlPlaneNodes?: ControlPlaneInventory;
  evaluatedAt: string;
  durationMs: number;
  thresholds?: Partial<EvaluationThresholds>;
  /**
   * When an earlier evaluation first saw each learner (member id → RFC 3339), from the stored
   * evaluation: the age of a learner no inventory entry dates.
   */
  learnersFirstSeen?: Readonly<Record<string, string>>;
  /**
   * The stored evaluation's leader's raft term and when it was evaluated (leaderTermOf), to count
   * the elections since; absent without a stored evaluation that named a leader.
   */
  previousLeaderTerm?: { term: number; evaluatedAt: string };
  /**
   * The consistency check is on. This evaluation hashed: the revision every voting member's
   * HashKV was asked at (each probe's hashKV), null when none could be chosen. It did not (not
   * configured for what it is for): the stored evaluation's result (consistencyOf), null when
   * there is none, shown while no older than maxAgeMs. Absent: the check is off.
   */
  consistency?: { revision: number | null } | { carried: CarriedConsistency | null; maxAgeMs: number };
  /** A druid target with `backup` configured: its backup facts (the backup check); absent otherwise. */
  backup?: DruidBackupFacts;
  /** The stored evaluation's lastMembership: carried into this one when it gets no member list. */
  lastMembership?: LastMembership;
  /**
   * A discovered target pins its etcd cluster ID: the stored pin ('unreadable' when the stored
   * evaluation could not be read, so the ID cannot be checked), or absent for the first evaluation.
   */
  clusterIdPin?: { pinned: ClusterIdPin | 'unreadable' | null };
  /**
   * Whether the process's locale orders plain member names by code unit (plainNamesCollateByCodeUnit
   * of its environment), so the members can be sorted without ICU's collator. Absent: localeCompare.
   */
  namesCollateByCodeUnit?: boolean;
}
