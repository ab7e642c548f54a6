// The Cluster API Runtime Extension routes (webhook/domain/runtime-hooks.ts): the discovery
// answer and one handler per upgrade hook, on the webhook's own HTTPS port. Every answer is a hook
// response, never a crash: what cannot be judged is a Failure naming why.
import express from 'express';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { AdmissionRequest, ParentLabels, ParentObjectRef } from '../domain/contract.js';
import type { EnforcedDecision } from '../domain/enforcement.js';
import {
  controlPlaneRefOf,
  DISCOVERY_PATH,
  discoveryResponse,
  hookAnswer,
  hookEvent,
  hookFailure,
  hookPath,
  impliedControlPlaneUpdate,
  labelsFromRead,
  parseHookRequest,
  UPGRADE_HOOKS,
  withoutOverrideHint,
  type HookAnswer,
  type UpgradeHook,
  type UpgradeHookRequest,
} from '../domain/runtime-hooks.js';
import type { EventIntent } from '../../functions/domain/events.js';
import type { Logger } from '../../functions/shared/logger.js';
import type { WebhookMetrics } from './metrics.js';

export interface RuntimeExtensionDeps {
  /** The admission decision path, for a request the server made up (budget in ms). */
  decide(request: AdmissionRequest, startedAt: number, budgetMs: number): Promise<EnforcedDecision>;
  /** Reads the control plane's labels; absent: the Cluster's cluster-name label stands for them. */
  parentLabels?: (ref: ParentObjectRef) => Promise<ParentLabels>;
  retryAfterSeconds: number;
  metrics: WebhookMetrics;
  logger: Logger;
  /** Queues an Event, as admission decisions do (never throws; absent: Events are off). */
  recordEvent?: (event: EventIntent) => void;
}

/** A hook's answer, and what it rested on when it went through the admission decision. */
interface Answered {
  answer: HookAnswer;
  decided?: { enforced: EnforcedDecision; event: EventIntent | null };
}

/** Inside Cluster API's call timeout (HANDLER_TIMEOUT_SECONDS), with a margin for the answer. */
const DECISION_BUDGET_MS = 8_000;

function message(enforced: EnforcedDecision): string {
  const { response } = enforced;
  const said = response.allowed ? (response.warnings ?? []).join('; ') : (response.status?.message ?? enforced.reason);
  const target = enforced.target === '' ? 'no target' : `target ${enforced.target}`;
  return response.allowed
    ? `etcd-guard: ${target}: ${enforced.reason}${said === '' ? '' : `; ${said}`}`
    : withoutOverrideHint(said);
}

async function labelsFor(
  deps: RuntimeExtensionDeps,
  request: UpgradeHookRequest,
): Promise<{ labels?: Readonly<Record<string, string>> } | { failed: string }> {
  const read = deps.parentLabels === undefined ? undefined : await deps.parentLabels(controlPlaneRefOf(request));
  return labelsFromRead(request, read);
}

async function answer(deps: RuntimeExtensionDeps, hook: UpgradeHook, body: unknown): Promise<Answered> {
  const startedAt = performance.now();
  const parsed = parseHookRequest(hook, body);
  if (!parsed.ok) return { answer: hookFailure(hook, parsed.message) };
  const labels = await labelsFor(deps, parsed.request);
  if ('failed' in labels)
    return { answer: hookAnswer(hook, { allowed: false, message: `etcd-guard: ${labels.failed}` }, deps.retryAfterSeconds) };
  const uid = `runtime-extension-${randomUUID()}`;
  const enforced = await deps.decide(
    impliedControlPlaneUpdate(hook, parsed.request, uid, labels.labels),
    startedAt,
    DECISION_BUDGET_MS,
  );
  const answered = hookAnswer(
    hook,
    enforced.response.allowed ? { allowed: true, message: message(enforced) } : { allowed: false, message: message(enforced) },
    deps.retryAfterSeconds,
  );
  return { answer: answered, decided: { enforced, event: hookEvent(hook, parsed.request, enforced, answered) } };
}

/** After the answer, as for an admission decision: the counters, the log line, the Event (queued only). */
function recordAnswer(deps: RuntimeExtensionDeps, hook: UpgradeHook, { answer: answered, decided }: Answered): void {
  deps.metrics.recordHookAnswer(hook, answered.outcome);
  if (decided !== undefined) {
    const { enforced, event } = decided;
    deps.metrics.recordHookDecision(hook, {
      target: enforced.target,
      decision: enforced.decision,
      mode: enforced.mode,
      reason: enforced.reason,
    });
    if (event !== null) deps.recordEvent?.(event);
  }
  if (answered.outcome !== 'proceed')
    deps.logger.info({ hook, outcome: answered.outcome, message: answered.body.message }, 'runtime hook');
}

function hookHandler(deps: RuntimeExtensionDeps, hook: UpgradeHook): express.RequestHandler {
  return (req, res) => {
    answer(deps, hook, req.body)
      .catch((error: unknown): Answered => ({
        answer: hookFailure(hook, `etcd-guard could not judge it: ${error instanceof Error ? error.message : String(error)}`),
      }))
      .then((answered) => {
        res.status(200).json(answered.answer.body);
        recordAnswer(deps, hook, answered);
      })
      .catch(() => res.destroy());
  };
}

/** Body parse errors (not JSON) still get a hook Failure, not express's HTML page. */
function badBody(deps: RuntimeExtensionDeps, hook: UpgradeHook): express.ErrorRequestHandler {
  return (error: unknown, _req, res, next) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const answered = hookFailure(hook, `body is not JSON: ${error instanceof Error ? error.message : String(error)}`);
    deps.metrics.recordHookAnswer(hook, answered.outcome);
    res.status(200).json(answered.body);
  };
}

export function addRuntimeExtensionRoutes(
  app: express.Express,
  jsonBody: express.RequestHandler,
  deps: RuntimeExtensionDeps,
): void {
  app.post(DISCOVERY_PATH, (_req, res) => {
    res.status(200).json(discoveryResponse());
  });
  for (const hook of UPGRADE_HOOKS) {
    app.post(hookPath(hook), jsonBody, hookHandler(deps, hook), badBody(deps, hook));
  }
}
