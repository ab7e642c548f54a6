// Which resources the guard protects, as data: each controller kind's rule (an API group, the
// resource (plural) and kind, and the JSON pointers whose change moves etcd membership, each with
// its reason) lives in its module under functions/domain/kinds/, listed by the registry; this file
// adds what holds for every kind (the /scale subresource, the replica bound). Pure.
import type { GuardedPointer, GuardRule } from '../../functions/domain/kinds/kind.js';
import { BUILT_IN, kindOfResource } from '../../functions/domain/kinds/registry.js';

export type { GuardedPointer, GuardRule, GuardScope, HarmlessChild } from '../../functions/domain/kinds/kind.js';

/** The /scale subresource always carries an autoscaling/v1 Scale, whatever the parent is. */
export const SCALE_SUBRESOURCE = 'scale';
export const SCALE_REPLICAS_POINTER = '/spec/replicas';
export const SCALE_GUARDED: readonly GuardedPointer[] = [
  { pointer: SCALE_REPLICAS_POINTER, reason: 'the replica count is the number of etcd members', harmless: [] },
];
/**
 * autoscaling/v1 ScaleSpec.replicas is `omitempty`: a Scale to 0 arrives as `spec: {}`, so an
 * absent count in a Scale means 0, never the parent's default.
 */
export const SCALE_DEFAULT_REPLICAS = 0;

/**
 * The largest replica count the guard judges. etcd clusters have 1-9 members (etcd recommends at
 * most 7); a count beyond this is a typo or an attack, and is denied at once, before any
 * projection, so no request can make the webhook compute over billions of members.
 */
export const MAX_JUDGED_REPLICAS = 100;

/** The built-in kinds' rules (what the manifests grant and register the webhook for). */
export const GUARD_RULES: readonly GuardRule[] = BUILT_IN.map((kind) => kind.rule);

/** The rule guarding `group`/`resource` (any version), or undefined when it is not guarded. */
export function findGuardRule(
  resource: { group: string; resource: string },
  rules?: readonly GuardRule[],
): GuardRule | undefined {
  if (rules === undefined) return kindOfResource(resource)?.rule;
  return rules.find((rule) => rule.group === resource.group && rule.resource === resource.resource);
}

/** The subtrees that count for a request: the rule's own, or only replicas for /scale. */
export function guardedPointersFor(rule: GuardRule, subResource: string | undefined): readonly GuardedPointer[] {
  return subResource === SCALE_SUBRESOURCE ? SCALE_GUARDED : rule.guarded;
}
