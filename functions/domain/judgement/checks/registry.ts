// Every check by name, in the order of CHECK_NAMES: the one place a new check is registered.
import type { CheckName } from '../../evaluation-document.js';
import type { CheckFunction } from '../check.js';
import { backupCheck } from './backup.js';
import { dbSizeCheck, fragmentationCheck, latencyCheck, raftIndexCheck, versionCheck } from './capacity.js';
import { consistencyCheck } from './consistency.js';
import { downgradeCheck } from './downgrade.js';
import {
  alarmsCheck,
  leaderChangesCheck,
  leaderCheck,
  linearizableReadCheck,
  quorumCheck,
  reachableCheck,
  tlsIdentityCheck,
  watchCheck,
} from './health.js';
import {
  clusterIdCheck,
  inventoryCheck,
  learnersCheck,
  memberCountCheck,
  memberListAgreementCheck,
  memberListCheck,
  nodeMembersCheck,
} from './membership.js';

/** Every check, keyed by its name; the evaluation lists them in CHECK_NAMES order. */
export const CHECKS: Record<CheckName, CheckFunction> = {
  'member-list': memberListCheck,
  'member-list-agreement': memberListAgreementCheck,
  'cluster-id': clusterIdCheck,
  reachable: reachableCheck,
  'tls-identity': tlsIdentityCheck,
  'linearizable-read': linearizableReadCheck,
  watch: watchCheck,
  leader: leaderCheck,
  quorum: quorumCheck,
  alarms: alarmsCheck,
  consistency: consistencyCheck,
  learners: learnersCheck,
  'db-size': dbSizeCheck,
  fragmentation: fragmentationCheck,
  'raft-index': raftIndexCheck,
  version: versionCheck,
  downgrade: downgradeCheck,
  latency: latencyCheck,
  'leader-changes': leaderChangesCheck,
  backup: backupCheck,
  'member-count': memberCountCheck,
  inventory: inventoryCheck,
  'node-members': nodeMembersCheck,
};
