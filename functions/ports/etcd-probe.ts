// What the etcd probe adapter hands the judgement: plain data per call, never a library object.
// The contract between functions/adapters/etcd-member-probe.ts and functions/domain/judgement/.
import type { Failed } from '../domain/probe-failure.js';

/**
 * The result of one call: a value, or why not: our own short text (never a library error object)
 * and the failure's kind, which is what checks judge by.
 */
export type Outcome<T> = { ok: true; value: T } | Failed;

/** One entry of the cluster's member list (ids as decimal strings: they are uint64). */
export interface DiscoveredMember {
  id: string;
  /** Empty while a newly added member has not started. */
  name: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

/** What maintenance Status says about the member that answered. */
export interface MemberStatus {
  memberId: string;
  /** "0" when the member knows no leader. */
  leaderId: string;
  raftIndex: number;
  raftTerm: number;
  dbSizeBytes: number;
  dbSizeInUseBytes: number;
  version: string;
  isLearner: boolean;
  /** The cluster the answering member belongs to (uint64 as a decimal string), when known. */
  clusterId?: string;
  /** The member's own --quota-backend-bytes, when it reports it (etcd 3.6+ Status dbSizeQuota). */
  dbSizeQuotaBytes?: number;
  /** The cluster's downgrade as the member reports it (etcd 3.6+ Status downgradeInfo; absent before 3.6). */
  downgrade?: { enabled: boolean; targetVersion: string };
  /** The member's current key-value store revision (the Status header's), when known. */
  revision?: number;
}

/** maintenance HashKV of one member at `revision`: the hash of its MVCC keys up to it. */
export interface HashKVAnswer {
  revision: number;
  /** uint32, as a decimal string. */
  hash: string;
  /** The member's compact revision when the hash began; hashes compare only at the same one. */
  compactRevision: number;
}

export interface RaisedAlarm {
  memberId: string;
  /** etcd's alarm name, e.g. NOSPACE or CORRUPT. */
  alarm: string;
}

/**
 * The watch round trip: milliseconds until the watch delivered the write, or why not;
 * `writeFailed` when the write through another member never got through (nothing was tested).
 */
export type WatchOutcome = { ok: true; value: number } | (Failed & { writeFailed?: true });

/** Everything one endpoint answered within the deadline. */
export interface EndpointProbe {
  endpoint: string;
  status: Outcome<MemberStatus>;
  /**
   * The cluster's alarms: from Status when it reports none and the linearizable read answered,
   * else an alarm GET through raft; fails without quorum either way.
   */
  alarms: Outcome<RaisedAlarm[]>;
  /** A linearizable (quorum) read; learners refuse it by design. */
  linearizableRead: Outcome<null>;
  /** Round trip of the Status call, null when it did not answer. */
  latencyMs: number | null;
  /**
   * The listed member this endpoint was dialled to reach, when the way in is not one of its
   * advertised URLs (e.g. a port-forward to its pod): the probe is that member's even if it failed.
   */
  forMemberId?: string;
  /**
   * The opt-in watch round trip: milliseconds until a watch on this endpoint delivered a write
   * made through another member, or why it did not. Absent when the watch probe is off.
   */
  watch?: WatchOutcome;
  /** The opt-in consistency check: this member's HashKV at the evaluation's common revision. */
  hashKV?: Outcome<HashKVAnswer>;
}

export interface ControlPlaneNode {
  name: string;
  addresses: string[];
  /**
   * RFC 3339 creation time of the Node (of the Machine when its Node's is unknown): a new one gets
   * a grace period to join etcd, and a learner on it is as old as it.
   */
  createdAt?: string;
  /** A Cluster API Machine with a deletionTimestamp: its member is expected to go. */
  deleting?: boolean;
  /** A Cluster API Machine without a Node yet (no status.nodeRef): not compared, as KCP does. */
  provisioning?: boolean;
}

/** The Nodes adapter's result: the nodes, or why they could not be listed. */
export type ControlPlaneInventory = ControlPlaneNode[] | { error: string };
