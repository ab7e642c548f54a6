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
import type { TargetConfig, TargetMatch } from '../../functions/entrypoints/config.js';
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

function own(object: object, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(object, key);
}

/** Whether the match has label criteria at all (requiredLabels non-empty), without building them. */
function hasRequiredLabels(match: TargetMatch): boolean {
  if (match.clusterName !== undefined) return true;
  const selector = match.labelSelector;
  if (selector !== undefined) for (const key in selector) if (own(selector, key)) return true;
  return false;
}

/** Every pair of requiredLabels(match) is on `labels`, read where they live (no copy per request). */
function hasAllRequiredLabels(match: TargetMatch, labels: Readonly<Record<string, string>>): boolean {
  const { labelSelector: selector, clusterName } = match;
  if (selector !== undefined) {
    for (const key in selector) {
      // clusterName wins over a labelSelector entry for the same label, as in requiredLabels.
      if (!own(selector, key) || (clusterName !== undefined && key === CLUSTER_NAME_LABEL)) continue;
      if (labels[key] !== selector[key]) return false;
    }
  }
  return clusterName === undefined || labels[CLUSTER_NAME_LABEL] === clusterName;
}

/** First target whose match accepts the subject (see the rules at the top of this file). */
export function matchTarget(targets: readonly TargetConfig[], subject: MatchSubject): TargetMatchResult {
  for (const target of targets) {
    const match = target.match ?? NO_MATCH;
    if (!passesNameCriteria(match, subject)) continue;
    if (!hasRequiredLabels(match)) return { kind: 'matched', target };
    if (subject.labels === null) return { kind: 'labels-unknown', target };
    if (hasAllRequiredLabels(match, subject.labels)) return { kind: 'matched', target };
  }
  return { kind: 'none' };
}

/** Targets that name the object explicitly (used for StatefulSets, guarded only when named). */
export function targetsNaming(targets: readonly TargetConfig[], namespace: string, name: string): TargetConfig[] {
  return targets.filter((target) => namesObject(target.match ?? {}, namespace, name));
}
