// Issue 32, druid backups end to end: a real 3-member etcd reached as a discovered druid target
// (the Etcd, its TLS Secrets and its snapshot Leases on the stand-in apiserver; pod DNS does not
// resolve here, so the target's advertised endpoints are swapped for the harness members'), and
// Etcd reviews posted to /validate over HTTPS with `discovery.druid.backup.requiredForChanges` on.
// A scale is allowed while druid reports BackupReady=True with a recent snapshot; BackupReady=False
// denies it with druid's reason and message; absent status fields are "unknown" and a stale
// snapshot warns, and both deny under the rule. Every request is judged live (decisionMaxAgeMs 0),
// so each step reads what the stand-in holds now.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { evaluateResolvedTarget } from '../../functions/usecases/reach-target.js';
import { generateTestCerts } from '../harness/certs.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../harness/fake-kube-apiserver.js';
import { druidImageReview, fixtureReview } from '../harness/reviews.js';
import { startTestWebhook, type TestWebhook } from '../harness/webhook.js';

const NAMESPACE = 'shoot--prod--core';
const NAME = 'etcd-main';
const HOUR = 3_600_000;

let etcd: EtcdTestCluster;
let fake: FakeKubeApiServer;
let webhook: TestWebhook;
let workDir: string;
const evaluations: Evaluation[] = [];

async function base64(file: string): Promise<string> {
  return (await readFile(file)).toString('base64');
}

function etcdObject(conditions: unknown[] | undefined): FakeObject {
  return {
    apiVersion: 'druid.gardener.cloud/v1alpha1',
    kind: 'Etcd',
    metadata: { name: NAME, namespace: NAMESPACE, uid: 'c3a1e0f2-1d4b-4b8e-a0c9-8e2d5b7f9a33' },
    spec: {
      replicas: 3,
      etcd: {
        clientPort: 2379,
        clientUrlTls: {
          tlsCASecretRef: { name: 'ca-etcd-bundle', dataKey: 'bundle.crt' },
          clientTLSSecretRef: { name: 'etcd-client-tls' },
        },
      },
      backup: { store: { provider: 'S3', prefix: 'shoot--prod--core/etcd-main', secretRef: { name: 'etcd-backup' } } },
    },
    status: { replicas: 3, readyReplicas: 3, ready: true, ...(conditions === undefined ? {} : { conditions }) },
  };
}

function backupReady(status: 'True' | 'False', reason: string, message: string) {
  const at = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return { type: 'BackupReady', status, reason, message, lastTransitionTime: at, lastUpdateTime: at };
}

function snapshotLease(kind: 'full' | 'delta', ageMs: number): FakeObject {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: `${NAME}-${kind}-snap`, namespace: NAMESPACE },
    spec: { holderIdentity: '1024', renewTime: new Date(Date.now() - ageMs).toISOString().replace('Z', '000Z') },
  };
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-druid-backup-'));
  const [cluster, stand, certs] = await Promise.all([
    startEtcdCluster({ size: 3, name: 'druid-backup' }),
    startFakeKubeApiServer(),
    generateTestCerts(workDir),
  ]);
  [etcd, fake] = [cluster, stand];
  const secret = (name: string, data: Record<string, string>): FakeObject => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: NAMESPACE },
    data,
  });
  fake.putObject('secrets', secret('ca-etcd-bundle', { 'bundle.crt': await base64(etcd.clientTls.caFile) }));
  fake.putObject(
    'secrets',
    secret('etcd-client-tls', {
      'tls.crt': await base64(etcd.clientTls.certFile),
      'tls.key': await base64(etcd.clientTls.keyFile),
    }),
  );
  fake.putObject('etcds', etcdObject([backupReady('True', 'BackupSucceeded', 'Snapshot backup succeeded')]));
  fake.putObject('leases', snapshotLease('full', 2 * HOUR));
  fake.putObject('leases', snapshotLease('delta', 20_000));
  const config = parseGuardConfig(
    {
      store: { kind: 'file', dir: path.join(workDir, 'store') },
      decisionMaxAgeMs: 0,
      discovery: {
        druid: { namespaces: [NAMESPACE], backup: { maxSnapshotAge: '1h', requiredForChanges: true } },
        kubeconfigFile: fake.kubeconfigFile,
        timeout: '5s',
      },
    },
    'druid backup e2e config',
  );
  webhook = await startTestWebhook({
    config,
    certs,
    store: createStore(config.store),
    ready: true,
    // The real reach (Secrets, the Etcd, its Leases, TLS to every member), at the harness members.
    evaluate: async (target, context) => {
      const evaluation = await evaluateResolvedTarget({ ...target, endpoints: etcd.endpoints }, context);
      evaluations.push(evaluation);
      return evaluation;
    },
  });
}, 90_000);

afterAll(async () => {
  await webhook?.close();
  await Promise.all([etcd?.destroy(), fake?.close()]);
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

const scaleUp = () => fixtureReview('etcd-druid-replicas-3-to-5.json', { namespace: NAMESPACE, name: NAME });
const backupCheckOf = (evaluation: Evaluation | undefined) => evaluation?.checks.find((check) => check.name === 'backup');

describe('issue 32: druid backups hold back a scale through the HTTPS webhook on real etcd', () => {
  it('allows a scale on BackupReady=True with a recent snapshot, from the Etcd and Leases read live', async () => {
    await etcd.waitHealthy();
    const answer = await webhook.postReview(scaleUp());
    const judged = evaluations.at(-1);
    expect(answer.allowed, `${answer.status?.message} / ${judged?.reasons.join('; ')}`).toBe(true);
    expect(judged?.verdict).toBe('Healthy');
    expect(backupCheckOf(judged)).toMatchObject({
      status: 'pass',
      message: expect.stringMatching(/^BackupReady=True, last snapshot delta at /),
    });
    const read = fake.requests.map((request) => `${request.verb} ${request.resource} ${request.name}`);
    expect(read).toEqual(
      expect.arrayContaining([`get etcds ${NAME}`, `get leases ${NAME}-full-snap`, `get leases ${NAME}-delta-snap`]),
    );
  });

  it('denies the scale and an etcd upgrade on BackupReady=False, with druid reason and message', async () => {
    fake.putObject(
      'etcds',
      etcdObject([backupReady('False', 'BackupFailed', 'Stale snapshot leases. Not renewed in a long time')]),
    );
    const answer = await webhook.postReview(scaleUp());
    expect(answer.allowed).toBe(false);
    expect(answer.status?.code).toBe(403);
    const message = answer.status?.message ?? '';
    console.log(`backup denial: ${message}`);
    expect(message).toContain(`scale up from 3 to 5 replicas of Etcd ${NAMESPACE}/${NAME}`);
    expect(message).toContain(
      'backup check fail: backup failing: BackupReady=False (BackupFailed: Stale snapshot leases. Not renewed in a long time)',
    );
    expect(message).toContain('backup.requiredForChanges holds back a membership change until the backup check passes');
    // etcd itself serves: the failing backup degrades the verdict, the rule is what denies.
    expect(evaluations.at(-1)?.verdict).toBe('Degraded');
    // An etcd image change (an upgrade) waits for the backup too; a patch step crosses no minor gate.
    const upgrade = await webhook.postReview(druidImageReview('quay.io/coreos/etcd:v3.5.17', 'quay.io/coreos/etcd:v3.5.21'));
    expect(upgrade.allowed).toBe(false);
    expect(upgrade.status?.message).toContain('holds back an etcd upgrade until the backup check passes');
  });

  it('absent status fields are unknown, never a pass: the scale is denied saying so', async () => {
    fake.putObject('etcds', etcdObject(undefined));
    const answer = await webhook.postReview(scaleUp());
    expect(answer.allowed).toBe(false);
    expect(answer.status?.message).toContain(
      'backup check warn: backup unknown: the Etcd status has no BackupReady condition yet',
    );
    expect(backupCheckOf(evaluations.at(-1))?.status).toBe('warn');
  });

  it('a snapshot older than maxSnapshotAge warns stale (and the rule holds the scale back)', async () => {
    fake.putObject('etcds', etcdObject([backupReady('True', 'BackupSucceeded', 'Snapshot backup succeeded')]));
    fake.putObject('leases', snapshotLease('delta', 3 * HOUR));
    const answer = await webhook.postReview(scaleUp());
    expect(answer.allowed).toBe(false);
    const check = backupCheckOf(evaluations.at(-1));
    expect(check?.status).toBe('warn');
    expect(check?.message).toMatch(/^backup stale: last snapshot full at .*, 120m ago, older than 60m \(BackupReady=True\)$/);
    expect(answer.status?.message).toContain('backup check warn: backup stale');
  });
});
