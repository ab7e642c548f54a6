// Real etcd clusters on loopback for tests: TLS with client-cert auth on the client URLs, random
// free ports, data and logs in a temp dir. Every process is SIGKILLed on destroy (SIGTERM takes
// ~7 s on this machine) and, as a safety net, when the test process exits.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdtemp, mkdir, open, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { generateTestCerts, type CaKeyType, type TestCerts } from './certs.js';
import { freePorts } from './free-port.js';
import { startPeerProxy, type PeerIsolation, type PeerProxy } from './peer-proxy.js';

/**
 * The etcd under test: ETCD_GUARD_ETCD_BIN_DIR names a dir holding etcd and etcdctl (CI points it
 * at the etcd 3.5 that scripts/ensure-etcd-3.5.sh unpacks, then at the 3.6 and 3.7 that
 * scripts/ensure-etcd-go.sh builds); ETCD_BIN / ETCDCTL_BIN name single files; otherwise the
 * ones on PATH.
 */
export function etcdBinaries(env: NodeJS.ProcessEnv = process.env): { etcd: string; etcdctl: string } {
  const dir = env.ETCD_GUARD_ETCD_BIN_DIR;
  return {
    etcd: env.ETCD_BIN ?? (dir ? path.join(dir, 'etcd') : 'etcd'),
    etcdctl: env.ETCDCTL_BIN ?? (dir ? path.join(dir, 'etcdctl') : 'etcdctl'),
  };
}

/** "3.5.16", from `etcd --version` of the etcd under test; rejects when it cannot be run. */
export function etcdVersion(etcd = etcdBinaries().etcd): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(etcd, ['--version'], { timeout: 10_000 }, (error, stdout) => {
      const version = /etcd Version: (\S+)/.exec(String(stdout))?.[1];
      if (error || version === undefined) reject(new Error(`cannot run ${etcd} --version: ${error?.message ?? stdout}`));
      else resolve(version);
    });
  });
}

const { etcd: ETCD_BIN, etcdctl: ETCDCTL_BIN } = etcdBinaries();

export interface EtcdTestMember {
  name: string;
  clientUrl: string;
  peerUrl: string;
  dataDir: string;
  /** undefined while the member is not running (killed, or a learner not yet started). */
  pid: number | undefined;
}

/** The test PKI as etcd's clients see it: the CA (and its key, to mint like KCP), client certs good, wrong and expired. */
export type EtcdTlsFiles = Omit<TestCerts, 'dir' | 'serverCertFile' | 'serverKeyFile'>;

export interface EtcdctlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface EtcdTestCluster {
  members: EtcdTestMember[];
  /** Client URLs of the members the cluster was started with (learners are appended later). */
  endpoints: string[];
  tls: EtcdTlsFiles;
  /** The right client credentials, in the shape a target's `tls` config takes. */
  clientTls: { caFile: string; certFile: string; keyFile: string };
  dir: string;
  /** The test PKI the cluster was started with; pass it as `pki` to start another cluster under the same CA. */
  pki: TestCerts;
  /** SIGKILL; resolves when the child's 'exit' event fired. */
  kill(index: number): Promise<void>;
  /** SIGSTOP: the TCP listener stays open and nothing answers. */
  pause(index: number): void;
  resume(index: number): void;
  /** Starts a killed member again on the same data dir. */
  restart(index: number): Promise<void>;
  /**
   * Stops a member as an operator would before swapping its binary: SIGTERM, then SIGKILL if it
   * has not exited within timeoutMs (15 s unless told). Resolves when it exited.
   */
  stop(index: number, timeoutMs?: number): Promise<void>;
  /** Starts a stopped member on the same data dir, on another etcd binary when given (kept for later restarts). */
  start(index: number, options?: { etcd?: string }): Promise<void>;
  /** The etcd binary each member runs (or ran last), by index. */
  binaries(): string[];
  /** Polls until every running, unpaused member answers a linearizable read. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** etcdctl v3 with --endpoints (running members) and TLS flags pre-filled. */
  etcdctl(
    args: string[],
    options?: { endpoints?: string[]; timeoutMs?: number; stdin?: string | Buffer },
  ): Promise<EtcdctlResult>;
  /** Index in members of the member the running members call leader (etcdctl endpoint status). */
  leaderIndex(): Promise<number>;
  /** `member add --learner`; start() launches the new process and appends it to members. */
  addLearner(): Promise<{ memberId: string; memberIdDecimal: string; name: string; start(): Promise<void> }>;
  /**
   * Cuts the member off from its peers in both directions (needs `peerProxies`); it keeps
   * running and serving its clients. Resolves with its member id (hex).
   */
  isolate(index: number): Promise<string>;
  /** SIGKILL everything, wait for the exits, remove the temp dir. */
  destroy(): Promise<void>;
}

export interface StartEtcdClusterOptions {
  size?: number;
  quotaBackendBytes?: number;
  name?: string;
  /** The CA's key type; ECDSA P-256 by default, RSA 2048 like kubeadm. */
  caKeyType?: CaKeyType;
  /**
   * Another cluster's PKI (its `pki`): both clusters then trust the same CA and accept the same
   * client certificate, so a client reaches a member of either and sees its cluster ID. The files
   * live in the first cluster's dir: destroy the second cluster first.
   */
  pki?: TestCerts;
  /**
   * DNS names the members' serving certificate carries beside 127.0.0.1 and localhost; the member
   * names by default, as kubeadm names the node. [] makes a certificate without the node names.
   */
  serverCertNames?: string[];
  /** Puts a relay (test/harness/peer-proxy.ts) in front of each member's advertised peer URL, for isolate(). */
  peerProxies?: boolean;
  /** The etcd and etcdctl to run instead of etcdBinaries()'s (e.g. a mixed-version upgrade's first version). */
  binaries?: { etcd: string; etcdctl: string };
}

interface RunningProcess {
  child: ChildProcess;
  exited: Promise<void>;
  paused: boolean;
}

const liveChildren = new Set<ChildProcess>();
/** Temp dirs of clusters not yet destroyed, removed by the safety net too. */
const liveDirs = new Set<string>();
let safetyNetInstalled = false;

function killEverything(): void {
  for (const child of liveChildren) {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone; nothing to clean.
    }
  }
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
  liveDirs.clear();
}

/**
 * Kills every etcd member this process started when it exits, and also when it is ended by
 * SIGINT or SIGTERM (Node's default for those exits without an 'exit' event, which would leave
 * the members running): the signal is then raised again so the process ends as it would have.
 * A process with handlers of its own for the signal (the demo cleans up and prints what it did)
 * is left to them; the 'exit' net still covers it. This listener is put first, so it sees them.
 */
function installSafetyNet(): void {
  if (safetyNetInstalled) return;
  safetyNetInstalled = true;
  process.on('exit', killEverything);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const onSignal = () => {
      if (process.listeners(signal).some((listener) => listener !== onSignal)) return;
      process.off(signal, onSignal);
      killEverything();
      process.kill(process.pid, signal);
    };
    process.prependListener(signal, onSignal);
  }
}

function execFileResult(file: string, args: string[], timeoutMs: number, stdin?: string | Buffer): Promise<EtcdctlResult> {
  return new Promise((resolve) => {
    const child = execFile(
      file,
      args,
      { timeout: timeoutMs, killSignal: 'SIGKILL', env: { ...process.env, ETCDCTL_API: '3' }, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        let code = 0;
        if (error) {
          const raw = (error as { code?: unknown }).code;
          code = typeof raw === 'number' ? raw : 1;
        }
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
    // etcdctl reads a put's value from stdin when none is given: the way to pass large values.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(stdin ?? '');
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A member that exited while its cluster was starting (e.g. its port was taken meanwhile). */
class MemberDidNotStart extends Error {}

/**
 * A cluster whose every member is running. A port is picked free and then released for etcd to
 * bind, so another process can take it in between; the cluster would then come up on the other
 * members' quorum with one member dead. Such a start is made again on new ports, twice at most.
 */
export async function startEtcdCluster(options: StartEtcdClusterOptions = {}): Promise<EtcdTestCluster> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startEtcdClusterOnce(options);
    } catch (error) {
      if (!(error instanceof MemberDidNotStart) || attempt >= 3) throw error;
      console.warn(`etcd harness: starting again on new ports: ${error.message}`);
    }
  }
}

async function startEtcdClusterOnce(options: StartEtcdClusterOptions): Promise<EtcdTestCluster> {
  installSafetyNet();
  const size = options.size ?? 3;
  const prefix = options.name ?? 'etcd';
  const dir = await mkdtemp(path.join(os.tmpdir(), `etcd-guard-${prefix}-`));
  liveDirs.add(dir);
  // Member names are node names in a kubeadm cluster; its serving certificate names the node.
  const memberNames = Array.from({ length: size }, (_, index) => `${prefix}-${index}`);
  const serverNames = options.serverCertNames ?? memberNames;
  const certs = options.pki ?? (await generateTestCerts(dir, { caKeyType: options.caKeyType, serverNames }));
  const token = `${prefix}-${randomBytes(4).toString('hex')}`;
  const ports = await freePorts(size * (options.peerProxies ? 3 : 2));

  const members: EtcdTestMember[] = [];
  // With relays, a member advertises (and its peers dial) the relay's port and listens on its own.
  const listenPeerUrls = new Map<string, string>();
  const isolation: PeerIsolation = { isolated: new Set() };
  const proxies: PeerProxy[] = [];
  for (let index = 0; index < size; index += 1) {
    const name = `${prefix}-${index}`;
    if (options.peerProxies) listenPeerUrls.set(name, `http://127.0.0.1:${ports[size * 2 + index]}`);
    members.push({
      name,
      clientUrl: `https://127.0.0.1:${ports[index * 2]}`,
      peerUrl: `http://127.0.0.1:${ports[index * 2 + 1]}`,
      dataDir: path.join(dir, name),
      pid: undefined,
    });
  }
  const initialCluster = members.map((member) => `${member.name}=${member.peerUrl}`).join(',');
  // Per member: the flags it was first started with, reused by restart().
  const memberArgs = new Map<string, { initialCluster: string }>();
  const processes = new Map<number, RunningProcess>();
  const tlsArgs = ['--cacert', certs.caFile, '--cert', certs.certFile, '--key', certs.keyFile];
  const etcdctlBin = options.binaries?.etcdctl ?? ETCDCTL_BIN;
  // Per member index, once start() swapped it: the etcd binary it runs; the others run the cluster's.
  const memberBins = new Map<number, string>();
  const binOf = (index: number) => memberBins.get(index) ?? options.binaries?.etcd ?? ETCD_BIN;

  async function launch(index: number, clusterState: 'new' | 'existing'): Promise<void> {
    const member = members[index];
    if (!member) throw new Error(`no etcd member at index ${index}`);
    const args = memberArgs.get(member.name);
    if (!args) throw new Error(`no start arguments recorded for ${member.name}`);
    await mkdir(member.dataDir, { recursive: true });
    const log = await open(path.join(dir, `${member.name}.log`), 'a');
    const flags = [
      `--name=${member.name}`,
      `--data-dir=${member.dataDir}`,
      `--listen-client-urls=${member.clientUrl}`,
      `--advertise-client-urls=${member.clientUrl}`,
      `--listen-peer-urls=${listenPeerUrls.get(member.name) ?? member.peerUrl}`,
      `--initial-advertise-peer-urls=${member.peerUrl}`,
      `--initial-cluster=${args.initialCluster}`,
      `--initial-cluster-state=${clusterState}`,
      `--initial-cluster-token=${token}`,
      '--client-cert-auth',
      `--trusted-ca-file=${certs.caFile}`,
      `--cert-file=${certs.serverCertFile}`,
      `--key-file=${certs.serverKeyFile}`,
      '--heartbeat-interval=50',
      '--election-timeout=500',
      '--logger=zap',
      '--log-level=warn',
      '--snapshot-count=10000',
    ];
    if (options.quotaBackendBytes !== undefined) flags.push(`--quota-backend-bytes=${options.quotaBackendBytes}`);
    const etcdBin = binOf(index);
    const child = spawn(etcdBin, flags, { stdio: ['ignore', log.fd, log.fd] });
    // Listen before any await: 'spawn' and 'error' can fire while we close the log handle.
    const spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', () => resolve());
      child.once('error', (error) => reject(new Error(`cannot start ${etcdBin} for ${member.name}: ${error.message}`)));
    });
    liveChildren.add(child);
    const exited = new Promise<void>((resolve) => {
      child.once('exit', () => {
        liveChildren.delete(child);
        if (processes.get(index)?.child === child) {
          processes.delete(index);
          member.pid = undefined;
        }
        resolve();
      });
    });
    try {
      await spawned;
    } finally {
      await log.close();
    }
    processes.set(index, { child, exited, paused: false });
    member.pid = child.pid;
  }

  function runningEndpoints(): string[] {
    return members.filter((_, index) => processes.has(index) && !processes.get(index)?.paused).map((member) => member.clientUrl);
  }

  const cluster: EtcdTestCluster = {
    members,
    endpoints: members.map((member) => member.clientUrl),
    tls: {
      caFile: certs.caFile,
      caKeyFile: certs.caKeyFile,
      certFile: certs.certFile,
      keyFile: certs.keyFile,
      wrongCaFile: certs.wrongCaFile,
      wrongCertFile: certs.wrongCertFile,
      wrongKeyFile: certs.wrongKeyFile,
      expiredCertFile: certs.expiredCertFile,
      expiredKeyFile: certs.expiredKeyFile,
    },
    clientTls: { caFile: certs.caFile, certFile: certs.certFile, keyFile: certs.keyFile },
    dir,
    pki: certs,

    async kill(index) {
      const running = processes.get(index);
      if (!running) return;
      running.child.kill('SIGKILL');
      await running.exited;
    },

    pause(index) {
      const running = processes.get(index);
      if (!running) throw new Error(`etcd member ${index} is not running`);
      running.child.kill('SIGSTOP');
      running.paused = true;
    },

    resume(index) {
      const running = processes.get(index);
      if (!running) throw new Error(`etcd member ${index} is not running`);
      running.child.kill('SIGCONT');
      running.paused = false;
    },

    async restart(index) {
      await cluster.kill(index);
      await launch(index, 'existing');
    },

    async stop(index, timeoutMs = 15_000) {
      const running = processes.get(index);
      if (!running) return;
      if (running.paused) running.child.kill('SIGCONT');
      running.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const overdue = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          running.child.kill('SIGKILL');
          resolve();
        }, timeoutMs);
      });
      await Promise.race([running.exited, overdue]);
      clearTimeout(timer);
      await running.exited;
    },

    async start(index, startOptions = {}) {
      if (processes.has(index)) throw new Error(`etcd member ${index} is running: stop it first`);
      if (startOptions.etcd !== undefined) memberBins.set(index, startOptions.etcd);
      await launch(index, 'existing');
    },

    binaries() {
      return members.map((_, index) => binOf(index));
    },

    async waitHealthy(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      let last: EtcdctlResult | undefined;
      while (Date.now() < deadline) {
        const endpoints = runningEndpoints();
        // endpoint health does a linearizable get on each endpoint.
        last = await cluster.etcdctl(['endpoint', 'health', '--command-timeout=1s'], { endpoints, timeoutMs: 5_000 });
        if (last.code === 0) return;
        await delay(100);
      }
      throw new Error(
        `etcd cluster in ${dir} not healthy after ${timeoutMs} ms: ${last?.stderr.trim() ?? 'no answer'} ${last?.stdout.trim() ?? ''}`,
      );
    },

    etcdctl(args, callOptions = {}) {
      const endpoints = callOptions.endpoints ?? runningEndpoints();
      return execFileResult(
        etcdctlBin,
        [`--endpoints=${endpoints.join(',')}`, ...tlsArgs, '--dial-timeout=2s', ...args],
        callOptions.timeoutMs ?? 30_000,
        callOptions.stdin,
      );
    },

    async leaderIndex() {
      const result = await cluster.etcdctl(['endpoint', 'status', '-w', 'json', '--command-timeout=2s']);
      let statuses: unknown;
      try {
        statuses = JSON.parse(result.stdout);
      } catch {
        throw new Error(`etcdctl endpoint status gave no JSON: ${result.stderr.trim()}`);
      }
      if (!Array.isArray(statuses)) throw new Error(`etcdctl endpoint status gave ${result.stdout}`);
      for (const entry of statuses as Array<{
        Endpoint?: string;
        Status?: { leader?: number; header?: { member_id?: number } };
      }>) {
        if (entry.Status?.leader !== undefined && entry.Status.leader === entry.Status.header?.member_id) {
          const index = members.findIndex((member) => member.clientUrl === entry.Endpoint);
          if (index >= 0) return index;
        }
      }
      throw new Error(`no running member is the leader: ${result.stdout.trim()} ${result.stderr.trim()}`);
    },

    async addLearner() {
      const [clientPort, peerPort] = await freePorts(2);
      const name = `${prefix}-${members.length}`;
      const member: EtcdTestMember = {
        name,
        clientUrl: `https://127.0.0.1:${clientPort}`,
        peerUrl: `http://127.0.0.1:${peerPort}`,
        dataDir: path.join(dir, name),
        pid: undefined,
      };
      // etcd refuses membership changes ("unhealthy cluster") until every voting member has been
      // connected for 5 s, e.g. right after a start or restart: retry for a while.
      const retryUntil = Date.now() + 15_000;
      let result = await cluster.etcdctl(['member', 'add', name, '--learner', `--peer-urls=${member.peerUrl}`]);
      while (result.code !== 0 && /unhealthy cluster/.test(result.stderr) && Date.now() < retryUntil) {
        await delay(250);
        result = await cluster.etcdctl(['member', 'add', name, '--learner', `--peer-urls=${member.peerUrl}`]);
      }
      if (result.code !== 0) throw new Error(`etcdctl member add ${name} --learner failed: ${result.stderr.trim()}`);
      const idMatch = /Member\s+([0-9a-f]+)\s+added/i.exec(result.stdout);
      const clusterMatch = /ETCD_INITIAL_CLUSTER="([^"]+)"/.exec(result.stdout);
      if (!idMatch?.[1] || !clusterMatch?.[1]) throw new Error(`unexpected etcdctl member add output: ${result.stdout}`);
      const memberId = idMatch[1];
      members.push(member);
      const index = members.length - 1;
      memberArgs.set(name, { initialCluster: clusterMatch[1] });
      return {
        memberId,
        memberIdDecimal: BigInt(`0x${memberId}`).toString(10),
        name,
        start: () => launch(index, 'existing'),
      };
    },

    async isolate(index) {
      const member = members[index];
      const proxy = proxies[index];
      if (!member || !proxy) throw new Error(`etcd member ${index} has no peer relay (start with peerProxies)`);
      const listed = await cluster.etcdctl(['member', 'list']);
      // Plain output: "<id hex>, started, <name>, <peer urls>, <client urls>, <is learner>".
      for (const line of listed.stdout.split('\n')) {
        const [id, , , peerUrls] = line.split(', ');
        const relayed = proxies.find((candidate) => peerUrls === `http://127.0.0.1:${candidate.port}`);
        if (id && relayed) relayed.memberIdHex = id.trim();
      }
      if (proxy.memberIdHex === undefined)
        throw new Error(`${member.name} not in the member list: ${listed.stdout} ${listed.stderr}`);
      isolation.isolated.add(proxy.memberIdHex);
      for (const relay of proxies) relay.cutAll();
      return proxy.memberIdHex;
    },

    async destroy() {
      await Promise.all(proxies.map((proxy) => proxy.close()));
      const exits = [...processes.values()].map((running) => {
        running.child.kill('SIGKILL');
        return running.exited;
      });
      await Promise.all(exits);
      await rm(dir, { recursive: true, force: true });
      liveDirs.delete(dir);
    },
  };

  for (const member of members) memberArgs.set(member.name, { initialCluster });
  try {
    for (const member of members) {
      const listen = listenPeerUrls.get(member.name);
      if (listen)
        proxies.push(await startPeerProxy(Number(new URL(member.peerUrl).port), Number(new URL(listen).port), isolation));
    }
    await Promise.all(members.map((_, index) => launch(index, 'new')));
    await cluster.waitHealthy();
    const dead = members.filter((_, index) => !processes.has(index));
    if (dead.length > 0) {
      const logs = await Promise.all(
        dead.map(async (member) => {
          const text = await readFile(path.join(dir, `${member.name}.log`), 'utf8').catch(() => '');
          return `${member.name} (${member.clientUrl}) exited: ${text.trim().split('\n').slice(-3).join(' | ')}`;
        }),
      );
      throw new MemberDidNotStart(logs.join('; '));
    }
  } catch (error) {
    await cluster.destroy();
    throw error;
  }
  return cluster;
}
