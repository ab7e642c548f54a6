// Evaluates one configured etcd target: reads its TLS files, discovers the members, probes every
// member under ONE overall deadline (start + target.timeout) and lets the pure core judge.
import { readFile } from 'node:fs/promises';
import { ConfigError, type InventoryConfig, type TargetConfig } from './config.js';
import { EtcdProbeSession, type ProbeCredentials } from './adapters/etcd-member-probe.js';
import {
  evaluateCluster,
  type ControlPlaneInventory,
  type ControlPlaneNode,
  type DiscoveredMember,
  type EndpointProbe,
  type Outcome,
} from './core/evaluate.js';
import { Deadline, withDeadline } from './core/deadline.js';
import type { Evaluation } from './core/evaluation.js';

export interface EvaluateTargetOptions {
  now?: () => Date;
  /** Lists the control-plane Nodes when target.inventory is set; the Kubernetes adapter by default. */
  listControlPlaneNodes?: (inventory: InventoryConfig, timeoutMs: number) => Promise<ControlPlaneNode[]>;
}

async function readTlsFile(targetName: string, field: string, file: string | undefined): Promise<Buffer | undefined> {
  if (file === undefined) return undefined;
  try {
    return await readFile(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError(`target ${targetName}`, [`${field}: cannot read ${JSON.stringify(file)} (${code})`]);
  }
}

/** Reads the target's TLS files; a missing or unreadable one is a ConfigError naming the field. */
export async function readTargetCredentials(target: Pick<TargetConfig, 'name' | 'tls'>): Promise<ProbeCredentials> {
  const [ca, cert, key] = await Promise.all([
    readTlsFile(target.name, 'tls.caFile', target.tls?.caFile),
    readTlsFile(target.name, 'tls.certFile', target.tls?.certFile),
    readTlsFile(target.name, 'tls.keyFile', target.tls?.keyFile),
  ]);
  const credentials: ProbeCredentials = {};
  if (ca) credentials.ca = ca;
  if (cert) credentials.cert = cert;
  if (key) credentials.key = key;
  return credentials;
}

/** The first member list any endpoint returns; all errors joined when none does. */
function discoverMembers(
  session: EtcdProbeSession,
  endpoints: readonly string[],
  deadline: Deadline,
): Promise<Outcome<DiscoveredMember[]>> {
  return new Promise((resolve) => {
    const errors: string[] = [];
    let pending = endpoints.length;
    for (const endpoint of endpoints) {
      void session.listMembers(endpoint, deadline).then((outcome) => {
        pending -= 1;
        if (outcome.ok) resolve(outcome);
        else errors.push(outcome.error);
        if (pending === 0) resolve({ ok: false, error: errors.join('; ') });
      });
    }
  });
}

async function listInventory(
  inventory: InventoryConfig,
  deadline: Deadline,
  lister: NonNullable<EvaluateTargetOptions['listControlPlaneNodes']>,
): Promise<ControlPlaneInventory> {
  const budgetMs = Math.max(1, Math.round(deadline.remainingMs()));
  return withDeadline(
    lister(inventory, budgetMs),
    deadline,
    () => new Error(`listing control-plane nodes timed out after ${budgetMs} ms`),
  ).catch((error: unknown): ControlPlaneInventory => ({ error: error instanceof Error ? error.message : String(error) }));
}

export async function evaluateTarget(target: TargetConfig, options: EvaluateTargetOptions = {}): Promise<Evaluation> {
  const now = options.now ?? (() => new Date());
  const evaluatedAt = now();
  const started = performance.now();
  // One deadline for everything, reading the TLS files included: the caller's bound is the timeout.
  const deadline = Deadline.after(target.timeout);
  const credentials = await readTargetCredentials(target);

  const session = new EtcdProbeSession(credentials);
  try {
    let inventoryRun: Promise<ControlPlaneInventory> | undefined;
    if (target.inventory !== undefined) {
      const lister = options.listControlPlaneNodes ?? (await import('./adapters/kube-nodes.js')).listControlPlaneNodes;
      inventoryRun = listInventory(target.inventory, deadline, (inventory, timeoutMs) => lister(inventory, timeoutMs));
    }
    // The given endpoints are probed while the member list is fetched, saving a round trip.
    const probes = new Map<string, Promise<EndpointProbe>>();
    for (const endpoint of target.endpoints) probes.set(endpoint, session.probe(endpoint, deadline));
    const memberList = await discoverMembers(session, target.endpoints, deadline);
    if (memberList.ok) {
      for (const member of memberList.value) {
        const known = member.clientUrls.find((url) => probes.has(url));
        const first = member.clientUrls[0];
        if (known === undefined && first !== undefined) probes.set(first, session.probe(first, deadline));
      }
    }
    const [probeResults, controlPlaneNodes] = await Promise.all([Promise.all(probes.values()), inventoryRun]);
    const input: Parameters<typeof evaluateCluster>[0] = {
      target: target.name,
      endpoints: target.endpoints,
      memberList,
      probes: probeResults,
      quotaBackendBytes: target.quotaBackendBytes,
      evaluatedAt: evaluatedAt.toISOString(),
      durationMs: Math.round(performance.now() - started),
    };
    if (controlPlaneNodes !== undefined) input.controlPlaneNodes = controlPlaneNodes;
    return evaluateCluster(input);
  } finally {
    session.close();
  }
}
