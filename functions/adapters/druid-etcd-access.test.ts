import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCoreV1Api } from './kube.js';
import { openDruidEtcdAccess } from './druid-etcd-access.js';
import { parseGuardConfig } from '../domain/config.js';
import { Deadline } from '../domain/deadline.js';
import { druidTargets } from '../domain/discovery-mapping.js';
import type { Target } from '../domain/targets.js';
import { evaluateResolvedTarget } from '../usecases/reach-target.js';
import { EtcdAccessError } from '../ports/etcd-access.js';
import { startEtcdCluster, type EtcdTestCluster } from '../../test/harness/etcd-cluster.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../../test/harness/fake-kube-apiserver.js';

const NAMESPACE = 'shoot--dev--alpha';
let etcd: EtcdTestCluster;
let fake: FakeKubeApiServer;

const base64 = (file: string) => readFileSync(file).toString('base64');
function secret(name: string, data: Record<string, string>): FakeObject {
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NAMESPACE }, type: 'Opaque', data };
}

/** The druid target of the fixture Etcd, but dialled at the harness cluster (no pod DNS here). */
function druidTarget(): Target {
  const etcdObject = JSON.parse(
    readFileSync(new URL('../../test/fixtures/discovery/etcd-druid.json', import.meta.url), 'utf8'),
  ) as unknown;
  const [target] = druidTargets([etcdObject], { timeout: 3000, kubeconfigFile: fake.kubeconfigFile }).targets;
  if (!target) throw new Error('the fixture Etcd made no target');
  return { ...target, endpoints: etcd.endpoints };
}

beforeAll(async () => {
  [etcd, fake] = await Promise.all([startEtcdCluster({ size: 3 }), startFakeKubeApiServer()]);
  fake.putObject('secrets', secret('ca-etcd-bundle', { 'bundle.crt': base64(etcd.clientTls.caFile) }));
  fake.putObject(
    'secrets',
    secret('etcd-client-tls', { 'tls.crt': base64(etcd.clientTls.certFile), 'tls.key': base64(etcd.clientTls.keyFile) }),
  );
}, 60_000);

afterAll(async () => {
  await Promise.all([etcd?.destroy(), fake?.close()]);
});

describe('druid Etcd access: TLS from the Secrets spec.etcd.clientUrlTls names', () => {
  it('a druid target is evaluated Healthy with the CA and client certificate read into memory', async () => {
    const evaluation = await evaluateResolvedTarget(druidTarget());
    expect(evaluation.reasons).toEqual([]);
    expect(evaluation.verdict).toBe('Healthy');
    expect(evaluation.cluster.votingMembers).toBe(3);
    const read = fake.requests
      .filter((request) => request.resource === 'secrets')
      .map((request) => `${request.verb} ${request.name}`);
    expect(read).toEqual(expect.arrayContaining(['get ca-etcd-bundle', 'get etcd-client-tls']));
    const text = JSON.stringify(evaluation);
    expect(text).not.toContain('PRIVATE KEY');
    expect(text).not.toContain(base64(etcd.clientTls.keyFile).slice(0, 40));
  });

  it.each([
    [
      'the CA Secret is missing',
      () => fake.removeObject('secrets', 'v1', NAMESPACE, 'ca-etcd-bundle'),
      /not found: cannot get secrets "ca-etcd-bundle" in namespace "shoot--dev--alpha"/,
    ],
    [
      'the client Secret lacks tls.key',
      () => fake.putObject('secrets', secret('etcd-client-tls', { 'tls.crt': base64(etcd.clientTls.certFile) })),
      /Secret shoot--dev--alpha\/etcd-client-tls has no key "tls.key"/,
    ],
    [
      'the CA key holds no PEM',
      () =>
        fake.putObject(
          'secrets',
          secret('ca-etcd-bundle', { 'bundle.crt': Buffer.from('garbage-secret-value').toString('base64') }),
        ),
      /Secret shoot--dev--alpha\/ca-etcd-bundle: key "bundle.crt" does not hold PEM data/,
    ],
  ])('%s: Unhealthy naming the Secret and key, never its content', async (_case, breakIt, message) => {
    const api = createCoreV1Api(fake.kubeconfigFile);
    breakIt();
    try {
      const target = druidTarget();
      const access = openDruidEtcdAccess(
        api,
        { endpoints: target.endpoints, reach: target.reach as never },
        Deadline.after(2000),
      );
      await expect(access).rejects.toBeInstanceOf(EtcdAccessError);
      await expect(access).rejects.toThrow(message);
      const evaluation = await evaluateResolvedTarget(target);
      expect(evaluation.verdict).toBe('Unhealthy');
      expect(evaluation.reasons.join('\n')).toMatch(message);
      expect(JSON.stringify(evaluation)).not.toContain('garbage-secret-value');
    } finally {
      fake.putObject('secrets', secret('ca-etcd-bundle', { 'bundle.crt': base64(etcd.clientTls.caFile) }));
      fake.putObject(
        'secrets',
        secret('etcd-client-tls', { 'tls.crt': base64(etcd.clientTls.certFile), 'tls.key': base64(etcd.clientTls.keyFile) }),
      );
    }
  });

  it('discovery config hands the management kubeconfig to discovered targets', () => {
    const config = parseGuardConfig({ discovery: { druid: {}, kubeconfigFile: '/k/config' } }, 'test', '/');
    expect(config.discovery?.kubeconfigFile).toBe('/k/config');
  });
});
