// Evaluates any resolved target by the reach strategy its kind names (ControllerKind.reach, put on
// its discovered targets as `reach.kind`): `static` through its endpoints and TLS files, `druid`
// through the advertised client URLs with TLS from the object's Secrets, `capi` the way KCP
// reaches a Cluster API cluster. The kinds are pure and only name a strategy; the I/O is here.
import type { CustomObjectsApi } from '../adapters/kube-discovery.js';
import type { CoreV1Api } from '../adapters/kube.js';
import type { TargetConfig } from '../domain/config.js';
import { Deadline } from '../domain/deadline.js';
import type { ControlPlaneNode } from '../ports/etcd-probe.js';
import { datedByNodes } from '../domain/machines.js';
import type { Evaluation } from '../domain/evaluation-document.js';
import type { Target, TargetReach } from '../domain/targets.js';
import type { ReachStrategy } from '../domain/kinds/kind.js';
import { NotEvaluatedError } from '../shared/errors.js';
import type { EtcdAccess } from '../ports/etcd-access.js';
import { evaluateTarget, evaluateThroughAccess, type EvaluateTargetOptions } from './evaluate-target.js';
import { BriefReuse } from './brief-reuse.js';
import { type CapiManagement, type WarmConnections } from './warm-connections.js';

export { createWarmConnections, type WarmConnections } from './warm-connections.js';

type CapiReach = Extract<TargetReach, { kind: 'capi' }>;

type CapiModules = [
  typeof import('../adapters/kube.js'),
  typeof import('../adapters/kube-discovery.js'),
  typeof import('../adapters/capi-machines.js'),
  typeof import('../adapters/capi-etcd-access.js'),
];
let capiModules: Promise<CapiModules> | undefined;

/**
 * The Kubernetes adapters a Cluster API evaluation needs, loaded on the first one only: a dynamic
 * import runs the loader's resolution again each time, on every live evaluation's critical path.
 */
function loadCapiModules(): Promise<CapiModules> {
  const loading = (capiModules ??= Promise.all([
    import('../adapters/kube.js'),
    import('../adapters/kube-discovery.js'),
    import('../adapters/capi-machines.js'),
    import('../adapters/capi-etcd-access.js'),
  ]));
  loading.catch(() => {
    if (capiModules === loading) capiModules = undefined;
  });
  return loading;
}

/** Opens the access to a Cluster API cluster's etcd through its control-plane nodes. */
export type CapiAccessOpener = (
  reach: CapiReach,
  nodeNames: readonly string[] | Promise<readonly string[]>,
  deadline: Deadline,
) => Promise<EtcdAccess>;

export interface EvaluateResolvedOptions extends EvaluateTargetOptions {
  /** Management cluster clients; built from the target's kubeconfig (else in-cluster) by default. */
  coreApi?: CoreV1Api;
  customObjectsApi?: CustomObjectsApi;
  openCapiAccess?: CapiAccessOpener;
  /** Connections kept between evaluations (the webhook's); absent: each evaluation opens and closes its own. */
  warm?: WarmConnections | null;
}

/**
 * KCP's way in: the Cluster's Secrets on the management cluster, each member through pod
 * port-forward; with `warm`, the access is kept for the next evaluation of `target`.
 */
async function openCapiAccessDefault(
  api: CoreV1Api,
  reach: CapiReach,
  nodeNames: readonly string[] | Promise<readonly string[]>,
  deadline: Deadline,
  kept?: { warm: WarmConnections; target: string; management: CapiManagement | null },
) {
  const [, , , { openCapiEtcdAccess }] = await loadCapiModules();
  if (kept === undefined) return openCapiEtcdAccess(api, reach, nodeNames, deadline);
  const { warm, target, management } = kept;
  const cluster = `${reach.namespace}/${reach.clusterName}`;
  return openCapiEtcdAccess(api, reach, nodeNames, deadline, {
    ...(management !== null && { credentials: (read) => management.credentials.get(cluster, read) }),
    keep: {
      accesses: warm.capiAccesses,
      target,
      // Channels dialled through its listeners lead nowhere once they are closed.
      onClosed: (endpoints) =>
        warm.channels.retireWhere(target, (key) => endpoints.some((endpoint) => key.startsWith(`${endpoint}\0`))),
    },
  });
}

type ReachOf<K extends ReachStrategy> = Extract<TargetReach, { kind: K }>;
type Reacher<K extends ReachStrategy> = (
  target: Target | TargetConfig,
  reach: ReachOf<K>,
  options: EvaluateResolvedOptions,
) => Promise<Evaluation>;

/** The members' advertised client URLs, with TLS from the Secrets the object names. */
async function throughDruidSecrets(
  target: Target | TargetConfig,
  reach: ReachOf<'druid'>,
  options: EvaluateResolvedOptions,
): Promise<Evaluation> {
  const kube = await import('../adapters/kube.js');
  const { openDruidEtcdAccess } = await import('../adapters/druid-etcd-access.js');
  const api = options.coreApi ?? kube.createCoreV1Api(reach.kubeconfigFile);
  const guarded = 'guards' in target ? target.guards : null;
  const policy = target.backup;
  let backupOptions: EvaluateResolvedOptions = options;
  if (policy !== undefined && guarded !== null) {
    const discovery = await import('../adapters/kube-discovery.js');
    const { readDruidBackupFacts } = await import('../adapters/druid-backup.js');
    const objects = options.customObjectsApi ?? discovery.createCustomObjectsApi(reach.kubeconfigFile);
    const etcd = { namespace: guarded.namespace, name: guarded.name };
    backupOptions = {
      ...options,
      backupFacts: (deadline) => readDruidBackupFacts(objects, etcd, policy.maxSnapshotAge, deadline),
    };
  }
  return evaluateThroughAccess(
    target,
    (deadline) => openDruidEtcdAccess(api, { endpoints: target.endpoints, reach }, deadline),
    backupOptions,
  );
}

/**
 * The reach strategies a kind's module may name (ControllerKind.reach), each with its I/O: the
 * kinds say which one their discovered targets take, this table says how it is done.
 */
const REACHES: { [K in ReachStrategy]: Reacher<K> } = {
  static: (target, _reach, options) => evaluateTarget(target, options),
  druid: throughDruidSecrets,
  capi: throughCapiMachines,
};

export async function evaluateResolvedTarget(
  target: Target | TargetConfig,
  options: EvaluateResolvedOptions = {},
): Promise<Evaluation> {
  const reach: TargetReach = 'reach' in target ? target.reach : { kind: 'static' };
  const reacher = REACHES[reach.kind] as Reacher<typeof reach.kind>;
  const warm = options.warm ?? undefined;
  // A discovered target's etcd is named by tenant-writable objects: its cluster ID is pinned.
  const pinned = reach.kind === 'static' ? options : { ...options, pinClusterId: true };
  return reacher(target, reach, warm === undefined ? pinned : { ...pinned, channels: warm.channels, tlsFiles: warm.tlsFiles });
}

/**
 * KCP's way in. The control-plane Machines are listed once per evaluation: their nodes say which
 * etcd pods to reach, and they are the inventory that every member must match.
 */
async function throughCapiMachines(
  target: Target | TargetConfig,
  reach: CapiReach,
  options: EvaluateResolvedOptions,
): Promise<Evaluation> {
  const modules = await loadCapiModules();
  const { listControlPlaneMachines } = modules[2];
  const management = await managementClients(reach, options, modules);
  const machines: Promise<ControlPlaneNode[]> = listControlPlaneMachines(
    management.customObjectsApi,
    reach,
    Deadline.after(target.timeout),
  );
  machines.catch(() => undefined);
  const coreApi = management.coreApi;
  const kept = options.warm ? { warm: options.warm, target: target.name, management: management.kept } : undefined;
  const openCapiAccess: CapiAccessOpener =
    options.openCapiAccess ?? ((capi, nodeNames, deadline) => openCapiAccessDefault(coreApi, capi, nodeNames, deadline, kept));
  // The workload's Nodes date the Machines; they are listed through the access once it is open.
  let settleNodes: (nodes: Promise<ControlPlaneNode[] | null>) => void = () => undefined;
  const workloadNodes = new Promise<ControlPlaneNode[] | null>((resolve) => {
    settleNodes = (nodes) => resolve(nodes.catch(() => null));
  });
  return evaluateThroughAccess(
    target,
    async (deadline) => {
      try {
        // The Machines are the management cluster's: failing to list them says nothing about etcd.
        // A provisioning Machine has no Node, so no etcd pod to forward to. Handed over as a
        // promise: the access reads the Cluster's Secrets meanwhile.
        const withNode = machines.then(
          (nodes) => nodes.filter((node) => node.provisioning !== true).map((node) => node.name),
          (error: unknown) => {
            throw new NotEvaluatedError(`cannot list the control-plane Machines: ${(error as Error).message}`);
          },
        );
        withNode.catch(() => undefined);
        const access = await openCapiAccess(reach, withNode, deadline);
        settleNodes(workloadNodesOf(access, reach, management.kept, deadline));
        return access;
      } finally {
        settleNodes(Promise.resolve(null));
      }
    },
    { ...options, controlPlaneInventory: async () => datedByNodes(await machines, await workloadNodes) },
  );
}

/**
 * The management cluster's clients: the given ones, else built from the target's kubeconfig. A
 * process with kept connections uses what it built, and the credentials read through it, for
 * CAPI_MANAGEMENT_REUSE_MS (`kept`, warm-connections.ts); loading a kubeconfig and reading two Secrets was most of
 * what a warm evaluation spent on the management cluster. The Machines are listed every time.
 */
async function managementClients(
  reach: CapiReach,
  options: EvaluateResolvedOptions,
  [kube, discovery]: CapiModules,
): Promise<{ coreApi: CoreV1Api; customObjectsApi: CustomObjectsApi; kept: CapiManagement | null }> {
  const build = () => ({
    coreApi: options.coreApi ?? kube.createCoreV1Api(reach.kubeconfigFile),
    customObjectsApi: options.customObjectsApi ?? discovery.createCustomObjectsApi(reach.kubeconfigFile),
  });
  const warm = options.warm ?? undefined;
  // Clients handed in are the caller's to keep or not.
  if (warm === undefined || options.coreApi !== undefined || options.customObjectsApi !== undefined) {
    return { ...build(), kept: null };
  }
  const kept = await warm.capiManagement.get(reach.kubeconfigFile ?? '', async () => ({
    ...build(),
    // As long as the clients: the whole of it is built and read again when they are.
    credentials: new BriefReuse(Number.POSITIVE_INFINITY),
    workloadNodes: new BriefReuse(Number.POSITIVE_INFINITY),
  }));
  return { ...kept, kept };
}

/**
 * The workload's control-plane Nodes through `access`; with kept management clients, the list a
 * recent evaluation got. They only date the Machines (a Node's grace to run a member counts from
 * its creation), and a date only ever moves later when a Node is created again: an older list
 * dates a Machine as old or older, so its grace ends no later. Never a reason to allow.
 */
function workloadNodesOf(
  access: EtcdAccess,
  reach: CapiReach,
  kept: CapiManagement | null,
  deadline: Deadline,
): Promise<ControlPlaneNode[] | null> {
  const list = access.listControlPlaneNodes;
  if (list === undefined) return Promise.resolve(null);
  const listNow = () => list(nodeListBudgetMs(deadline));
  if (kept === null) return listNow();
  return kept.workloadNodes.get(`${reach.namespace}/${reach.clusterName}`, listNow);
}

/**
 * The Node listing must end before the evaluation's deadline, so that a slow workload API server
 * costs only the Node dates (the Machines' own are kept), never the whole inventory.
 */
function nodeListBudgetMs(deadline: Deadline): number {
  return Math.max(1, Math.round(deadline.remainingMs() * 0.8));
}
