// One KCP rollout step played on real etcd behind the loopback Cluster API stand-in (issue 17):
// a new Machine provisions, its Node appears, kubeadm adds its member as a learner (`member add
// --learner`), the learner starts and is promoted, KCP deletes the oldest Machine and removes its
// member, and the old Machine and Node go. Every step goes through the scheduled run (evaluate,
// then store) with an injected clock, so ages are exact and nothing sleeps; then a learner left
// unpromoted turns Unhealthy past the grace, dated by its Node, and one never started by when the
// scheduled run first saw it (carried in the stored evaluation).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCoreV1Api } from '../../functions/adapters/kube.js';
import { createCustomObjectsApi } from '../../functions/adapters/kube-discovery.js';
import { FileStore } from '../../functions/adapters/file-store.js';
import { parseGuardConfig } from '../../functions/domain/config.js';
import {
  evaluationSchema,
  verdictFromChecks,
  type Evaluation,
  type Verdict,
} from '../../functions/domain/evaluation-document.js';
import type { Target } from '../../functions/domain/targets.js';
import { evaluateResolvedTarget } from '../../functions/usecases/reach-target.js';
import { runScheduledEvaluation } from '../../functions/usecases/scheduled-run.js';
import { routeEtcdPods, startCapiWorkload, type CapiWorkload } from '../harness/capi-workload.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../harness/fake-kube-apiserver.js';
import { waitFor } from '../harness/wait.js';

const NAMESPACE = 'fleet';
const CLUSTER = 'roll';
const CONTROL_PLANE_LABEL = 'node-role.kubernetes.io/control-plane';
const TIMEOUT_MS = 5000;
const SECOND = 1000;
const MINUTE = 60 * SECOND;

let management: FakeKubeApiServer;
let workload: CapiWorkload;
let storeDir: string;
let store: FileStore;
/**
 * The evaluations' clock. It starts 30 minutes in the past so that every stamp the steps give it
 * stays behind the real clock the store compares with (a stamp ahead of it would be a skewed writer).
 */
const T0 = Date.now() - 30 * MINUTE;
let clock = T0;
const at = (offsetMs: number) => new Date(T0 + offsetMs).toISOString();

/** Nodes of the workload cluster, by name, with their creation offsets from T0. */
const nodes = new Map<string, number>();

function publishNodes(): void {
  workload.apiServer.setNodes(
    [...nodes].map(([node, offset]) => ({ name: node, labels: { [CONTROL_PLANE_LABEL]: '' }, createdAt: at(offset) })),
  );
}

function putNode(name: string, createdOffsetMs: number): void {
  nodes.set(name, createdOffsetMs);
  publishNodes();
}

function removeNode(name: string): void {
  nodes.delete(name);
  publishNodes();
}

function putMachine(name: string, options: { node?: string; createdOffsetMs: number; deletingOffsetMs?: number }): void {
  const machine: FakeObject = {
    apiVersion: 'cluster.x-k8s.io/v1beta1',
    kind: 'Machine',
    metadata: {
      name,
      namespace: NAMESPACE,
      creationTimestamp: at(options.createdOffsetMs),
      ...(options.deletingOffsetMs !== undefined && { deletionTimestamp: at(options.deletingOffsetMs) }),
      labels: { 'cluster.x-k8s.io/cluster-name': CLUSTER, 'cluster.x-k8s.io/control-plane': '' },
    },
    spec: { clusterName: CLUSTER },
    status: options.node === undefined ? {} : { nodeRef: { kind: 'Node', name: options.node } },
  };
  management.putObject('machines', machine);
}

const target: Target = {
  name: 'capi-fleet-roll',
  source: 'capi',
  guards: { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', namespace: NAMESPACE, name: CLUSTER },
  reach: { kind: 'capi', namespace: NAMESPACE, clusterName: CLUSTER },
  machines: { namespace: NAMESPACE, clusterName: CLUSTER },
  endpoints: [],
  timeout: TIMEOUT_MS,
  quotaBackendBytes: 2 * 1024 ** 3,
  match: {},
};

interface Step {
  step: string;
  verdict: Verdict;
  wallMs: number;
  evaluation: Evaluation;
}
const steps: Step[] = [];

/** One scheduled run at `offsetMs` after T0: evaluated, stored, its evaluation returned. */
async function scheduledRun(step: string, offsetMs: number): Promise<Evaluation> {
  clock = T0 + offsetMs;
  const config = parseGuardConfig({ store: { kind: 'file', dir: storeDir }, discovery: { capi: {} } }, 'test');
  let evaluated: Evaluation | undefined;
  const options = {
    now: () => new Date(clock),
    coreApi: createCoreV1Api(management.kubeconfigFile),
    customObjectsApi: createCustomObjectsApi(management.kubeconfigFile),
  };
  const started = performance.now();
  const [result] = await runScheduledEvaluation({
    config,
    store,
    targets: [target],
    logger: { info: () => undefined, error: () => undefined },
    evaluate: async (resolved, context) => {
      evaluated = evaluationSchema.parse(await evaluateResolvedTarget(resolved, { ...options, ...context }));
      return evaluated;
    },
  });
  const wallMs = Math.round(performance.now() - started);
  if (result?.ok !== true || evaluated === undefined) throw new Error(`${step}: the run failed: ${JSON.stringify(result)}`);
  steps.push({ step, verdict: evaluated.verdict, wallMs, evaluation: evaluated });
  return evaluated;
}

async function memberIdHex(name: string): Promise<string> {
  const listed = await workload.etcd.etcdctl(['member', 'list']);
  // "<id hex>, started, <name>, <peer urls>, <client urls>, <is learner>"
  const line = listed.stdout.split('\n').find((entry) => entry.split(', ')[2] === name);
  const id = line?.split(', ')[0];
  if (id === undefined) throw new Error(`member ${name} not listed: ${listed.stdout} ${listed.stderr}`);
  return id;
}

/** The member list's rows as etcdctl prints them: "<id hex>, <state>, <name>, <peer urls>, <client urls>, <is learner>". */
async function memberRows(): Promise<string[][]> {
  const listed = await workload.etcd.etcdctl(['member', 'list']);
  if (listed.code !== 0) throw new Error(`member list failed: ${listed.stderr}`);
  return listed.stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => line.split(', '));
}

/**
 * Retries `member promote` until etcd finds the learner in sync with the leader. On a loaded
 * machine an attempt can be applied after etcdctl gave up on it; the retry then hears "can only
 * promote a learner member", so the member list, not the answer, says whether it was promoted.
 */
async function promote(idHex: string): Promise<void> {
  let last = '';
  await waitFor(`learner ${idHex} to be promoted`, 30_000, async () => {
    const result = await workload.etcd.etcdctl(['member', 'promote', idHex]);
    last = result.stderr.trim();
    if (result.code === 0) return true;
    const row = (await memberRows()).find((columns) => columns[0] === idHex);
    return row !== undefined && row[5] === 'false';
  }).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}: ${last}`);
  });
}

/**
 * `member remove`, retried while etcd refuses membership changes right after the last one (it
 * wants every voting member connected for 5 s first: "unhealthy cluster"). An attempt applied
 * after etcdctl gave up on it makes the retry hear "member not found": the member list decides.
 */
async function removeMember(idHex: string): Promise<void> {
  let last = '';
  await waitFor(`member ${idHex} to be removed`, 30_000, async () => {
    const result = await workload.etcd.etcdctl(['member', 'remove', idHex]);
    last = result.stderr.trim();
    if (result.code === 0) return true;
    return !(await memberRows()).some((columns) => columns[0] === idHex);
  }).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}: ${last}`);
  });
}

beforeAll(async () => {
  management = await startFakeKubeApiServer();
  // The learners roll-3, roll-4 and roll-5 join later; the serving certificate names them too.
  workload = await startCapiWorkload(management, {
    namespace: NAMESPACE,
    clusterName: CLUSTER,
    serverCertNames: Array.from({ length: 6 }, (_, index) => `${CLUSTER}-${index}`),
  });
  storeDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-rollout-'));
  store = new FileStore(storeDir);
  // Three Machines and Nodes made a month before the rollout.
  for (const [index, node] of workload.nodeNames.entries()) {
    putMachine(`${CLUSTER}-cp-${index}`, { node, createdOffsetMs: -30 * 24 * 60 * MINUTE });
    putNode(node, -30 * 24 * 60 * MINUTE);
  }
}, 60_000);

afterAll(async () => {
  console.log(
    `rollout steps (verdict without latency [as stored], wall ms): ${steps
      .map((entry) => `${entry.step}: ${judged(entry.evaluation).verdict} [${entry.verdict}] ${entry.wallMs}`)
      .join('; ')}`,
  );
  await Promise.all([workload?.destroy(), management?.close()]);
  if (storeDir !== undefined) await rm(storeDir, { recursive: true, force: true });
});

/**
 * The verdict and reasons without the latency check: this machine is shared and loaded (Status
 * through the port-forward relay took 500-620 ms in some runs), which says nothing about the
 * rollout. The latency check only ever warns, so no Unhealthy verdict depends on this.
 */
function judged(evaluation: Evaluation): { verdict: Verdict; reasons: string[] } {
  return {
    verdict: verdictFromChecks(evaluation.checks.filter((check) => check.name !== 'latency')),
    reasons: evaluation.reasons.filter((reason) => !/ slow: status took \d+ ms/.test(reason)),
  };
}

const reasonsOf = (evaluation: Evaluation) => judged(evaluation).reasons.join('\n');

describe('a KCP rollout step on real etcd, verdict at every step', () => {
  let learnerId = '';

  it('steady, 3 members: Healthy', async () => {
    const evaluation = await scheduledRun('steady', 0);
    expect(judged(evaluation).reasons).toEqual([]);
    expect(judged(evaluation).verdict).toBe('Healthy');
  });

  it('a new Machine provisioning (no Node yet) is not compared: Healthy', async () => {
    putMachine(`${CLUSTER}-cp-3`, { createdOffsetMs: 5 * SECOND });
    const evaluation = await scheduledRun('provisioning', 10 * SECOND);
    expect(judged(evaluation).reasons).toEqual([]);
    expect(judged(evaluation).verdict).toBe('Healthy');
    expect(evaluation.checks.find((check) => check.name === 'inventory')?.message).toContain(
      '1 provisioning Machine not compared',
    );
  });

  it('its Node exists, no member yet, 20 s after the Node was made: Degraded within the grace', async () => {
    putNode(`${CLUSTER}-3`, 40 * SECOND);
    putMachine(`${CLUSTER}-cp-3`, { node: `${CLUSTER}-3`, createdOffsetMs: 5 * SECOND });
    const evaluation = await scheduledRun('node without member', 60 * SECOND);
    expect(judged(evaluation).verdict).toBe('Degraded');
    // The grace counts from the Node (made at 40 s), not from the Machine (made at 5 s).
    expect(judged(evaluation).reasons).toEqual([
      `control-plane node ${CLUSTER}-3 runs no etcd member yet (created 20s ago, grace 2m)`,
    ]);
  });

  it('a learner added (not started yet): Degraded, a join in progress, and the cluster block says a learner exists', async () => {
    const learner = await workload.etcd.addLearner();
    learnerId = learner.memberId;
    const added = await scheduledRun('learner added', 70 * SECOND);
    expect(judged(added).verdict).toBe('Degraded');
    expect(added.cluster).toMatchObject({ votingMembers: 3, learners: 1, healthyVoting: 3 });
    expect(reasonsOf(added)).toContain(
      `learner id ${learner.memberIdDecimal} (not started) joining, age unknown (first seen by this evaluation)`,
    );
    expect(added.checks.find((check) => check.name === 'learners')?.status).toBe('warn');
    expect(added.checks.every((check) => check.status !== 'fail')).toBe(true);

    await learner.start();
    routeEtcdPods(workload.relay, workload.etcd);
    await waitFor('the learner to start and publish its name', 30_000, async () => {
      const listed = await workload.etcd.etcdctl(['member', 'list']);
      return listed.stdout.split('\n').some((line) => line.startsWith(`${learnerId}, started, ${CLUSTER}-3,`));
    });
    const joining = await scheduledRun('learner joining', 100 * SECOND);
    expect(judged(joining).verdict).toBe('Degraded');
    // Dated by its Node (made at 40 s), named as the issue asks.
    expect(judged(joining).reasons).toEqual([`membership change in progress: learner ${CLUSTER}-3 joining for 60s`]);
    expect(joining.members.find((member) => member.name === `${CLUSTER}-3`)).toMatchObject({
      learner: true,
      healthy: true,
      learnerSince: at(40 * SECOND),
    });
  });

  it('promoted, 4 voting members: Degraded (an even count), not Unhealthy', async () => {
    await promote(learnerId);
    await workload.etcd.waitHealthy();
    const evaluation = await scheduledRun('promoted', 150 * SECOND);
    expect(evaluation.cluster).toMatchObject({ votingMembers: 4, learners: 0, healthyVoting: 4 });
    expect(judged(evaluation).verdict).toBe('Degraded');
    expect(judged(evaluation).reasons).toEqual([
      'even number of voting members (4): tolerates 1 failure, no more than 3 members would',
    ]);
  });

  it('the oldest Machine deleting while its member is still there: Degraded, a membership change in progress', async () => {
    putMachine(`${CLUSTER}-cp-0`, {
      node: `${CLUSTER}-0`,
      createdOffsetMs: -30 * 24 * 60 * MINUTE,
      deletingOffsetMs: 170 * SECOND,
    });
    const evaluation = await scheduledRun('oldest Machine deleting', 180 * SECOND);
    expect(judged(evaluation).verdict).toBe('Degraded');
    expect(reasonsOf(evaluation)).toContain(`membership change in progress: member ${CLUSTER}-0`);
  });

  it('the oldest Machine deleting and its member removed: Degraded, not Unhealthy (KCP skips deleting Machines)', async () => {
    const oldest = await memberIdHex(`${CLUSTER}-0`);
    await removeMember(oldest);
    // The Machine's infrastructure goes with it; a removed etcd stops itself too.
    await workload.etcd.kill(0);
    await workload.etcd.waitHealthy();
    const evaluation = await scheduledRun('oldest member removed', 200 * SECOND);
    expect(evaluation.cluster).toMatchObject({ votingMembers: 3, learners: 0, healthyVoting: 3 });
    expect(judged(evaluation).verdict).toBe('Degraded');
    expect(judged(evaluation).reasons).toEqual([
      `membership change in progress: node ${CLUSTER}-0 runs no etcd member, its Machine is being deleted`,
    ]);
  });

  it('done, 3 members: Healthy', async () => {
    management.removeObject('machines', 'cluster.x-k8s.io/v1beta1', NAMESPACE, `${CLUSTER}-cp-0`);
    removeNode(`${CLUSTER}-0`);
    const evaluation = await scheduledRun('done', 240 * SECOND);
    expect(judged(evaluation).reasons).toEqual([]);
    expect(judged(evaluation).verdict).toBe('Healthy');
    expect(evaluation.members.map((member) => member.name).sort()).toEqual([`${CLUSTER}-1`, `${CLUSTER}-2`, `${CLUSTER}-3`]);
  });
});

describe('a learner left unpromoted', () => {
  it('dated by when the scheduled run first saw it (never started, no Machine): Unhealthy once past the 5 min grace', async () => {
    const learner = await workload.etcd.addLearner();
    try {
      const first = await scheduledRun('stray learner first seen', 300 * SECOND);
      expect(judged(first).verdict).toBe('Degraded');
      expect(reasonsOf(first)).toContain(
        `learner id ${learner.memberIdDecimal} (not started) joining, age unknown (first seen by this evaluation)`,
      );
      // The stored evaluation carries the sighting; the next run reads it back.
      const stored = await store.read(target.name);
      expect(stored?.members.find((member) => member.id === learner.memberIdDecimal)?.learnerSince).toBe(at(300 * SECOND));

      const within = await scheduledRun('stray learner 4m59s', 300 * SECOND + 4 * MINUTE + 59 * SECOND);
      expect(judged(within).verdict).toBe('Degraded');
      expect(reasonsOf(within)).toContain('joining for 5m');

      const past = await scheduledRun('stray learner 5m', 300 * SECOND + 5 * MINUTE);
      expect(judged(past).verdict).toBe('Unhealthy');
      expect(reasonsOf(past)).toContain(`learner id ${learner.memberIdDecimal} (not started) not promoted for 5m (grace 5m)`);
    } finally {
      await removeMember(learner.memberId);
    }
  });

  it('dated by its Node: Degraded 30 s after the Node was made, Unhealthy 6 min after', async () => {
    const learner = await workload.etcd.addLearner();
    putNode(learner.name, 11 * MINUTE);
    putMachine(`${CLUSTER}-cp-5`, { node: learner.name, createdOffsetMs: 10 * MINUTE });
    await learner.start();
    routeEtcdPods(workload.relay, workload.etcd);
    await waitFor('the second learner to start', 30_000, async () => {
      const listed = await workload.etcd.etcdctl(['member', 'list']);
      return listed.stdout.split('\n').some((line) => line.startsWith(`${learner.memberId}, started, ${learner.name},`));
    });
    const joining = await scheduledRun('learner on a new Node', 11 * MINUTE + 30 * SECOND);
    expect(judged(joining).verdict).toBe('Degraded');
    expect(judged(joining).reasons).toEqual([`membership change in progress: learner ${learner.name} joining for 30s`]);
    const stuck = await scheduledRun('learner stuck', 17 * MINUTE);
    expect(judged(stuck).verdict).toBe('Unhealthy');
    expect(judged(stuck).reasons).toEqual([`learner ${learner.name} not promoted for 6m (grace 5m)`]);
  });
});
