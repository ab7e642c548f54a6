// The cluster's own view of its membership, when several endpoints answered a member list. A
// member removed from the cluster but still running (isolated) keeps answering its stale list,
// fast; so does a member of another cluster given by mistake. Taking "the first list that
// answers" made the verdict depend on who answered first. The view is the leader's list (the
// leader most statuses name), else the list most answers agree on. Pure.
import type { DiscoveredMember, EndpointProbe, Outcome } from '../ports/etcd-probe.js';

/** One endpoint's member list with the header saying which cluster and member answered. */
export interface MemberListAnswer {
  /** uint64 ids as decimal strings. */
  clusterId: string;
  memberId: string;
  members: DiscoveredMember[];
}

export interface EndpointMemberList {
  endpoint: string;
  answer: Outcome<MemberListAnswer>;
}

export interface AgreedView {
  answer: MemberListAnswer & { endpoint: string };
  /** Why this one: a linearizable list (etcd 3.5+), the leader's own list, or the most common one. */
  basis: 'linearizable' | 'leader' | 'majority';
}

/** Members, learner flags and cluster: two lists with the same signature say the same thing. */
export function listSignature(answer: Pick<MemberListAnswer, 'clusterId' | 'members'>): string {
  const members = answer.members.map((member) => `${member.id}${member.isLearner ? 'L' : ''}`).sort();
  return `${answer.clusterId}:${members.join(',')}`;
}

/** The leader most reachable members name (never "0"), or null. */
function namedLeader(probes: readonly EndpointProbe[]): string | null {
  const votes = new Map<string, number>();
  for (const probe of probes) {
    if (!probe.status.ok || probe.status.value.leaderId === '0') continue;
    votes.set(probe.status.value.leaderId, (votes.get(probe.status.value.leaderId) ?? 0) + 1);
  }
  let best: string | null = null;
  for (const [id, count] of votes) if (best === null || count > (votes.get(best) ?? 0)) best = id;
  return best;
}

export function agreedView(
  lists: readonly EndpointMemberList[],
  probes: readonly EndpointProbe[],
  linearizable?: MemberListAnswer & { endpoint: string },
): AgreedView | null {
  // The committed membership, served through raft: no member's local view can be newer.
  if (linearizable !== undefined) return { answer: linearizable, basis: 'linearizable' };
  const answers = lists.flatMap(({ endpoint, answer }) => (answer.ok ? [{ endpoint, ...answer.value }] : []));
  if (answers.length === 0) return null;
  const leader = namedLeader(probes);
  const fromLeader = answers.find(
    (answer) => answer.memberId === leader && answer.members.some((member) => member.id === leader),
  );
  if (fromLeader !== undefined) return { answer: fromLeader, basis: 'leader' };
  const groups = new Map<string, typeof answers>();
  for (const answer of answers) {
    const signature = listSignature(answer);
    groups.set(signature, [...(groups.get(signature) ?? []), answer]);
  }
  // Ties go to the list whose own member is in it (a removed member is not in the cluster's list).
  const ranked = [...groups.values()].sort(
    (a, b) =>
      b.length - a.length ||
      Number(b.some((answer) => answer.members.some((member) => member.id === answer.memberId))) -
        Number(a.some((answer) => answer.members.some((member) => member.id === answer.memberId))),
  );
  const chosen = ranked[0]?.[0];
  return chosen === undefined ? null : { answer: chosen, basis: 'majority' };
}

/** Member ids print in hex, as etcdctl prints them. */
export function hexId(id: string): string {
  try {
    return BigInt(id).toString(16);
  } catch {
    return id;
  }
}
