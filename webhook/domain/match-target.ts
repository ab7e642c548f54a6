// Which target (etcd cluster) a guarded object belongs to. Pure.
//
// Rules, in order of the config's `targets` list — the FIRST target that matches wins, so list
// specific targets before catch-alls:
// - `match: {}` matches every object.
// - namespaces / names: the object's namespace / name must be in the list (when the list is given).
// - labelSelector (equality map) and clusterName (label cluster.x-k8s.io/cluster-name): every
//   pair must be present on the object's labels.
// - A /scale request carries an autoscaling/v1 Scale, whose metadata has no labels. A target whose
//   match has label criteria can then neither match nor be ruled out. Picking a later catch-all
//   target would judge the change against the WRONG etcd cluster, so the result is
//   "labels-unknown" and the request is denied (fail closed); name such objects with
//   match.namespaces + match.names to make /scale work.
import type { TargetConfig, TargetMatch } from '../../functions/domain/config.js';
import { CLUSTER_NAME_LABEL } from '../../functions/domain/controller-kinds.js';

export interface MatchSubject {
  namespace: string;
  name: string;
  /** The object's labels, or null when the request cannot tell (a /scale request). */
  labels: Readonly<Record<string, string>> | null;
}

export type TargetMatchResult =
  | { kind: 'matched'; target: TargetConfig }
  | { kind: 'none' }
  /** `target` might match, but only its label criteria could tell and the labels are unknown. */
  | { kind: 'labels-unknown'; target: TargetConfig };

/** The label pairs a match requires (labelSelector plus clusterName). */
export function requiredLabels(match: TargetMatch): Record<string, string> {
  const labels: Record<string, string> = { ...(match.labelSelector ?? {}) };
  if (match.clusterName !== undefined) labels[CLUSTER_NAME_LABEL] = match.clusterName;
  return labels;
}

function passesNameCriteria(match: TargetMatch, subject: MatchSubject): boolean {
  if (match.namespaces !== undefined && !match.namespaces.includes(subject.namespace)) return false;
  if (match.names !== undefined && !match.names.includes(subject.name)) return false;
  return true;
}

/** True when the match names the object explicitly: namespaces AND names both given and containing it. */
export function namesObject(match: TargetMatch, namespace: string, name: string): boolean {
  return (
    match.namespaces !== undefined &&
    match.names !== undefined &&
    match.namespaces.includes(namespace) &&
    match.names.includes(name)
  );
}

const NO_MATCH: TargetMatch = {};

/** requiredLabels(match) as pairs, built once per match object (targets are not changed in place). */
const requiredPairs = new WeakMap<TargetMatch, ReadonlyArray<readonly [string, string]>>();

function requiredLabelPairs(match: TargetMatch): ReadonlyArray<readonly [string, string]> {
  let pairs = requiredPairs.get(match);
  if (pairs === undefined) {
    pairs = Object.entries(requiredLabels(match));
    requiredPairs.set(match, pairs);
  }
  return pairs;
}

function hasAll(labels: Readonly<Record<string, string>>, pairs: ReadonlyArray<readonly [string, string]>): boolean {
  for (const [key, value] of pairs) if (labels[key] !== value) return false;
  return true;
}

/** First target whose match accepts the subject (see the rules at the top of this file). */
export function matchTarget(targets: readonly TargetConfig[], subject: MatchSubject): TargetMatchResult {
  for (const target of targets) {
    const match = target.match ?? NO_MATCH;
    if (!passesNameCriteria(match, subject)) continue;
    const wanted = requiredLabelPairs(match);
    if (wanted.length === 0) return { kind: 'matched', target };
    if (subject.labels === null) return { kind: 'labels-unknown', target };
    if (hasAll(subject.labels, wanted)) return { kind: 'matched', target };
  }
  return { kind: 'none' };
}

/** Targets that name the object explicitly (used for StatefulSets, guarded only when named). */
export function targetsNaming(targets: readonly TargetConfig[], namespace: string, name: string): TargetConfig[] {
  return targets.filter((target) => namesObject(target.match ?? {}, namespace, name));
}
