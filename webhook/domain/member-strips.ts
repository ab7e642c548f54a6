// The way around the member-bearing DELETE doors (member-exits.ts): the VWC sends a DELETE only
// for a Machine labelled cluster.x-k8s.io/control-plane and a pod a StatefulSet owns that runs
// etcd (its matchConditions), and the webhook judges it by the Machine's KubeadmControlPlane owner
// reference (or its control-plane-name label) and the pod's StatefulSet owner reference. All of
// them are tenant-writable: an UPDATE that removes or changes them first lets the DELETE through
// unseen; and so is a Machine's status.nodeRef (through /status), which names the member its DELETE
// takes out. Such an UPDATE is judged as that DELETE of the object as it was. Pure.
//
// An UPDATE after which the DELETE would still be judged the same way (KCP adopting a Machine that
// its control-plane-name label already named, an owner reference's apiVersion moving to a newer
// version) is allowed without a read. Cluster API's controllers keep the control-plane labels
// (KCP writes them on every Machine it syncs), so their ordinary UPDATEs are never stripping ones;
// the VWC's matchConditions keep them away from the webhook altogether. An object already
// terminating was judged by its DELETE; one whose owner is being deleted or gone is a teardown
// (the garbage collector orphaning pods of a StatefulSet deleted with --cascade=orphan).
import type { GuardConfig } from '../../functions/domain/config.js';
import { STATEFUL_SET } from '../../functions/domain/kinds/statefulset.js';
import type { FleetView, Target } from '../../functions/domain/targets.js';
import { labelsOf } from './classify.js';
import type { AdmissionRequest, Classification, GuardedObjectRef, ParentLabels } from './contract.js';
import {
  classifyDelete,
  CONTROL_PLANE_LABEL,
  CONTROL_PLANE_NAME_LABEL,
  MACHINE,
  machineOwner,
  POD,
  type OwnerReading,
} from './member-exits.js';
import { ownerReferences, type OwnerReference } from './owner-references.js';
import { record } from '../../functions/shared/records.js';

const STRIPPING: OwnerReading = { doing: 'changing the labels or owner references of', relation: 'the owner of' };

/** The labels a control-plane Machine's DELETE is keyed on. */
const MACHINE_KEYED_LABELS = [CONTROL_PLANE_LABEL, CONTROL_PLANE_NAME_LABEL] as const;

/** The pattern the VWC's etcd-container matchCondition applies to a container's image. */
const ETCD_IMAGE = /(^|\/)etcd([:@]|$)/;

/** Whether the request is a main-resource UPDATE of a Machine or a Pod (what the strip webhooks send). */
export function isMemberStripCandidate(request: AdmissionRequest): boolean {
  if (request.operation !== 'UPDATE') return false;
  const { group, resource } = request.resource;
  return (group === MACHINE.group && resource === MACHINE.resource) || (group === POD.group && resource === POD.resource);
}

const sameOwner = (a: OwnerReference, b: OwnerReference) => a.kind === b.kind && a.name === b.name && a.group === b.group;

/** What changes in the owner references, for the message: those removed, then those added. */
function ownerChanges(oldObject: unknown, object: unknown): string[] {
  const before = ownerReferences(oldObject);
  const after = ownerReferences(object);
  const shown = (owner: OwnerReference) => `${owner.kind} ${owner.name}`.slice(0, 80);
  return [
    ...before
      .filter((owner) => !after.some((other) => sameOwner(owner, other)))
      .map((owner) => `removes owner reference ${shown(owner)}`),
    ...after
      .filter((owner) => !before.some((other) => sameOwner(owner, other)))
      .map((owner) => `adds owner reference ${shown(owner)}`),
  ];
}

/** What changes in the keyed labels, for the message. */
function labelChanges(oldObject: unknown, object: unknown): string[] {
  const before = labelsOf(oldObject);
  const after = labelsOf(object);
  const changes: string[] = [];
  for (const key of MACHINE_KEYED_LABELS) {
    if (!(key in before)) {
      if (key in after) changes.push(`adds label ${key}`);
    } else if (!(key in after)) changes.push(`removes label ${key}`);
    else if (before[key] !== after[key]) changes.push(`changes label ${key}`);
  }
  return changes;
}

/** What a control-plane Machine's DELETE resolves to: its KubeadmControlPlane, or why none judges it. */
function machineKey(object: unknown, ref: GuardedObjectRef): string {
  if (!(CONTROL_PLANE_LABEL in labelsOf(object))) return 'not-control-plane';
  const owner = machineOwner(object, ref);
  if (!('kind' in owner)) return `owner:${owner.name}`;
  return owner.kind === 'needs-evaluation' ? owner.kind : `${owner.kind}:${owner.reason}`;
}

const nodeRefOf = (machine: unknown): string | undefined => {
  const name = record(record(record(machine).status).nodeRef).name;
  return typeof name === 'string' && name !== '' ? name : undefined;
};

/**
 * How the UPDATE changes a nodeRef that was set (the member its DELETE names), or null. Cluster
 * API's machine controller only ever sets one that was unset, which names a member no DELETE
 * judged before and is no strip.
 */
function nodeRefChange(oldObject: unknown, object: unknown): string | null {
  const before = nodeRefOf(oldObject);
  const after = nodeRefOf(object);
  if (before === undefined || after === before) return null;
  return after === undefined ? 'removes status.nodeRef' : 'changes status.nodeRef';
}

/** Whether a container runs etcd as the VWC's etcd-container matchCondition reads it. */
function runsEtcd(pod: unknown): boolean {
  const containers = record(record(pod).spec).containers;
  return (Array.isArray(containers) ? containers : []).some((container) => {
    const { name, image } = record(container);
    return name === 'etcd' || (typeof image === 'string' && ETCD_IMAGE.test(image));
  });
}

/** What an etcd pod's DELETE is keyed on: its StatefulSet owner references, while it runs etcd. */
function podKey(object: unknown): string {
  if (!runsEtcd(object)) return 'no-etcd';
  const owners = ownerReferences(object).filter(
    (owner) => owner.kind === STATEFUL_SET.kind && owner.group === STATEFUL_SET.group,
  );
  return JSON.stringify(owners.map((owner) => owner.name).sort());
}

function refOf(request: AdmissionRequest, kind: string, group: string): GuardedObjectRef {
  const metadata = record(record(request.oldObject).metadata);
  const name = typeof request.name === 'string' && request.name !== '' ? request.name : String(metadata.name ?? '');
  const namespace = typeof request.namespace === 'string' ? request.namespace : String(metadata.namespace ?? '');
  return { group, kind, namespace, name, viaScale: false };
}

/**
 * A Machine or Pod UPDATE: allowed when its DELETE would still be judged as before; otherwise
 * judged as the DELETE of the object as it was, the change saying what the UPDATE strips.
 */
export function classifyMemberStrip(
  request: AdmissionRequest,
  config: GuardConfig,
  parent: ParentLabels | undefined,
  targets: readonly Target[],
  fleet: FleetView | undefined,
): Classification {
  const machine = request.resource.group === MACHINE.group;
  const subResource = request.subResource ?? '';
  // A Machine's /status carries the nodeRef its DELETE names the member by; a pod's, nothing it keys on.
  if (subResource !== '' && !(machine && subResource === 'status')) return { kind: 'allow', reason: 'not-guarded' };
  const ref = machine ? refOf(request, MACHINE.kind, MACHINE.group) : refOf(request, POD.kind, POD.group);
  const keyOf = (object: unknown) => (machine ? machineKey(object, ref) : podKey(object));
  const before = keyOf(request.oldObject);
  if (before === 'not-control-plane' || before === 'no-etcd' || before === '[]') return { kind: 'allow', reason: 'not-guarded' };
  const nodeRef = machine ? nodeRefChange(request.oldObject, request.object) : null;
  if (keyOf(request.object) === before && nodeRef === null) return { kind: 'allow', reason: 'keeps-guard' };
  const deleting: AdmissionRequest = { ...request, operation: 'DELETE', subResource: '', object: null };
  const judged = classifyDelete(deleting, config, parent, targets, fleet, STRIPPING);
  if (judged.kind !== 'needs-evaluation') return judged;
  const exit = judged.change;
  if (exit.kind !== 'machine-delete' && exit.kind !== 'pod-delete') return judged;
  const changes = machine
    ? [
        ...labelChanges(request.oldObject, request.object),
        ...ownerChanges(request.oldObject, request.object),
        ...(nodeRef === null ? [] : [nodeRef]),
      ]
    : [...ownerChanges(request.oldObject, request.object), ...(runsEtcd(request.object) ? [] : ['runs no etcd image any more'])];
  const strip = changes.length > 0 ? changes.join(', ') : 'changes what etcd-guard keys its deletion on';
  return { ...judged, change: { ...exit, strip } };
}
