// The admission decision for a guarded change, given the evaluation the server found. Pure: the
// same input always gives the same decision, so dryRun requests need no special case.
//
// Order: a forbidden override attempt → deny; missing or stale evaluation → deny; projection of
// the change onto the membership (projection.ts) → allow (with warnings) or deny. A valid override
// (annotation newly set or changed in THIS request by a member of config.override.groups) turns
// any of those denials into an allow with a warning and audit annotations.
//
// Audit annotation keys are unprefixed ("override-user", "override-reason"): the API server
// prefixes each key with the webhook's name and rejects keys that already contain a "/".
import { epochMs, evaluatedAtMs, type Evaluation, type LastMembership } from '../../functions/domain/evaluation-document.js';
import { annotationsOf } from './classify.js';
import { carriedOut, describeSubject } from './cluster-topology.js';
import type { Decision, DecisionInput, GuardedChange, MemberExit } from './contract.js';
import { changesEtcd, judgeEtcdUpgrade } from './etcd-upgrade.js';
import { judgeFreshness } from './freshness.js';
import { isDowngradeReason, JOINING_REASON, projectOntoEvaluation } from './projection.js';
import { allowDecision, clip, denyDecision, MAX_WARNINGS, oneLine } from './respond.js';
import { warningChunks } from './enforcement.js';
import { describeExit, judgeMemberExit } from './member-exits.js';
import {
  effectiveChange,
  hibernationOf,
  isMemberExit,
  projectionOptionsFor,
  type Hibernation,
  type ProjectionFacts,
} from './removal.js';

const MAX_REASONS_IN_MESSAGE = 3;
/** The warning that a change was judged on cached evidence, in the API server's short warnings. */
const MAX_EVIDENCE_WARNINGS = 3;
/** The permission that lets a user override, granted like any other: `verbs: [override]` on `targets` in `etcd-guard.io`. */
export const OVERRIDE_GROUP = 'etcd-guard.io';
export const OVERRIDE_RESOURCE = 'targets';
export const OVERRIDE_VERB = 'override';
/** Stored evaluations are untrusted input: each reason is cut here (respond.ts bounds the whole). */
const MAX_REASON_LENGTH = 200;
const MAX_OVERRIDE_REASON_LENGTH = 200;

export const AUDIT_OVERRIDE_USER = 'override-user';
export const AUDIT_OVERRIDE_REASON = 'override-reason';
export const AUDIT_OVERRIDDEN_DENIAL = 'overridden-denial';
export const AUDIT_HIBERNATION_USER = 'hibernation-user';
export const AUDIT_HIBERNATION = 'hibernation';
/** A member-bearing DELETE sent by a controller named in memberDeletes.controllerUsers. */
export const AUDIT_MEMBER_DELETE_CONTROLLER = 'member-delete-controller';
/** What was judged of it when memberDeletes.exemptControllers let it through. */
export const AUDIT_MEMBER_DELETE_EXEMPT = 'member-delete-exempt';
/** How old the evaluation the decision rests on was when it was made (ms since it started). */
export const AUDIT_EVIDENCE_AGE_MS = 'evidence-age-ms';
/** `live`, `cached` (no live evaluation could run) or `failed` (a live one was due and did not come). */
export const AUDIT_EVIDENCE = 'evidence';

export function describeChange(change: GuardedChange): string {
  if (isMemberExit(change)) return describeExit(change);
  switch (change.kind) {
    case 'retarget':
      return `a change of what decides its target (moves it ${change.to === null ? 'out of this target' : `to target ${change.to}`})`;
    case 'scale-up':
    case 'scale-down':
      return `${change.kind === 'scale-up' ? 'scale up' : 'scale down'} from ${change.from} to ${change.to} replicas`;
    case 'rollout': {
      const paths = change.changedPaths.map((path) => path.slice(1).replace(/\//g, '.')).join(', ');
      const scale =
        change.previousReplicas !== undefined ? ` with replicas ${change.previousReplicas} to ${change.replicas}` : '';
      return `rollout (${paths} changed)${scale}`;
    }
  }
}

export type OverrideAttempt =
  { kind: 'none' } | { kind: 'permitted'; user: string; reason: string } | { kind: 'forbidden'; user: string; reason: string };

/**
 * A /scale request carries an autoscaling/v1 Scale, which has no annotations: an override has to
 * go through the parent object (e.g. `kubectl patch` of replicas and the annotation together).
 *
 * An override counts only when the annotation is newly set or changed by this request: a leftover
 * annotation from an earlier change must not silently wave through every later one.
 */
export function readOverride(input: Pick<DecisionInput, 'request' | 'config' | 'overrideByRbac'>): OverrideAttempt {
  const key = input.config.override.annotation;
  // A DELETE carries no new object: the annotation set on the object beforehand counts, judged
  // by who deletes it (a user allowed to override), since who set it is not known here.
  const deleting = input.request.operation === 'DELETE';
  const value = annotationsOf(deleting ? input.request.oldObject : input.request.object)[key];
  const previous = deleting ? undefined : annotationsOf(input.request.oldObject)[key];
  if (value === undefined || value.trim() === '' || value === previous) return { kind: 'none' };
  const user = input.request.userInfo.username ?? '(unknown user)';
  const reason = oneLine(value).slice(0, MAX_OVERRIDE_REASON_LENGTH);
  const groups = input.request.userInfo.groups ?? [];
  const permitted = input.overrideByRbac === true || groups.some((group) => input.config.override.groups.includes(group));
  return permitted ? { kind: 'permitted', user, reason } : { kind: 'forbidden', user, reason };
}

/** Whether the request sets an override annotation at all (then the server asks RBAC who may). */
export function attemptsOverride(input: Pick<DecisionInput, 'request' | 'config'>): boolean {
  return readOverride(input).kind !== 'none';
}

function formatAge(ms: number): string {
  return `${Math.round(ms / 1000)}s`;
}

/** Who may override: RBAC (verb override on targets.etcd-guard.io) or the configured groups. */
function whoMayOverride(input: DecisionInput): string {
  const groups = input.config.override.groups;
  const rbac = `RBAC verb ${OVERRIDE_VERB} on ${OVERRIDE_RESOURCE}.${OVERRIDE_GROUP} ${input.classification.target.name}`;
  return groups.length > 0 ? `${rbac}, or membership in ${groups.join(' or ')}` : rbac;
}

function overrideHint(input: DecisionInput): string {
  const then = input.request.operation === 'DELETE' ? ', then delete it again' : '';
  return `to override, annotate with ${input.config.override.annotation}=<reason>${then} (needs ${whoMayOverride(input)})`;
}

function deny(input: DecisionInput, reason: string, message: string): Decision {
  return denyDecision(input.request.uid, reason, message);
}

function allow(input: DecisionInput, reason: string, warnings: readonly string[]): Decision {
  // The pointer is read only when warnings are cut, which takes more than MAX_WARNINGS of them.
  const more = warnings.length > MAX_WARNINGS ? whereToSeeAll(input.classification.target?.name) : '';
  return allowDecision(input.request.uid, reason, warnings, more);
}

/** Where a reader of a shortened list finds every reason: nothing is cut without saying so. */
function whereToSeeAll(target: string | undefined): string {
  const name = target ?? '<target>';
  return `all in the evaluation, GET /evaluations/${name} or ConfigMap etcd-guard-${name}`;
}

function topReasons(reasons: readonly string[], target: string): string {
  const unique = [
    ...new Set(reasons.map((reason) => clip(oneLine(reason), MAX_REASON_LENGTH)).filter((reason) => reason !== '')),
  ];
  const shown = unique.slice(0, MAX_REASONS_IN_MESSAGE).join('; ');
  const more = unique.length - MAX_REASONS_IN_MESSAGE;
  return more > 0 ? `${shown} (+${more} more: ${whereToSeeAll(target)})` : shown;
}

type Judgement = { allowed: true; reason: string; warnings: string[] } | { allowed: false; reason: string; message: string };

/** The evaluation and its age when it is fresh enough to judge by, or the denial saying why not. */
function freshEvaluation(
  input: DecisionInput,
): { evaluation: Evaluation; ageMs: number } | Extract<Judgement, { allowed: false }> {
  const { evidence } = input;
  if (evidence?.kind === 'failed') {
    const target = input.classification.target.name;
    return { allowed: false, reason: 'no-live-evaluation', message: `no fresh etcd evaluation for ${target} (${evidence.why})` };
  }
  const freshness = judgeFreshness(input.evaluation, input.now, input.config.maxAgeSeconds);
  if (freshness.fresh) return freshness;
  const why = input.refreshNote ?? (evidence?.kind === 'cached' ? evidence.why : undefined);
  const note = why ? `; ${why}` : '';
  return {
    allowed: false,
    reason: freshness.reason,
    message: `no fresh etcd evaluation for ${input.classification.target.name} (${freshness.why})${note}`,
  };
}

function deniedMessage(input: DecisionInput, evaluation: Evaluation, ageMs: number, reasons: readonly string[]): string {
  const { classification } = input;
  return (
    `etcd-guard denied ${describeChange(classification.change)} of ${describeSubject(classification)}: ` +
    `target ${classification.target.name} verdict ${evaluation.verdict}, evaluated ${formatAge(ageMs)} ago: ${topReasons(reasons, classification.target.name)}`
  );
}

/** A Degraded evaluation's reasons, as warnings naming the target; none for any other verdict. */
function degradedWarnings(evaluation: Evaluation, target: string): string[] {
  return evaluation.verdict === 'Degraded' ? evaluation.reasons.map((reason) => `etcd ${target}: ${reason}`) : [];
}

/** A member-bearing DELETE (member-exits.ts): its own reasons, naming the member, lead the denial. */
function judgeExit(input: DecisionInput, change: MemberExit, evaluation: Evaluation, ageMs: number): Judgement {
  const target = input.classification.target.name;
  const exit = judgeMemberExit(evaluation, change, input.classification.object, target);
  if (exit.allowed) {
    return { allowed: true, reason: exit.reason, warnings: [...exit.warnings, ...degradedWarnings(evaluation, target)] };
  }
  const message = deniedMessage(input, evaluation, ageMs, [...exit.reasons, ...evaluation.reasons]);
  return { allowed: false, reason: exit.reason, message: `${message}; ${exit.hint}` };
}

function judge(original: DecisionInput): Judgement {
  // A Cluster's topology change is projected as its KCP carries it out (cluster-topology.ts).
  const carried = carriedOut(original.classification, original.request);
  const change = effectiveChange(carried.classification, carried.request);
  // e.g. only KCP's rollout strategy changed: no member moves, nothing to judge.
  if (change === null) return { allowed: true, reason: 'no-membership-change', warnings: [] };
  // Copied only when the kind changed what moves (the usual change is judged as it came).
  const input: DecisionInput =
    change === original.classification.change
      ? original
      : { ...original, classification: { ...original.classification, change } };
  const fresh = freshEvaluation(input);
  if (!('evaluation' in fresh)) return fresh;
  const { evaluation, ageMs } = fresh;
  const target = input.classification.target.name;
  if (isMemberExit(change)) return judgeExit(input, change, evaluation, ageMs);
  if (change.kind === 'retarget') {
    // Leaving a target must not dodge its verdict: the target left has to be fit for changes.
    if (evaluation.verdict !== 'Unhealthy')
      return { allowed: true, reason: evaluation.verdict.toLowerCase(), warnings: degradedWarnings(evaluation, target) };
    return { allowed: false, reason: 'unhealthy', message: deniedMessage(input, evaluation, ageMs, evaluation.reasons) };
  }
  const facts: ProjectionFacts = {
    classification: { ...carried.classification, change },
    request: carried.request,
    evaluation,
  };
  if (input.machines !== undefined) facts.machines = input.machines;
  if (input.parent !== undefined) facts.parent = input.parent;
  const options = projectionOptionsFor(facts);
  const projection = projectOntoEvaluation(evaluation, change, options);
  if (!projection.allowed) {
    // The evaluation's own reasons name the sick member, so they lead when etcd itself is Unhealthy;
    // otherwise (a healthy cluster asked to shrink too far) the projection's reasons say why.
    const failing =
      evaluation.verdict === 'Unhealthy'
        ? [...evaluation.reasons, ...projection.reasons]
        : [...projection.reasons, ...evaluation.reasons];
    const joining = projection.reasons.includes(JOINING_REASON);
    const downgrading = projection.reasons.some(isDowngradeReason);
    return {
      allowed: false,
      reason:
        evaluation.verdict === 'Unhealthy' ? 'unhealthy' : joining ? 'member-joining' : downgrading ? 'etcd-downgrade' : 'quorum',
      message: deniedMessage(input, evaluation, ageMs, failing) + (projection.hint === undefined ? '' : `; ${projection.hint}`),
    };
  }
  // The rules below judge the change as carried out (a Cluster's topology as its KCP's).
  const asCarried: DecisionInput = { ...input, classification: facts.classification, request: carried.request };
  const upgradeBlocked = judgeEtcdUpgrade(asCarried, evaluation);
  if (upgradeBlocked !== null) return heldBack(input, evaluation, ageMs, 'etcd-upgrade', upgradeBlocked);
  const backupBlocked = judgeBackupRule(asCarried, evaluation);
  if (backupBlocked !== null) return heldBack(input, evaluation, ageMs, 'backup', backupBlocked);
  const warnings = projection.warnings;
  if (evaluation.verdict === 'Degraded') warnings.push(...degradedWarnings(evaluation, target));
  warnings.push(...defragFirst(asCarried, evaluation));
  return { allowed: true, reason: evaluation.verdict.toLowerCase(), warnings };
}

/**
 * An etcd upgrade of a target whose fragmentation check warns: allowed (a fragmented DB serves),
 * with the advice to defragment first, one warning per member its check names (a warning is cut
 * at MAX_WARNING_LENGTH, so the command leads). A rollout restarts every member in turn; before
 * it, the members reload smaller files and the quota has its headroom back. The URLs come from a
 * stored document, untrusted: only URL characters are taken.
 */
function defragFirst(input: DecisionInput, evaluation: Evaluation): string[] {
  if (!changesEtcd(input)) return [];
  const check = evaluation.checks.find((candidate) => candidate.name === 'fragmentation');
  if (check?.status !== 'warn') return [];
  const urls = [...check.message.matchAll(/etcdctl defrag --endpoints=(https?:\/\/[A-Za-z0-9.:[\]_-]{1,200})/g)].map(
    (match) => match[1] ?? '',
  );
  return [...new Set(urls)].map((url) => `etcd-guard: before this etcd upgrade, defragment: etcdctl defrag --endpoints=${url}`);
}

/** A change the projection allows but a rule of the target holds back, with that rule's words. */
function heldBack(input: DecisionInput, evaluation: Evaluation, ageMs: number, reason: string, why: string): Judgement {
  const { classification } = input;
  const message =
    `etcd-guard denied ${describeChange(classification.change)} of ${describeSubject(classification)}: ` +
    `target ${classification.target.name} (verdict ${evaluation.verdict}, evaluated ${formatAge(ageMs)} ago): ${why}`;
  return { allowed: false, reason, message };
}

/**
 * The target's backup.requiredForChanges: a membership change (scale up or down) or an etcd
 * upgrade (a rollout that changes the etcd it runs) needs its backup check to pass. Null when the
 * rule is off or does not apply, else why the change waits. A druid hibernation rides its own
 * exception before this (no member changes its data there).
 */
function judgeBackupRule(input: DecisionInput, evaluation: Evaluation): string | null {
  if (input.classification.target.backup?.requiredForChanges !== true) return null;
  const change = input.classification.change;
  const membership = change.kind === 'scale-up' || change.kind === 'scale-down';
  if (!membership && !changesEtcd(input)) return null;
  const check = evaluation.checks.find((candidate) => candidate.name === 'backup');
  if (check?.status === 'pass') return null;
  const what = membership ? 'a membership change' : 'an etcd upgrade';
  const state =
    check === undefined
      ? 'the evaluation has no backup check (it is judged for druid targets only)'
      : `backup check ${check.status}: ${clip(oneLine(check.message), MAX_REASON_LENGTH)}`;
  return `${state}; backup.requiredForChanges holds back ${what} until the backup check passes`;
}

/**
 * etcd-druid hibernation: Gardener scales an Etcd to 0 and back, which druid's CRD allows. At 0 no
 * member runs, so no evaluation can pass; waking up from 0 starts every member afresh, which is
 * safe only at the size the members last had (fewer could not form its quorum). Allowed whatever
 * the verdict, said in a warning and the audit log with the user (hibernationOf says when).
 */
function allowHibernation(input: DecisionInput, hibernation: Hibernation): Decision {
  const user = input.request.userInfo.username ?? '(unknown user)';
  const { what, from, to, lastMembership } = hibernation;
  const warnings = [`etcd-guard: ${what} ${from} to ${to} replicas allowed whatever the etcd verdict (by ${user})`];
  if (lastMembership !== undefined) {
    warnings.push(`etcd-guard: ${to} is the voting size the evaluation of ${lastMembership.evaluatedAt} saw`);
  }
  const decision = allow(input, what, warnings);
  decision.response.auditAnnotations = {
    [AUDIT_HIBERNATION_USER]: user,
    [AUDIT_HIBERNATION]: `${what}: ${from} to ${to} replicas`,
  };
  return decision;
}

/** The voting size the target's fresh evaluation remembers; unknown without one (a wake-up is then judged). */
function rememberedMembership(input: DecisionInput): LastMembership | undefined {
  const { evaluation } = input;
  if (evaluation?.lastMembership === undefined) return undefined;
  return judgeFreshness(evaluation, input.now, input.config.maxAgeSeconds).fresh ? evaluation.lastMembership : undefined;
}

/**
 * Every decision on an evaluation says what it rested on in its audit annotations, and an allow
 * on cached evidence (no live evaluation could run) says so in a warning with its age: a change
 * judged on what etcd said a while ago is never let through silently.
 */
function withEvidence(input: DecisionInput, decision: Decision): Decision {
  const { evaluation } = input;
  const evidence = input.evidence ?? { kind: 'live' };
  const annotations: Record<string, string> = { [AUDIT_EVIDENCE]: evidence.kind };
  if (evaluation !== null) {
    const ageMs = Math.max(0, Math.round(epochMs(input.now) - evaluatedAtMs(evaluation.evaluatedAt)));
    if (Number.isFinite(ageMs)) annotations[AUDIT_EVIDENCE_AGE_MS] = String(ageMs);
    if (evidence.kind === 'cached' && decision.response.allowed) {
      const said = warningChunks(
        `etcd-guard: decided on the cached evaluation of ${input.classification.target.name}, ${formatAge(ageMs)} old ` +
          `(${ageMs} ms), not on a live one (at most ${evidence.decisionMaxAgeMs} ms old): ${evidence.why}`,
        MAX_EVIDENCE_WARNINGS,
      );
      const others = decision.response.warnings ?? [];
      // The last of a full list says how many were cut; the age warning takes room before it.
      const kept =
        others.length + said.length > MAX_WARNINGS
          ? [...others.slice(0, MAX_WARNINGS - said.length - 1), ...others.slice(-1)]
          : others;
      decision.response.warnings = [...said, ...kept];
    }
  }
  decision.response.auditAnnotations = { ...annotations, ...decision.response.auditAnnotations };
  return decision;
}

export function decide(input: DecisionInput): Decision {
  return withEvidence(input, byController(input, decideOnEvaluation(input)));
}

/** The controller (memberDeletes.controllerUsers) that sends a member-bearing DELETE, or null. */
function deletingController(input: DecisionInput): string | null {
  if (!isMemberExit(input.classification.change)) return null;
  const user = input.request.userInfo.username;
  return user !== undefined && input.config.memberDeletes.controllerUsers.includes(user) ? user : null;
}

/**
 * A member-bearing DELETE by a controller (KCP deleting its own Machines) is judged like anyone's
 * and audited as the controller's; with memberDeletes.exemptControllers its denial becomes an
 * allow that says and audits what was judged.
 */
function byController(input: DecisionInput, decision: Decision): Decision {
  const controller = deletingController(input);
  if (controller === null) return decision;
  if (decision.response.allowed || !input.config.memberDeletes.exemptControllers) {
    decision.response.auditAnnotations = { ...decision.response.auditAnnotations, [AUDIT_MEMBER_DELETE_CONTROLLER]: controller };
    return decision;
  }
  const judged = oneLine(decision.response.status?.message ?? decision.reason);
  const exempt = allow(input, 'exempt-controller', [
    `etcd-guard: memberDeletes.exemptControllers lets ${controller} through`,
    `exempt: ${judged}`,
  ]);
  exempt.response.auditAnnotations = {
    [AUDIT_MEMBER_DELETE_CONTROLLER]: controller,
    [AUDIT_MEMBER_DELETE_EXEMPT]: judged.slice(0, 500),
  };
  return exempt;
}

function decideOnEvaluation(input: DecisionInput): Decision {
  const override = readOverride(input);
  if (override.kind === 'forbidden') {
    return deny(
      input,
      'forbidden-override',
      `etcd-guard: user ${override.user} is not allowed to override (annotation ${input.config.override.annotation} ` +
        `needs ${whoMayOverride(input)}); remove the annotation`,
    );
  }
  const hibernation = hibernationOf(input.classification, rememberedMembership(input));
  if (hibernation !== null) return allowHibernation(input, hibernation);
  const judgement = judge(input);
  if (judgement.allowed) return allow(input, judgement.reason, judgement.warnings);
  if (override.kind === 'permitted') {
    const decision = allow(input, 'override', [
      `etcd-guard override by ${override.user}: ${override.reason}`,
      `overridden: ${judgement.message}`,
    ]);
    decision.result = 'overridden';
    decision.response.auditAnnotations = {
      [AUDIT_OVERRIDE_USER]: override.user,
      [AUDIT_OVERRIDE_REASON]: override.reason,
      [AUDIT_OVERRIDDEN_DENIAL]: oneLine(judgement.message).slice(0, 500),
    };
    return decision;
  }
  return deny(input, judgement.reason, `${judgement.message}; ${overrideHint(input)}`);
}
