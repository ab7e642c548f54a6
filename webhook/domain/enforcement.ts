// Turns the guard's conclusion into the answer the API server gets and the record it leaves. Pure.
//
// - Enforcement (per target, else the config's default): `enforce` answers a denial as a denial;
//   `warn` allows it with the denial text as admission warnings (kubectl prints each as
//   "Warning: ..."); `audit` allows it silently. The conclusion itself (decision "denied") is kept
//   for the metrics, the log, the audit annotations and the Event, so a would-be denial is counted
//   and recorded the same way in every mode.
// - Audit annotations on every decision. Keys are unprefixed: the API server puts each under the
//   webhook's name (`etcd-guard.etcd-guard.io/<key>`) and rejects keys that contain a "/".
// - The Event to record, if any (a denial, a would-be denial, an override), as data: the server's
//   recorder writes it off the response path. A dryRun request records none (no side effects).
import type { EnforcementMode, GuardConfig, TargetConfig } from '../../functions/domain/config.js';
import type { Verdict } from '../../functions/domain/evaluation-document.js';
import {
  EVENT_ACTION_ADMISSION,
  MAX_EVENT_NOTE_LENGTH,
  type EventIntent,
  type EventObjectRef,
} from '../../functions/domain/events.js';
import type { AdmissionRequest, AdmissionResponse, Decision, GuardedObjectRef } from './contract.js';
import { clip, MAX_WARNING_LENGTH, MAX_WARNINGS, oneLine } from './respond.js';
import { objectUid } from '../../functions/shared/object-uid.js';

export const AUDIT_TARGET = 'target';
export const AUDIT_VERDICT = 'verdict';
export const AUDIT_EVALUATION_AGE = 'evaluation-age-seconds';
export const AUDIT_DECISION = 'decision';
export const AUDIT_REASON = 'reason';
export const AUDIT_ENFORCEMENT = 'enforcement';
export const AUDIT_WOULD_DENY = 'would-deny';
/** The API server keeps audit annotations in every audit event: each value stays short. */
export const MAX_AUDIT_VALUE_LENGTH = 500;

export interface EnforcementInput {
  /** What the guard concluded (decide or the classification). */
  decision: Decision;
  request: AdmissionRequest;
  config: Pick<GuardConfig, 'enforcement'>;
  /** The target the request belongs to, when one does. */
  target: Pick<TargetConfig, 'name' | 'enforcement'> | null;
  /** The other targets a move between targets touches: the strictest mode of them all applies. */
  touches?: readonly Pick<TargetConfig, 'enforcement'>[] | undefined;
  /** The guarded object, when the request is about one. */
  object: GuardedObjectRef | null;
  /** The evaluation the decision was made on, and its age. */
  evaluation: { verdict: Verdict; ageSeconds: number } | null;
}

/** The answer, the record and the labels of one admission decision. */
export interface EnforcedDecision {
  response: AdmissionResponse;
  /** What the guard concluded; with a mode other than enforce a "denied" was let through. */
  decision: Decision['result'];
  reason: string;
  mode: EnforcementMode;
  /** The target's name, or "" when no target owns the request. */
  target: string;
  /** The Event to record, or null (an allow, a dryRun request, no guarded object). */
  event: EventIntent | null;
}

function metadataOf(object: unknown): Record<string, unknown> {
  if (object === null || typeof object !== 'object') return {};
  const metadata = (object as { metadata?: unknown }).metadata;
  return metadata !== null && typeof metadata === 'object' ? (metadata as Record<string, unknown>) : {};
}

/**
 * The object an Event is about, with its uid so that kubectl describe shows the Event. A /scale
 * request's Scale carries its parent's uid (the API server copies it); an UPDATE or DELETE has it
 * in oldObject, a CREATE (never recorded: always allowed) only in object. A uid that is not one
 * (shared/object-uid.ts) is left out.
 */
export function regardingOf(object: GuardedObjectRef, request: AdmissionRequest): EventObjectRef {
  const uid = objectUid(metadataOf(request.oldObject).uid) ?? objectUid(metadataOf(request.object).uid);
  const version = request.resource.version;
  return {
    apiVersion: object.group === '' ? version : `${object.group}/${version}`,
    kind: object.kind,
    namespace: object.namespace,
    name: object.name,
    ...(uid === undefined ? {} : { uid }),
  };
}

/** Cuts a text into warnings of at most MAX_WARNING_LENGTH, at spaces where it can, at most `max` of them. */
export function warningChunks(text: string, max: number = MAX_WARNINGS): string[] {
  const chunks: string[] = [];
  let rest = oneLine(text);
  while (rest !== '' && chunks.length < max) {
    if (rest.length <= MAX_WARNING_LENGTH) {
      chunks.push(rest);
      rest = '';
      break;
    }
    const space = rest.lastIndexOf(' ', MAX_WARNING_LENGTH);
    const cut = space > MAX_WARNING_LENGTH / 2 ? space : MAX_WARNING_LENGTH;
    chunks.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
  }
  if (rest !== '' && chunks.length > 0)
    chunks[chunks.length - 1] = clip(`${chunks[chunks.length - 1] ?? ''} ${rest}`, MAX_WARNING_LENGTH);
  return chunks;
}

// Assigned one by one rather than spread from literals (same keys, same order): this runs on
// every admission request.
function auditAnnotations(input: EnforcementInput, mode: EnforcementMode, denial: string | null): Record<string, string> {
  const { decision, target, evaluation } = input;
  const annotations: Record<string, string> = {
    [AUDIT_DECISION]: decision.result,
    [AUDIT_REASON]: decision.reason,
    [AUDIT_ENFORCEMENT]: mode,
  };
  if (target !== null) annotations[AUDIT_TARGET] = target.name;
  if (evaluation !== null) {
    annotations[AUDIT_VERDICT] = evaluation.verdict;
    annotations[AUDIT_EVALUATION_AGE] = String(Math.max(0, Math.round(evaluation.ageSeconds)));
  }
  if (denial !== null && mode !== 'enforce') annotations[AUDIT_WOULD_DENY] = clip(oneLine(denial), MAX_AUDIT_VALUE_LENGTH);
  // The decision's own (override user and reason) are more specific and win.
  return Object.assign(annotations, decision.response.auditAnnotations);
}

function eventFor(input: EnforcementInput, mode: EnforcementMode, denial: string | null): EventIntent | null {
  const { decision, object, request } = input;
  if (request.dryRun === true || object === null || decision.result === 'allowed') return null;
  const regarding = regardingOf(object, request);
  const user = request.userInfo.username ?? '(unknown user)';
  if (decision.result === 'overridden') {
    const overridden = (decision.response.warnings ?? []).join(' ');
    return event(regarding, 'Overridden', `change by ${user} allowed by override: ${overridden}`);
  }
  const text = denial ?? decision.reason;
  if (mode === 'enforce') return event(regarding, 'Denied', `change by ${user} denied: ${text}`);
  return event(regarding, 'WouldDeny', `change by ${user} allowed (enforcement ${mode}), would be denied: ${text}`);
}

function event(regarding: EventObjectRef, reason: string, note: string): EventIntent {
  return {
    regarding,
    type: 'Warning',
    reason,
    action: EVENT_ACTION_ADMISSION,
    note: clip(oneLine(note), MAX_EVENT_NOTE_LENGTH),
  };
}

const STRICTNESS: Readonly<Record<EnforcementMode, number>> = { audit: 0, warn: 1, enforce: 2 };

/**
 * The mode that applies: the target's (else the config's); for a move between targets the
 * strictest of every target it touches, so that leaving an `enforce` target for an `audit` one
 * (or none) is never judged in `audit`.
 */
export function enforcementMode(input: Pick<EnforcementInput, 'config' | 'target' | 'touches'>): EnforcementMode {
  let mode = input.target?.enforcement ?? input.config.enforcement;
  for (const other of input.touches ?? []) {
    const its = other.enforcement ?? input.config.enforcement;
    if (STRICTNESS[its] > STRICTNESS[mode]) mode = its;
  }
  return mode;
}

/** Applies the target's enforcement to the guard's conclusion (see the top of this file). */
export function enforce(input: EnforcementInput): EnforcedDecision {
  const { decision } = input;
  const mode = enforcementMode(input);
  const denial = decision.result === 'denied' ? (decision.response.status?.message ?? decision.reason) : null;
  const annotations = auditAnnotations(input, mode, denial);
  let response: AdmissionResponse = { ...decision.response, auditAnnotations: annotations };
  if (denial !== null && mode !== 'enforce') {
    const warnings = mode === 'warn' ? warningChunks(`etcd-guard would deny (enforcement warn): ${denial}`) : [];
    response = {
      uid: decision.response.uid,
      allowed: true,
      auditAnnotations: annotations,
      ...(warnings.length > 0 ? { warnings } : {}),
    };
  }
  return {
    response,
    decision: decision.result,
    reason: decision.reason,
    mode,
    target: input.target?.name ?? '',
    event: eventFor(input, mode, denial),
  };
}
