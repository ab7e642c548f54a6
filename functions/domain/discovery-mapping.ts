// Discovery's pure half: turns the objects a provider listed into targets (see targets.ts for the
// names). The adapter lists; the kind whose discovery source it is decides (its module under
// kinds/). Objects arrive as the apiserver's JSON, untrusted: every field is read defensively and
// a problem names the object, never quotes its content.
import type { DiscoveryDefaults } from './kinds/discovery-common.js';
import type { ProviderResult } from './kinds/kind.js';
import { kindOfSource } from './kinds/registry.js';

export { quantityBytes, type DiscoveryDefaults } from './kinds/discovery-common.js';
export type { ProviderResult } from './kinds/kind.js';
export { CLUSTER_NAME_LABEL, capiTargets, owningCluster } from './kinds/kubeadm-control-plane.js';
export { druidTargets } from './kinds/druid-etcd.js';

/** Targets of discovery source `source` from its listings (in its kind's `discovery.lists` order). */
export function discoveredTargets(
  source: string,
  listed: readonly (readonly unknown[])[],
  defaults: DiscoveryDefaults,
): ProviderResult {
  const kind = kindOfSource(source);
  if (kind === undefined) throw new Error(`no controller kind has discovery source ${source}`);
  return kind.discovery.toTargets(listed, defaults);
}
