// Checks about who is in the cluster: member lists and their agreement, cluster ID, learners,
// member count and the control-plane Node inventory.
import { type CheckFunction, type Finding, concluded, fail, warn } from '../check.js';
import { comparedInventory, nodeOf } from '../cluster-view.js';
import { answeredBy, formatAge, label, listedNames, plural } from '../wording.js';
import { hexId, listSignature } from '../../member-view.js';
import type { EvaluationInput } from '../input.js';

export const memberListCheck: CheckFunction = ({ memberList, members, agreed }) =>
  memberList.ok
    ? concluded(
        [],
        `${members.length} members listed${agreed?.basis === 'linearizable' ? ' (linearizable: the committed membership)' : ''}`,
      )
    : concluded([fail(`member list unavailable from every endpoint: ${memberList.error}`)]);

// Every member of this cluster that answered must list the same members as the cluster's view.
export const memberListAgreementCheck: CheckFunction = ({ input, agreed, members }) => {
  if (input.memberLists === undefined || agreed === null) return null;
  const view = agreed.answer;
  const findings: Finding[] = [];
  let agreeing = 0;
  for (const { endpoint, answer } of input.memberLists) {
    if (!answer.ok || answer.value.clusterId !== view.clusterId) continue;
    if (!view.members.some((member) => member.id === answer.value.memberId)) continue;
    if (listSignature(answer.value) === listSignature(view)) {
      agreeing += 1;
      continue;
    }
    findings.push(
      fail(
        `${answeredBy(endpoint, answer.value.memberId, members)} lists ${answer.value.members.length} members (${listedNames(answer.value.members)}), the cluster lists ${view.members.length} (${listedNames(view.members)})`,
      ),
    );
  }
  let vouched = 0;
  for (const endpoint of input.listsVouchedByRead ?? []) {
    const probe = input.probes.find((candidate) => candidate.endpoint === endpoint);
    if (!probe?.status.ok || !probe.linearizableRead.ok || probe.status.value.clusterId !== view.clusterId) continue;
    const memberId = probe.status.value.memberId;
    if (view.members.some((member) => member.id === memberId)) vouched += 1;
  }
  agreeing += vouched;
  const byRead = vouched === 0 ? '' : ` (${vouched} by ${vouched === 1 ? 'its' : 'their'} linearizable read, list not asked)`;
  return concluded(findings, `${agreeing} member${agreeing === 1 ? '' : 's'} agree on the member list${byRead}`);
};

// An endpoint that answers for another cluster, or as a member this cluster no longer has.
export const clusterIdCheck: CheckFunction = ({ input, agreed }) => {
  if (input.memberLists === undefined || agreed === null) return null;
  const view = agreed.answer;
  const findings: Finding[] = [];
  const answers = new Map<string, { clusterId: string; memberId: string }>();
  for (const { endpoint, answer } of input.memberLists) if (answer.ok) answers.set(endpoint, answer.value);
  for (const probe of input.probes) {
    const status = probe.status.ok ? probe.status.value : null;
    if (status?.clusterId !== undefined && !answers.has(probe.endpoint)) {
      answers.set(probe.endpoint, { clusterId: status.clusterId, memberId: status.memberId });
    }
  }
  findings.push(...pinFindings(input.clusterIdPin, view.clusterId));
  for (const [endpoint, answer] of answers) {
    if (answer.clusterId !== view.clusterId) {
      findings.push(
        fail(
          `endpoint ${endpoint} answers for another cluster (${hexId(answer.clusterId)}, this cluster is ${hexId(view.clusterId)})`,
        ),
      );
    } else if (!view.members.some((member) => member.id === answer.memberId)) {
      findings.push(fail(`endpoint ${endpoint} (member ${hexId(answer.memberId)}) is not a member of this cluster`));
    }
  }
  return concluded(findings, `every endpoint answers for cluster ${hexId(view.clusterId)}`);
};

/** A discovered target's etcd must stay the cluster its first evaluation saw (issue 30 item 10). */
function pinFindings(pin: EvaluationInput['clusterIdPin'], clusterId: string): Finding[] {
  if (pin === undefined || pin.pinned === null) return [];
  if (pin.pinned === 'unreadable') {
    return [
      fail(
        `cannot check cluster ${hexId(clusterId)} against this target's pinned cluster ID: its stored evaluation could not be read`,
      ),
    ];
  }
  if (pin.pinned.clusterId === clusterId) return [];
  return [
    fail(
      `etcd cluster ID changed: this target was pinned to cluster ${hexId(pin.pinned.clusterId)} (since ${pin.pinned.since}) ` +
        `and now answers as cluster ${hexId(clusterId)}; changes are denied until an operator resets the pin`,
    ),
  ];
}

// A learner is a join in progress (kubeadm adds every joining member as one since Kubernetes
// 1.29): Degraded while within the grace, Unhealthy once it stays unpromoted past it. The check
// warns rather than passes so that every reader (the webhook too) sees a membership change under way.
export const learnersCheck: CheckFunction = ({ learners, joins, thresholds }) =>
  concluded(
    learners.map((member) => {
      const join = joins.get(member.id);
      const who = member.name !== '' ? member.name : `id ${member.id} (not started)`;
      if (join === undefined || join.overdue) {
        const age = join === undefined ? '' : ` for ${formatAge(join.ageMs)}`;
        return fail(`learner ${who} not promoted${age} (grace ${formatAge(thresholds.learnerGraceMs)})`);
      }
      // A one-shot run (no store, no inventory) sees every learner for the first time: "for 0s"
      // would make one stuck for hours read as just started.
      const age = join.dated ? ` for ${formatAge(join.ageMs)}` : ', age unknown (first seen by this evaluation)';
      return warn(`membership change in progress: learner ${who} joining${age}`);
    }),
    'no learner',
  );

export const memberCountCheck: CheckFunction = ({ voting }) => {
  if (voting.length > 0 && voting.length % 2 === 0) {
    const tolerated = voting.length / 2 - 1;
    const text = `even number of voting members (${voting.length}): tolerates ${tolerated} failure${tolerated === 1 ? '' : 's'}, no more than ${voting.length - 1} members would`;
    return concluded([warn(text)]);
  }
  return concluded([], `${voting.length} voting member${voting.length === 1 ? '' : 's'}`);
};

// Only when an inventory is configured: every member must match a control-plane node. As KCP
// reads it (cluster-api controlplane/kubeadm/internal/workload_cluster_conditions.go,
// compareMachinesAndMembers): a Machine without a Node is provisioning and matches nothing yet,
// and while one exists a member without a Machine is not a failure (its Node may be linked soon);
// a member whose Machine is being deleted is expected to go.
export const inventoryCheck: CheckFunction = ({ input, members, joins }) => {
  const inventory = input.controlPlaneNodes;
  if (inventory === undefined) return null;
  if (!Array.isArray(inventory)) {
    return concluded([fail(`control-plane node inventory unavailable: ${inventory.error}`)]);
  }
  const compared = comparedInventory(inventory);
  const provisioning = inventory.length - compared.length;
  const findings: Finding[] = [];
  for (const member of members) {
    const node = nodeOf(member, compared);
    if (node?.deleting === true) {
      findings.push(
        warn(`membership change in progress: member ${label(member)} runs on node ${node.name}, whose Machine is being deleted`),
      );
    } else if (node === undefined && provisioning > 0) {
      findings.push(
        warn(`member ${label(member)} matches no control-plane node yet (${plural(provisioning, 'Machine')} still provisioning)`),
      );
    } else if (node === undefined && member.learner && member.name === '' && joins.get(member.id)?.overdue === false) {
      // Added but not started: no name yet to match by; the learners check fails it after the grace.
      findings.push(warn(`learner ${label(member)} matches no control-plane node yet (not started)`));
    } else if (node === undefined) {
      findings.push(fail(`member ${label(member)} matches no control-plane node`));
    }
  }
  const skipped = provisioning > 0 ? ` (${plural(provisioning, 'provisioning Machine')} not compared)` : '';
  return concluded(findings, `every member matches one of ${compared.length} control-plane nodes${skipped}`);
};

// A control-plane node without a member: still joining within the grace (counted from the Node's
// creation, as KCP counts its two minutes), a leftover after it; a node whose Machine is being
// deleted has had its member removed first (KCP removes the member, then the Machine).
export const nodeMembersCheck: CheckFunction = ({ input, members, thresholds }) => {
  const inventory = input.controlPlaneNodes;
  if (inventory === undefined || !Array.isArray(inventory)) return null;
  const compared = comparedInventory(inventory);
  const matched = new Set(members.map((member) => nodeOf(member, compared)?.name));
  const now = Date.parse(input.evaluatedAt);
  const grace = formatAge(thresholds.nodeMemberGraceMs);
  const findings = compared
    .filter((node) => !matched.has(node.name))
    .map((node) => {
      if (node.deleting === true) {
        return warn(`membership change in progress: node ${node.name} runs no etcd member, its Machine is being deleted`);
      }
      const created = node.createdAt === undefined ? Number.NaN : Date.parse(node.createdAt);
      const ageMs = Number.isFinite(created) ? Math.max(0, now - created) : Number.POSITIVE_INFINITY;
      if (ageMs < thresholds.nodeMemberGraceMs) {
        return warn(`control-plane node ${node.name} runs no etcd member yet (created ${formatAge(ageMs)} ago, grace ${grace})`);
      }
      const age = Number.isFinite(ageMs) ? `created ${formatAge(ageMs)} ago` : 'creation time unknown';
      return fail(`control-plane node ${node.name} runs no etcd member (${age}, grace ${grace})`);
    });
  return concluded(findings, `every one of ${compared.length} control-plane nodes runs an etcd member`);
};
