// Checks about whether members answer and agree: reachability, TLS identity, linearizable read,
// watch, quorum, leader, leader changes and alarms.
import { type CheckFunction, type Finding, concluded, fail, warn } from '../check.js';
import { type JudgedMember, firstError, quorumState, statusOf } from '../cluster-view.js';
import { formatAge, label, memberProblem, nameOf, plural } from '../wording.js';

/** The adapter's usual prefix, dropped only so a reason does not say "TLS identity" twice. */
const TLS_IDENTITY_PREFIX = /^(?:.*?: )?TLS identity: /;

/**
 * Why the member's certificate is not its own, when that is what kept it from answering. Judged
 * by the failure's kind; the text is only what people read.
 */
export function tlsIdentityProblem(member: JudgedMember): string | undefined {
  const status = member.probe?.status;
  if (status?.ok !== false || status.kind !== 'tls-identity') return undefined;
  return status.error.replace(TLS_IDENTITY_PREFIX, '');
}

// A voting member's reachability shows here; a learner's too, though its read is not expected. A
// learner joining within its grace may not answer yet (added, its etcd not started): a warning.
// A member that answered with a certificate naming someone else is reported by tls-identity.
export const reachableCheck: CheckFunction = ({ voting, learners, members, joins }) => {
  const findings: Finding[] = [];
  for (const member of voting) {
    const probe = member.probe;
    if (!probe) findings.push(fail(memberProblem('member', member, 'unreachable', member.missingReason ?? 'not probed')));
    else if (!probe.status.ok && tlsIdentityProblem(member) === undefined) {
      findings.push(fail(memberProblem('member', member, 'unreachable', probe.status.error)));
    }
  }
  for (const member of learners) {
    if (!member.probe?.status.ok && tlsIdentityProblem(member) === undefined) {
      const problem = memberProblem('learner', member, 'unreachable', firstError(member) ?? 'no answer');
      findings.push(joins.get(member.id)?.overdue === false ? warn(problem) : fail(problem));
    }
  }
  const unverified = members.filter((member) => tlsIdentityProblem(member) !== undefined).length;
  return concluded(
    findings,
    unverified === 0
      ? `all ${members.length} members answered`
      : `${members.length - unverified} of ${members.length} members answered; see tls-identity`,
  );
};

// A certificate that chains to the CA but names another host: not a network fault, and not one
// a retry fixes. Says which name was expected and which the certificate has (tlsVerify: chain-only
// is the documented way out).
export const tlsIdentityCheck: CheckFunction = ({ members }) => {
  const findings = members.flatMap((member) => {
    const problem = tlsIdentityProblem(member);
    return problem === undefined
      ? []
      : [fail(`${member.learner ? 'learner' : 'member'} ${label(member)} TLS identity: ${problem}`)];
  });
  return concluded(findings, 'every member that answered presented a certificate naming it');
};

export const linearizableReadCheck: CheckFunction = ({ voting }) => {
  const reachableVoting = voting.filter((member) => member.probe?.status.ok === true);
  const findings = reachableVoting.flatMap((member) => {
    const read = member.probe?.linearizableRead;
    return read?.ok === false ? [fail(memberProblem('member', member, 'did not answer a linearizable read', read.error))] : [];
  });
  const readers = reachableVoting.length - findings.length;
  return concluded(findings, `${readers} of ${reachableVoting.length} reachable voting members answered a linearizable read`);
};

// Only when the watch probe ran: a member can answer Status and reads while its watches stall
// (flannel's stuck watches), which no unary call shows.
export const watchCheck: CheckFunction = ({ members }) => {
  const watched = members.flatMap((member) => (member.probe?.watch === undefined ? [] : [{ member, watch: member.probe.watch }]));
  if (watched.length === 0) return null;
  const findings: Finding[] = [];
  const delays: number[] = [];
  for (const { member, watch } of watched) {
    if (watch.ok) {
      delays.push(watch.value);
      continue;
    }
    if (watch.writeFailed === true) {
      findings.push(warn(`watch on member ${label(member)} not tested: ${watch.error}`));
      continue;
    }
    findings.push(
      fail(
        watch.kind === 'timeout' && watch.budgetMs !== undefined
          ? `watch on member ${label(member)} delivered nothing within ${watch.budgetMs} ms`
          : memberProblem('member', member, 'watch delivered nothing', watch.error),
      ),
    );
  }
  return concluded(
    findings,
    `${delays.length} watch${delays.length === 1 ? '' : 'es'} delivered a write made through another member (slowest ${Math.round(Math.max(0, ...delays))} ms)`,
  );
};

export const quorumCheck: CheckFunction = ({ voting, healthyVoting, quorum, quorumHeld }) => {
  if (voting.length === 0) return concluded([fail('no voting member known')]);
  if (!quorumHeld) {
    const state = quorumState(voting, healthyVoting.length, quorum);
    const text = `${state}: ${healthyVoting.length} of ${voting.length} voting members healthy, quorum needs ${quorum}`;
    return concluded([fail(text)]);
  }
  return concluded(
    [],
    `${healthyVoting.length} of ${voting.length} voting members healthy, quorum ${quorum}, fault tolerance ${healthyVoting.length - quorum}`,
  );
};

export const leaderCheck: CheckFunction = ({ leader, members }) =>
  leader.id === null
    ? concluded([fail(leader.problem)])
    : concluded([], `leader ${nameOf(members, leader.id)} agreed by all ${leader.agreedBy} reachable members`);

/**
 * Elections since the stored evaluation: each raises the raft term. The leader's term is the
 * cluster's (a member cut off from its peers may raise its own without winning anything). Warns
 * when the count proves the etcd mixin's rate: leaderChangesWarn or more within its window, or
 * over a longer gap that many per window on average. Not judged without a stored leader term, a
 * leader now, or time between the two.
 */
export const leaderChangesCheck: CheckFunction = ({ input, leader, members, thresholds }) => {
  const previous = input.previousLeaderTerm;
  if (previous === undefined || leader.id === null) return null;
  const leading = members.find((member) => member.id === leader.id);
  const status = leading === undefined ? null : statusOf(leading);
  const elapsedMs = Date.parse(input.evaluatedAt) - Date.parse(previous.evaluatedAt);
  if (status === null || !(elapsedMs > 0)) return null;
  const changes = status.raftTerm - previous.term;
  if (changes < 0) {
    return concluded(
      [],
      `raft term ${status.raftTerm} is below the stored ${previous.term}: not compared (a restored or replaced cluster)`,
    );
  }
  const window = thresholds.leaderChangesWindowMs;
  const rule = `warns at ${thresholds.leaderChangesWarn} in ${formatAge(window)}`;
  const perMinute = (changes / (elapsedMs / 60_000)).toFixed(1);
  const seen =
    `raft term ${previous.term} → ${status.raftTerm} (${plural(changes, 'election')}) in ${formatAge(elapsedMs)} ` +
    `since the stored evaluation, ${perMinute} per minute`;
  if (changes >= thresholds.leaderChangesWarn * Math.max(1, elapsedMs / window)) {
    return concluded([warn(`leader churn: ${seen}; ${rule}`)]);
  }
  return concluded([], `${seen}; ${rule}`);
};

// A voting member that answered Status and the read but not the alarm list fails here too.
export const alarmsCheck: CheckFunction = ({ voting, members, alarmsByMember, alarmAnswers }) => {
  const findings: Finding[] = [];
  for (const member of voting) {
    const probe = member.probe;
    if (probe?.status.ok && probe.linearizableRead.ok && !probe.alarms.ok) {
      findings.push(fail(memberProblem('member', member, 'could not list alarms', probe.alarms.error)));
    }
  }
  for (const [memberId, alarms] of alarmsByMember) {
    for (const alarm of alarms) findings.push(fail(`alarm ${alarm} raised on member ${nameOf(members, memberId)}`));
  }
  return concluded(findings, alarmAnswers > 0 ? 'no alarm raised' : 'alarm list unavailable (no member answered it)');
};
