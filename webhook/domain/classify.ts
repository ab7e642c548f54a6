// What an admission request is, before any evaluation is read. Pure.
//
// - Not a guarded resource, a subresource other than /scale (e.g. /status), CREATE, CONNECT, or
//   an UPDATE that changes no guarded field → allow without reading the cache. A DELETE of an
//   object that carries an etcd member (a control-plane Machine, an etcd pod) is judged as that
//   member leaving or going down (member-exits.ts); every other DELETE → allow.
// - A StatefulSet is guarded only when some target's match names it (namespaces AND names).
// - Guarded change but no target matches → deny; failing closed beats judging against the wrong
//   etcd cluster.
// - /scale and a target that matches by labels or clusterName: a Scale carries no labels, so the
//   first pass says LABELS_UNKNOWN; the server reads the parent object's labels and classifies
//   again with them. When that read failed (or no reader is wired) the request is denied saying why.
// - Replicas only → scale-up / scale-down. Any other guarded field → rollout. Replicas AND another
//   guarded field in one request → a rollout carrying previousReplicas, which the projection
//   judges by BOTH the rollout and the scale rules (the stricter reading).
// - A Cluster UPDATE that changes its topology's version or control plane replicas is judged as
//   the KubeadmControlPlane change it causes (cluster-topology.ts); any other Cluster edit → allow.
// - A Machine or Pod UPDATE that removes or changes what a member-bearing DELETE is keyed on is
//   judged as that DELETE (member-strips.ts); any other Machine or Pod edit → allow.
import type { GuardConfig, TargetConfig } from '../../functions/domain/config.js';
import { staticTarget, targetGuarding, type FleetView, type Target } from '../../functions/domain/targets.js';
import type {
  AdmissionRequest,
  Classification,
  GuardedObjectRef,
  MembershipChange,
  ParentLabels,
  ParentObjectRef,
} from './contract.js';
import { detectGuardedChange, valueAtPointer } from './detect-change.js';
import { discoveryOwnership, identityChanged } from './discovery-scope.js';
import { matchTarget, targetsNaming, type TargetMatchResult } from './match-target.js';
import { classifyClusterUpdate, isClusterUpdate } from './cluster-topology.js';
import { classifyDelete } from './member-exits.js';
import { classifyMemberStrip, isMemberStripCandidate } from './member-strips.js';
import {
  findGuardRule,
  guardedPointersFor,
  MAX_JUDGED_REPLICAS,
  SCALE_DEFAULT_REPLICAS,
  SCALE_REPLICAS_POINTER,
  SCALE_SUBRESOURCE,
  type GuardRule,
} from './rules.js';

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function metadataOf(object: unknown): Record<string, unknown> {
  if (!isRecord(object)) return {};
  const metadata = object.metadata;
  return isRecord(metadata) ? metadata : {};
}

/** metadata.labels or metadata.annotations as a string map (non-string values are ignored). */
function stringMapOf(object: unknown, field: 'labels' | 'annotations'): Record<string, string> {
  const map = metadataOf(object)[field];
  const result: Record<string, string> = {};
  if (isRecord(map)) {
    for (const [key, value] of Object.entries(map)) if (typeof value === 'string') result[key] = value;
  }
  return result;
}

/** The object's labels as a string map (non-string values are ignored). */
export function labelsOf(object: unknown): Record<string, string> {
  return stringMapOf(object, 'labels');
}

/** The object's annotations as a string map (non-string values are ignored). */
export function annotationsOf(object: unknown): Record<string, string> {
  return stringMapOf(object, 'annotations');
}

function stringField(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

export function describeObject(ref: Pick<GuardedObjectRef, 'kind' | 'namespace' | 'name'>): string {
  return `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`;
}

/**
 * The replica count at `pointer` (`fallback` when absent), or the text saying why it cannot be
 * judged: a number or a string rather than a result object, as every request reads two counts.
 */
function readReplicas(object: unknown, pointer: string, fallback: number, which: string): number | string {
  const value = valueAtPointer(object, pointer);
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_JUDGED_REPLICAS) return value;
  // Named only for a message: building it for every valid count was a visible share of a request.
  const field = `${which} ${pointer.slice(1).replace(/\//g, '.')}`;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) {
    return `${field} ${JSON.stringify(value)} is more than the ${MAX_JUDGED_REPLICAS} replicas etcd-guard judges (etcd clusters have 1 to 9 members)`;
  }
  let shown: string;
  try {
    shown = JSON.stringify(value) ?? typeof value;
  } catch {
    shown = typeof value;
  }
  return `${field} is not a non-negative integer (got ${shown.slice(0, 40)})`;
}

/**
 * The deny reason of a /scale request whose target depends on labels the Scale does not carry:
 * the server answers it by reading the parent object and classifying again.
 */
export const LABELS_UNKNOWN = 'labels-unknown';

function noTargetMessage(
  ref: GuardedObjectRef,
  result: Exclude<TargetMatchResult, { kind: 'matched' }>,
  parent: ParentLabels | undefined,
): string {
  if (result.kind === 'labels-unknown') {
    const why =
      parent?.ok === false
        ? `a /scale request carries no labels and reading the ${ref.kind} failed: ${parent.message}`
        : `a /scale request carries no labels and that target's match selects by label; ` +
          `name the object in match.namespaces and match.names`;
    return `etcd-guard cannot tell whether ${describeObject(ref)} belongs to target ${result.target.name}: ${why}`;
  }
  return `no etcd-guard target matches ${describeObject(ref)}; add a target whose match selects it`;
}

/** The pointers other than `pointer`, or null when there are none (the usual replicas-only change). */
function othersThan(pointers: readonly string[], pointer: string): string[] | null {
  let others: string[] | null = null;
  for (const each of pointers) if (each !== pointer) (others ??= []).push(each);
  return others;
}

/** The membership change (null: nothing moves), or the text saying why it cannot be judged. */
function membershipChange(
  rule: GuardRule,
  request: AdmissionRequest,
  changedPointers: readonly string[],
): MembershipChange | null | string {
  const viaScale = request.subResource === SCALE_SUBRESOURCE;
  const replicasPointer = viaScale ? SCALE_REPLICAS_POINTER : rule.replicasPointer;
  const fallback = viaScale ? SCALE_DEFAULT_REPLICAS : rule.defaultReplicas;
  const before = readReplicas(request.oldObject, replicasPointer, fallback, 'oldObject');
  if (typeof before === 'string') return before;
  const after = readReplicas(request.object, replicasPointer, fallback, 'object');
  if (typeof after === 'string') return after;
  const replicasChanged = changedPointers.includes(replicasPointer) && before !== after;
  const otherChanged = othersThan(changedPointers, replicasPointer);
  if (otherChanged !== null) {
    return {
      kind: 'rollout',
      replicas: after,
      changedPaths: otherChanged,
      ...(replicasChanged ? { previousReplicas: before } : {}),
    };
  }
  if (after === before) return null;
  if (after > before) return { kind: 'scale-up', from: before, to: after };
  return { kind: 'scale-down', from: before, to: after };
}

/** The object a /scale request scales, for the server's label read. */
export function parentObjectOf(request: AdmissionRequest): ParentObjectRef {
  return {
    group: request.resource.group,
    version: request.resource.version,
    resource: request.resource.resource,
    namespace: stringField(request.namespace) ?? '',
    name: stringField(request.name) ?? '',
  };
}

/** Whether no target is a discovered one (the usual static config): the list is then used as it is. */
function allStatic(targets: readonly Target[]): boolean {
  for (const target of targets) if (target.guards !== null) return false;
  return true;
}

/**
 * `parent`: for a /scale request, the scaled object's labels as the server read them (absent on
 * the first pass; see LABELS_UNKNOWN). Ignored for any other request, whose object carries its own.
 *
 * `targets` are the targets as of now (static and discovered; the config's static ones by
 * default). A discovered KubeadmControlPlane or Etcd belongs to its own target by identity (group,
 * kind, namespace, name), whatever its labels and also through /scale; static targets match by
 * their `match` and are never matched by a discovered target's empty one.
 */
export function classifyRequest(
  request: AdmissionRequest,
  config: GuardConfig,
  parent?: ParentLabels,
  targets: readonly Target[] = config.targets.map(staticTarget),
  fleet?: FleetView,
): Classification {
  if (request.operation === 'DELETE') return classifyDelete(request, config, parent, targets, fleet);
  if (isClusterUpdate(request)) return classifyClusterUpdate(request, config, parent, targets, fleet);
  if (isMemberStripCandidate(request)) return classifyMemberStrip(request, config, parent, targets, fleet);
  if (request.operation !== 'UPDATE') {
    return { kind: 'allow', reason: request.operation.toLowerCase() };
  }
  const rule = findGuardRule(request.resource);
  if (rule === undefined) return { kind: 'allow', reason: 'not-guarded' };
  const subResource = request.subResource ?? '';
  if (subResource !== '' && subResource !== SCALE_SUBRESOURCE) return { kind: 'allow', reason: 'not-guarded' };
  const viaScale = subResource === SCALE_SUBRESOURCE;

  const newMeta = metadataOf(request.object);
  const oldMeta = metadataOf(request.oldObject);
  const ref: GuardedObjectRef = {
    group: rule.group,
    kind: rule.kind,
    namespace: stringField(request.namespace) ?? stringField(newMeta.namespace) ?? stringField(oldMeta.namespace) ?? '',
    name: stringField(request.name) ?? stringField(newMeta.name) ?? stringField(oldMeta.name) ?? '',
    viaScale,
  };

  const own = targetGuarding(targets, ref);
  if (own !== undefined) return classifyDiscovered(rule, request, ref, own, config, targets);
  const owned = classifyOwned(rule, request, ref, config, parent, fleet);
  if (owned !== null && 'kind' in owned) return owned;
  const staticTargets = allStatic(targets) ? targets : targets.filter((target) => target.guards === null);
  let candidates: readonly TargetConfig[] = staticTargets;
  if (rule.scope === 'named-by-target' || owned !== null) {
    candidates = targetsNaming(staticTargets, ref.namespace, ref.name);
    if (candidates.length === 0) return owned?.noStaticTarget ?? { kind: 'allow', reason: 'not-guarded' };
  }

  const detected = detectGuardedChange(request.oldObject, request.object, guardedPointersFor(rule, request.subResource));
  // A /scale request carries no labels, so it cannot move the object; otherwise the old labels
  // say which target the object belongs to now and the new ones which it will belong to.
  const before = viaScale
    ? null
    : matchTarget(candidates, { namespace: ref.namespace, name: ref.name, labels: labelsOf(request.oldObject) });
  if (detected.changedPointers.length === 0) return classifyUnguardedEdit(request, candidates, ref, before);

  const byNewLabels = matchTarget(candidates, {
    namespace: ref.namespace,
    name: ref.name,
    labels: viaScale ? (parent?.ok === true ? parent.labels : null) : labelsOf(request.object),
  });
  // Leaving a target for none is judged in the stricter of that target's mode and the config's.
  const left = before?.kind === 'matched' ? before.target : undefined;
  if (byNewLabels.kind !== 'matched') return noTarget(ref, byNewLabels, parent, left);
  if (before !== null && (before.kind !== 'matched' || before.target.name !== byNewLabels.target.name)) {
    // Judging against either target could be the wrong etcd cluster's evaluation: fail closed.
    const from = before.kind === 'matched' ? `target ${before.target.name}` : 'no target';
    return {
      kind: 'deny',
      object: ref,
      target: left ?? byNewLabels.target,
      touches: left === undefined ? [] : [byNewLabels.target],
      reason: 'moves-target',
      message:
        `this change moves ${describeObject(ref)} from ${from} to target ${byNewLabels.target.name} by its labels ` +
        `while changing guarded fields, so etcd-guard cannot tell which etcd cluster to judge it against`,
    };
  }

  return judgeChange(rule, request, detected.changedPointers, byNewLabels.target, ref);
}

/**
 * An object its own discovered target guards. Its identity fields (a KCP's Cluster owner
 * references and cluster-name label, the labels discovery selects by) decide that target: changing them alone is judged against
 * the target it leaves, together with a guarded field it is denied (which etcd would judge it?).
 */
function classifyDiscovered(
  rule: GuardRule,
  request: AdmissionRequest,
  ref: GuardedObjectRef,
  own: Target,
  config: GuardConfig,
  targets: readonly Target[],
): Classification {
  const changed = detectGuardedChange(request.oldObject, request.object, guardedPointersFor(rule, request.subResource));
  const moved = !ref.viaScale && identityChanged(config, ref, request.oldObject, request.object);
  // A move is judged in the strictest mode of its own target and the static one its new labels pick.
  const touches = moved ? staticDestination(targets, ref, request.object) : [];
  if (moved && changed.changedPointers.length > 0) {
    return {
      kind: 'deny',
      object: ref,
      target: own,
      touches,
      reason: 'moves-target',
      message:
        `this change moves ${describeObject(ref)} away from target ${own.name} (its Cluster owner reference, ` +
        `cluster-name label or a label discovery selects by) while changing guarded fields, so etcd-guard cannot tell which etcd cluster to judge it against`,
    };
  }
  if (moved) return { kind: 'needs-evaluation', target: own, change: { kind: 'retarget', to: null }, object: ref, touches };
  if (changed.changedPointers.length === 0) return { kind: 'allow', reason: 'no-guarded-change' };
  return judgeChange(rule, request, changed.changedPointers, own, ref);
}

/** The static target a discovered object's new labels match (where a move out of discovery may land), as a list. */
function staticDestination(targets: readonly Target[], ref: GuardedObjectRef, object: unknown): TargetConfig[] {
  const statics = targets.filter((target) => target.guards === null);
  const match = matchTarget(statics, { namespace: ref.namespace, name: ref.name, labels: labelsOf(object) });
  return match.kind === 'matched' ? [match.target] : [];
}

/**
 * An object discovery owns but has no target for (see discovery-scope.ts): null when discovery
 * does not own it; a Classification when that settles it (an unguarded edit is allowed, which is
 * also how an owner repairs it; a guarded one denied naming why); else the static targets that may
 * judge it (only those naming it) and the denial when none does.
 */
function classifyOwned(
  rule: GuardRule,
  request: AdmissionRequest,
  ref: GuardedObjectRef,
  config: GuardConfig,
  parent: ParentLabels | undefined,
  fleet: FleetView | undefined,
): Classification | { noStaticTarget: Classification } | null {
  const labels = ref.viaScale
    ? parent?.ok === true
      ? [parent.labels]
      : null
    : [labelsOf(request.oldObject), labelsOf(request.object)];
  const ownership = discoveryOwnership(config, ref, labels, fleet);
  if (ownership.kind === 'not-owned') return null;
  if (ownership.kind === 'labels-unknown') {
    const message =
      parent?.ok === false
        ? `a /scale request carries no labels and reading the ${ref.kind} failed: ${parent.message}`
        : 'a /scale request carries no labels and discovery selects by label';
    const reason = parent === undefined ? LABELS_UNKNOWN : 'parent-unreadable';
    return { kind: 'deny', reason, message: `etcd-guard cannot tell whether discovery owns ${describeObject(ref)}: ${message}` };
  }
  const changed = detectGuardedChange(request.oldObject, request.object, guardedPointersFor(rule, request.subResource));
  if (changed.changedPointers.length === 0) return { kind: 'allow', reason: 'no-guarded-change' };
  if (ownership.kind === 'unresolved') return { kind: 'deny', reason: 'unresolved', message: ownership.message };
  return {
    noStaticTarget: {
      kind: 'deny',
      reason: 'unresolved',
      message:
        `etcd-guard's discovery leaves ${describeObject(ref)} to a static target that names it ` +
        `(match.namespaces and match.names), and none does: ${ownership.problem.message}`,
    },
  };
}

/** The membership change a guarded edit makes, to be judged against `target`'s evaluation. */
function judgeChange(
  rule: GuardRule,
  request: AdmissionRequest,
  changedPointers: readonly string[],
  target: TargetConfig,
  ref: GuardedObjectRef,
): Classification {
  const change = membershipChange(rule, request, changedPointers);
  if (typeof change === 'string') {
    return {
      kind: 'deny',
      object: ref,
      target,
      reason: 'invalid',
      message: `etcd-guard cannot judge ${describeObject(ref)}: ${change}`,
    };
  }
  // e.g. replicas written out explicitly with its default value: nothing moves.
  if (change === null) return { kind: 'allow', reason: 'no-guarded-change' };
  return { kind: 'needs-evaluation', target, change, object: ref };
}

function noTarget(
  ref: GuardedObjectRef,
  result: Exclude<TargetMatchResult, { kind: 'matched' }>,
  parent: ParentLabels | undefined,
  left?: TargetConfig,
): Classification {
  const reason = result.kind !== 'labels-unknown' ? 'no-target' : parent === undefined ? LABELS_UNKNOWN : 'parent-unreadable';
  const message = noTargetMessage(ref, result, parent);
  // No target owns the result, so the config's mode applies; the target left counts too.
  return { kind: 'deny', object: ref, reason, message, ...(left === undefined ? {} : { touches: [left] }) };
}

/**
 * An edit that changes no guarded field is allowed, unless its labels move the object away from
 * the target it belonged to (to another or to none): then the move is judged against the target it
 * leaves. An object that matched no target may be labelled into one (that is how it is onboarded).
 */
function classifyUnguardedEdit(
  request: AdmissionRequest,
  candidates: readonly TargetConfig[],
  ref: GuardedObjectRef,
  before: TargetMatchResult | null,
): Classification {
  if (before === null || before.kind !== 'matched') return { kind: 'allow', reason: 'no-guarded-change' };
  const after = matchTarget(candidates, { namespace: ref.namespace, name: ref.name, labels: labelsOf(request.object) });
  if (after.kind === 'matched' && after.target.name === before.target.name) return { kind: 'allow', reason: 'no-guarded-change' };
  return {
    kind: 'needs-evaluation',
    target: before.target,
    change: { kind: 'retarget', to: after.kind === 'matched' ? after.target.name : null },
    object: ref,
    touches: after.kind === 'matched' ? [after.target] : [],
  };
}
