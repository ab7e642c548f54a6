// Cluster API Runtime SDK lifecycle hooks the webhook answers (docs/runtime-extension.md). Pure.
//
// The contract is Cluster API's, read from sigs.k8s.io/cluster-api/api at the pinned version
// (scripts/versions.env CAPI_VERSION), package runtime/hooks/v1alpha1:
// - discovery_types.go: DiscoveryResponse{status, message, handlers[{name, requestHook{apiVersion,
//   hook}, timeoutSeconds, failurePolicy Ignore|Fail}]};
// - lifecyclehooks_types.go: BeforeClusterUpgradeRequest and BeforeControlPlaneUpgradeRequest
//   {settings, cluster (core v1beta2 Cluster), fromKubernetesVersion, toKubernetesVersion,
//   controlPlaneUpgrades, workersUpgrades}; their responses are a CommonRetryResponse;
// - common_types.go: status Success|Failure, message, retryAfterSeconds ("when set to a non-zero
//   value signifies that the hook will be called again at a future time");
// - runtime/catalog/catalog.go GVHToPath: /<group>/<version>/<lowercased hook>[/<lowercased name>].
//
// A hook is judged as the KubeadmControlPlane change it precedes: the request is turned into the
// KCP UPDATE the topology controller will send (spec.version from → to), and that goes through
// the admission decision path unchanged (classify, target match, live evidence, decide, enforce).
import { z } from 'zod';
import { describeValue, formatZodIssues } from '../../functions/shared/zod-issues.js';
import { CLUSTER_NAME_LABEL, KUBEADM_CONTROL_PLANE } from '../../functions/domain/kinds/kubeadm-control-plane.js';
import { EVENT_ACTION_ADMISSION, MAX_EVENT_NOTE_LENGTH, type EventIntent } from '../../functions/domain/events.js';
import { objectUid } from '../../functions/shared/object-uid.js';
import type { AdmissionRequest, ParentLabels, ParentObjectRef } from './contract.js';
import type { EnforcedDecision } from './enforcement.js';
import { clip, oneLine } from './respond.js';

export const HOOKS_API_VERSION = 'hooks.runtime.cluster.x-k8s.io/v1alpha1';
const HOOKS_PATH_PREFIX = `/${HOOKS_API_VERSION}`;
export const DISCOVERY_PATH = `${HOOKS_PATH_PREFIX}/discovery`;
/** The handler name every hook is registered under (the ExtensionConfig's handlers get `<name>.<extensionconfig>`). */
export const HANDLER_NAME = 'etcd-guard';

/**
 * Both hooks exist at the pinned version. BeforeClusterUpgrade runs once when an upgrade starts;
 * BeforeControlPlaneUpgrade before every version (chained upgrades included) reaches the control plane.
 */
export const UPGRADE_HOOKS = ['BeforeClusterUpgrade', 'BeforeControlPlaneUpgrade'] as const;
export type UpgradeHook = (typeof UPGRADE_HOOKS)[number];
export const HOOK_OUTCOMES = ['proceed', 'retry', 'failure'] as const;
export type HookOutcome = (typeof HOOK_OUTCOMES)[number];

/**
 * Failing closed: an extension that cannot answer blocks the upgrade (Cluster API retries it),
 * as the admission webhook's failurePolicy Fail does for a KCP change.
 */
export const HANDLER_FAILURE_POLICY = 'Fail';
/** Cluster API's DefaultHandlersTimeoutSeconds; the answer may include one live evaluation. */
export const HANDLER_TIMEOUT_SECONDS = 10;

export function hookPath(hook: UpgradeHook): string {
  return `${HOOKS_PATH_PREFIX}/${hook.toLowerCase()}/${HANDLER_NAME}`;
}

export function discoveryResponse(): Record<string, unknown> {
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'DiscoveryResponse',
    status: 'Success',
    handlers: UPGRADE_HOOKS.map((hook) => ({
      name: HANDLER_NAME,
      requestHook: { apiVersion: HOOKS_API_VERSION, hook },
      timeoutSeconds: HANDLER_TIMEOUT_SECONDS,
      failurePolicy: HANDLER_FAILURE_POLICY,
    })),
  };
}

const name = z.string().min(1).max(253);
const version = z.string().min(1).max(64);

// Only what the judgement reads is required; Cluster API sends the whole Cluster, and the rest passes.
const clusterSchema = z.object({
  apiVersion: z.string().optional(),
  metadata: z.object({ name, namespace: name }).passthrough(),
  spec: z
    .object({
      // v1beta2 ContractVersionedObjectReference {apiGroup, kind, name}; v1beta1's ObjectReference has apiVersion.
      controlPlaneRef: z
        .object({ apiGroup: z.string().optional(), apiVersion: z.string().optional(), kind: name, name })
        .passthrough(),
      topology: z
        .object({
          controlPlane: z
            .object({ replicas: z.number().int().min(0).optional() })
            .passthrough()
            .optional(),
        })
        .passthrough()
        .optional(),
    })
    .passthrough(),
});

function requestSchema(hook: UpgradeHook) {
  return z.object({
    apiVersion: z.literal(HOOKS_API_VERSION),
    kind: z.literal(`${hook}Request`),
    settings: z.record(z.string(), z.string()).optional(),
    cluster: clusterSchema,
    fromKubernetesVersion: version,
    toKubernetesVersion: version,
  });
}

const SCHEMAS = Object.fromEntries(UPGRADE_HOOKS.map((hook) => [hook, requestSchema(hook)])) as Record<
  UpgradeHook,
  ReturnType<typeof requestSchema>
>;

export type UpgradeHookRequest = z.infer<ReturnType<typeof requestSchema>>;

const MAX_ISSUES_IN_MESSAGE = 5;
const MAX_VALUE_TEXT = 80;

/** The request, or what is wrong with it, field by field. */
export function parseHookRequest(
  hook: UpgradeHook,
  body: unknown,
): { ok: true; request: UpgradeHookRequest } | { ok: false; message: string } {
  try {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return { ok: false, message: `body is not a ${hook}Request object (got ${describeValue(body, MAX_VALUE_TEXT)})` };
    }
    const result = SCHEMAS[hook].safeParse(body);
    if (result.success) return { ok: true, request: result.data };
    const issues = formatZodIssues(result.error, {
      input: body,
      maxValueChars: MAX_VALUE_TEXT,
      maxIssues: MAX_ISSUES_IN_MESSAGE,
    });
    return { ok: false, message: `invalid ${hook}Request: ${issues.join('; ')}` };
  } catch (error) {
    // Hostile getters or proxies could throw inside safeParse; the answer is still a Failure.
    return { ok: false, message: `invalid ${hook}Request: ${error instanceof Error ? error.message : 'unreadable body'}` };
  }
}

function groupOf(ref: { apiGroup?: string; apiVersion?: string }): string {
  if (ref.apiGroup !== undefined) return ref.apiGroup;
  const apiVersion = ref.apiVersion ?? '';
  return apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
}

/** Where the Cluster's control plane lives, for reading its labels (as a /scale's parent is read). */
export function controlPlaneRefOf(request: UpgradeHookRequest): ParentObjectRef & { kind: string } {
  const { cluster } = request;
  const ref = cluster.spec.controlPlaneRef;
  return {
    group: groupOf(ref),
    version: 'v1beta2',
    resource: ref.kind === KUBEADM_CONTROL_PLANE.kind ? KUBEADM_CONTROL_PLANE.resource : `${ref.kind.toLowerCase()}s`,
    kind: ref.kind,
    namespace: cluster.metadata.namespace,
    name: ref.name,
  };
}

/**
 * What the control plane's read gives the implied UPDATE: its labels; none when it is not there
 * yet (the Cluster's own label names it, as it will on the object the controller writes) or when
 * nothing reads it; or why the hook cannot be judged (the answer is then a retry).
 */
export function labelsFromRead(
  request: UpgradeHookRequest,
  read: ParentLabels | undefined,
): { labels?: Readonly<Record<string, string>> } | { failed: string } {
  if (read === undefined) return {};
  if (read.ok) return { labels: read.labels };
  if (read.notFound === true) return {};
  const ref = controlPlaneRefOf(request);
  return { failed: `cannot read ${ref.kind} ${ref.namespace}/${ref.name}: ${read.message}` };
}

/**
 * The control plane UPDATE the topology controller sends once the hook lets it: spec.version from
 * → to, replicas as the topology asks. `labels`: the control plane's own (read), else the
 * cluster-name label Cluster API puts on every object of the Cluster.
 */
export function impliedControlPlaneUpdate(
  hook: UpgradeHook,
  request: UpgradeHookRequest,
  uid: string,
  labels?: Readonly<Record<string, string>>,
): AdmissionRequest {
  const ref = controlPlaneRefOf(request);
  const replicas = request.cluster.spec.topology?.controlPlane?.replicas;
  const metadata = {
    name: ref.name,
    namespace: ref.namespace,
    labels: labels ?? { [CLUSTER_NAME_LABEL]: request.cluster.metadata.name },
  };
  const objectAt = (kubernetesVersion: string) => ({
    apiVersion: `${ref.group}/${ref.version}`,
    kind: ref.kind,
    metadata,
    spec: { version: kubernetesVersion, ...(replicas === undefined ? {} : { replicas }) },
  });
  return {
    uid,
    kind: { group: ref.group, version: ref.version, kind: ref.kind },
    resource: { group: ref.group, version: ref.version, resource: ref.resource },
    name: ref.name,
    namespace: ref.namespace,
    operation: 'UPDATE',
    userInfo: { username: `etcd-guard:runtime-extension:${hook}` },
    oldObject: objectAt(request.fromKubernetesVersion),
    object: objectAt(request.toKubernetesVersion),
  };
}

/**
 * The admission denial's override hint names an annotation on the control plane, which the
 * topology controller owns and the hook never reads: the hook's answer says what does apply.
 */
export function withoutOverrideHint(message: string): string {
  const at = message.lastIndexOf('; to override, annotate with ');
  const cut = at < 0 ? message : message.slice(0, at);
  return `${cut}; the upgrade waits until this passes (an override annotation does not apply to hooks)`;
}

export interface HookAnswer {
  outcome: HookOutcome;
  body: Record<string, unknown>;
}

/** Success with retryAfterSeconds 0 lets the topology controller go on; > 0 makes it call again then. */
export function hookAnswer(
  hook: UpgradeHook,
  verdict: { allowed: true; message?: string } | { allowed: false; message: string },
  retryAfterSeconds: number,
): HookAnswer {
  const retry = verdict.allowed ? 0 : retryAfterSeconds;
  const body: Record<string, unknown> = {
    apiVersion: HOOKS_API_VERSION,
    kind: `${hook}Response`,
    status: 'Success',
    retryAfterSeconds: retry,
  };
  if (verdict.message !== undefined && verdict.message !== '') body.message = verdict.message;
  return { outcome: retry > 0 ? 'retry' : 'proceed', body };
}

/** A request the extension cannot judge; Cluster API treats a Failure as an error and calls again. */
export function hookFailure(hook: UpgradeHook, message: string): HookAnswer {
  return {
    outcome: 'failure',
    body: { apiVersion: HOOKS_API_VERSION, kind: `${hook}Response`, status: 'Failure', message, retryAfterSeconds: 0 },
  };
}

/**
 * The Event a hook's answer records, as an admission decision records one, but on the Cluster
 * whose upgrade waits (the KCP it stands for has not been written yet, and whoever edited the
 * Cluster looks there): a retry under enforce is `UpgradeWaits`; a would-be denial let through
 * under warn or audit is `WouldDeny`. None for a proceed that nothing would have denied.
 */
export function hookEvent(
  hook: UpgradeHook,
  request: UpgradeHookRequest,
  enforced: Pick<EnforcedDecision, 'event' | 'mode'>,
  answer: HookAnswer,
): EventIntent | null {
  if (enforced.event === null) return null;
  const { cluster } = request;
  const uid = objectUid(cluster.metadata.uid);
  // Written as Cluster API sent it only when it is one of the Cluster's versions (the Event's field is checked by the apiserver).
  const sent = cluster.apiVersion ?? '';
  const apiVersion = /^cluster\.x-k8s\.io\/v1beta[12]$/.test(sent) ? sent : 'cluster.x-k8s.io/v1beta2';
  const upgrade = `${hook}: the upgrade from ${request.fromKubernetesVersion} to ${request.toKubernetesVersion}`;
  const said = typeof answer.body.message === 'string' ? answer.body.message : '';
  const note =
    answer.outcome === 'retry'
      ? `${upgrade} waits (asked again in ${String(answer.body.retryAfterSeconds)}s): ${said}`
      : `${upgrade} proceeds (enforcement ${enforced.mode}), would wait: ${said}`;
  return {
    regarding: {
      apiVersion,
      kind: 'Cluster',
      namespace: cluster.metadata.namespace,
      name: cluster.metadata.name,
      ...(uid === undefined ? {} : { uid }),
    },
    type: 'Warning',
    reason: answer.outcome === 'retry' ? 'UpgradeWaits' : 'WouldDeny',
    action: EVENT_ACTION_ADMISSION,
    note: clip(oneLine(note), MAX_EVENT_NOTE_LENGTH),
  };
}
