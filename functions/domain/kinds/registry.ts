// The one table of controller kinds. Everything that depends on a kind (the webhook's rules,
// removal order and discovery ownership, discovery's listings and mappings, how an evaluation
// reaches etcd, Event API versions, the manifests' verbs) looks the kind up here. Adding a kind
// is one module in this folder and one line in BUILT_IN (ARCHITECTURE.md, "How to add a guarded
// kind"). Pure.
import { druidEtcd } from './druid-etcd.js';
import type { ControllerKind, ControllerKindId, KindDiscovery } from './kind.js';
import { kubeadmControlPlane } from './kubeadm-control-plane.js';
import { statefulSet } from './statefulset.js';

export const BUILT_IN: readonly ControllerKind[] = [kubeadmControlPlane, druidEtcd, statefulSet];

/**
 * Kinds registered at run time, after the built-in ones. A registration lasts until its
 * `unregister` is called; module state is per process (each vitest file runs in its own), so a test
 * that registers and unregisters around its cases leaks into no other.
 */
let registered: readonly ControllerKind[] = [];

/** Every kind, built-in first. */
export function controllerKinds(): readonly ControllerKind[] {
  return registered.length === 0 ? BUILT_IN : [...BUILT_IN, ...registered];
}

/** Whether `object` is of kind `id`: group and kind both, never the group alone. */
export function isKind(object: { group: string; kind: string }, id: { group: string; kind: string }): boolean {
  return object.group === id.group && object.kind === id.kind;
}

function clash(candidate: ControllerKind, known: ControllerKind): string | null {
  const [a, b] = [candidate.rule, known.rule];
  if (a.group === b.group && (a.kind === b.kind || a.resource === b.resource)) return `${b.group} ${b.kind}/${b.resource}`;
  const source = candidate.discovery?.source;
  if (source !== undefined && source === known.discovery?.source) return `discovery source ${source}`;
  return null;
}

/**
 * Adds a kind; throws when it names a group and kind or resource, or a discovery source, that a
 * known kind already has (two rules for one resource would make the guard's answer depend on order).
 */
export function registerControllerKind(kind: ControllerKind): { unregister: () => void } {
  for (const known of controllerKinds()) {
    const taken = clash(kind, known);
    if (taken !== null) throw new Error(`controller kind ${kind.rule.group}/${kind.rule.kind}: ${taken} is already registered`);
  }
  registered = [...registered, kind];
  return {
    unregister: () => {
      registered = registered.filter((entry) => entry !== kind);
    },
  };
}

/** The kind of a guarded object (group AND kind), or undefined when etcd-guard does not know it. */
export function kindOf(object: { group: string; kind: string }): ControllerKind | undefined {
  // Loops, not find(): an admission request looks its kind up several times.
  for (const entry of controllerKinds()) if (isKind(object, entry.rule)) return entry;
  return undefined;
}

/** The kind guarding `group`/`resource` (any version), or undefined when it is not guarded. */
export function kindOfResource(resource: { group: string; resource: string }): ControllerKind | undefined {
  for (const entry of controllerKinds()) {
    if (entry.rule.group === resource.group && entry.rule.resource === resource.resource) return entry;
  }
  return undefined;
}

/** The kinds discovery can find, each with its discovery part. */
export function discoverableKinds(): readonly (ControllerKind & { discovery: KindDiscovery })[] {
  return controllerKinds().filter(
    (entry): entry is ControllerKind & { discovery: KindDiscovery } => entry.discovery !== undefined,
  );
}

/** The discovery source that owns objects of this group and kind, or undefined when none does. */
export function discoverySourceOf(object: { group: string; kind: string }): string | undefined {
  return kindOf(object)?.discovery?.source;
}

/** The kind a discovery source finds, or undefined when no kind has that source. */
export function kindOfSource(source: string): (ControllerKind & { discovery: KindDiscovery }) | undefined {
  return discoverableKinds().find((entry) => entry.discovery.source === source);
}

/** "group/version" naming an object of kind `id` in its Events: the first version its rule names (served by every supported release). */
export function apiVersionOf(id: Pick<ControllerKindId, 'group' | 'kind'>): string | undefined {
  const rule = kindOf(id)?.rule;
  const version = rule?.versions[0];
  return rule === undefined || version === undefined ? undefined : rule.group === '' ? version : `${rule.group}/${version}`;
}
