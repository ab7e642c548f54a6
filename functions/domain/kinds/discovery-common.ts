// What every kind's discovery mapping shares: reading the apiserver's untrusted JSON defensively,
// the loop that names an object or reports it, and the discovery-wide defaults each target takes.
// A problem names the object, never quotes its content. Pure.
import type { ConsistencyConfig, DecisionMode, DiscoveryConfig, DiscoveryScope, EnforcementMode } from '../config.js';
import type { GuardedObject, Target } from '../targets.js';
import { objectUid } from '../../shared/object-uid.js';
import { at, text } from '../../shared/records.js';
import type { ControllerKindId, KindDiscovery, ProviderResult } from './kind.js';

export interface DiscoveryDefaults {
  timeout: number;
  /** The management cluster's kubeconfig, for the Secrets and Machines an evaluation reads. */
  kubeconfigFile?: string;
  /** Run the opt-in watch round trip on every discovered target. */
  watchProbe?: boolean;
  /** The opt-in consistency check of every discovered target (targets[].consistency). */
  consistency?: ConsistencyConfig;
  /** The provider scope's enforcement, copied onto each of its targets. */
  enforcement?: EnforcementMode;
  /** The provider scope's decision settings, copied onto each of its targets. */
  decisionMaxAgeMs?: number;
  decision?: DecisionMode;
  /** How the discovered targets' serving certificates are checked (targets[].tlsVerify). */
  tlsVerify?: 'full' | 'chain-only';
  /** How long a learner may stay unpromoted, in milliseconds (the core's default when absent). */
  learnerGrace?: number;
  /** When the fragmentation check warns (targets[].fragmentation). */
  fragmentation?: { warnRatio: number; minFreeBytes: number };
  /** The druid scope's backup check and rule (targets[].backup). */
  backup?: { maxSnapshotAge: number; requiredForChanges: boolean };
}

function identity(object: unknown, id: ControllerKindId): GuardedObject | null {
  const namespace = text(at(object, 'metadata', 'namespace'));
  const name = text(at(object, 'metadata', 'name'));
  return namespace !== undefined && name !== undefined ? { group: id.group, kind: id.kind, namespace, name } : null;
}

export type Report = (message: string, options?: { staticMayJudge?: true }) => undefined;

/**
 * The loop every provider shares: an object without namespace or name is a problem; `toTarget`
 * makes the others' target, or reports why not (and returns what the report returns).
 */
export function provide(
  objects: readonly unknown[],
  provider: { source: KindDiscovery['source']; id: ControllerKindId },
  toTarget: (object: unknown, guards: GuardedObject, problem: Report) => Target | undefined,
): ProviderResult {
  const result: ProviderResult = { targets: [], problems: [] };
  const unnamed = `${/^[AEIOU]/.test(provider.id.kind) ? 'an' : 'a'} ${provider.id.kind} without namespace or name`;
  for (const item of objects) {
    const object = identity(item, provider.id);
    const problem: Report = (message, options) =>
      void result.problems.push({ source: provider.source, object, message, ...options });
    const target = object === null ? problem(unnamed) : toTarget(item, object, problem);
    if (target === undefined) continue;
    // The provider names the source (a target can never claim another provider's) and the uid of
    // the object it lists (for the target's Events), the same way for every kind.
    const { guardsUid: _ignored, ...rest } = target;
    const uid = objectUid(at(item, 'metadata', 'uid'));
    result.targets.push({ ...rest, source: provider.source, ...(uid === undefined ? {} : { guardsUid: uid }) });
  }
  return result;
}

/** A Kubernetes quantity ("8Gi", "2G", "2147483648") in bytes; undefined when it is not one. */
export function quantityBytes(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? value : undefined;
  const match = typeof value === 'string' ? /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(value.trim()) : null;
  if (!match) return undefined;
  const factors: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  const bytes = Math.round(Number(match[1]) * (match[2] ? (factors[match[2]] ?? 1) : 1));
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : undefined;
}

/** The management cluster's kubeconfig, for reaches that read Secrets or Machines there. */
export const management = (defaults: DiscoveryDefaults): { kubeconfigFile?: string } =>
  defaults.kubeconfigFile === undefined ? {} : { kubeconfigFile: defaults.kubeconfigFile };

/** The discovery-wide settings every discovered target carries. */
export function targetDefaults(defaults: DiscoveryDefaults) {
  return {
    timeout: defaults.timeout,
    match: {},
    ...(defaults.watchProbe === true && { watchProbe: true }),
    ...(defaults.consistency !== undefined && { consistency: defaults.consistency }),
    ...(defaults.enforcement !== undefined && { enforcement: defaults.enforcement }),
    ...(defaults.decisionMaxAgeMs !== undefined && { decisionMaxAgeMs: defaults.decisionMaxAgeMs }),
    ...(defaults.decision !== undefined && { decision: defaults.decision }),
    ...(defaults.tlsVerify === undefined ? {} : { tlsVerify: defaults.tlsVerify }),
    ...(defaults.learnerGrace !== undefined && { learnerGrace: defaults.learnerGrace }),
    ...(defaults.fragmentation !== undefined && { fragmentation: defaults.fragmentation }),
    ...(defaults.backup !== undefined && { backup: defaults.backup }),
  };
}

/** The config's scope for discovery source `source` (`discovery.<source>`), when it has one. */
export function scopeOf(discovery: DiscoveryConfig | undefined, source: string): DiscoveryScope | undefined {
  if (discovery === undefined || !Object.hasOwn(discovery, source)) return undefined;
  const scope: unknown = (discovery as Readonly<Record<string, unknown>>)[source];
  return scope !== null && typeof scope === 'object' ? (scope as DiscoveryScope) : undefined;
}
