// A StatefulSet that runs etcd (guarded only when a static target names it). The StatefulSet
// controller adds or removes pods on spec.replicas, highest ordinal first, names them
// `<name>-<ordinal>` from spec.ordinals.start (0 by default), and replaces them on a template
// revision. Not discovered: a static target names it and says where its etcd is. Pure.
import { valueAtPointer } from '../../shared/json-pointer.js';
import type { ControllerKind, RemovalFacts } from './kind.js';
import { ordinalProjection } from './ordinal-removal.js';

export const STATEFUL_SET = { group: 'apps', kind: 'StatefulSet', resource: 'statefulsets' } as const;

/**
 * The first ordinal, as far as the request tells: 0 when spec.ordinals is absent (the default),
 * null when it cannot be told (a /scale request carries a Scale, not the StatefulSet; an
 * unreadable value).
 */
function ordinalStart(facts: RemovalFacts): number | null {
  if (facts.object.viaScale) return null;
  const value = valueAtPointer(facts.request.oldObject, '/spec/ordinals/start');
  if (value === undefined || value === null) return 0;
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : null;
}

const UNKNOWN_START =
  "a /scale request does not carry the StatefulSet's spec.ordinals, so which pods go is unknown and a healthy " +
  'member is assumed to leave; change spec.replicas with kubectl patch instead';

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
    projectionOptions: (facts) =>
      ordinalProjection(facts.members, facts.object.name, ordinalStart(facts), facts.shrink, UNKNOWN_START),
  },
  reach: 'static',
};
