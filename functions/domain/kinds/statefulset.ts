// A StatefulSet that runs etcd (guarded only when a static target names it). The StatefulSet
// controller adds or removes pods on spec.replicas, highest ordinal first, names them
// `<name>-<ordinal>` from spec.ordinals.start (0 by default), and replaces them on a template
// revision. Not discovered: a static target names it and says where its etcd is. Pure.
import { valueAtPointer } from '../../shared/json-pointer.js';
import { printableExcerpt as clipped } from '../../shared/redact.js';
import type { ControllerKind, RemovalFacts } from './kind.js';
import { ordinalProjection } from './ordinal-removal.js';

export const STATEFUL_SET = { group: 'apps', kind: 'StatefulSet', resource: 'statefulsets' } as const;

const ORDINALS_START = '/spec/ordinals/start';
const REPLICAS = '/spec/replicas';
const ASSUMED = 'so which pods go is unknown and a healthy member is assumed to leave';

/** spec.ordinals.start of a StatefulSet: 0 when absent (the default), null when not a valid ordinal. */
function startOf(statefulSet: unknown): number | null {
  const value = valueAtPointer(statefulSet, ORDINALS_START);
  if (value === undefined || value === null) return 0;
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : null;
}

/**
 * The first ordinal, or why it cannot be told. A /scale request carries a Scale, not the
 * StatefulSet: the server reads the StatefulSet, whose spec.replicas must be the Scale's old one
 * (otherwise it is another revision than the one being scaled, and its ordinals may be too).
 */
function ordinalStart(facts: RemovalFacts): { start: number } | { hint: string } {
  const start = (of: unknown, what: string) => {
    const found = startOf(of);
    return found === null ? { hint: `${what} spec.ordinals.start is not a non-negative integer, ${ASSUMED}` } : { start: found };
  };
  if (!facts.object.viaScale) return start(facts.request.oldObject, "the StatefulSet's");
  const { parent } = facts;
  if (parent === undefined) {
    return {
      hint: `a /scale request does not carry the StatefulSet's spec.ordinals, ${ASSUMED}; change spec.replicas with kubectl patch instead`,
    };
  }
  if (!parent.ok) {
    return {
      hint: `a /scale request does not carry spec.ordinals and reading the StatefulSet failed (${parent.error}), ${ASSUMED}`,
    };
  }
  const replicas = valueAtPointer(parent.object, REPLICAS) ?? statefulSet.rule.defaultReplicas;
  if (facts.shrink !== null && replicas !== facts.shrink.from) {
    const shown = typeof replicas === 'number' ? String(replicas) : 'not a number';
    return {
      hint:
        `the StatefulSet read for its spec.ordinals has spec.replicas ${shown}, not the Scale's ${facts.shrink.from} ` +
        `(it changed meanwhile), ${ASSUMED}; retry`,
    };
  }
  return start(parent.object, 'the StatefulSet read for it has');
}

const ETCD_IMAGE = /(^|\/)etcd([:@]|$)/;

/**
 * The etcd container's image in spec.template: the container named etcd, else the one running an
 * etcd image (the same choice as the pods webhook's matchCondition in manifests/).
 */
function etcdContainerImage(object: unknown): { version: string | null; source: string; reference: 'image' } {
  const containers = valueAtPointer(object, '/spec/template/spec/containers');
  const list = Array.isArray(containers) ? (containers as unknown[]) : [];
  const field = (container: unknown, key: string): string | undefined => {
    const value = container !== null && typeof container === 'object' ? (container as Record<string, unknown>)[key] : undefined;
    return typeof value === 'string' && value !== '' ? value : undefined;
  };
  const etcd =
    list.find((container) => field(container, 'name') === 'etcd') ??
    list.find((container) => ETCD_IMAGE.test(field(container, 'image') ?? ''));
  const image = field(etcd, 'image');
  if (image === undefined) return { version: null, source: 'no etcd container image in spec.template', reference: 'image' };
  return {
    version: image,
    source: `container ${clipped(field(etcd, 'name') ?? '?')} image ${clipped(image)}`,
    reference: 'image',
  };
}

export const statefulSet: ControllerKind = {
  rule: {
    ...STATEFUL_SET,
    versions: ['v1'],
    guarded: [
      {
        pointer: '/spec',
        reason:
          'the StatefulSet controller adds or removes pods on spec.replicas, renames them on spec.ordinals, and ' +
          'replaces them on a spec.template revision as spec.updateStrategy says',
        harmless: [
          { pointer: '/spec/minReadySeconds', reason: 'only delays when a started pod counts as available' },
          { pointer: '/spec/revisionHistoryLimit', reason: 'only prunes old ControllerRevisions' },
          {
            pointer: '/spec/persistentVolumeClaimRetentionPolicy',
            reason: 'only decides whether PVCs outlive pods that are deleted later',
          },
        ],
      },
    ],
    replicasPointer: '/spec/replicas',
    defaultReplicas: 1,
    scope: 'named-by-target',
  },
  removal: {
    projectionOptions: (facts) => {
      const known = ordinalStart(facts);
      return 'start' in known
        ? ordinalProjection(facts.members, facts.object.name, known.start, facts.shrink, '')
        : ordinalProjection(facts.members, facts.object.name, null, facts.shrink, known.hint);
    },
    parentPointers: [ORDINALS_START, REPLICAS],
  },
  etcdVersion: etcdContainerImage,
  reach: 'static',
};
