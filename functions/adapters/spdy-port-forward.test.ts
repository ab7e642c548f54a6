// The SPDY/3.1 port-forward fallback and HTTPS_PROXY, against real etcd: a workload API server
// stand-in that refuses WebSocket upgrades (as proxies in front of API servers do) and speaks
// SPDY, a loopback HTTP CONNECT proxy, and the framer on its own against hostile bytes.
import net from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientCertificateMinter } from './capi-credentials.js';
import { openCapiEtcdAccess } from './capi-etcd-access.js';
import { createCoreV1Api, type CoreV1Api } from './kube.js';
import { webSocketRefusalFallsBack } from './pod-port-forward.js';
import {
  FrameReader,
  HeaderCompressor,
  HeaderDecompressor,
  SPDY3_DICTIONARY,
  SpdyProtocolError,
  controlFrame,
  dataFrame,
} from './spdy.js';
import { proxyFor } from './workload-tunnel.js';
import { Deadline } from '../domain/deadline.js';
import { evaluationSchema, type Evaluation } from '../domain/evaluation-document.js';
import { evaluateThroughAccess } from '../usecases/evaluate-target.js';
import { startCapiWorkload, type CapiWorkload } from '../../test/harness/capi-workload.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';
import { BOUND_SLACK_MS } from '../../test/harness/timing.js';

const TIMEOUT_MS = 2000;

let management: FakeKubeApiServer;
let managementApi: CoreV1Api;
let workload: CapiWorkload;
const minter = new ClientCertificateMinter();

/**
 * Healthy, every member reached. A "slow" reason alone (a status call over its 500 ms limit while
 * this shared machine runs at load 15-20) is the machine, not the port-forward, so it is allowed.
 */
function expectHealthy(evaluation: Evaluation): void {
  expect(evaluation.reasons.filter((reason) => !/\) slow: /.test(reason))).toEqual([]);
  expect(evaluation.members.every((member) => member.healthy)).toBe(true);
  expect(['Healthy', 'Degraded']).toContain(evaluation.verdict);
  if (evaluation.reasons.length === 0) expect(evaluation.verdict).toBe('Healthy');
}

async function evaluate(
  environment: Record<string, string | undefined> = {},
): Promise<{ evaluation: Evaluation; wallMs: number }> {
  const started = performance.now();
  const evaluation = await evaluateThroughAccess(
    { name: workload.cluster.clusterName, timeout: TIMEOUT_MS, quotaBackendBytes: 2 * 1024 ** 3 },
    (deadline) => openCapiEtcdAccess(managementApi, workload.cluster, workload.nodeNames, deadline, { minter, environment }),
  );
  const wallMs = performance.now() - started;
  evaluationSchema.parse(evaluation);
  return { evaluation, wallMs };
}

/** A loopback HTTP CONNECT proxy: counts tunnels, refuses with 403 while `refusing`. */
async function startConnectProxy() {
  let tunnels = 0;
  let refusing = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      client.off('data', onData);
      const match = /^CONNECT (\S+):(\d+) HTTP\/1\.1\r\n/.exec(head.toString('latin1'));
      if (match === null || refusing) return void client.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
      tunnels += 1;
      const upstream = net.connect(Number(match[2]), match[1]?.replace(/^\[|\]$/g, ''), () => {
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        if (end + 4 < head.length) upstream.write(head.subarray(end + 4));
        client.pipe(upstream).pipe(client);
      });
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    tunnels: () => tunnels,
    refuse: (on: boolean) => void (refusing = on),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
let proxy: Awaited<ReturnType<typeof startConnectProxy>>;

beforeAll(async () => {
  management = await startFakeKubeApiServer();
  managementApi = createCoreV1Api(management.kubeconfigFile);
  [workload, proxy] = await Promise.all([
    startCapiWorkload(management, { namespace: 'team-s', clusterName: 'ws' }),
    startConnectProxy(),
  ]);
  // Mint the client certificate once: the timed cases measure reaching etcd.
  const access = await openCapiEtcdAccess(managementApi, workload.cluster, workload.nodeNames, Deadline.after(10_000), {
    minter,
  });
  await access.close();
}, 60_000);

afterAll(async () => {
  await Promise.all([workload?.destroy(), management?.close(), proxy?.close()]);
});

describe('port-forward falls back to SPDY when the WebSocket upgrade is refused', () => {
  it.each([400, 403, 404, 426, 500, 502, 503])('falls back on HTTP %i and not on 401', (status) => {
    expect(webSocketRefusalFallsBack(status)).toBe(true);
    expect(webSocketRefusalFallsBack(401)).toBe(false);
  });

  it.each([403, 426, 502])('is Healthy through SPDY when WebSocket upgrades get HTTP %i', async (status) => {
    workload.relay.refuseWebSocket(status);
    try {
      const spdyBefore = workload.relay.spdyOpened();
      const webSocketsBefore = workload.relay.streamsOpened();
      const { evaluation, wallMs } = await evaluate();
      console.info(`SPDY fallback after HTTP ${status}: evaluation in ${Math.round(wallMs)} ms`);
      expectHealthy(evaluation);
      expect(evaluation.members.map((member) => member.endpoint).sort()).toEqual(
        workload.nodeNames.map((node) => `kube-system/etcd-${node}:2379 via port-forward`),
      );
      expect(workload.relay.spdyOpened() - spdyBefore).toBeGreaterThanOrEqual(workload.nodeNames.length);
      expect(workload.relay.streamsOpened()).toBe(webSocketsBefore);
    } finally {
      workload.relay.refuseWebSocket(null);
    }
  });

  it('names a SIGKILLed member through SPDY, the error stream described and never quoted', async () => {
    workload.relay.refuseWebSocket(403);
    const leader = await workload.etcd.leaderIndex();
    const victimIndex = (leader + 1) % workload.etcd.members.length;
    const victim = workload.etcd.members[victimIndex];
    await workload.etcd.kill(victimIndex);
    try {
      const { evaluation, wallMs } = await evaluate();
      console.info(`SPDY fallback, one member SIGKILLed: evaluation in ${Math.round(wallMs)} ms`);
      expect(evaluation.verdict).toBe('Unhealthy');
      const reasons = evaluation.reasons.filter((reason) => !/\) slow: /.test(reason));
      expect(reasons).toEqual([
        expect.stringContaining(`member ${victim?.name} unreachable: kube-system/etcd-${victim?.name}:2379 via port-forward: `),
      ]);
      expect(reasons[0]).toMatch(/port-forward error: the pod refused the connection/);
      expect(evaluation.reasons.join('\n')).not.toMatch(/ECONNREFUSED/);
      expect(wallMs).toBeLessThan(TIMEOUT_MS + BOUND_SLACK_MS);
    } finally {
      workload.relay.refuseWebSocket(null);
      await workload.etcd.restart(victimIndex);
      await workload.etcd.waitHealthy();
    }
  });

  it.each([
    { name: 'a frame over 1 MiB', bytes: controlFrame(2, 0, Buffer.alloc(0)).fill(0xff, 5, 8) },
    { name: 'a SPDY/2 control frame', bytes: Buffer.from([0x80, 0x02, 0, 2, 0, 0, 0, 0]) },
    { name: 'random bytes', bytes: Buffer.from(Array.from({ length: 4096 }, (_, index) => (index * 7919 + 13) % 256)) },
    { name: 'a RST_STREAM of the data stream', bytes: controlFrame(3, 0, Buffer.from([0, 0, 0, 3, 0, 0, 0, 5])) },
  ])('is Unhealthy within timeout + 250 ms, no crash, when the SPDY server sends $name', async ({ bytes }) => {
    workload.relay.refuseWebSocket(403);
    workload.relay.spdyGarbage(bytes);
    try {
      const { evaluation, wallMs } = await evaluate();
      expect(evaluation.verdict).toBe('Unhealthy');
      expect(wallMs).toBeLessThan(TIMEOUT_MS + BOUND_SLACK_MS);
    } finally {
      workload.relay.refuseWebSocket(null);
      workload.relay.spdyGarbage(null);
    }
  });
});

describe('HTTPS_PROXY and NO_PROXY for workload API servers', () => {
  it.each([
    { name: 'WebSocket', refusal: null },
    { name: 'SPDY', refusal: 403 },
  ])('is Healthy through a loopback CONNECT proxy ($name)', async ({ refusal }) => {
    workload.relay.refuseWebSocket(refusal);
    try {
      const before = proxy.tunnels();
      const { evaluation, wallMs } = await evaluate({ HTTPS_PROXY: proxy.url });
      console.info(
        `through the CONNECT proxy (${refusal === null ? 'WebSocket' : 'SPDY'}): evaluation in ${Math.round(wallMs)} ms`,
      );
      expectHealthy(evaluation);
      expect(proxy.tunnels() - before).toBeGreaterThanOrEqual(workload.nodeNames.length);
    } finally {
      workload.relay.refuseWebSocket(null);
    }
  });

  it('goes direct when NO_PROXY names the API server', async () => {
    const before = proxy.tunnels();
    const { evaluation, wallMs } = await evaluate({ https_proxy: proxy.url, no_proxy: 'example.com, 127.0.0.0/8' });
    console.info(`direct WebSocket (NO_PROXY): evaluation in ${Math.round(wallMs)} ms`);
    expectHealthy(evaluation);
    expect(proxy.tunnels()).toBe(before);
  });

  it('is Unhealthy within timeout + 250 ms when the proxy refuses CONNECT, naming no proxy text', async () => {
    proxy.refuse(true);
    try {
      const { evaluation, wallMs } = await evaluate({ HTTPS_PROXY: proxy.url });
      expect(evaluation.verdict).toBe('Unhealthy');
      expect(evaluation.reasons.join('\n')).toMatch(/workload API server of team-s\/ws unreachable or refused the port-forward/);
      expect(wallMs).toBeLessThan(TIMEOUT_MS + BOUND_SLACK_MS);
    } finally {
      proxy.refuse(false);
    }
  });

  it.each([
    { noProxy: undefined, host: 'api.example.com', proxied: true },
    { noProxy: '*', host: 'api.example.com', proxied: false },
    { noProxy: 'example.com', host: 'api.example.com', proxied: false },
    { noProxy: '.example.com', host: 'example.com', proxied: true }, // as Go: the leading dot means subdomains only
    { noProxy: 'example.com:6443', host: 'api.example.com', proxied: true },
    { noProxy: 'example.com:443', host: 'api.example.com', proxied: false },
    { noProxy: '10.0.0.0/8', host: '10.1.2.3', proxied: false },
    { noProxy: '10.0.0.0/8', host: '192.168.0.1', proxied: true },
    { noProxy: 'ample.com', host: 'api.example.com', proxied: true },
  ])('NO_PROXY $noProxy for $host: proxied $proxied', ({ noProxy, host, proxied }) => {
    const setting = proxyFor(new URL(`https://${host}`), { HTTPS_PROXY: 'http://u:p@proxy:3128', NO_PROXY: noProxy });
    expect(setting !== undefined).toBe(proxied);
    if (proxied)
      expect(setting).toEqual({ host: 'proxy', port: 3128, authorization: `Basic ${Buffer.from('u:p').toString('base64')}` });
  });

  it('refuses an HTTPS_PROXY that is not an http:// proxy, naming the variable', () => {
    expect(() => proxyFor(new URL('https://a'), { HTTPS_PROXY: 'socks5://p:1080' })).toThrow(
      /HTTPS_PROXY must be an http:\/\/ proxy/,
    );
  });
});

describe('the SPDY/3 framer', () => {
  it("primes zlib with SPDY/3's dictionary (1423 bytes, Adler-32 e3c6a7c2 as the draft's)", () => {
    expect(SPDY3_DICTIONARY.length).toBe(1423);
    const stream = zlib.deflateSync(Buffer.from('x'), { dictionary: SPDY3_DICTIONARY });
    expect(stream.readUInt32BE(2).toString(16)).toBe('e3c6a7c2');
  });

  it('carries header blocks across one compression context per direction', async () => {
    const compressor = new HeaderCompressor();
    const decompressor = new HeaderDecompressor(64 * 1024);
    const first = { streamtype: 'error', port: '2379', requestid: '0' };
    const second = { streamtype: 'data', port: '2379', requestid: '0' };
    expect(await decompressor.decompress(await compressor.compress(first))).toEqual(first);
    expect(await decompressor.decompress(await compressor.compress(second))).toEqual(second);
    compressor.close();
    decompressor.close();
  });

  it('refuses a header block that inflates past its bound (a zlib bomb)', async () => {
    const compressor = new HeaderCompressor();
    const decompressor = new HeaderDecompressor(1024);
    await expect(decompressor.decompress(await compressor.compress({ big: 'a'.repeat(100_000) }))).rejects.toThrow(
      SpdyProtocolError,
    );
    compressor.close();
    decompressor.close();
  });

  it('cuts frames split at every byte, and refuses oversized or foreign-version frames', () => {
    const frames = Buffer.concat([controlFrame(6, 0, Buffer.from([0, 0, 0, 2])), dataFrame(3, 1, Buffer.from('hello'))]);
    const reader = new FrameReader(1024);
    const seen = [...frames].flatMap((byte) => reader.push(Buffer.of(byte)));
    expect(seen).toEqual([
      { control: true, type: 6, flags: 0, data: Buffer.from([0, 0, 0, 2]) },
      { control: false, streamId: 3, flags: 1, data: Buffer.from('hello') },
    ]);
    expect(() => new FrameReader(1024).push(dataFrame(3, 0, Buffer.alloc(1025)))).toThrow(SpdyProtocolError);
    expect(() => new FrameReader(1024).push(Buffer.from([0x80, 0x02, 0, 1, 0, 0, 0, 0]))).toThrow(SpdyProtocolError);
  });
});
