// A real kube-apiserver (scripts/ensure-kube.sh builds it) on loopback for end-to-end tests:
// a random port, TLS with the test PKI, client-certificate users (an admin in system:masters and
// limited users whose RBAC the test grants), service-account keys (so TokenRequest works),
// RBAC and Node authorization, a file audit backend logging every request's metadata (audit
// annotations included), and --enable-aggregator-routing: webhook Services are resolved through
// their EndpointSlices. Its storage is a one-member etcd of test/harness/etcd-cluster.ts.
//
// No controller-manager or kubelet runs, so no Pod ever serves a Service. Endpoint addresses may
// not be loopback (the server's validation refuses 127.0.0.0/8), so the test writes an
// EndpointSlice with an ordinary address, and the server's "cluster" egress (webhooks, by the
// EgressSelectorConfiguration below) goes through an HTTP CONNECT relay on a unix socket that maps
// that address to the test's listener: what reaches the webhook went through the real resolver.
//
// The process and its children are one process group, SIGKILLed on destroy and when the test
// process exits; its temp dir is removed.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { openSync, rmSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { generateTestCerts, makeClientCert, type TestCerts } from './certs.js';
import { startEtcdCluster, type EtcdTestCluster } from './etcd-cluster.js';
import { freePorts } from './free-port.js';
import { runProcess, type ProcessRun } from './process.js';
import { kubeBinaries } from './versions.js';
import { waitFor } from './wait.js';

export interface KubeUser {
  name: string;
  groups: string[];
  kubeconfig: string;
}

export interface KubectlOptions {
  /** Default: the admin's. */
  kubeconfig?: string;
  stdin?: string;
  timeoutMs?: number;
  env?: Record<string, string>;
}

/** One audit.k8s.io/v1 Event line of the audit log (the fields the tests read). */
export interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string; groups?: string[] };
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string; apiGroup?: string };
  responseStatus?: { code?: number };
  annotations?: Record<string, string>;
}

export interface KubeApiserver {
  /** https://127.0.0.1:<port> */
  url: string;
  dir: string;
  /** The CA of the serving certificate and of every client certificate. */
  caFile: string;
  pki: TestCerts;
  admin: KubeUser;
  kubectlBin: string;
  /** From spawn to /readyz answering ok, in ms. */
  startupMs: number;
  /** The built kubectl with --kubeconfig (the admin's by default); never throws on a non-zero exit. */
  kubectl(args: string[], options?: KubectlOptions): Promise<ProcessRun>;
  /** A client-certificate user (CN = name, one O per group) and its kubeconfig; no RBAC granted. */
  user(name: string, groups?: string[]): Promise<KubeUser>;
  /** A kubeconfig with a token of the ServiceAccount from TokenRequest (`kubectl create token`). */
  serviceAccountKubeconfig(namespace: string, name: string): Promise<string>;
  /** Every audit event written so far. */
  auditEvents(): Promise<AuditEvent[]>;
  /** The relay sends CONNECTs to `address:port` (an EndpointSlice's) to 127.0.0.1:`loopbackPort`. */
  route(address: string, port: number, loopbackPort: number): void;
  /** The `host:port` of every CONNECT the server's egress made, in order. */
  readonly connects: readonly string[];
  /** What the server printed (its log file). */
  log(): Promise<string>;
  destroy(): Promise<void>;
}

export interface StartKubeApiserverOptions {
  /** Names the temp dir and the storage etcd. */
  name: string;
  /** How long to wait for /readyz (the server boots in seconds; CRD-heavy suites load more). */
  readyTimeoutMs?: number;
}

const liveGroups = new Set<number>();
const liveDirs = new Set<string>();
let safetyNetInstalled = false;

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // The group is gone already.
  }
}

function installSafetyNet(): void {
  if (safetyNetInstalled) return;
  safetyNetInstalled = true;
  process.on('exit', () => {
    for (const pid of liveGroups) killGroup(pid);
    for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
  });
}

function kubeconfigYaml(url: string, caFile: string, user: Record<string, string>): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server: url, 'certificate-authority': caFile } }],
    users: [{ name: 'user', user }],
    contexts: [{ name: 'test', context: { cluster: 'test', user: 'user' } }],
    'current-context': 'test',
  });
}

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  # The server's own lease renewals would bury what the tests look for.
  - level: None
    resources:
      - group: coordination.k8s.io
        resources: [leases]
  - level: Metadata
`;

// A unix socket: over TCP the server insists on TLS to the relay (its config check lets http://
// through, then it dereferences the absent TLS config and panics).
function egressConfig(relaySocket: string): string {
  return `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: HTTPConnect
      transport:
        uds:
          udsName: ${relaySocket}
`;
}

interface Relay {
  server: net.Server;
  routes: Map<string, number>;
  connects: string[];
  sockets: Set<net.Socket>;
}

/** An HTTP CONNECT relay that only knows the routes it is given (502 for anything else). */
function startRelay(socketPath: string): Promise<Relay> {
  const relay: Relay = { server: net.createServer(), routes: new Map(), connects: [], sockets: new Set() };
  relay.server.on('connection', (socket) => {
    relay.sockets.add(socket);
    socket.once('close', () => relay.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) {
        if (head.length > 16_384) socket.destroy();
        return;
      }
      socket.off('data', onData);
      const target = /^CONNECT (\S+) HTTP\/1\.[01]\r\n/.exec(head.subarray(0, end).toString('latin1'))?.[1];
      const rest = head.subarray(end + 4);
      const loopbackPort = target === undefined ? undefined : relay.routes.get(target);
      if (target !== undefined) relay.connects.push(target);
      if (loopbackPort === undefined) {
        socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n');
        return;
      }
      const upstream = net.connect(loopbackPort, '127.0.0.1');
      relay.sockets.add(upstream);
      upstream.once('close', () => {
        relay.sockets.delete(upstream);
        socket.destroy();
      });
      socket.once('close', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
      upstream.once('connect', () => {
        socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
        if (rest.length > 0) upstream.write(rest);
        socket.pipe(upstream);
        upstream.pipe(socket);
      });
    };
    socket.on('data', onData);
  });
  return new Promise((resolve, reject) => {
    relay.server.once('error', reject);
    relay.server.listen(socketPath, () => resolve(relay));
  });
}

function readyz(url: string, ca: Buffer): Promise<boolean> {
  return new Promise((resolve) => {
    const request = https.get(`${url}/readyz`, { ca, timeout: 2_000 }, (response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve(response.statusCode === 200 && body.trim() === 'ok'));
    });
    request.on('timeout', () => request.destroy());
    request.on('error', () => resolve(false));
  });
}

async function openssl(args: string[], cwd: string): Promise<void> {
  const run = await runProcess('openssl', args, { cwd });
  if (run.code !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${run.stderr}`);
}

export async function startKubeApiserver(options: StartKubeApiserverOptions): Promise<KubeApiserver> {
  installSafetyNet();
  const binaries = kubeBinaries();
  const dir = await mkdtemp(path.join(os.tmpdir(), `etcd-guard-kube-${options.name}-`));
  liveDirs.add(dir);
  let storage: EtcdTestCluster | undefined;
  let child: ChildProcess | undefined;
  let relay: Relay | undefined;
  let exited: Promise<unknown> = Promise.resolve();
  const destroy = async () => {
    if (child?.pid !== undefined) {
      killGroup(child.pid);
      await exited;
      liveGroups.delete(child.pid);
    }
    if (relay !== undefined) {
      for (const socket of relay.sockets) socket.destroy();
      await new Promise((resolve) => relay?.server.close(resolve));
    }
    await storage?.destroy();
    await rm(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  };
  try {
    const [etcd, pki, ports] = await Promise.all([
      startEtcdCluster({ size: 1, name: `kube-storage-${options.name}` }),
      generateTestCerts(dir),
      freePorts(1),
      openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'sa.key'], dir),
    ]);
    storage = etcd;
    const [port] = ports as [number];
    const relaySocket = path.join(dir, 'egress.sock');
    await openssl(['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
    relay = await startRelay(relaySocket);
    const url = `https://127.0.0.1:${port}`;
    const ca = { cert: pki.caFile, key: pki.caKeyFile };
    await writeFile(path.join(dir, 'audit-policy.yaml'), AUDIT_POLICY);
    await writeFile(path.join(dir, 'egress.yaml'), egressConfig(relaySocket));
    const auditLog = path.join(dir, 'audit.log');
    const logFile = path.join(dir, 'kube-apiserver.log');

    const makeUser = async (name: string, groups: string[] = []): Promise<KubeUser> => {
      const subject = [...groups.map((group) => `/O=${group}`), `/CN=${name}`].join('');
      const fileName = `user-${name.replace(/[^a-z0-9-]/gi, '_')}`;
      const cert = await makeClientCert(dir, fileName, ca, subject);
      const kubeconfig = path.join(dir, `${fileName}.kubeconfig`);
      await writeFile(kubeconfig, kubeconfigYaml(url, pki.caFile, { 'client-certificate': cert.cert, 'client-key': cert.key }), {
        mode: 0o600,
      });
      return { name, groups, kubeconfig };
    };
    const admin = await makeUser('etcd-guard-test-admin', ['system:masters']);

    const args = [
      `--etcd-servers=${etcd.endpoints.join(',')}`,
      `--etcd-cafile=${etcd.clientTls.caFile}`,
      `--etcd-certfile=${etcd.clientTls.certFile}`,
      `--etcd-keyfile=${etcd.clientTls.keyFile}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${port}`,
      `--cert-dir=${path.join(dir, 'cert-dir')}`,
      `--tls-cert-file=${pki.serverCertFile}`,
      `--tls-private-key-file=${pki.serverKeyFile}`,
      `--client-ca-file=${pki.caFile}`,
      `--service-account-key-file=${path.join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${path.join(dir, 'sa.key')}`,
      '--service-account-issuer=https://kubernetes.default.svc',
      '--service-cluster-ip-range=10.96.0.0/16',
      '--authorization-mode=Node,RBAC',
      '--enable-aggregator-routing=true',
      `--egress-selector-config-file=${path.join(dir, 'egress.yaml')}`,
      `--audit-policy-file=${path.join(dir, 'audit-policy.yaml')}`,
      `--audit-log-path=${auditLog}`,
      '--audit-log-mode=blocking',
      '--profiling=false',
    ];
    const log = openSync(logFile, 'w');
    const started = performance.now();
    const spawned = spawn(binaries.kubeApiserver, args, { detached: true, stdio: ['ignore', log, log], cwd: dir });
    child = spawned;
    exited = once(spawned, 'exit').catch(() => undefined);
    if (spawned.pid !== undefined) liveGroups.add(spawned.pid);
    const caPem = await readFile(pki.caFile);
    try {
      await waitFor('kube-apiserver /readyz', options.readyTimeoutMs ?? 60_000, async () => {
        if (spawned.exitCode !== null || spawned.signalCode !== null) {
          throw new Error(`kube-apiserver exited (${spawned.exitCode ?? spawned.signalCode}) before ready`);
        }
        return readyz(url, caPem);
      });
    } catch (error) {
      const text = await readFile(logFile, 'utf8').catch(() => '');
      throw new Error(`${(error as Error).message}\n${text.slice(-4_000)}`);
    }
    const startupMs = performance.now() - started;
    const home = path.join(dir, 'home');

    const kubectl = (kubectlArgs: string[], kubectlOptions: KubectlOptions = {}) =>
      runKubectl(binaries.kubectl, ['--kubeconfig', kubectlOptions.kubeconfig ?? admin.kubeconfig, ...kubectlArgs], {
        // A HOME of its own: kubectl's discovery cache must not leak between servers or runs.
        env: { PATH: process.env.PATH ?? '', HOME: home, ...kubectlOptions.env },
        stdin: kubectlOptions.stdin,
        timeoutMs: kubectlOptions.timeoutMs ?? 60_000,
      });
    const activeRelay = relay;
    return {
      url,
      dir,
      caFile: pki.caFile,
      pki,
      admin,
      kubectlBin: binaries.kubectl,
      startupMs,
      kubectl,
      user: makeUser,
      async serviceAccountKubeconfig(namespace, name) {
        const run = await kubectl(['create', 'token', name, '-n', namespace, '--duration=1h']);
        if (run.code !== 0) throw new Error(`kubectl create token ${namespace}/${name} failed: ${run.stderr}`);
        const file = path.join(dir, `sa-${namespace}-${name}.kubeconfig`);
        await writeFile(file, kubeconfigYaml(url, pki.caFile, { token: run.stdout.trim() }), { mode: 0o600 });
        return file;
      },
      async auditEvents() {
        const text = await readFile(auditLog, 'utf8').catch(() => '');
        return text
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line) as AuditEvent);
      },
      route(address, routePort, loopbackPort) {
        activeRelay.routes.set(`${address}:${routePort}`, loopbackPort);
      },
      get connects() {
        return activeRelay.connects;
      },
      log: () => readFile(logFile, 'utf8'),
      destroy,
    };
  } catch (error) {
    await destroy();
    throw error;
  }
}

/** runProcess with stdin: kubectl apply -f - reads its manifest from there. */
function runKubectl(
  kubectlBin: string,
  args: string[],
  options: { env: NodeJS.ProcessEnv; stdin?: string; timeoutMs: number },
): Promise<ProcessRun> {
  if (options.stdin === undefined) return runProcess(kubectlBin, args, { env: options.env, timeoutMs: options.timeoutMs });
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(kubectlBin, args, { env: options.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const guard = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`kubectl ${args.join(' ')} did not finish within ${options.timeoutMs} ms\n${stderr}`));
    }, options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(guard);
      reject(error);
    });
    child.once('close', (code: number | null) => {
      clearTimeout(guard);
      resolve({ code, stdout, stderr, wallMs: performance.now() - started, uncaught: null });
    });
    child.stdin.end(options.stdin);
  });
}
