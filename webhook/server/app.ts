// The webhook's express app: HTTP in, the pure core (webhook/domain/*) for every decision, metrics
// and one log line out. Fails closed: anything that goes wrong on a request whose uid is known
// becomes a denial, never an allow and never a crash.
import express, { type NextFunction, type Request, type Response } from 'express';
import type http from 'node:http';
import { performance } from 'node:perf_hooks';
import { decisionMaxAgeMsOf, decisionModeOf, type GuardConfig, type TargetConfig } from '../../functions/domain/config.js';
import { evaluationAgeMs, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { Deadline, withTimeout } from '../../functions/domain/deadline.js';
import type { MachineReader } from '../../functions/adapters/capi-machines.js';
import type { AccessReviewer } from '../../functions/adapters/kube-access-review.js';
import {
  StarvedEvaluationError,
  type OnDemandRequest,
  type OnDemandResponse,
} from '../../functions/usecases/on-demand-service.js';
import { OverloadError } from '../../functions/usecases/run-slots.js';
import { parseGoDurationMs } from '../../functions/shared/duration.js';
import { staticTarget, targetOverview, type FleetView, type Target } from '../../functions/domain/targets.js';
import { addsMember } from '../../functions/domain/kinds/kind.js';
import type { EvaluationCache } from './cache.js';
import { classifyRequest, LABELS_UNKNOWN, parentObjectOf } from '../domain/classify.js';
import { carriedOut } from '../domain/cluster-topology.js';
import type {
  AdmissionRequest,
  AdmissionResponse,
  AdmissionReviewRequest,
  AdmissionReviewResponse,
  Classification,
  Decision,
  DecisionInput,
  ParentLabels,
  ParentObjectRef,
} from '../domain/contract.js';
import { attemptsOverride, decide, OVERRIDE_GROUP, OVERRIDE_RESOURCE, OVERRIDE_VERB } from '../domain/decide.js';
import { enforce, type EnforcedDecision, type EnforcementInput } from '../domain/enforcement.js';
import type { EventIntent } from '../../functions/domain/events.js';
import { chooseEvaluation, type Evidence } from '../domain/freshness.js';
import { classificationDecision, failClosedResponse } from '../domain/respond.js';
import {
  clusterNameOf,
  machineOwnerOf,
  needsMachines,
  parentPointersFor,
  type MachinesRead,
  type ParentRead,
} from '../domain/removal.js';
import type { ParentReader } from './parent-labels.js';
import { buildAdmissionReviewResponse, parseAdmissionReview } from '../domain/review.js';
import { flatLineLogger, type Logger } from '../../functions/shared/logger.js';
import type { WebhookMetrics } from './metrics.js';
import { sendJson } from './send-json.js';
import { addRuntimeExtensionRoutes } from './runtime-extension.js';
import { APISERVER_QUERY, VALIDATE_PATH, withFastValidate, type FastValidateParts } from './fast-validate.js';

/** kube-apiserver's default webhook timeout, used when a request carries no ?timeout=. */
export const DEFAULT_APISERVER_TIMEOUT_MS = 10_000;
/** The longest timeout kube-apiserver allows a webhook (timeoutSeconds ≤ 30); a larger ?timeout= is clamped. */
export const MAX_APISERVER_TIMEOUT_MS = 30_000;
export const BODY_LIMIT_BYTES = 3 * 1024 * 1024;
/** The Machines read gets at most this long, and must leave the margin below to the apiserver. */
export const MACHINES_READ_TIMEOUT_MS = 2_000;
const MACHINES_READ_MARGIN_MS = 500;

/** The core functions the app calls; injectable so tests can make one of them throw. */
export interface WebhookCore {
  parseAdmissionReview(body: unknown): { ok: true; review: AdmissionReviewRequest } | { ok: false; message: string };
  classifyRequest(
    request: AdmissionRequest,
    config: GuardConfig,
    parent?: ParentLabels,
    targets?: readonly Target[],
    fleet?: FleetView,
  ): Classification;
  decide(input: DecisionInput): Decision;
  enforce(input: EnforcementInput): EnforcedDecision;
  buildAdmissionReviewResponse(response: AdmissionResponse): AdmissionReviewResponse;
}

export interface OnDemandService {
  authorize(authorizationHeader?: string): boolean;
  refresh(targetName: string): Promise<Evaluation>;
  /** `addsMember`: the change seeds a new member (consistency.scaleUps hashes then). */
  evaluateForAdmission(
    targetName: string,
    options: { persist: boolean; notBeforeMs?: number; addsMember?: boolean },
  ): Promise<Evaluation>;
  handle(request: OnDemandRequest): Promise<OnDemandResponse>;
}

export type CacheView = Pick<EvaluationCache, 'get' | 'put' | 'ready' | 'targets' | 'evaluatedAt'>;

export interface WebhookAppDeps {
  config: GuardConfig;
  cache: CacheView;
  onDemand: OnDemandService;
  metrics: WebhookMetrics;
  logger: Logger;
  now?: () => Date;
  core?: Partial<WebhookCore>;
  /**
   * Reads the labels of the object a /scale request scales (bounded by its own deadline, never
   * throws). Without it such a request is denied when a target matches by labels.
   */
  parentLabels?: (ref: ParentObjectRef) => Promise<ParentLabels>;
  /**
   * Reads the object a /scale shrink scales when its kind's removal order needs its fields (a
   * StatefulSet's spec.ordinals; never throws); absent: the projection assumes the worst case.
   */
  readParent?: ParentReader['object'];
  /** Reads a KCP's Machines (which member KCP removes); absent: the projection assumes the worst case. */
  readMachines?: MachineReader;
  /** The targets as of now (static and discovered); the config's static targets by default. */
  targets?: () => readonly Target[];
  /**
   * Takes the Event a decision asks for, after the answer is sent. Must return at once and never
   * throw: the recorder queues, deduplicates and writes on its own time (EventRecorder).
   */
  recordEvent?: (event: EventIntent) => void;
  /** What discovery listed and could not resolve (with discovery configured; see classifyRequest). */
  fleet?: () => FleetView;
  /** Asks the API server (SubjectAccessReview) whether a user may override; absent: only override.groups count. */
  reviewAccess?: AccessReviewer;
}

/** The apiserver's total budget for this call, from ?timeout= or the Kubernetes default. */
export function apiserverTimeoutMs(query: unknown): number {
  const raw = typeof query === 'string' ? query : Array.isArray(query) && typeof query[0] === 'string' ? query[0] : undefined;
  if (raw === undefined) return DEFAULT_APISERVER_TIMEOUT_MS;
  const parsed = parseGoDurationMs(raw);
  if (parsed === null || parsed <= 0) return DEFAULT_APISERVER_TIMEOUT_MS;
  // "720h" would overflow setTimeout (2^31 ms) and fire at once; no apiserver waits that long anyway.
  return Math.min(parsed, MAX_APISERVER_TIMEOUT_MS);
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function shorten(text: string, max = 200): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

/** The uid of a body the core could not handle, when it plainly has one, so the error can deny it. */
function uidOf(body: unknown): string | null {
  if (body === null || typeof body !== 'object') return null;
  const request = (body as { request?: unknown }).request;
  if (request === null || typeof request !== 'object') return null;
  const uid = (request as { uid?: unknown }).uid;
  return typeof uid === 'string' && uid.length > 0 && uid.length <= 256 ? uid : null;
}

/** The deps with their defaults filled in: what every handler below is built from. */
interface AppContext {
  readonly config: GuardConfig;
  readonly cache: CacheView;
  readonly onDemand: OnDemandService;
  readonly metrics: WebhookMetrics;
  readonly logger: Logger;
  /** For the one decision line per request: its fields are written out in logDecision, all flat. */
  readonly decisionLogger: Logger;
  readonly now: () => Date;
  readonly core: WebhookCore;
  readonly targets: () => readonly Target[];
  readonly fleet: WebhookAppDeps['fleet'];
  readonly parentLabels: WebhookAppDeps['parentLabels'];
  readonly readMachines: WebhookAppDeps['readMachines'];
  readonly readParent: WebhookAppDeps['readParent'];
  readonly recordEvent: WebhookAppDeps['recordEvent'];
  readonly reviewAccess: WebhookAppDeps['reviewAccess'];
}

function appContext(deps: WebhookAppDeps): AppContext {
  const core: WebhookCore = {
    parseAdmissionReview,
    classifyRequest,
    decide,
    enforce,
    buildAdmissionReviewResponse,
    ...deps.core,
  };
  const staticOnly = deps.config.targets.map(staticTarget);
  return {
    config: deps.config,
    cache: deps.cache,
    onDemand: deps.onDemand,
    metrics: deps.metrics,
    logger: deps.logger,
    decisionLogger: flatLineLogger(deps.logger),
    now: deps.now ?? (() => new Date()),
    core,
    targets: deps.targets ?? (() => staticOnly),
    fleet: deps.fleet,
    parentLabels: deps.parentLabels,
    readMachines: deps.readMachines,
    readParent: deps.readParent,
    recordEvent: deps.recordEvent,
    reviewAccess: deps.reviewAccess,
  };
}

/**
 * A step that answers at once when it needs no I/O, else a promise: the cached allow then runs
 * from parse to answer without a promise or a microtask per step.
 */
type Sync<T> = T | Promise<T>;

type EvaluationPick = { evaluation: Evaluation | null; evidence: Evidence; refreshNote?: string };

/**
 * The I/O side of the core's chooseEvaluation: the live evaluation it asks for, and its metrics.
 * `arrivedAtMs` is the wall-clock time the request arrived, which bounds the evidence.
 */
function evaluationFor(
  ctx: AppContext,
  target: TargetConfig,
  startedAt: number,
  budgetMs: number,
  request: { dryRun: boolean; addsMember: boolean },
): Sync<EvaluationPick> {
  const { cache, config, metrics } = ctx;
  const cached = cache.get(target.name);
  const nowMs = ctx.now().getTime();
  const elapsedMs = performance.now() - startedAt;
  const decisionMaxAgeMs = decisionMaxAgeMsOf(config, target);
  const choice = chooseEvaluation({
    cached,
    arrivedAtMs: nowMs - elapsedMs,
    nowMs,
    decisionMaxAgeMs,
    decision: decisionModeOf(config, target),
    remainingMs: budgetMs - elapsedMs,
    evaluationTimeoutMs: target.timeout,
  });
  if (choice.kind === 'use') {
    if (choice.skippedRefresh) metrics.recordInlineRefresh(target.name, 'skipped');
    return choice;
  }
  return refreshInline(
    ctx,
    target,
    { cached, timeoutMs: choice.timeoutMs, notBeforeMs: choice.notBeforeMs, decisionMaxAgeMs },
    request,
  );
}

async function refreshInline(
  ctx: AppContext,
  target: TargetConfig,
  due: { cached: Evaluation | null; timeoutMs: number; notBeforeMs: number; decisionMaxAgeMs: number },
  { dryRun, addsMember: adds }: { dryRun: boolean; addsMember: boolean },
): Promise<EvaluationPick> {
  const { cache, metrics } = ctx;
  try {
    // A dryRun request gets the same decision but must cause no side effect: nothing is stored.
    // The evaluation has its own deadlines; this one guarantees the answer still reaches the apiserver.
    const fresh = await withTimeout(
      ctx.onDemand.evaluateForAdmission(target.name, { persist: !dryRun, notBeforeMs: due.notBeforeMs, addsMember: adds }),
      due.timeoutMs,
      `live evaluation of ${target.name}`,
    );
    cache.put(fresh);
    metrics.recordInlineRefresh(target.name, 'success');
    return { evaluation: fresh, evidence: { kind: 'live' } };
  } catch (error) {
    metrics.recordInlineRefresh(target.name, 'error');
    const why = shorten(errorMessage(error));
    ctx.logger.warn({ target: target.name, err: why }, 'live evaluation failed');
    // A run that never got a slot saw nothing: the cached evaluation may decide, saying so. Any
    // other failure (a run that timed out, or ran starved) may have met the fault itself, and
    // nothing older stands in for it.
    if (error instanceof OverloadError && !(error instanceof StarvedEvaluationError)) {
      const note = `no live evaluation: ${why}`;
      return {
        evaluation: due.cached,
        evidence: { kind: 'cached', why: note, decisionMaxAgeMs: due.decisionMaxAgeMs },
        refreshNote: note,
      };
    }
    return { evaluation: null, evidence: { kind: 'failed', why: `live evaluation failed: ${why}` } };
  }
}

/**
 * A Scale carries no labels: when the target depends on them, read the parent's and classify
 * again. A member-bearing DELETE names the owner to read instead (member-exits.ts).
 */
function classify(ctx: AppContext, request: AdmissionRequest): Sync<Classification> {
  const targets = ctx.targets();
  const fleet = ctx.fleet?.();
  const first = ctx.core.classifyRequest(request, ctx.config, undefined, targets, fleet);
  const { parentLabels } = ctx;
  if (first.kind !== 'deny' || first.reason !== LABELS_UNKNOWN || parentLabels === undefined) return first;
  return parentLabels(first.parent ?? parentObjectOf(request)).then((parent) =>
    ctx.core.classifyRequest(request, ctx.config, parent, targets, fleet),
  );
}

type NeedsEvaluation = Extract<Classification, { kind: 'needs-evaluation' }>;

/** `call()`'s promise, or a rejected one when it throws before returning one. */
function settled<T>(call: () => Promise<T>): Promise<T> {
  try {
    return call();
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}

/** What a read the decision waits for may take: its own bound, leaving the margin to the apiserver's budget. */
function readTimeoutMs(startedAt: number, budgetMs: number): number {
  return Math.min(MACHINES_READ_TIMEOUT_MS, budgetMs - (performance.now() - startedAt) - MACHINES_READ_MARGIN_MS);
}

/** The guarded KCP's Machines when they decide which member leaves; a failure is reported, not thrown. */
function readMachinesFor(
  ctx: AppContext,
  classification: NeedsEvaluation,
  request: AdmissionRequest,
  startedAt: number,
  budgetMs: number,
): Sync<MachinesRead | undefined> {
  const { readMachines } = ctx;
  // A Cluster's topology change: the Machines of the KCP that carries it out.
  const carried = carriedOut(classification, request);
  const guarded = carried.classification;
  if (readMachines === undefined || !needsMachines(guarded)) return undefined;
  const timeoutMs = readTimeoutMs(startedAt, budgetMs);
  if (timeoutMs <= 0) return { ok: false, error: 'no time left in the apiserver budget to read them' };
  const query = {
    namespace: guarded.object.namespace,
    controlPlaneName: guarded.object.name,
    clusterName: clusterNameOf(guarded, carried.request.object) ?? clusterNameOf(guarded, carried.request.oldObject),
    ...machineOwnerOf(guarded),
  };
  return settled(() => readMachines(query, Deadline.after(Math.round(timeoutMs)))).then(
    (listing): MachinesRead => ({ ok: true, ...listing }),
    (error: unknown): MachinesRead => {
      ctx.logger.warn(
        { object: `${query.namespace}/${query.controlPlaneName}`, err: errorMessage(error) },
        'reading Machines failed',
      );
      return { ok: false, error: shorten(errorMessage(error)) };
    },
  );
}

/**
 * A /scale shrink's parent object when its kind's removal order reads it (a StatefulSet's
 * spec.ordinals), the Scale's own revision if the cache holds it; a failure is reported, not thrown.
 */
function readParentFor(
  ctx: AppContext,
  classification: NeedsEvaluation,
  request: AdmissionRequest,
  startedAt: number,
  budgetMs: number,
): Sync<ParentRead | undefined> {
  const { readParent } = ctx;
  if (readParent === undefined || parentPointersFor(classification) === null) return undefined;
  const timeoutMs = readTimeoutMs(startedAt, budgetMs);
  if (timeoutMs <= 0) return { ok: false, error: 'no time left in the apiserver budget to read it' };
  const revision = (request.oldObject as { metadata?: { resourceVersion?: unknown } } | undefined)?.metadata?.resourceVersion;
  return settled(() =>
    readParent(parentObjectOf(request), {
      timeoutMs: Math.round(timeoutMs),
      ...(typeof revision === 'string' ? { resourceVersion: revision } : {}),
    }),
  ).then(
    (read) => {
      if (!read.ok)
        ctx.logger.warn(
          { object: `${request.namespace ?? ''}/${request.name ?? ''}`, err: read.error },
          'reading the scaled object failed',
        );
      return read.ok ? read : { ok: false, error: shorten(read.error) };
    },
    (error: unknown): ParentRead => ({ ok: false, error: shorten(errorMessage(error)) }),
  );
}

/** What decides which member leaves, read only where it does: a KCP's Machines, a /scale shrink's parent. */
function removalReads(
  ctx: AppContext,
  classification: NeedsEvaluation,
  request: AdmissionRequest,
  startedAt: number,
  budgetMs: number,
): Sync<{ machines?: MachinesRead; parent?: ParentRead }> {
  const machines = readMachinesFor(ctx, classification, request, startedAt, budgetMs);
  const parent = readParentFor(ctx, classification, request, startedAt, budgetMs);
  if (!(machines instanceof Promise) && !(parent instanceof Promise)) {
    return { ...(machines === undefined ? {} : { machines }), ...(parent === undefined ? {} : { parent }) };
  }
  return Promise.all([machines, parent]).then(([readMachines, readParent]) => ({
    ...(readMachines === undefined ? {} : { machines: readMachines }),
    ...(readParent === undefined ? {} : { parent: readParent }),
  }));
}

/**
 * Whether RBAC lets the user override (verb override on targets.etcd-guard.io, named after the
 * target), asked only when the request sets the override annotation and the user's groups alone do
 * not allow it. A failed or late review counts as no answer: the groups list decides.
 */
function overrideByRbac(
  ctx: AppContext,
  classification: NeedsEvaluation,
  request: AdmissionRequest,
  startedAt: number,
  budgetMs: number,
): Sync<boolean | undefined> {
  const { override } = ctx.config;
  const { reviewAccess } = ctx;
  const { username, uid, groups = [], extra } = request.userInfo;
  if (reviewAccess === undefined || !override.subjectAccessReview || username === undefined) return undefined;
  if (!attemptsOverride({ request, config: ctx.config })) return undefined;
  if (groups.some((group) => override.groups.includes(group))) return undefined;
  const timeoutMs = Math.min(override.reviewTimeout, budgetMs - (performance.now() - startedAt) - MACHINES_READ_MARGIN_MS);
  if (timeoutMs <= 0) return undefined;
  const question = {
    user: username,
    groups,
    ...(uid === undefined ? {} : { uid }),
    ...(extra === undefined ? {} : { extra }),
    verb: OVERRIDE_VERB,
    group: OVERRIDE_GROUP,
    resource: OVERRIDE_RESOURCE,
    name: classification.target.name,
    // Cluster-scoped unless configured: a tenant's namespaced Role (even `*` on `*`) grants nothing.
    ...(override.namespaced && classification.object.namespace !== '' ? { namespace: classification.object.namespace } : {}),
  };
  return settled(() => reviewAccess(question, Deadline.after(Math.round(timeoutMs)))).catch((error: unknown) => {
    ctx.logger.warn(
      { user: username, err: errorMessage(error) },
      'SubjectAccessReview for an override failed; override.groups decide',
    );
    return undefined;
  });
}

interface DecisionOutcome {
  enforced: EnforcedDecision;
  ageSeconds?: number;
}

/** Classifies the request and, for a guarded object, decides on its target's evaluation. */
function decideRequest(ctx: AppContext, request: AdmissionRequest, startedAt: number, budgetMs: number): Sync<DecisionOutcome> {
  const classification = classify(ctx, request);
  if (classification instanceof Promise) {
    return classification.then((classified) => decideClassified(ctx, request, classified, startedAt, budgetMs));
  }
  return decideClassified(ctx, request, classification, startedAt, budgetMs);
}

function decideClassified(
  ctx: AppContext,
  request: AdmissionRequest,
  classification: Classification,
  startedAt: number,
  budgetMs: number,
): Sync<DecisionOutcome> {
  if (classification.kind !== 'needs-evaluation') {
    const denial = classification.kind === 'deny' ? classification : null;
    const enforced = ctx.core.enforce({
      decision: classificationDecision(request.uid, classification),
      request,
      config: ctx.config,
      target: denial?.target ?? null,
      touches: denial?.touches,
      object: denial?.object ?? null,
      evaluation: null,
    });
    return { enforced };
  }
  const choice = evaluationFor(ctx, classification.target, startedAt, budgetMs, {
    dryRun: request.dryRun === true,
    addsMember: addsMember(classification.change),
  });
  if (choice instanceof Promise) {
    return choice.then((chosen) => gatherAndJudge(ctx, request, classification, chosen, startedAt, budgetMs));
  }
  return gatherAndJudge(ctx, request, classification, choice, startedAt, budgetMs);
}

/** The evaluation's age, then the removal reads, then the RBAC answer (each only when needed), then the decision. */
function gatherAndJudge(
  ctx: AppContext,
  request: AdmissionRequest,
  classification: NeedsEvaluation,
  choice: EvaluationPick,
  startedAt: number,
  budgetMs: number,
): Sync<DecisionOutcome> {
  const ageMs = choice.evaluation ? evaluationAgeMs(choice.evaluation, ctx.now()) : undefined;
  const facts = { request, classification, choice, ageMs };
  const reads = removalReads(ctx, classification, request, startedAt, budgetMs);
  if (reads instanceof Promise) {
    return reads.then(async (read) =>
      judged(ctx, facts, read, await overrideByRbac(ctx, classification, request, startedAt, budgetMs)),
    );
  }
  const byRbac = overrideByRbac(ctx, classification, request, startedAt, budgetMs);
  if (byRbac instanceof Promise) return byRbac.then((answer) => judged(ctx, facts, reads, answer));
  return judged(ctx, facts, reads, byRbac);
}

function judged(
  ctx: AppContext,
  facts: { request: AdmissionRequest; classification: NeedsEvaluation; choice: EvaluationPick; ageMs: number | undefined },
  reads: { machines?: MachinesRead; parent?: ParentRead },
  byRbac: boolean | undefined,
): DecisionOutcome {
  const { request, classification, choice, ageMs } = facts;
  const now = ctx.now();
  const decision = ctx.core.decide({
    request,
    config: ctx.config,
    classification,
    evaluation: choice.evaluation,
    now,
    evidence: choice.evidence,
    ...(choice.refreshNote === undefined ? {} : { refreshNote: choice.refreshNote }),
    ...reads,
    ...(byRbac === undefined ? {} : { overrideByRbac: byRbac }),
  });
  const enforced = ctx.core.enforce({
    decision,
    request,
    config: ctx.config,
    target: classification.target,
    touches: classification.touches,
    object: classification.object,
    evaluation:
      choice.evaluation && ageMs !== undefined ? { verdict: choice.evaluation.verdict, ageSeconds: ageMs / 1000 } : null,
  });
  if (choice.evaluation !== null && choice.evidence.kind !== 'failed') {
    ctx.metrics.recordEvidenceAge(choice.evidence.kind, evaluationAgeMs(choice.evaluation, now) / 1000);
  }
  return { enforced, ...(ageMs === undefined ? {} : { ageSeconds: Math.round(ageMs / 1000) }) };
}

function logDecision(logger: Logger, request: AdmissionRequest, outcome: DecisionOutcome, seconds: number): void {
  logger.info(
    {
      uid: request.uid,
      operation: request.operation,
      kind: `${request.kind.group}/${request.kind.kind}`,
      subResource: request.subResource,
      object: `${request.namespace ?? ''}/${request.name ?? ''}`,
      user: request.userInfo.username,
      dryRun: request.dryRun === true,
      result: outcome.enforced.decision,
      mode: outcome.enforced.mode,
      reason: outcome.enforced.reason,
      target: outcome.enforced.target || undefined,
      ageSeconds: outcome.ageSeconds,
      durationMs: Math.round(seconds * 1000),
    },
    'admission decision',
  );
}

async function validate(ctx: AppContext, body: unknown, timeout: unknown, res: http.ServerResponse): Promise<void> {
  const startedAt = performance.now();
  const budgetMs = apiserverTimeoutMs(timeout);
  let uid: string | null = null;
  try {
    const parsed = ctx.core.parseAdmissionReview(body);
    if (!parsed.ok) {
      ctx.logger.warn({ err: shorten(parsed.message) }, 'rejected a body that is not an AdmissionReview');
      sendJson(res, 400, { error: parsed.message });
      return;
    }
    const request = parsed.review.request;
    uid = request.uid;
    const decided = decideRequest(ctx, request, startedAt, budgetMs);
    const outcome = decided instanceof Promise ? await decided : decided;
    // The core owns the response, but the uid echo is the one thing the apiserver checks.
    const { enforced } = outcome;
    const response: AdmissionResponse = { ...enforced.response, uid };
    const seconds = (performance.now() - startedAt) / 1000;
    ctx.metrics.recordDecision(
      { target: enforced.target, decision: enforced.decision, mode: enforced.mode, reason: enforced.reason },
      seconds,
    );
    sendJson(res, 200, ctx.core.buildAdmissionReviewResponse(response));
    // The line (its duration measured above) goes out after the answer, in the same turn of the
    // event loop: the apiserver does not wait for it to be formatted and handed to stdout.
    logDecision(ctx.decisionLogger, request, outcome, seconds);
    // After the answer: the recorder only queues, and a failing or slow write never reaches it.
    if (enforced.event !== null) ctx.recordEvent?.(enforced.event);
  } catch (error) {
    failClosed(ctx, res, uid ?? uidOf(body), error, startedAt);
  }
}

function failClosed(ctx: AppContext, res: http.ServerResponse, uid: string | null, error: unknown, startedAt: number): void {
  const message = shorten(errorMessage(error));
  ctx.metrics.recordDecision(
    { target: '', decision: 'denied', mode: 'enforce', reason: 'internal-error' },
    (performance.now() - startedAt) / 1000,
  );
  ctx.logger.error({ uid, err: message }, 'admission review failed; denying');
  if (res.headersSent) return;
  if (uid === null) {
    sendJson(res, 500, { error: `internal error: ${message}` });
    return;
  }
  const response = failClosedResponse(uid, message);
  let review: AdmissionReviewResponse;
  try {
    review = ctx.core.buildAdmissionReviewResponse(response);
  } catch {
    review = { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
  }
  sendJson(res, 200, review);
}

function validateHandler(ctx: AppContext): express.RequestHandler {
  return (req, res, next) => {
    validate(ctx, req.body, req.query.timeout, res).catch(next);
  };
}

/** Every /evaluations route (the overview and each target, GET and POST) needs the token. */
function requireBearerToken(onDemand: OnDemandService): express.RequestHandler {
  return (req, res, next) => {
    if (onDemand.authorize(req.get('authorization'))) {
      next();
      return;
    }
    res.set({ 'www-authenticate': 'Bearer realm="etcd-guard"', 'cache-control': 'no-store' });
    res.status(401).json({ error: 'missing or wrong bearer token' });
  };
}

/** The fleet overview: every target with the object it guards and its cached verdict. */
function evaluationsOverviewHandler(targets: () => readonly Target[], cache: CacheView): express.RequestHandler {
  return (_req, res) => {
    res.status(200).json({ targets: targets().map((target) => targetOverview(target, cache.get(target.name))) });
  };
}

function evaluationHandler(onDemand: OnDemandService): express.RequestHandler {
  return (req, res, next) => {
    const authorization = req.get('authorization');
    onDemand
      .handle({ method: req.method, target: req.params.target ?? '', ...(authorization === undefined ? {} : { authorization }) })
      .then((answer) => {
        if (answer.headers) res.set(answer.headers);
        res.status(answer.status).json(answer.body);
      })
      .catch(next);
  };
}

function healthzHandler(): express.RequestHandler {
  return (_req, res) => {
    res.status(200).json({ status: 'ok' });
  };
}

/**
 * Readiness for the kubelet, who needs no token: counts only. Target names are every tenant's
 * namespaces and clusters; GET /evaluations (behind the token) and the logs name them.
 */
function readyzHandler(cache: CacheView): express.RequestHandler {
  return (_req, res) => {
    if (cache.ready) {
      res.status(200).json({ ready: true });
      return;
    }
    const targets = cache.targets();
    res.status(503).json({
      ready: false,
      reason: 'the evaluation cache has not read every target from the store yet (the log names the targets it cannot read)',
      targets: targets.length,
      targetsWithoutEvaluation: targets.filter((target) => cache.evaluatedAt(target) === null).length,
    });
  };
}

function notFoundHandler(): express.RequestHandler {
  return (req, res) => {
    res.status(404).json({ error: `no route for ${req.method} ${shorten(req.path, 100)}` });
  };
}

/** The answer to a request that failed outside a decision: body-parser's errors, a broken handler. */
function answerError(logger: Logger, path: string, error: unknown, res: http.ServerResponse): void {
  const status = httpStatusOf(error);
  const message = clientMessage(error, status);
  if (status >= 500) logger.error({ path, err: errorMessage(error) }, 'request failed');
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, status, { error: message });
}

function errorHandler(logger: Logger): express.ErrorRequestHandler {
  // express recognises an error handler by its four parameters.
  return (error: unknown, req: Request, res: Response, _next: NextFunction) => answerError(logger, req.path, error, res);
}

/**
 * The webhook's request listener: the apiserver's POST /validate on the fast path
 * (fast-validate.ts), everything else through the express app.
 */
export function createWebhookApp(deps: WebhookAppDeps): http.RequestListener {
  const routes = createWebhookRoutes(deps);
  return withFastValidate({ ...routes.fastValidate, fallback: routes.app });
}

/** The express app (every route, /validate included) and what the fast path shares with it. */
export interface WebhookRoutes {
  readonly app: express.Express;
  readonly fastValidate: Omit<FastValidateParts, 'fallback'>;
}

export function createWebhookRoutes(deps: WebhookAppDeps): WebhookRoutes {
  const ctx = appContext(deps);
  // The metrics follow the targets the webhook judges, not every document the store lists.
  ctx.metrics.observeTargets({
    targets: ctx.targets,
    get: (target) => ctx.cache.get(target),
    maxAgeSeconds: ctx.config.maxAgeSeconds,
    enforcement: ctx.config.enforcement,
  });

  const app = express();
  // sendJson (the /validate answer) writes what res.json does only with these two settings.
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', apiserverQueryParser(app.get('query parser fn') as QueryParser));

  // Parse every content type as JSON: the apiserver sends application/json, and anything else is
  // still answered with a clear 400 instead of an empty body.
  const jsonBody = express.json({ limit: BODY_LIMIT_BYTES, type: () => true, strict: true });

  app.post(VALIDATE_PATH, jsonBody, validateHandler(ctx));
  addRuntimeExtensionRoutes(app, jsonBody, {
    decide: async (request, startedAt, budgetMs) => (await decideRequest(ctx, request, startedAt, budgetMs)).enforced,
    ...(ctx.parentLabels === undefined ? {} : { parentLabels: ctx.parentLabels }),
    retryAfterSeconds: ctx.config.runtimeExtension.retryAfterSeconds,
    metrics: ctx.metrics,
    logger: ctx.logger,
    ...(ctx.recordEvent === undefined ? {} : { recordEvent: ctx.recordEvent }),
  });
  app.use('/evaluations', requireBearerToken(ctx.onDemand));
  app.get('/evaluations', evaluationsOverviewHandler(ctx.targets, ctx.cache));
  app.all('/evaluations/:target', evaluationHandler(ctx.onDemand));
  app.get('/healthz', healthzHandler());
  app.get('/readyz', readyzHandler(ctx.cache));
  app.use(notFoundHandler());
  app.use(errorHandler(ctx.logger));
  return {
    app,
    fastValidate: {
      jsonBody,
      limitBytes: BODY_LIMIT_BYTES,
      validate: (body, timeout, res) => validate(ctx, body, timeout, res),
      fail: (error, res) => answerError(ctx.logger, VALIDATE_PATH, error, res),
    },
  };
}

export type QueryParser = (query: string | null | undefined) => Record<string, unknown>;

/**
 * express's extended query parser (qs) with a shortcut for the one query the apiserver sends,
 * whose result is the same `{ timeout }` object; anything else still goes through qs.
 */
export function apiserverQueryParser(extended: QueryParser): QueryParser {
  return (query) => {
    const timeout = typeof query === 'string' ? APISERVER_QUERY.exec(query)?.[1] : undefined;
    return timeout === undefined ? extended(query) : { timeout };
  };
}

function httpStatusOf(error: unknown): number {
  if (error !== null && typeof error === 'object') {
    const candidate =
      (error as { status?: unknown; statusCode?: unknown }).status ?? (error as { statusCode?: unknown }).statusCode;
    if (typeof candidate === 'number' && candidate >= 400 && candidate <= 599) return candidate;
  }
  return 500;
}

/** body-parser's errors carry a `type`; turn the common ones into messages that say what to fix. */
function clientMessage(error: unknown, status: number): string {
  const type = error !== null && typeof error === 'object' ? (error as { type?: unknown }).type : undefined;
  if (type === 'entity.too.large') {
    const length = (error as { length?: unknown }).length;
    const got = typeof length === 'number' ? ` (got ${length} bytes)` : '';
    return `request body is larger than the ${BODY_LIMIT_BYTES} byte (3 MiB) limit${got}`;
  }
  if (type === 'entity.parse.failed') return `request body is not valid JSON: ${shorten(errorMessage(error))}`;
  if (status >= 500) return `internal error: ${shorten(errorMessage(error))}`;
  return shorten(errorMessage(error));
}
