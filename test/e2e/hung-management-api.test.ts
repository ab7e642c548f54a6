// Issue 30, item 8: "a hung management API is stored as Unhealthy". While the management API
// server accepted and never answered, inline refreshes stored Unhealthy ("cannot list the
// control-plane Machines: timed out") for clusters whose etcd was healthy. A reach failure of
// ours is no verdict about the cluster: nothing is stored, the scheduled run reports the target
// as not evaluated (exit 1), and admission denies as for a missing evaluation. Through the real
// processes: `evaluate --config` and `etcd-guard webhook`, with a real etcd behind port-forward.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluationSchema, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { discoveredTargetName } from '../../functions/domain/targets.js';
import { putControlPlaneObjects, startCapiWorkload, type CapiWorkload } from '../harness/capi-workload.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';
import { runProcess } from '../harness/process.js';
import { fixtureReview } from '../harness/reviews.js';
import { startWebhookProcess } from '../harness/webhook-process.js';

const BIN = path.resolve(import.meta.dirname, '../../bin/etcd-guard.mjs');
const TIMEOUT_MS = 2_000;

let workDir: string;
let management: FakeKubeApiServer;
let workload: CapiWorkload;
let configFile: string;
let storeDir: string;
let target: string;

/** What reaching the cluster reads from the management API: its Machines and its two Secrets. */
function hangTheReachReads(): void {
  const { namespace } = workload.cluster;
  management.hang(`/apis/cluster.x-k8s.io/v1beta1/namespaces/${namespace}/machines`);
  management.hang(`/api/v1/namespaces/${namespace}/secrets`);
}

async function stored(): Promise<Evaluation | null> {
  const file = path.join(storeDir, `${target}.json`);
  if (!existsSync(file)) return null;
  return evaluationSchema.parse(JSON.parse(await readFile(file, 'utf8')));
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-hung-management-'));
  management = await startFakeKubeApiServer();
  workload = await startCapiWorkload(management, { namespace: 'team-a', clusterName: 'wa' });
  putControlPlaneObjects(management, workload.cluster, workload.nodeNames);
  target = discoveredTargetName('capi', workload.cluster.namespace, workload.cluster.clusterName);
  storeDir = path.join(workDir, 'store');
  configFile = path.join(workDir, 'guard.json');
  await writeFile(
    configFile,
    JSON.stringify({
      store: { kind: 'file', dir: storeDir },
      maxAgeSeconds: 60,
      inlineRefresh: true,
      events: false,
      targets: [],
      discovery: {
        capi: { namespaces: [workload.cluster.namespace] },
        kubeconfigFile: management.kubeconfigFile,
        timeout: `${TIMEOUT_MS}ms`,
      },
    }),
  );
}, 120_000);

afterAll(async () => {
  await Promise.all([workload?.destroy(), management?.close()]);
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

describe('issue 30 item 8: a management API that accepts and never answers', () => {
  it('evaluate --config reports the target as not evaluated, exits 1 and leaves the stored evaluation alone', async () => {
    const healthy = await runProcess('node', [BIN, 'evaluate', '--config', configFile], { timeoutMs: 60_000 });
    expect(healthy.code, healthy.stderr).toBe(0);
    const before = await stored();
    expect(before?.passed, before?.reasons.join('; ')).toBe(true);
    hangTheReachReads();
    try {
      const run = await runProcess('node', [BIN, 'evaluate', '--config', configFile], { timeoutMs: 60_000 });
      console.log(
        `hung management API: evaluate --config exit ${run.code} in ${run.wallMs.toFixed(0)} ms ` +
          `(${healthy.wallMs.toFixed(0)} ms while it answered)`,
      );
      expect(run.uncaught).toBeNull();
      expect(run.code).toBe(1);
      expect(`${run.stdout}${run.stderr}`).toMatch(/not evaluated: .*timed out/);
      expect(await stored()).toEqual(before);
    } finally {
      management.unhang();
    }
  }, 120_000);

  it('the webhook denies for want of an evaluation and stores none', async () => {
    await rm(path.join(storeDir, `${target}.json`), { force: true });
    const webhook = await startWebhookProcess({ configFile, insecureHttp: true });
    // Discovery has found the target; from now on the management API hangs, every path of it.
    management.hang('/');
    try {
      const review = fixtureReview('kcp-scale-up-3-to-5.json', {
        namespace: workload.cluster.namespace,
        name: `${workload.cluster.clusterName}-control-plane`,
        clusterName: workload.cluster.clusterName,
      });
      const started = performance.now();
      const answer = await post(`${webhook.url}/validate?timeout=10s`, JSON.stringify(review));
      const ms = performance.now() - started;
      const response = (answer.json as { response: { uid: string; allowed: boolean; status?: { message?: string } } }).response;
      console.log(`hung management API: review answered in ${ms.toFixed(0)} ms: ${response.status?.message ?? ''}`);
      expect(response.uid).toBe(review.request.uid);
      expect(response.allowed).toBe(false);
      expect(response.status?.message).toContain(`no fresh etcd evaluation for ${target}`);
      expect(response.status?.message).toMatch(/not evaluated: cannot list the control-plane Machines/);
      const onDemand = await post(`${webhook.url}/evaluations/${target}`, '');
      expect(onDemand.status).toBe(503);
      expect(onDemand.json).toMatchObject({ notEvaluated: true });
      expect(await stored()).toBeNull();
    } finally {
      management.unhang();
      await webhook.stop();
    }
  }, 120_000);
});

function post(url: string, body: string): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json' }, timeout: 15_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as unknown });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`POST ${url} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}
