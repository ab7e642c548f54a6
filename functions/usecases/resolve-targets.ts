// Resolves the config's targets: the static ones as written, plus what each configured discovery
// provider finds in the management cluster now. One listing per provider, all under one deadline;
// a provider that cannot list is reported and leaves the others' targets intact.
import type { CustomObjectsApi } from '../adapters/kube-discovery.js';
import type { DiscoveryScope, GuardConfig } from '../domain/config.js';
import type { DiscoverySource } from '../domain/controller-kinds.js';
import { Deadline } from '../domain/deadline.js';
import { discoveredTargets, type DiscoveryDefaults } from '../domain/discovery-mapping.js';
import { scopeOf } from '../domain/kinds/discovery-common.js';
import { discoverableKinds } from '../domain/kinds/registry.js';
import { mergeTargets, staticTarget, type DiscoveryProblem, type Target } from '../domain/targets.js';

/** How long one discovery round (every provider, every page) may take. */
export const DISCOVERY_TIMEOUT_MS = 10_000;

export interface ResolvedTargets {
  targets: Target[];
  problems: DiscoveryProblem[];
  /** Providers that could not list this round (their targets are unknown, not gone). */
  failures: DiscoveryFailure[];
}

export interface DiscoveryFailure {
  source: DiscoverySource | 'discovery';
  /** e.g. `forbidden: cannot list kubeadmcontrolplanes...`; names the operation, never secret content. */
  message: string;
}

export interface ResolveOptions {
  /** The management cluster's custom objects client (built from discovery.kubeconfigFile by default). */
  api?: CustomObjectsApi;
  timeoutMs?: number;
}

/** The static targets alone, for deployables that must not wait for the apiserver. */
export function staticTargets(config: GuardConfig): Target[] {
  return config.targets.map(staticTarget);
}

/** A provider's defaults with its scope's enforcement and decision settings, when the scope names them. */
function withScope(
  defaults: DiscoveryDefaults,
  scope: Pick<DiscoveryScope, 'enforcement' | 'decisionMaxAgeMs' | 'decision'> & { backup?: DiscoveryDefaults['backup'] },
): DiscoveryDefaults {
  const { enforcement, decisionMaxAgeMs, decision, backup } = scope;
  if (enforcement === undefined && decisionMaxAgeMs === undefined && decision === undefined && backup === undefined)
    return defaults;
  return {
    ...defaults,
    ...(backup === undefined ? {} : { backup }),
    ...(enforcement === undefined ? {} : { enforcement }),
    ...(decisionMaxAgeMs === undefined ? {} : { decisionMaxAgeMs }),
    ...(decision === undefined ? {} : { decision }),
  };
}

export async function resolveTargets(config: GuardConfig, options: ResolveOptions = {}): Promise<ResolvedTargets> {
  const discovery = config.discovery;
  if (discovery === undefined) return { targets: staticTargets(config), problems: [], failures: [] };
  const adapter = await import('../adapters/kube-discovery.js');
  const deadline = Deadline.after(options.timeoutMs ?? DISCOVERY_TIMEOUT_MS);
  const failures: DiscoveryFailure[] = [];
  let api: CustomObjectsApi;
  try {
    api = options.api ?? adapter.createCustomObjectsApi(discovery.kubeconfigFile);
  } catch (error) {
    return {
      targets: staticTargets(config),
      problems: [],
      failures: [{ source: 'discovery', message: (error as Error).message }],
    };
  }
  const defaults = {
    timeout: discovery.timeout,
    ...(discovery.watchProbe === true && { watchProbe: true }),
    ...(discovery.consistency !== undefined && { consistency: discovery.consistency }),
    ...(discovery.tlsVerify === undefined ? {} : { tlsVerify: discovery.tlsVerify }),
    ...(discovery.learnerGrace !== undefined && { learnerGrace: discovery.learnerGrace }),
    ...(discovery.fragmentation !== undefined && { fragmentation: discovery.fragmentation }),
    ...(discovery.kubeconfigFile === undefined ? {} : { kubeconfigFile: discovery.kubeconfigFile }),
  };
  // Each configured provider lists what its kind's discovery names, all at once; its mapping decides.
  const results = await Promise.all(
    discoverableKinds().map(async ({ discovery: provider }) => {
      const scope = scopeOf(discovery, provider.source);
      if (scope === undefined) return null;
      try {
        const [own, ...related] = provider.lists;
        const listed = await Promise.all([
          adapter.listInScope(api, own, scope, true, deadline),
          ...related.map((resource) => adapter.listInScope(api, resource, scope, false, deadline)),
        ]);
        return discoveredTargets(provider.source, listed, withScope(defaults, scope));
      } catch (error) {
        failures.push({ source: provider.source, message: (error as Error).message });
        return { targets: [], problems: [] };
      }
    }),
  );
  const found = results.flatMap((result) => result?.targets ?? []);
  const merged = mergeTargets(config.targets, found);
  return {
    targets: merged.targets,
    problems: [...results.flatMap((result) => result?.problems ?? []), ...merged.problems],
    failures,
  };
}
