// TLS identity as its own outcome, against real etcd reached like KCP (pod port-forward, the node
// name as the TLS server name): a serving certificate that chains to the cluster's CA but lacks the
// node name fails the tls-identity check naming the name expected and the names the certificate
// has, not "unreachable"; with tlsVerify: chain-only the same cluster is Healthy; a certificate
// from another CA is refused in both modes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientCertificateMinter } from '../../functions/adapters/capi-credentials.js';
import { openCapiEtcdAccess } from '../../functions/adapters/capi-etcd-access.js';
import { createCoreV1Api, type CoreV1Api } from '../../functions/adapters/kube.js';
import { parseGuardConfig } from '../../functions/domain/config.js';
import { evaluationSchema, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { evaluateTarget, evaluateThroughAccess } from '../../functions/usecases/evaluate-target.js';
import { startCapiWorkload, type CapiWorkload } from '../harness/capi-workload.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';

let management: FakeKubeApiServer;
let managementApi: CoreV1Api;
let workload: CapiWorkload;
const minter = new ClientCertificateMinter();

beforeAll(async () => {
  management = await startFakeKubeApiServer();
  managementApi = createCoreV1Api(management.kubeconfigFile);
  // Serving certificates with 127.0.0.1 and localhost only, none with the node (member) name.
  workload = await startCapiWorkload(management, { namespace: 'team-n', clusterName: 'nn', serverCertNames: [] });
}, 60_000);

afterAll(async () => {
  await Promise.all([workload?.destroy(), management?.close()]);
});

async function evaluate(tlsVerify?: 'full' | 'chain-only'): Promise<Evaluation> {
  const evaluation = await evaluateThroughAccess(
    {
      name: 'nn',
      // Generous: the shared test machine runs at load 20 at times (a TLS handshake then takes 1 s).
      timeout: 5000,
      quotaBackendBytes: 2 * 1024 ** 3,
      ...(tlsVerify === undefined ? {} : { tlsVerify }),
    },
    (deadline) => openCapiEtcdAccess(managementApi, workload.cluster, workload.nodeNames, deadline, { minter }),
  );
  return evaluationSchema.parse(evaluation);
}

const checkOf = (evaluation: Evaluation, name: string) => evaluation.checks.find((check) => check.name === name);

describe('a serving certificate without the node name', () => {
  it.each([undefined, 'full'] as const)(
    'is reported as TLS identity naming the node and the certificate’s names (tlsVerify %s)',
    async (tlsVerify) => {
      const evaluation = await evaluate(tlsVerify);
      expect(evaluation.verdict).toBe('Unhealthy');
      expect(checkOf(evaluation, 'tls-identity')?.status).toBe('fail');
      for (const node of workload.nodeNames) {
        expect(evaluation.reasons).toContain(
          `member kube-system/etcd-${node}:2379 via port-forward TLS identity: the server certificate does not name ${node}; it names IP Address:127.0.0.1, DNS:localhost`,
        );
      }
      // Not a network fault: nothing says unreachable, and reachable does not fail for it.
      expect(evaluation.reasons.join('\n')).not.toMatch(/unreachable/);
      expect(checkOf(evaluation, 'reachable')?.status).not.toBe('fail');
    },
  );

  it('is Healthy with tlsVerify: chain-only', async () => {
    const evaluation = await evaluate('chain-only');
    // Under heavy load a member may answer slower than the latency limit: a warning about the
    // machine, not about TLS. Nothing else may be said, and without it the verdict is Healthy.
    const slow = /slow: status took \d+ ms/;
    expect(evaluation.reasons.filter((reason) => !slow.test(reason))).toEqual([]);
    expect(evaluation.verdict).toBe(evaluation.reasons.length === 0 ? 'Healthy' : 'Degraded');
    expect(checkOf(evaluation, 'tls-identity')?.status).toBe('pass');
    expect(evaluation.members.map((member) => member.name).sort()).toEqual([...workload.nodeNames].sort());
  });
});

describe('chain-only still verifies the chain', () => {
  it.each(['full', 'chain-only'] as const)('refuses a server certificate from another CA (tlsVerify %s)', async (tlsVerify) => {
    const config = parseGuardConfig(
      {
        targets: [
          {
            name: 'wrong-ca',
            endpoints: workload.etcd.endpoints,
            tls: { ...workload.etcd.clientTls, caFile: workload.etcd.tls.wrongCaFile },
            timeout: '2s',
            tlsVerify,
          },
        ],
      },
      'test config',
    );
    const [target] = config.targets;
    if (!target) throw new Error('no target parsed');
    const evaluation = await evaluateTarget(target);
    expect(evaluation.verdict).toBe('Unhealthy');
    expect(evaluation.members.every((member) => member.healthy === false)).toBe(true);
    expect(evaluation.members[0]?.error).toMatch(/server certificate not trusted/);
  });
});
