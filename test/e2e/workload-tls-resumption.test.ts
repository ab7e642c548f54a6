// TLS session resumption of the connections to a Cluster API workload API server (one per
// forwarded member connection, every evaluation), against the harness's workload stand-in with
// WebSocket pod port-forward to real etcd: a later evaluation resumes the session of an earlier
// verified handshake; other kubeconfig bytes (CA, token) never find it and are verified in full;
// a kept session is offered only for the TTL after its full verification; a connection that
// offered a session and failed drops it.
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientCertificateMinter } from '../../functions/adapters/capi-credentials.js';
import { openCapiEtcdAccess } from '../../functions/adapters/capi-etcd-access.js';
import { createCoreV1Api, type CoreV1Api } from '../../functions/adapters/kube.js';
import { TlsSessionCache } from '../../functions/adapters/tls-sessions.js';
import { parseWorkloadKubeconfig } from '../../functions/adapters/workload-kubeconfig.js';
import { connectWorkload, workloadTlsHandshakeCounts } from '../../functions/adapters/workload-tunnel.js';
import { Deadline } from '../../functions/domain/deadline.js';
import { evaluationSchema, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { evaluateThroughAccess } from '../../functions/usecases/evaluate-target.js';
import { putCapiSecrets, secretObject, startCapiWorkload, type CapiWorkload } from '../harness/capi-workload.js';
import { generateTestCerts } from '../harness/certs.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';

// Generous: the shared test machine runs at load 20 at times (a full TLS handshake then takes 1 s).
const TIMEOUT_MS = 5000;

let management: FakeKubeApiServer;
let managementApi: CoreV1Api;
let workload: CapiWorkload;
let kubeconfig: { clusters: { cluster: Record<string, unknown> }[]; users: { user: Record<string, unknown> }[] };
const minter = new ClientCertificateMinter();

beforeAll(async () => {
  management = await startFakeKubeApiServer();
  managementApi = createCoreV1Api(management.kubeconfigFile);
  workload = await startCapiWorkload(management, { namespace: 'resume', clusterName: 'wr' });
  kubeconfig = JSON.parse(await readFile(workload.apiServer.kubeconfigFile, 'utf8')) as typeof kubeconfig;
}, 60_000);

afterAll(async () => {
  await Promise.all([workload?.destroy(), management?.close()]);
});

/**
 * One evaluation through port-forward, and what its connections to the workload API server did:
 * `cache` is where their sessions are kept (the process's when not given).
 */
async function evaluated(cache?: TlsSessionCache) {
  const counts = () => (cache === undefined ? workloadTlsHandshakeCounts() : cache.counts());
  const before = { ...counts(), streams: workload.relay.streamsOpened() };
  const evaluation = evaluationSchema.parse(
    await evaluateThroughAccess({ name: 'wr', timeout: TIMEOUT_MS, quotaBackendBytes: 2 * 1024 ** 3 }, (deadline) =>
      openCapiEtcdAccess(managementApi, workload.cluster, workload.nodeNames, deadline, {
        minter,
        ...(cache === undefined ? {} : { workloadTlsSessions: cache }),
      }),
    ),
  );
  const after = counts();
  return {
    evaluation,
    resumed: after.resumed - before.resumed,
    verified: after.verified - before.verified,
    /** Port-forward streams the workload stand-in opened: one per TLS connection that got through. */
    streams: workload.relay.streamsOpened() - before.streams,
  };
}

/** Healthy, or Degraded only because the loaded machine made a member slow. */
function expectHealthy(evaluation: Evaluation): void {
  const slow = /slow: status took \d+ ms/;
  expect(evaluation.reasons.filter((reason) => !slow.test(reason))).toEqual([]);
}

/** Puts `<cluster>-kubeconfig` with `change` applied to the stand-in's kubeconfig. */
function putKubeconfig(change: (cluster: Record<string, unknown>, user: Record<string, unknown>) => void): void {
  const edited = structuredClone(kubeconfig);
  change(edited.clusters[0]?.cluster ?? {}, edited.users[0]?.user ?? {});
  const { namespace, clusterName } = workload.cluster;
  management.putObject('secrets', secretObject(namespace, `${clusterName}-kubeconfig`, { value: JSON.stringify(edited) }));
}

const pemBase64 = async (file: string) => (await readFile(file)).toString('base64');

describe('connections to the workload API server in a later evaluation', () => {
  it('resume the TLS session of the earlier verified handshake (the process-wide sessions)', async () => {
    const first = await evaluated();
    expectHealthy(first.evaluation);
    expect(first.streams).toBeGreaterThanOrEqual(workload.nodeNames.length);
    const second = await evaluated();
    expectHealthy(second.evaluation);
    // Every connection of the second evaluation is an abbreviated handshake: none verified again.
    expect(second.streams).toBeGreaterThanOrEqual(workload.nodeNames.length);
    expect({ resumed: second.resumed, verified: second.verified }).toEqual({ resumed: second.streams, verified: 0 });
  });

  // Each row changes the Secret's bytes; the session of the stand-in's own kubeconfig is kept.
  const changed = [
    {
      case: 'a CA bundle that trusts the same CA in other bytes',
      change: async () => {
        const [right, other] = await Promise.all([
          readFile(workload.apiServer.kubeconfigFile, 'utf8').then(
            (text) => (JSON.parse(text) as typeof kubeconfig).clusters[0]?.cluster['certificate-authority-data'] as string,
          ),
          readFile(workload.etcd.tls.caFile),
        ]);
        const bundle = Buffer.concat([Buffer.from(right, 'base64'), other]).toString('base64');
        return (cluster: Record<string, unknown>) => (cluster['certificate-authority-data'] = bundle);
      },
      healthy: true,
    },
    {
      case: 'another bearer token',
      change: async () => (_cluster: Record<string, unknown>, user: Record<string, unknown>) => (user.token = 'another-token'),
      healthy: false,
    },
  ];
  it.each(changed)('never resume for $case and are verified in full', async ({ change, healthy }) => {
    const cache = new TlsSessionCache();
    expectHealthy((await evaluated(cache)).evaluation);
    putKubeconfig(await change());
    try {
      const { evaluation, resumed, verified } = await evaluated(cache);
      expect(resumed).toBe(0);
      expect(verified).toBeGreaterThanOrEqual(workload.nodeNames.length);
      if (healthy) expectHealthy(evaluation);
      else expect(evaluation.verdict).toBe('Unhealthy');
    } finally {
      await putCapiSecrets(management, workload.cluster, workload);
    }
    // The Secret as before still finds its session: the changed bytes never touched it.
    const again = await evaluated(cache);
    expect({ resumed: again.resumed, verified: again.verified }).toEqual({ resumed: again.streams, verified: 0 });
  });

  it('are refused at once, with the same words as without a kept session, for a CA that did not sign the server', async () => {
    const warm = new TlsSessionCache();
    expectHealthy((await evaluated(warm)).evaluation);
    const wrongCa = await pemBase64(workload.etcd.tls.caFile);
    putKubeconfig((cluster) => (cluster['certificate-authority-data'] = wrongCa));
    try {
      const withSession = await evaluated(warm);
      const without = await evaluated(new TlsSessionCache());
      expect({ resumed: withSession.resumed, verified: withSession.verified, streams: withSession.streams }).toEqual({
        resumed: 0,
        verified: 0,
        streams: 0,
      });
      expect(withSession.evaluation.verdict).toBe('Unhealthy');
      expect(withSession.evaluation.reasons.join('\n')).toMatch(
        /workload API server of resume\/wr unreachable or refused the port-forward \(server and credentials from Secret resume\/wr-kubeconfig\)/,
      );
      expect(withSession.evaluation.reasons).toEqual(without.evaluation.reasons);
    } finally {
      await putCapiSecrets(management, workload.cluster, workload);
    }
  });
});

describe('a kept workload API server session', () => {
  it('is offered until the TTL after its full verification, then the server is verified again', async () => {
    let now = Date.parse('2026-12-01T12:00:00Z');
    const ttlMs = 60_000;
    const cache = new TlsSessionCache({ ttlMs, now: () => now });
    const first = await evaluated(cache);
    expect({ resumed: first.resumed, verified: first.verified }).toEqual({ resumed: 0, verified: first.streams });
    now += ttlMs - 1_000;
    const inside = await evaluated(cache);
    expect({ resumed: inside.resumed, verified: inside.verified }).toEqual({ resumed: inside.streams, verified: 0 });
    // The stand-in (a Node server) sends no new ticket on a resumed handshake, so what is offered
    // here is still the first session; a Go API server's new ticket would keep its basis too.
    now += 1_000;
    const past = await evaluated(cache);
    expect(past.resumed).toBe(0);
    expect(past.verified).toBeGreaterThanOrEqual(workload.nodeNames.length);
  });
});

describe('a connection to the workload API server that offered a session and failed', () => {
  let dir: string;
  let certs: Awaited<ReturnType<typeof generateTestCerts>>;
  // Ticket keys outlive a restart of the good server, as a Kubernetes API server's do not need
  // to: only a dropped session makes its next connection a full handshake.
  const ticketKeys = Buffer.alloc(48, 7);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-workload-drop-'));
    certs = await generateTestCerts(dir);
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A TLS server on 127.0.0.1:`port` (0: any) that answers "ok" and ends. */
  async function serve(port: number, identity: { cert: string; key: string }): Promise<tls.Server> {
    const server = tls.createServer(
      { cert: await readFile(identity.cert), key: await readFile(identity.key), ticketKeys },
      (socket) => socket.end('ok'),
    );
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    return server;
  }

  /** One connection through connectWorkload, read to its end (the ticket comes before "ok"). */
  async function connectOnce(endpoint: ReturnType<typeof parseWorkloadKubeconfig>, cache: TlsSessionCache) {
    const before = cache.counts();
    try {
      const socket = await connectWorkload(endpoint, Deadline.after(TIMEOUT_MS), {}, cache);
      socket.resume();
      await once(socket, 'end');
      socket.destroy();
      return { ok: true, ...difference(cache.counts(), before) };
    } catch (error) {
      return { ok: false, error: (error as Error).message, ...difference(cache.counts(), before) };
    }
  }

  const difference = (after: { resumed: number; verified: number }, before: { resumed: number; verified: number }) => ({
    resumed: after.resumed - before.resumed,
    verified: after.verified - before.verified,
  });

  it('drops it: the next connection to the real server is verified in full', async () => {
    const identity = { cert: certs.serverCertFile, key: certs.serverKeyFile };
    let server = await serve(0, identity);
    const port = (server.address() as AddressInfo).port;
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'w',
          cluster: { server: `https://127.0.0.1:${port}`, 'certificate-authority-data': await pemBase64(certs.caFile) },
        },
      ],
      users: [{ name: 'u', user: { token: 'a-token' } }],
      contexts: [{ name: 'c', context: { cluster: 'w', user: 'u' } }],
      'current-context': 'c',
    };
    const endpoint = parseWorkloadKubeconfig(
      { value: Buffer.from(JSON.stringify(config)).toString('base64') },
      'drop/w-kubeconfig',
    );
    const cache = new TlsSessionCache();
    try {
      expect(await connectOnce(endpoint, cache)).toEqual({ ok: true, resumed: 0, verified: 1 });
      expect(await connectOnce(endpoint, cache)).toEqual({ ok: true, resumed: 1, verified: 0 });
      // Another server on that address, with a certificate of another CA and its own ticket keys.
      await new Promise((resolve) => server.close(resolve));
      const impostor = tls.createServer(
        { cert: await readFile(certs.wrongCertFile), key: await readFile(certs.wrongKeyFile) },
        (socket) => socket.end('ok'),
      );
      impostor.listen(port, '127.0.0.1');
      await once(impostor, 'listening');
      try {
        expect(await connectOnce(endpoint, cache)).toEqual({
          ok: false,
          error: 'TLS connection to the workload API server failed',
          resumed: 0,
          verified: 0,
        });
      } finally {
        await new Promise((resolve) => impostor.close(resolve));
      }
      // The real server is back with its ticket keys: it would resume the old session, had it been kept.
      server = await serve(port, identity);
      expect(await connectOnce(endpoint, cache)).toEqual({ ok: true, resumed: 0, verified: 1 });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
