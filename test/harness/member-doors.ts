// What the suites of the member-bearing doors share (webhook/domain/member-exits.test.ts: the
// Machine and etcd pod DELETEs; member-strips.test.ts: the UPDATEs that would let them go unseen):
// one config with a Cluster API target and a druid StatefulSet target, the owners a parent read
// returns, members named as a test says, and the decision on a review its owner let through.
import { guardConfigSchema, type GuardConfig } from '../../functions/domain/config.js';
import type { Evaluation, MemberReport } from '../../functions/domain/evaluation-document.js';
import { classifyRequest } from '../../webhook/domain/classify.js';
import type { Classification, ParentLabels } from '../../webhook/domain/contract.js';
import { decide } from '../../webhook/domain/decide.js';
import { makeEvaluation, makeMember } from './evaluation-fixture.js';
import { parsedRequest, type TestReview } from './reviews.js';

type Json = Record<string, unknown>;

export const NOW = new Date('2026-11-30T02:00:00.000Z');
export const CONFIG: GuardConfig = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [
    { name: 'prod', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'prod' } },
    { name: 'etcd-main', endpoints: ['https://127.0.0.1:12379'], match: { namespaces: ['shoot--prod'], names: ['etcd-main'] } },
  ],
});
/** The Node (and member) of the control-plane Machine in the fixtures. */
export const NODE = 'prod-control-plane-7xkqp';
/** The other members of its etcd. */
export const OTHERS = ['prod-control-plane-a1', 'prod-control-plane-b2'];

/** The Machine fixture's KubeadmControlPlane as a parent read returns it. */
export function kcp(extra: Json = {}, labels: Record<string, string> = { 'cluster.x-k8s.io/cluster-name': 'prod' }) {
  return {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlane',
    metadata: { name: 'prod-control-plane', namespace: 'default', labels, ...extra },
    spec: { replicas: 3, kubeadmConfigSpec: { clusterConfiguration: { etcd: { local: {} } } } },
  };
}

/** The pod fixture's StatefulSet as a parent read returns it. */
export function statefulSet(replicas = 3, extra: Json = {}) {
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'etcd-main', namespace: 'shoot--prod', labels: {}, ...extra },
    spec: { replicas },
  };
}

/** A parent read that found `object`. */
export const read = (object: { metadata: { labels: Record<string, string> } }): ParentLabels => ({
  ok: true,
  labels: object.metadata.labels,
  object,
});

export const classify = (review: TestReview, parent?: ParentLabels): Classification =>
  classifyRequest(parsedRequest(review), CONFIG, parent);

/** Members named as the test says, the leader first; `dead`, `learner`, `blank` name the odd ones. */
export function members(
  names: readonly string[],
  odd: { dead?: string[]; learner?: string[]; blank?: string[] } = {},
): MemberReport[] {
  return names.map((name, index) =>
    makeMember(index, {
      name: odd.blank?.includes(name) ? '' : name,
      healthy: !(odd.dead ?? []).includes(name),
      leader: index === 0,
      learner: (odd.learner ?? []).includes(name),
    }),
  );
}

/** A fresh evaluation of `list`: Unhealthy when a voting member is, each such member a reason. */
export function evaluationOf(list: MemberReport[]): Evaluation {
  const unhealthy = list.some((member) => !member.healthy && !member.learner);
  return makeEvaluation({
    members: list,
    evaluatedAt: new Date(NOW.getTime() - 2_000).toISOString(),
    verdict: unhealthy ? 'Unhealthy' : 'Healthy',
    reasons: list.filter((member) => !member.healthy).map((member) => `member ${member.name} unreachable`),
  });
}

/** The decision on `review` once `parent` was read, on an evaluation of `list`; throws when it is not judged. */
export function decideOn(review: TestReview, parent: ParentLabels, list: MemberReport[], config: GuardConfig = CONFIG) {
  const request = parsedRequest(review);
  const classification = classifyRequest(request, config, parent);
  if (classification.kind !== 'needs-evaluation') throw new Error(`not judged: ${JSON.stringify(classification)}`);
  return decide({ request, config, classification, evaluation: evaluationOf(list), now: NOW });
}
