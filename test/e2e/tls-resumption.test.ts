// TLS session resumption of the probe's connections, against real etcd (Go TLS 1.3, client-cert
// auth): a later evaluation's new connections resume the sessions of an earlier one's verified
// handshakes; never with other CA/certificate/key bytes, another verification mode or another
// name; a member with new ticket keys (restarted) gets a full, verified handshake; a kept session
// is offered only until the earlier of the server certificate's notAfter and the TTL.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientCertificateMinter } from '../../functions/adapters/capi-credentials.js';
import { openCapiEtcdAccess } from '../../functions/adapters/capi-etcd-access.js';
import { EtcdProbeSession, tlsHandshakeCounts } from '../../functions/adapters/etcd-member-probe.js';
import { type ProbeCredentials } from '../../functions/ports/etcd-access.js';
import { createCoreV1Api } from '../../functions/adapters/kube.js';
import { TlsSessionCache } from '../../functions/adapters/tls-sessions.js';
import { Deadline } from '../../functions/domain/deadline.js';
import { evaluationSchema, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { targetSchema, type TargetConfig } from '../../functions/domain/config.js';
import { evaluateTarget, evaluateThroughAccess } from '../../functions/usecases/evaluate-target.js';
import { startCapiWorkload, type CapiWorkload } from '../harness/capi-workload.js';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';

let cluster: EtcdTestCluster;

beforeAll(async () => {
  cluster = await startEtcdCluster({ name: 'tlsresume' });
}, 60_000);

afterAll(async () => {
  await cluster?.destroy();
});

// Generous: the shared test machine runs at load 20 at times (a full TLS handshake then takes 1 s).
const TIMEOUT = '5s';

function targetFor(tls: Record<string, string>, overrides: Record<string, unknown> = {}): TargetConfig {
  return targetSchema.parse({ name: 'resume', endpoints: cluster.endpoints, tls, timeout: TIMEOUT, ...overrides });
}

/** An evaluation and what the process's TLS handshakes did during it. */
async function evaluated(target: TargetConfig): Promise<{ evaluation: Evaluation; resumed: number; verified: number }> {
  const before = tlsHandshakeCounts();
  const evaluation = evaluationSchema.parse(await evaluateTarget(target));
  const after = tlsHandshakeCounts();
  return { evaluation, resumed: after.resumed - before.resumed, verified: after.verified - before.verified };
}

/** Healthy, or Degraded only because the loaded machine made a member slow. */
function expectHealthy(evaluation: Evaluation): void {
  const slow = /slow: status took \d+ ms/;
  expect(evaluation.reasons.filter((reason) => !slow.test(reason))).toEqual([]);
  expect(evaluation.verdict).toBe(evaluation.reasons.length === 0 ? 'Healthy' : 'Degraded');
}

const credentialsOf = (files: { caFile: string; certFile?: string; keyFile?: string }): ProbeCredentials => ({
  ca: readFileSync(files.caFile),
  ...(files.certFile === undefined ? {} : { cert: readFileSync(files.certFile) }),
  ...(files.keyFile === undefined ? {} : { key: readFileSync(files.keyFile) }),
});

/** One probe of one endpoint in a session of its own, and what its handshakes did in `cache`. */
async function probedOnce(
  cache: TlsSessionCache,
  endpoint: string,
  options: { serverName?: string; tlsVerify?: 'full' | 'chain-only' } = {},
) {
  const before = cache.counts();
  const session = new EtcdProbeSession(credentialsOf(cluster.clientTls), {
    tlsSessions: cache,
    ...(options.serverName === undefined ? {} : { serverNameFor: () => options.serverName }),
    ...(options.tlsVerify === undefined ? {} : { tlsVerify: options.tlsVerify }),
  });
  try {
    const probe = await session.probe(endpoint, Deadline.after(5000));
    const after = cache.counts();
    return { status: probe.status, resumed: after.resumed - before.resumed, verified: after.verified - before.verified };
  } finally {
    session.close();
  }
}

describe('a later evaluation in the same process', () => {
  it('dials every member again and resumes the TLS session of the earlier verified handshake', async () => {
    const target = targetFor(cluster.clientTls);
    const first = await evaluated(target);
    expectHealthy(first.evaluation);
    const second = await evaluated(target);
    expectHealthy(second.evaluation);
    // One new connection per member, each an abbreviated handshake: nothing pooled, nothing verified again.
    expect(second).toMatchObject({ resumed: cluster.members.length, verified: 0 });
  });

  // The bundles differ from the good one in their bytes, so their digests never find its sessions.
  const changedBundles = [
    {
      case: 'a CA that did not sign the server certificate',
      tls: () => ({ ...cluster.clientTls, caFile: cluster.tls.wrongCaFile }),
      cause: /server certificate not trusted/,
    },
    {
      case: 'a client certificate from another CA',
      tls: () => ({ ...cluster.clientTls, certFile: cluster.tls.wrongCertFile, keyFile: cluster.tls.wrongKeyFile }),
      cause: /client certificate missing or not accepted/,
    },
    {
      case: 'an expired client certificate',
      tls: () => ({ ...cluster.clientTls, certFile: cluster.tls.expiredCertFile, keyFile: cluster.tls.expiredKeyFile }),
      cause: /client certificate expired/,
    },
    {
      case: 'no client certificate',
      tls: () => ({ caFile: cluster.clientTls.caFile }),
      cause: /client certificate missing or not accepted/,
    },
  ];
  it.each(changedBundles)('never resumes for $case and is rejected as before', async ({ tls, cause }) => {
    expectHealthy((await evaluated(targetFor(cluster.clientTls))).evaluation);
    const { evaluation, resumed } = await evaluated(targetFor(tls()));
    expect(resumed).toBe(0);
    expect(evaluation.verdict).toBe('Unhealthy');
    for (const member of evaluation.members) {
      expect(member.healthy).toBe(false);
      expect(member.error).toMatch(cause);
    }
    // The good bundle still resumes: a rejected bundle's failure never touched its sessions.
    expect((await evaluated(targetFor(cluster.clientTls))).resumed).toBe(cluster.members.length);
  });

  it('verifies in full for a CA bundle that trusts the same CA in other bytes', async () => {
    expectHealthy((await evaluated(targetFor(cluster.clientTls))).evaluation);
    // The right CA plus one more: the same members verify, but it is other trust.
    const bundle = `${cluster.dir}/ca-and-wrong-ca.pem`;
    await writeFile(bundle, Buffer.concat([readFileSync(cluster.tls.caFile), readFileSync(cluster.tls.wrongCaFile)]));
    const { evaluation, resumed, verified } = await evaluated(targetFor({ ...cluster.clientTls, caFile: bundle }));
    expectHealthy(evaluation);
    expect({ resumed, verified }).toEqual({ resumed: 0, verified: cluster.members.length });
  });
});

describe('a kept session', () => {
  it('is offered until the TTL after its full verification, then the member is verified again', async () => {
    let now = Date.parse('2026-12-01T12:00:00Z');
    const ttlMs = 60_000;
    const cache = new TlsSessionCache({ ttlMs, now: () => now });
    const endpoint = cluster.endpoints[0] ?? '';
    expect(await probedOnce(cache, endpoint)).toMatchObject({ status: { ok: true }, resumed: 0, verified: 1 });
    now += ttlMs - 1_000;
    expect(await probedOnce(cache, endpoint)).toMatchObject({ status: { ok: true }, resumed: 1, verified: 0 });
    // The session the resumed connection received keeps the first one's basis: chaining never
    // moves the TTL.
    now += 1_000;
    expect(await probedOnce(cache, endpoint)).toMatchObject({ status: { ok: true }, resumed: 0, verified: 1 });
    now += ttlMs - 1_000;
    expect(await probedOnce(cache, endpoint)).toMatchObject({ status: { ok: true }, resumed: 1, verified: 0 });
  });

  it('is never offered past the server certificate’s notAfter', async () => {
    const notAfter = Date.parse(new X509Certificate(readFileSync(cluster.pki.serverCertFile)).validTo);
    let now = notAfter - 2_000;
    const cache = new TlsSessionCache({ ttlMs: 30 * 86_400_000, now: () => now });
    const endpoint = cluster.endpoints[1] ?? '';
    expect(await probedOnce(cache, endpoint)).toMatchObject({ status: { ok: true }, verified: 1 });
    now = notAfter - 1_000;
    expect(await probedOnce(cache, endpoint)).toMatchObject({ status: { ok: true }, resumed: 1, verified: 0 });
    now = notAfter;
    expect(await probedOnce(cache, endpoint)).toMatchObject({ resumed: 0, verified: 1 });
  });

  it('is not offered to another member', async () => {
    const cache = new TlsSessionCache();
    const [one, two] = cluster.endpoints;
    expect(await probedOnce(cache, one ?? '')).toMatchObject({ status: { ok: true }, verified: 1 });
    expect(await probedOnce(cache, two ?? '')).toMatchObject({ status: { ok: true }, resumed: 0, verified: 1 });
    expect(await probedOnce(cache, one ?? '')).toMatchObject({ status: { ok: true }, resumed: 1 });
  });

  it('is dropped when a connection that offered it fails TLS', async () => {
    const cache = new TlsSessionCache();
    // A server of another CA (the harness's foreign client certificate serving).
    const impostor = http2.createSecureServer({
      cert: readFileSync(cluster.tls.wrongCertFile),
      key: readFileSync(cluster.tls.wrongKeyFile),
    });
    await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
    try {
      const impostorEndpoint = `https://127.0.0.1:${(impostor.address() as AddressInfo).port}`;
      // Relayed under one node name: the impostor's relay is offered the member's ticket.
      const relayed = { serverName: 'localhost' };
      const member = cluster.endpoints[0] ?? '';
      expect(await probedOnce(cache, member, relayed)).toMatchObject({ status: { ok: true }, verified: 1 });
      const refused = await probedOnce(cache, impostorEndpoint, relayed);
      expect(refused).toMatchObject({ status: { ok: false, kind: 'tls' }, resumed: 0, verified: 0 });
      expect(await probedOnce(cache, member, relayed)).toMatchObject({ status: { ok: true }, resumed: 0, verified: 1 });
    } finally {
      await new Promise((resolve) => impostor.close(resolve));
    }
  });
});

describe('a name the server certificate does not carry', () => {
  const wrongName = 'not-a-member.example';

  it('is refused after a resumable session for another name to the same member', async () => {
    const cache = new TlsSessionCache();
    const endpoint = cluster.endpoints[2] ?? '';
    expect(await probedOnce(cache, endpoint, { serverName: 'localhost' })).toMatchObject({ status: { ok: true } });
    expect(await probedOnce(cache, endpoint, { serverName: 'localhost' })).toMatchObject({ status: { ok: true }, resumed: 1 });
    const wrong = await probedOnce(cache, endpoint, { serverName: wrongName });
    expect(wrong).toMatchObject({ status: { ok: false, kind: 'tls-identity' }, resumed: 0, verified: 0 });
    expect(await probedOnce(cache, endpoint, {})).toMatchObject({ status: { ok: true }, resumed: 0, verified: 1 });
  });

  it('is refused with full verification after a chain-only session for that very name', async () => {
    const cache = new TlsSessionCache();
    const endpoint = cluster.endpoints[2] ?? '';
    const chainOnly = { serverName: wrongName, tlsVerify: 'chain-only' } as const;
    expect(await probedOnce(cache, endpoint, chainOnly)).toMatchObject({ status: { ok: true }, verified: 1 });
    expect(await probedOnce(cache, endpoint, chainOnly)).toMatchObject({ status: { ok: true }, resumed: 1 });
    const full = await probedOnce(cache, endpoint, { serverName: wrongName, tlsVerify: 'full' });
    expect(full).toMatchObject({ status: { ok: false, kind: 'tls-identity' }, resumed: 0 });
  });
});

describe('a restarted member', () => {
  it('gets a full verified handshake (its ticket keys are new) and the evaluation stays Healthy', async () => {
    const target = targetFor(cluster.clientTls);
    expectHealthy((await evaluated(target)).evaluation);
    await cluster.kill(0);
    await cluster.restart(0);
    await cluster.waitHealthy();
    const { evaluation, resumed, verified } = await evaluated(target);
    expectHealthy(evaluation);
    expect({ resumed, verified }).toEqual({ resumed: cluster.members.length - 1, verified: 1 });
    expect((await evaluated(target)).resumed).toBe(cluster.members.length);
  }, 60_000);
});

describe('members reached through a pod port-forward (a new loopback port per evaluation)', () => {
  let management: FakeKubeApiServer;
  let workload: CapiWorkload;
  const minter = new ClientCertificateMinter();

  beforeAll(async () => {
    management = await startFakeKubeApiServer();
    workload = await startCapiWorkload(management, { namespace: 'team-r', clusterName: 'rr' });
  }, 60_000);

  afterAll(async () => {
    await Promise.all([workload?.destroy(), management?.close()]);
  });

  it('resume by the member name verified, so the next evaluation’s relays resume too', async () => {
    const api = createCoreV1Api(management.kubeconfigFile);
    const evaluate = async () => {
      const before = tlsHandshakeCounts();
      const evaluation = await evaluateThroughAccess(
        { name: 'rr', timeout: 5000, quotaBackendBytes: 2 * 1024 ** 3 },
        (deadline) => openCapiEtcdAccess(api, workload.cluster, workload.nodeNames, deadline, { minter }),
      );
      const after = tlsHandshakeCounts();
      return { evaluation: evaluationSchema.parse(evaluation), resumed: after.resumed - before.resumed };
    };
    expectHealthy((await evaluate()).evaluation);
    const second = await evaluate();
    expectHealthy(second.evaluation);
    expect(second.resumed).toBe(workload.nodeNames.length);
  });
});
