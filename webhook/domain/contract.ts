// The seam between the webhook's pure core (webhook/domain/*) and its express server (webhook/*).
// The server parses the HTTP body, asks the core what the request is, fetches an evaluation when
// the core says one is needed, and asks the core for the decision. No I/O happens in the core.
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { GuardConfig, TargetConfig } from '../../functions/domain/config.js';
import type { MachinesRead, ParentRead } from '../../functions/domain/kinds/kind.js';
import type { MembershipChange, TargetMove } from '../../functions/domain/kinds/kind.js';
import type { Evidence } from './freshness.js';

/** admission.k8s.io/v1 AdmissionRequest, the fields the guard reads. */
export interface AdmissionRequest {
  uid: string;
  kind: { group: string; version: string; kind: string };
  resource: { group: string; version: string; resource: string };
  subResource?: string;
  requestKind?: { group: string; version: string; kind: string };
  requestResource?: { group: string; version: string; resource: string };
  requestSubResource?: string;
  name?: string;
  namespace?: string;
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  userInfo: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
  options?: unknown;
}

export interface AdmissionReviewRequest {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  request: AdmissionRequest;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: { code: number; reason?: string; message: string; metadata?: Record<string, never> };
  warnings?: string[];
  auditAnnotations?: Record<string, string>;
}

export interface AdmissionReviewResponse {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: AdmissionResponse;
}

// What a change does to membership is the kinds' vocabulary too (their removal orders read it).
export type { MembershipChange, TargetMove } from '../../functions/domain/kinds/kind.js';

/**
 * A DELETE of an object that carries an etcd member (member-exits.ts): a control-plane Machine,
 * whose member leaves for good, or an etcd pod, whose member is down until the pod returns. With
 * `strip`: an UPDATE that removes or changes what the DELETE webhook keys on (member-strips.ts),
 * after which that DELETE would go unseen; judged as the DELETE, `strip` saying what it changes.
 */
export type MemberExit =
  | {
      kind: 'machine-delete';
      strip?: string;
      machine: string;
      /** `status.nodeRef.name` (kubeadm names the member after it); null: no Node yet, the member is undetermined. */
      nodeName: string | null;
      /** The KubeadmControlPlane that owns it, for the safe path the denial names. */
      controlPlane: string;
    }
  | { kind: 'pod-delete'; pod: string; statefulSet: string; strip?: string };

/** Every change a guarded request may make, as the decision judges it. */
export type GuardedChange = MembershipChange | TargetMove | MemberExit;

/**
 * The labels of the object a /scale request scales, read from the API server by the webhook (an
 * autoscaling/v1 Scale carries none), or why they could not be read.
 */
export type ParentLabels =
  /** `object`: the object as read, when the reader kept it (a DELETE's owner: is it being deleted, its replicas). */
  | { ok: true; labels: Readonly<Record<string, string>>; object?: unknown }
  /** `notFound`: the apiserver answered 404, the object is gone. */
  | { ok: false; message: string; notFound?: boolean };

/** Where the object a /scale request scales lives: GET /apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}. */
export interface ParentObjectRef {
  group: string;
  version: string;
  resource: string;
  namespace: string;
  name: string;
}

/** What the core makes of a request before any evaluation is read. */
export type Classification =
  /** Allow at once, without reading the cache. */
  | { kind: 'allow'; reason: string }
  /**
   * Deny at once (e.g. guarded, but no target matches). `object`: the guarded object, when the
   * request is about one (its Event goes there); `target`: the target whose enforcement applies;
   * `touches`: the other targets a move touches (the strictest enforcement of them all applies).
   */
  | {
      kind: 'deny';
      reason: string;
      message: string;
      object?: GuardedObjectRef;
      target?: TargetConfig;
      /** With reason LABELS_UNKNOWN: the object to read before classifying again (default: the /scale request's parent). */
      parent?: ParentObjectRef;
      touches?: readonly TargetConfig[];
    }
  /** An evaluation of `target` is needed to decide; `touches` as for a deny. */
  | {
      kind: 'needs-evaluation';
      target: TargetConfig;
      change: GuardedChange;
      object: GuardedObjectRef;
      touches?: readonly TargetConfig[];
      /** When another object's controller carries the change out (a ClusterClass Cluster's KCP). */
      controller?: ControllerView;
    };

/**
 * The object whose controller carries out a change made by editing another (cluster-topology.ts:
 * a Cluster's topology, carried out on its KubeadmControlPlane), as before and after the change:
 * its kind's rules project it. The edited object stays the classification's `object` (the
 * message, the Event and the override annotation are the edited object's).
 */
export interface ControllerView {
  object: GuardedObjectRef;
  request: { object: unknown; oldObject: unknown };
}

export interface GuardedObjectRef {
  group: string;
  kind: string;
  namespace: string;
  name: string;
  viaScale: boolean;
}

export interface DecisionInput {
  request: AdmissionRequest;
  config: GuardConfig;
  classification: Extract<Classification, { kind: 'needs-evaluation' }>;
  /** Latest evaluation known for the target (cached or freshly made), or null. */
  evaluation: Evaluation | null;
  /** A Date or milliseconds since the epoch (Date.now()): the same decision. */
  now: Date | number;
  /** The guarded KCP's control-plane Machines, read when they decide which member leaves. */
  machines?: MachinesRead;
  /** A /scale shrink's parent object (e.g. the StatefulSet's spec.ordinals), read when the removal order needs it. */
  parent?: ParentRead;
  /** Why no fresh evaluation could be had, when that is so (e.g. "inline refresh skipped: budget 0.8s"). */
  refreshNote?: string;
  /**
   * What `evaluation` is as evidence (freshness.ts): live, cached (then an allow warns with its
   * age) or failed (a live evaluation was due and did not come: deny). Absent: the caller vouches
   * that the evaluation is live, as the server does only when it is.
   */
  evidence?: Evidence;
  /**
   * The API server's SubjectAccessReview said the requesting user may override (verb `override` on
   * `targets.etcd-guard.io`); absent or false: only `config.override.groups` let a user override.
   */
  overrideByRbac?: boolean;
}

export interface Decision {
  response: AdmissionResponse;
  /** Metric label: allowed | denied | overridden. */
  result: 'allowed' | 'denied' | 'overridden';
  /** Metric label, a short stable word: e.g. not-guarded, healthy, degraded, unhealthy, stale, missing, no-target, override, forbidden-override, quorum, etcd-upgrade. */
  reason: string;
}
