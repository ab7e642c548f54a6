// `etcd-guard targets --config FILE`: every target the config yields now, static and discovered,
// with its source, the object it guards and how it is reached; what discovery skipped and why on
// stderr. Reads the management cluster only when the config has a discovery section.
import { loadGuardConfigForCommand } from './config-file.js';
import { describeGuarded, type Target } from '../domain/targets.js';
import { resolveTargets } from '../usecases/resolve-targets.js';
import { formatTable } from './format-table.js';
import { UsageError } from '../shared/errors.js';

export interface TargetsCommandIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

function reachOf(target: Target): string {
  switch (target.reach.kind) {
    case 'capi':
      return `Cluster ${target.reach.namespace}/${target.reach.clusterName} (port-forward)`;
    case 'druid':
      return `${target.endpoints.length} members, TLS ${target.reach.tls === null ? 'off' : 'from Secrets'}`;
    default:
      return target.endpoints.join(',');
  }
}

function guardsOf(target: Target): string {
  if (target.guards !== null) return describeGuarded(target.guards);
  const match = JSON.stringify(target.match ?? {});
  return match === '{}' ? 'every guarded object' : `match ${match}`;
}

/** Exit 0 listed, 1 a provider could not list, 2 (UsageError) a bad flag or config. */
export async function runTargetsCommand(flags: { config?: string; output?: string }, io: TargetsCommandIo): Promise<number> {
  if (flags.config === undefined || flags.config.trim() === '') throw new UsageError('--config is required');
  const output = flags.output ?? 'table';
  if (output !== 'table' && output !== 'json')
    throw new UsageError(`--output: want table or json (got ${JSON.stringify(output)})`);
  const config = loadGuardConfigForCommand(flags.config);
  const resolved = await resolveTargets(config);
  if (output === 'json') {
    const targets = resolved.targets.map(({ name, source, guards, reach, endpoints, timeout, quotaBackendBytes, backup }) => ({
      name,
      source,
      guards,
      reach,
      endpoints,
      timeout,
      quotaBackendBytes,
      // Which targets the backup rule holds changes back on is worth seeing before a change is denied.
      ...(backup === undefined ? {} : { backup }),
    }));
    io.stdout(`${JSON.stringify({ targets, problems: resolved.problems, failures: resolved.failures }, null, 2)}\n`);
  } else {
    const rows = resolved.targets.map((target) => [target.name, target.source, guardsOf(target), reachOf(target)]);
    io.stdout(`${formatTable(['NAME', 'SOURCE', 'GUARDS', 'REACHED THROUGH'], rows)}\n`);
  }
  for (const problem of resolved.problems)
    io.stderr(`skipped ${describeGuarded(problem.object)} (${problem.source}): ${problem.message}\n`);
  for (const failure of resolved.failures) io.stderr(`discovery ${failure.source} could not list: ${failure.message}\n`);
  return resolved.failures.length === 0 ? 0 : 1;
}
