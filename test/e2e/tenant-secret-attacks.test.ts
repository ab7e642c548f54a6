// A tenant of a Cluster API management cluster writes the Secrets of its own namespace: here it
// attacks etcd-guard through `<cluster>-kubeconfig` (and a druid client Secret), and the guard
// runs as it does in production: `etcd-guard evaluate --config` as a process, capi and druid
// discovery against the management stand-in, a healthy workload cluster A (real etcd, HTTPS
// workload stand-in) and a static target beside the attacks. Nothing a tenant writes may run a
// command, read a local file, crash the run, cost others their evaluation, exhaust memory, or
// tell the tenant what listens where (the stored reasons are quoted in denials).
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluationSchema, type Evaluation } from '../../functions/domain/evaluation-document.js';
import { discoveredTargetName } from '../../functions/domain/targets.js';
import {
  putCapiSecrets,
  putControlPlaneObjects,
  secretObject,
  startCapiWorkload,
  startWorkloadApiServer,
} from '../harness/capi-workload.js';
import type { CapiWorkload } from '../harness/capi-workload.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../harness/fake-kube-apiserver.js';
import { attachPortForward } from '../harness/fake-portforward.js';
import { freePort } from '../harness/free-port.js';
import { runProcess, type ProcessRun } from '../harness/process.js';
import { generateTestCerts } from '../harness/certs.js';
import { waitFor } from '../harness/wait.js';
import { startTestWebhook, type TestWebhook } from '../harness/webhook.js';
import { parseGuardConfig } from '../../functions/domain/config.js';

const BIN = path.resolve(import.meta.dirname, '../../bin/etcd-guard.mjs');
const TENANT = 'team-x';
const DRUID_NAMESPACE = 'shoot--x';
/** A tenant namespace of its own for the scan, so its run holds only the scanned servers. */
const SCANNER = 'team-scan';
const STOLEN = 'stolen-service-account-token-0123456789';

let workDir: string;
let management: FakeKubeApiServer;
let a: CapiWorkload;
/** The workload kubeconfig A's Secret holds: the base every attack edits. */
let legit: Record<string, unknown>;

type Kubeconfig = { clusters: [{ cluster: Record<string, unknown> }]; users: [{ user: Record<string, unknown> }] } & Record<
  string,
  unknown
>;

function edited(edit: (config: Kubeconfig) => void): string {
  const config = structuredClone(legit) as Kubeconfig;
  edit(config);
  return JSON.stringify(config);
}

const marker = (name: string) => path.join(workDir, `ran-${name}`);

/** Each attack: a tenant cluster whose `<cluster>-kubeconfig` holds `kubeconfig`, and the field its refusal must name. */
function kubeconfigAttacks(): Array<{ attack: string; kubeconfig: () => string; reason: RegExp }> {
  return [
    {
      attack: 'exec runs a command',
      kubeconfig: () =>
        edited((config) => {
          config.users[0].user = {
            exec: { apiVersion: 'client.authentication.k8s.io/v1', command: '/bin/sh', args: ['-c', `touch ${marker('exec')}`] },
          };
        }),
      reason: /users\[0\]\.user\.exec is refused: runs a command/,
    },
    {
      attack: 'auth-provider runs cmd-path',
      kubeconfig: () =>
        edited((config) => {
          config.users[0].user = {
            'auth-provider': { name: 'gcp', config: { 'cmd-path': 'touch', 'cmd-args': marker('auth-provider') } },
          };
        }),
      reason: /users\[0\]\.user\.auth-provider is refused/,
    },
    {
      attack: 'tokenFile sends a local file as the token',
      kubeconfig: () => edited((config) => void (config.users[0].user = { tokenFile: path.join(workDir, 'stolen-token') })),
      reason: /users\[0\]\.user\.tokenFile is refused: names a file/,
    },
    {
      attack: 'token-file sends a local file as the token',
      kubeconfig: () => edited((config) => void (config.users[0].user = { 'token-file': path.join(workDir, 'stolen-token') })),
      reason: /users\[0\]\.user\.token-file is refused: names a file/,
    },
    {
      attack: 'client-key names a local file',
      kubeconfig: () =>
        edited((config) => {
          config.users[0].user = { 'client-certificate': a.etcd.tls.certFile, 'client-key': a.etcd.tls.keyFile };
        }),
      reason: /users\[0\]\.user\.client-certificate is refused: names a file.*users\[0\]\.user\.client-key is refused/,
    },
    {
      attack: 'certificate-authority names a local file',
      kubeconfig: () =>
        edited((config) => {
          delete config.clusters[0].cluster['certificate-authority-data'];
          config.clusters[0].cluster['certificate-authority'] = '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt';
        }),
      reason: /clusters\[0\]\.cluster\.certificate-authority is refused: names a file/,
    },
    {
      attack: 'basic auth',
      kubeconfig: () => edited((config) => void Object.assign(config.users[0].user, { username: 'admin', password: 'x' })),
      reason: /users\[0\]\.user\.username is refused.*users\[0\]\.user\.password is refused/,
    },
    {
      attack: 'impersonation',
      kubeconfig: () => edited((config) => void Object.assign(config.users[0].user, { as: 'system:admin' })),
      reason: /users\[0\]\.user\.as is refused: impersonation/,
    },
    {
      attack: 'proxy-url re-routes the connection',
      kubeconfig: () => edited((config) => void (config.clusters[0].cluster['proxy-url'] = 'http://127.0.0.1:1')),
      reason: /clusters\[0\]\.cluster\.proxy-url is refused/,
    },
    {
      attack: 'insecure-skip-tls-verify',
      kubeconfig: () => edited((config) => void (config.clusters[0].cluster['insecure-skip-tls-verify'] = true)),
      reason: /clusters\[0\]\.cluster\.insecure-skip-tls-verify is refused/,
    },
    {
      attack: 'an unknown stanza',
      kubeconfig: () => edited((config) => void (config.users[0].user['plugin-loader'] = { path: '/tmp/x.so' })),
      reason: /users\[0\]\.user\.plugin-loader is not a field etcd-guard uses/,
    },
    {
      attack: 'plain http server',
      kubeconfig: () => edited((config) => void (config.clusters[0].cluster.server = a.apiServer.url.replace('https:', 'http:'))),
      reason: /server is not an https URL/,
    },
    {
      attack: 'a server without a scheme',
      kubeconfig: () => edited((config) => void (config.clusters[0].cluster.server = a.apiServer.url.replace('https://', ''))),
      reason: /server is not (a URL|an https URL)/,
    },
    {
      attack: 'a newline in the token',
      kubeconfig: () => edited((config) => void (config.users[0].user = { token: `${a.apiServer.token}\r\nX-Injected: 1` })),
      reason: /token contains a line break/,
    },
    {
      attack: 'a control character in the token',
      kubeconfig: () => edited((config) => void (config.users[0].user = { token: `${a.apiServer.token}\u0000` })),
      reason: /token contains a space, control or non-ASCII character/,
    },
    {
      attack: 'YAML aliases that expand',
      kubeconfig: () =>
        'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n',
      reason: /"value" is not a kubeconfig/,
    },
    {
      attack: 'a kubeconfig over 64 KiB',
      kubeconfig: () => edited((config) => void (config.users[0].user = { token: 'x'.repeat(70 * 1024) })),
      reason: /"value" is larger than 64 KiB/,
    },
  ];
}

const slug = (attack: string) =>
  attack
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 30);

/** Puts a tenant cluster: A's etcd CA in `<cluster>-etcd`, the given kubeconfig, one control-plane node of its own. */
function putTenantCluster(clusterName: string, kubeconfig: string, namespace = TENANT): void {
  const cluster = { namespace, clusterName };
  management.putObject('secrets', secretObject(namespace, `${clusterName}-kubeconfig`, { value: kubeconfig }));
  management.putObject(
    'secrets',
    secretObject(namespace, `${clusterName}-etcd`, {
      'tls.crt': readFileSync(a.etcd.tls.caFile),
      'tls.key': readFileSync(a.etcd.tls.caKeyFile),
    }),
  );
  putControlPlaneObjects(management, cluster, [`${clusterName}-node`]);
}

async function configFile(name: string, extra: Record<string, unknown>): Promise<{ file: string; storeDir: string }> {
  const storeDir = path.join(workDir, `store-${name}`);
  const file = path.join(workDir, `${name}.json`);
  await writeFile(file, JSON.stringify({ store: { kind: 'file', dir: storeDir }, ...extra }));
  return { file, storeDir };
}

async function stored(storeDir: string, target: string): Promise<Evaluation | null> {
  const file = path.join(storeDir, `${target}.json`);
  if (!existsSync(file)) return null;
  return evaluationSchema.parse(JSON.parse(await readFile(file, 'utf8')));
}

const capiTarget = (namespace: string, clusterName: string) => discoveredTargetName('capi', namespace, clusterName);

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-tenant-'));
  management = await startFakeKubeApiServer();
  a = await startCapiWorkload(management, { namespace: 'team-a', clusterName: 'wa' });
  putControlPlaneObjects(management, a.cluster, a.nodeNames);
  legit = JSON.parse(await readFile(a.apiServer.kubeconfigFile, 'utf8')) as Record<string, unknown>;
  await writeFile(path.join(workDir, 'stolen-token'), STOLEN);
  for (const { attack, kubeconfig } of kubeconfigAttacks()) putTenantCluster(slug(attack), kubeconfig());
  // A druid Etcd whose client Secret holds a key of another certificate (etcd3 threw in its constructor).
  const druid = JSON.parse(readFileSync(new URL('../fixtures/discovery/etcd-druid.json', import.meta.url), 'utf8')) as {
    metadata: { namespace: string };
  };
  druid.metadata.namespace = DRUID_NAMESPACE;
  management.putObject('etcds', druid as never);
  management.putObject(
    'secrets',
    secretObject(DRUID_NAMESPACE, 'ca-etcd-bundle', { 'bundle.crt': readFileSync(a.etcd.tls.caFile) }),
  );
  management.putObject(
    'secrets',
    secretObject(DRUID_NAMESPACE, 'etcd-client-tls', {
      'tls.crt': readFileSync(a.etcd.tls.certFile),
      'tls.key': readFileSync(a.etcd.tls.wrongKeyFile),
    }),
  );
}, 60_000);

afterAll(async () => {
  await Promise.all([a?.destroy(), management?.close()]);
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

describe('evaluate --config with tenants attacking through <cluster>-kubeconfig and key files', () => {
  let run: ProcessRun;
  let storeDir: string;
  const attacks = kubeconfigAttacks();

  beforeAll(async () => {
    const config = await configFile('attacks', {
      targets: [
        { name: 'static-good', endpoints: a.etcd.endpoints, tls: a.etcd.clientTls, timeout: '3s', match: { namespaces: ['x'] } },
        {
          name: 'static-key-mismatch',
          endpoints: a.etcd.endpoints,
          tls: { ...a.etcd.clientTls, keyFile: a.etcd.tls.wrongKeyFile },
          timeout: '3s',
          match: { namespaces: ['y'] },
        },
      ],
      discovery: {
        capi: { namespaces: ['team-a', TENANT] },
        druid: { namespaces: [DRUID_NAMESPACE] },
        kubeconfigFile: management.kubeconfigFile,
        timeout: '3s',
      },
    });
    storeDir = config.storeDir;
    run = await runProcess('node', [BIN, 'evaluate', '--config', config.file], { timeoutMs: 60_000 });
  }, 90_000);

  it('runs to its end without an uncaught exception or unhandled rejection', () => {
    expect(run.uncaught).toBeNull();
    // The static target with a key of another certificate is the one target not evaluated.
    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout + run.stderr).toMatch(/static-key-mismatch.*tls: the client key does not belong to the client certificate/);
  });

  it('stores every other target: A and the static target passing beside the attacks', async () => {
    // Passed, not Healthy: on a loaded machine a member may answer slowly (Degraded).
    expect((await stored(storeDir, capiTarget('team-a', 'wa')))?.passed).toBe(true);
    expect((await stored(storeDir, 'static-good'))?.passed).toBe(true);
    expect(await stored(storeDir, 'static-key-mismatch')).toBeNull();
  });

  it('stores the druid target whose client key is not its certificate as Unhealthy, naming the Secrets', async () => {
    const evaluation = await stored(storeDir, discoveredTargetName('druid', DRUID_NAMESPACE, 'etcd-main'));
    expect(evaluation?.verdict).toBe('Unhealthy');
    expect(evaluation?.reasons.join('\n')).toMatch(
      /Secret shoot--x\/ca-etcd-bundle \/ shoot--x\/etcd-client-tls: the client key does not belong to the client certificate/,
    );
  });

  it.each(attacks.map(({ attack, reason }) => ({ attack, reason })))(
    'refuses the kubeconfig ($attack) with a reason naming the field, and stores it as Unhealthy',
    async ({ attack, reason }) => {
      const evaluation = await stored(storeDir, capiTarget(TENANT, slug(attack)));
      expect(evaluation?.verdict).toBe('Unhealthy');
      const reasons = evaluation?.reasons.join('\n') ?? '';
      expect(reasons).toMatch(new RegExp(`Secret ${TENANT}/${slug(attack)}-kubeconfig`));
      expect(reasons).toMatch(reason);
      // Never a value: no token, path or command from the kubeconfig.
      for (const value of [a.apiServer.token, STOLEN, workDir, '/bin/sh', 'system:admin', 'X-Injected']) {
        expect(reasons).not.toContain(value);
      }
    },
  );

  it('ran no command and sent no request on behalf of a refused kubeconfig', () => {
    expect(existsSync(marker('exec'))).toBe(false);
    expect(existsSync(marker('auth-provider'))).toBe(false);
    const tenantPods = a.apiServer.requests.filter((request) => request.path.includes('-node/portforward'));
    expect(tenantPods).toEqual([]);
  });
});

describe('the HTTPS webhook with an open POST /evaluations (as the capi overlay shipped it)', () => {
  let webhook: TestWebhook;

  beforeAll(async () => {
    const certs = await generateTestCerts(await mkdtemp(path.join(workDir, 'webhook-')));
    const config = parseGuardConfig(
      {
        store: { kind: 'file', dir: path.join(workDir, 'store-webhook') },
        targets: [
          {
            name: 'static-key-mismatch',
            endpoints: a.etcd.endpoints,
            tls: { ...a.etcd.clientTls, keyFile: a.etcd.tls.wrongKeyFile },
            match: { namespaces: ['y'] },
          },
        ],
        discovery: {
          capi: { namespaces: [TENANT] },
          druid: { namespaces: [DRUID_NAMESPACE] },
          kubeconfigFile: management.kubeconfigFile,
          timeout: '2s',
        },
      },
      'tenant webhook config',
    );
    webhook = await startTestWebhook({
      config,
      certs,
      kubeconfigFile: management.kubeconfigFile,
      agent: { keepAlive: false },
    });
  }, 60_000);

  afterAll(async () => {
    await webhook?.close();
  });

  const post = (target: string) => webhook.request('POST', `/evaluations/${target}`);
  const healthz = async () => (await webhook.request('GET', '/healthz', { timeoutMs: 5_000 })).status;

  it.each([
    { attack: 'exec runs a command', target: () => capiTarget(TENANT, slug('exec runs a command')) },
    { attack: 'auth-provider runs cmd-path', target: () => capiTarget(TENANT, slug('auth-provider runs cmd-path')) },
    { attack: 'a newline in the token', target: () => capiTarget(TENANT, slug('a newline in the token')) },
    { attack: 'a server without a scheme', target: () => capiTarget(TENANT, slug('a server without a scheme')) },
    {
      attack: 'a druid client key of another certificate',
      target: () => discoveredTargetName('druid', DRUID_NAMESPACE, 'etcd-main'),
    },
  ])('POST for $attack answers Unhealthy, runs nothing and the server stays up', async ({ target }) => {
    let answer = await post(target());
    // Discovery runs in the background after start: the target appears within a round.
    await waitFor(`discovery to list ${target()}`, 10_000, async () => (answer = await post(target())).status !== 404);
    expect(answer.status, answer.text).toBe(200);
    expect((answer.json as Evaluation).verdict).toBe('Unhealthy');
    expect(existsSync(marker('exec'))).toBe(false);
    expect(existsSync(marker('auth-provider'))).toBe(false);
    expect(await healthz()).toBe(200);
  });

  it('POST for a static target whose key is not its certificate fails that request only', async () => {
    const answer = await post('static-key-mismatch');
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(answer.text).not.toMatch(/PRIVATE KEY/);
    expect(await healthz()).toBe(200);
  });
});

describe('a tenant picks the workload server: no port-scan oracle in stored reasons', () => {
  it('says the same for a closed port, an HTTP answer, a TLS failure and silence', async () => {
    const silent = net.createServer((socket) => socket.on('error', () => undefined));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
    const silentPort = (silent.address() as net.AddressInfo).port;
    const closedPort = await freePort();
    const servers = {
      refused: `https://127.0.0.1:${closedPort}`,
      silent: `https://127.0.0.1:${silentPort}`,
      answers401: a.apiServer.url,
      // The etcd member serves TLS with a certificate the kubeconfig's CA never signed.
      tlsRejected: a.etcd.endpoints[0] ?? '',
    };
    for (const [probe, server] of Object.entries(servers)) {
      putTenantCluster(
        `scan-${probe.toLowerCase()}`,
        edited((config) => {
          config.clusters[0].cluster.server = server;
          if (probe === 'answers401') config.users[0].user = { token: 'not-the-token' };
        }),
        SCANNER,
      );
    }
    const config = await configFile('scan', {
      targets: [],
      discovery: { capi: { namespaces: [SCANNER] }, kubeconfigFile: management.kubeconfigFile, timeout: '2s' },
    });
    try {
      const run = await runProcess('node', [BIN, 'evaluate', '--config', config.file], { timeoutMs: 60_000 });
      expect(run.uncaught).toBeNull();
      const reasons: Record<string, string> = {};
      for (const probe of Object.keys(servers)) {
        const clusterName = `scan-${probe.toLowerCase()}`;
        const evaluation = await stored(config.storeDir, capiTarget(SCANNER, clusterName));
        reasons[probe] = (evaluation?.reasons.join('\n') ?? 'not stored').split(clusterName).join('<cluster>');
      }
      console.log(`stored reason for every scanned server: ${reasons.refused}`);
      expect(reasons.refused).toMatch(
        /workload API server of team-scan\/<cluster> unreachable or refused the port-forward \(server and credentials from Secret team-scan\/<cluster>-kubeconfig\)/,
      );
      expect(reasons).toEqual({
        refused: reasons.refused,
        silent: reasons.refused,
        answers401: reasons.refused,
        tlsRejected: reasons.refused,
      });
    } finally {
      silent.close();
    }
  }, 90_000);
});

describe('a workload server sending 90 MiB WebSocket frames', () => {
  it('cannot take evaluate --config past a bounded RSS', async () => {
    const hostile = await startWorkloadApiServer();
    const relay = attachPortForward(hostile);
    const clusterName = 'flood';
    try {
      relay.setPod('kube-system', `etcd-${clusterName}-node`, {
        host: '127.0.0.1',
        port: Number(new URL(a.etcd.endpoints[0] ?? '').port),
      });
      await putCapiSecrets(management, { namespace: TENANT, clusterName }, { apiServer: hostile, etcd: a.etcd });
      putControlPlaneObjects(management, { namespace: TENANT, clusterName }, [`${clusterName}-node`]);
      const config = await configFile('flood', {
        targets: [],
        discovery: {
          capi: { namespaces: [TENANT], labelSelector: { 'cluster.x-k8s.io/cluster-name': clusterName } },
          kubeconfigFile: management.kubeconfigFile,
          timeout: '2s',
        },
      });
      /** evaluate --config as a process, its peak RSS (VmHWM) sampled from /proc until it exits. */
      const measured = async () => {
        let peakKiB = 0;
        let sampler: NodeJS.Timeout | undefined;
        const run = await runProcess('node', [BIN, 'evaluate', '--config', config.file], {
          timeoutMs: 60_000,
          onSpawn: (pid) => {
            sampler = setInterval(() => {
              try {
                const status = readFileSync(`/proc/${pid}/status`, 'utf8');
                peakKiB = Math.max(peakKiB, Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0));
              } catch {
                // The process has exited.
              }
            }, 20);
          },
        });
        clearInterval(sampler);
        return { run, peakMiB: peakKiB / 1024 };
      };
      // The same run against a server that sends nothing hostile: what node and the CLI cost here.
      const baseline = await measured();
      relay.sendOnOpen(90 * 1024 * 1024);
      const streamsBefore = relay.streamsOpened();
      const { run, peakMiB } = await measured();
      const evaluation = await stored(config.storeDir, capiTarget(TENANT, clusterName));
      console.log(
        `90 MiB frames: evaluate --config peak RSS ${peakMiB.toFixed(0)} MiB (same run without them: ` +
          `${baseline.peakMiB.toFixed(0)} MiB), ${relay.streamsOpened() - streamsBefore} streams, wall ` +
          `${run.wallMs.toFixed(0)} ms; reason: ${evaluation?.reasons[0] ?? 'none'}`,
      );
      expect(run.uncaught).toBeNull();
      expect(evaluation?.verdict).toBe('Unhealthy');
      expect(evaluation?.reasons.join('\n')).toMatch(/port-forward closed: the API server sent a frame over 1 MiB/);
      expect(relay.streamsOpened()).toBeGreaterThan(streamsBefore);
      // One frame is refused by its header: the hostile run costs far less than one 90 MiB frame more.
      expect(peakMiB - baseline.peakMiB).toBeLessThan(64);
    } finally {
      await hostile.close();
    }
  }, 90_000);
});
