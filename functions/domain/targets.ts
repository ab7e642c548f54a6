// The target model: every etcd cluster the guard judges, whether the config lists it (static) or
// discovery found it in the management cluster (capi: a KubeadmControlPlane with stacked etcd;
// druid: an etcd-druid Etcd). Pure: turns listed objects into targets, names them, merges them.
//
// Discovered target names are `<source>-<namespace>-<name>` (capi: the Cluster's name; druid: the
// Etcd's name), e.g. `capi-fleet-prod`, ConfigMap `etcd-guard-capi-fleet-prod`. That readable form
// is used only when it is unambiguous and fits: the namespace has no "-" (so the name splits back
// at the first two "-"), the name is a DNS label without "--", and the whole is at most 48
// characters. So a readable name never holds "--". Every other object gets a hashed name: a
// readable prefix (cut to fit, characters outside [a-z0-9-] and runs of "-" made one "-"), then
// "--" and 16 hex digits of SHA-256 over the JSON text `["<source>","<namespace>","<name>"]`:
// `capi-team-a-prod--5f0c2a91d3e4b607`. Readable and hashed names are disjoint sets ("--"), the
// readable form is injective by its split and the hashed one by 64 bits of SHA-256, so no object
// a tenant names can take another's name; whatever the input, the result is a DNS label every
// store accepts. A name that still collides (with a static target's) is reported, not guessed.
import { createHash } from 'node:crypto';
import type { TargetConfig } from './config.js';
import type { DiscoverySource } from './controller-kinds.js';
import { compareCodeUnits } from '../shared/names.js';

export type TargetSource = 'static' | DiscoverySource;

/** The object a discovered target guards; a request for it matches the target by identity. */
export interface GuardedObject {
  group: string;
  kind: string;
  namespace: string;
  name: string;
}

/** Where the TLS material of a druid Etcd lives (Secrets in the Etcd's namespace). */
export interface DruidTlsSecrets {
  caSecret: string;
  caDataKey: string;
  /** Client certificate Secret (tls.crt, tls.key); absent when the Etcd names none. */
  clientSecret?: string;
}

/** How an evaluation reaches the target's etcd. */
export type TargetReach =
  /** The config's endpoints and TLS files. */
  | { kind: 'static' }
  /** Like KCP: `<cluster>-kubeconfig`, `<cluster>-etcd`, pod port-forward to each member. */
  | { kind: 'capi'; namespace: string; clusterName: string; kubeconfigFile?: string }
  /** The members' client URLs (pod DNS) with TLS from the Etcd's Secrets. */
  | { kind: 'druid'; namespace: string; tls: DruidTlsSecrets | null; kubeconfigFile?: string };

/** Where the control-plane inventory comes from when it is not a static target's Node list. */
export interface MachineInventory {
  namespace: string;
  clusterName: string;
}

export type Target = TargetConfig & {
  source: TargetSource;
  /** The object it guards (discovered targets), or null (static targets guard what `match` says). */
  guards: GuardedObject | null;
  /**
   * The metadata.uid of the object `guards` names, as discovery listed it (valid, see
   * shared/object-uid.ts); absent when it had none or a malformed one. Only Events use it (their
   * `regarding.uid`); identity stays group, kind, namespace and name.
   */
  guardsUid?: string;
  reach: TargetReach;
  machines?: MachineInventory;
};

/** A listed object discovery could not turn into a target, and why. */
export interface DiscoveryProblem {
  source: Exclude<TargetSource, 'static'>;
  object: GuardedObject | null;
  message: string;
  /**
   * Discovery leaves this object to the static targets on purpose (external etcd, a hibernated
   * Etcd): one that names it by namespace and name may judge it. Any other problem leaves the
   * object owned but unresolved, and its guarded changes are denied naming the problem.
   */
  staticMayJudge?: true;
}

/**
 * What the webhook knows of discovery beyond its targets: which providers have listed at least
 * once (before that, every object in their scope is unresolved) and the objects they could not
 * resolve, with why.
 */
export interface FleetView {
  listed: ReadonlySet<Exclude<TargetSource, 'static'>>;
  problems: readonly DiscoveryProblem[];
}

/** A target name becomes part of ConfigMap and file names; 48 leaves room for their prefixes. */
export const MAX_TARGET_NAME = 48;
const HASH_LENGTH = 16;
/** What separates a hashed name's prefix from its hash; a readable name never holds it. */
export const HASH_SEPARATOR = '--';
const READABLE_PART = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** The deterministic target name of a discovered object (see the top of this file). */
export function discoveredTargetName(source: Exclude<TargetSource, 'static'>, namespace: string, name: string): string {
  const readable = `${source}-${namespace}-${name}`;
  const unambiguous =
    READABLE_PART.test(namespace) &&
    !namespace.includes('-') &&
    READABLE_PART.test(name) &&
    !name.includes(HASH_SEPARATOR) &&
    readable.length <= MAX_TARGET_NAME;
  if (unambiguous) return readable;
  // JSON, not "a/b/c": owner names are untrusted and may hold "/" themselves.
  const hash = createHash('sha256')
    .update(JSON.stringify([source, namespace, name]))
    .digest('hex')
    .slice(0, HASH_LENGTH);
  const prefix = readable
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .slice(0, MAX_TARGET_NAME - HASH_LENGTH - HASH_SEPARATOR.length)
    .replace(/-+$/, '');
  return `${prefix}${HASH_SEPARATOR}${hash}`;
}

/** A static target as the model sees it. */
export function staticTarget(config: TargetConfig): Target {
  return { ...config, source: 'static', guards: null, reach: { kind: 'static' } };
}

/** A target fleet discovery found: its source is never 'static'. */
export type DiscoveredTarget = Target & { source: DiscoverySource };

export interface MergedTargets {
  targets: Target[];
  problems: DiscoveryProblem[];
}

/**
 * Static targets first (in config order), then discovered ones sorted by name. A discovered
 * target whose name is already taken is dropped with a problem naming both objects: guessing
 * which one the name means could judge one cluster by another's etcd.
 */
export function mergeTargets(staticTargets: readonly TargetConfig[], discovered: readonly DiscoveredTarget[]): MergedTargets {
  const targets = staticTargets.map(staticTarget);
  const staticNames = new Set(targets.map((target) => target.name));
  const byName = new Map<string, DiscoveredTarget[]>();
  for (const target of discovered) byName.set(target.name, [...(byName.get(target.name) ?? []), target]);
  const problems: DiscoveryProblem[] = [];
  // Code units: every process (CronJob, webhook, CLI) lists the targets in one order whatever its
  // locale; discovered names are DNS labels, for which that is also the English alphabetical order.
  for (const [name, claimants] of [...byName.entries()].sort(([a], [b]) => compareCodeUnits(a, b))) {
    const [only, ...others] = claimants;
    if (only !== undefined && others.length === 0 && !staticNames.has(name)) {
      targets.push(only);
      continue;
    }
    const claimedBy = [
      ...(staticNames.has(name) ? [`static target ${name}`] : []),
      ...claimants.map((c) => describeGuarded(c.guards)),
    ];
    for (const claimant of claimants) {
      problems.push({
        source: claimant.source,
        object: claimant.guards,
        message: `target name ${name} is claimed by ${claimedBy.join(' and ')}; none of the discovered ones is evaluated`,
      });
    }
  }
  return { targets, problems };
}

export function describeGuarded(object: GuardedObject | null): string {
  return object === null ? 'its match' : `${object.kind} ${object.namespace}/${object.name}`;
}

/** The discovered target guarding exactly this object, if any. */
export function targetGuarding(targets: readonly Target[], object: GuardedObject): Target | undefined {
  // A loop, not find(): this runs on every admission request, and the closure was garbage.
  for (const target of targets) {
    const guards = target.guards;
    if (
      guards !== null &&
      guards.group === object.group &&
      guards.kind === object.kind &&
      guards.namespace === object.namespace &&
      guards.name === object.name
    ) {
      return target;
    }
  }
  return undefined;
}

/** One row of the fleet overview (`GET /evaluations`, `etcd-guard targets`). */
export interface TargetOverview {
  name: string;
  source: TargetSource;
  /** The object a discovered target guards; null for a static target (its `match` decides). */
  guards: GuardedObject | null;
  /** A static target's match; absent for discovered targets. */
  match?: TargetConfig['match'];
  verdict: 'Healthy' | 'Degraded' | 'Unhealthy' | null;
  evaluatedAt: string | null;
}

export function targetOverview(
  target: Target,
  evaluation: { verdict: TargetOverview['verdict']; evaluatedAt: string } | null,
): TargetOverview {
  return {
    name: target.name,
    source: target.source,
    guards: target.guards,
    ...(target.source === 'static' ? { match: target.match } : {}),
    verdict: evaluation?.verdict ?? null,
    evaluatedAt: evaluation?.evaluatedAt ?? null,
  };
}
