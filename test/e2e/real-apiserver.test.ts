// Issue 29, the Kubernetes half: the real kube-apiserver and kubectl of scripts/versions.env
// (built by scripts/ensure-kube.sh), the real CRDs from their Go modules, the shipped manifests
// applied unchanged with `kubectl apply --server-side -k`, and etcd-guard's webhook (the bundle,
// as the image runs it) called by that server through its own Service resolution: the
// EndpointSlice the test writes for the shipped Service, the egress relay of the harness.
// Every change below is made with the built kubectl, and its output is what a user would see.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ConfigMapStore } from '../../functions/adapters/configmap-store.js';
import { createCoreV1Api } from '../../functions/adapters/kube.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { etcdVersion, startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';
import { startKubeApiserver, type KubeApiserver, type KubeUser } from '../harness/kube-apiserver.js';
import { CelError, evaluateCel } from '../harness/cel.js';
import { at, objs, ROOT, webhookConfiguration } from '../harness/manifests.js';
import { runProcess, type ProcessRun } from '../harness/process.js';
import { goModuleDir, pinnedVersion } from '../harness/versions.js';
import { waitFor } from '../harness/wait.js';
import { startWebhookProcess, type WebhookProcess } from '../harness/webhook-process.js';

/** The real CRDs of every kind the manifests and the guard use: [module pin, module, files]. */
const CRD_SOURCES: Array<[string, string, string[]]> = [
  [
    'CAPI_VERSION',
    'sigs.k8s.io/cluster-api',
    [
      'core/config/crd/bases/cluster.x-k8s.io_clusters.yaml',
      'core/config/crd/bases/cluster.x-k8s.io_machines.yaml',
      'controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml',
      'core/config/crd/bases/runtime.cluster.x-k8s.io_extensionconfigs.yaml',
    ],
  ],
  ['DRUID_API_VERSION', 'github.com/gardener/etcd-druid/api', ['core/v1alpha1/crds/druid.gardener.cloud_etcds.yaml']],
  [
    'PROMETHEUS_OPERATOR_VERSION',
    'github.com/prometheus-operator/prometheus-operator',
    [
      'example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml',
      'example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml',
    ],
  ],
  [
    'CERT_MANAGER_VERSION',
    'github.com/cert-manager/cert-manager',
    ['deploy/crds/cert-manager.io_certificates.yaml', 'deploy/crds/cert-manager.io_issuers.yaml'],
  ],
];

/** An address the Service's EndpointSlice may carry (loopback is refused); the relay maps it to the webhook. */
const WEBHOOK_POD_IP = '10.244.0.10';
const WEBHOOK_POD_PORT = 8443;
const TARGET = 'prod';
const NS = 'default';

let kube: KubeApiserver;
let etcd: EtcdTestCluster;
let webhook: WebhookProcess | undefined;
let work: string;
let oncall: KubeUser;
let developer: KubeUser;
let configFile: string;
let evaluatorKubeconfig: string;
let webhookKubeconfig: string;
let certFile: string;
let keyFile: string;

/**
 * (Re)starts the webhook bundle with the test's config in this enforcement mode and points the
 * relay at it: the EndpointSlice keeps its address and port, only what is behind it changes.
 */
async function startGuard(enforcement: 'enforce' | 'warn' | 'audit'): Promise<WebhookProcess> {
  await webhook?.stop();
  const tokenFile = path.join(work, 'api-token');
  await writeFile(tokenFile, 'e2e-api-token\n', { mode: 0o600 });
  await writeFile(
    configFile,
    stringify({
      store: { kind: 'configmap', namespace: 'etcd-guard' },
      maxAgeSeconds: 120,
      inlineRefresh: true,
      enforcement,
      targets: [
        {
          name: TARGET,
          endpoints: etcd.endpoints,
          tls: etcd.clientTls,
          timeout: '5s',
          match: { namespaces: [NS], names: [TARGET] },
        },
      ],
      auth: { tokenFile },
      override: { annotation: 'etcd-guard.io/override', groups: ['system:masters'], subjectAccessReview: true },
    }),
  );
  const started = await startWebhookProcess({ configFile, certFile, keyFile, env: { KUBECONFIG: webhookKubeconfig } });
  webhook = started;
  kube.route(WEBHOOK_POD_IP, WEBHOOK_POD_PORT, started.port);
  return started;
}

/** The CronJob's command, `etcd-guard evaluate --config`, as the evaluator ServiceAccount (a real token). */
function scheduledRun(): Promise<ProcessRun> {
  return runProcess(process.execPath, [path.join(ROOT, 'bin/etcd-guard.mjs'), 'evaluate', '--config', configFile], {
    env: { ...process.env, KUBECONFIG: evaluatorKubeconfig, LOG_LEVEL: 'warn' },
    timeoutMs: 60_000,
  });
}

/**
 * stderr without the warnings a loaded machine adds: a status call over the 500 ms slow-member
 * limit makes the evaluation Degraded, whose reasons the webhook passes on as warnings.
 */
function calm(stderr: string): string {
  return stderr.replace(/^Warning: etcd prod: member \S+ \(https:\/\/[^)]+\) slow: status took \d+ ms \(limit 500 ms\)\n/gm, '');
}

function ok(run: ProcessRun, what: string): string {
  expect(run.code, `${what}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`).toBe(0);
  return run.stdout;
}

async function applyYaml(objects: unknown[], kubeconfig?: string): Promise<ProcessRun> {
  const text = objects.map((object) => stringify(object)).join('---\n');
  return kube.kubectl(['apply', '--server-side', '-f', '-'], { stdin: text, ...(kubeconfig ? { kubeconfig } : {}) });
}

/** A kustomization in `work` of the base plus the components no overlay includes. */
async function baseWithComponents(): Promise<string> {
  const dir = path.join(work, 'with-components');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir);
  const relative = (to: string) => path.relative(dir, path.join(ROOT, to));
  await writeFile(
    path.join(dir, 'kustomization.yaml'),
    stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: [relative('manifests/base')],
      components: [relative('manifests/components/observability'), relative('manifests/components/network-policies')],
    }),
  );
  return dir;
}

/** The guarded objects, all named after the one target, with the fields their real schemas require. */
function guardedObjects(replicas: number): unknown[] {
  const labels = { 'cluster.x-k8s.io/cluster-name': TARGET };
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: TARGET, namespace: NS, labels },
      spec: {
        replicas,
        serviceName: TARGET,
        selector: { matchLabels: { app: 'etcd' } },
        template: {
          metadata: { labels: { app: 'etcd' } },
          spec: { containers: [{ name: 'etcd', image: 'registry.k8s.io/etcd:3.6.5-0' }] },
        },
      },
    },
    {
      apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
      kind: 'KubeadmControlPlane',
      metadata: { name: TARGET, namespace: NS, labels },
      spec: {
        replicas,
        version: 'v1.34.4',
        machineTemplate: {
          spec: {
            infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachineTemplate', name: TARGET },
          },
        },
      },
    },
    {
      apiVersion: 'druid.gardener.cloud/v1alpha1',
      kind: 'Etcd',
      metadata: { name: TARGET, namespace: NS, labels },
      spec: { replicas, labels: { app: 'etcd-druid' }, etcd: {}, backup: {} },
    },
  ];
}

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-real-apiserver-'));
  const crdFiles = Promise.all(
    CRD_SOURCES.map(async ([pin, module, files]) => {
      const dir = await goModuleDir(module, pinnedVersion(pin));
      return files.map((file) => path.join(dir, file));
    }),
  );
  [kube, etcd] = await Promise.all([startKubeApiserver({ name: 'e2e' }), startEtcdCluster({ size: 3, name: 'realapi' })]);
  // Both the guarded etcd and the server's storage run the etcd under test (ETCD_GUARD_ETCD_BIN_DIR),
  // so each real-etcd pass of .ci/run meets the real server on its etcd.
  console.log(
    `kube-apiserver ${pinnedVersion('KUBE_VERSION')} ready in ${Math.round(kube.startupMs)} ms; its storage and the guarded etcd run etcd ${await etcdVersion()}`,
  );
  const files = (await crdFiles).flat();
  ok(await kube.kubectl(['apply', '--server-side', ...files.flatMap((file) => ['-f', file])]), 'applying the real CRDs');
  ok(
    await kube.kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...files.flatMap((file) => ['-f', file])]),
    'CRDs established',
  );
}, 240_000);

afterAll(async () => {
  await webhook?.stop();
  await kube?.destroy();
  await etcd?.destroy();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('issue 29: the shipped manifests on a real kube-apiserver', () => {
  it.each([
    ['the base', 'manifests/base'],
    ['the capi overlay', 'manifests/overlays/capi'],
    ['the druid overlay', 'manifests/overlays/druid'],
    ['the cert-manager overlay', 'manifests/overlays/cert-manager'],
    ['the base with the observability and network-policies components', null],
  ])('accepts every object of %s (kubectl apply --server-side -k)', async (_what, dir) => {
    const kustomization = dir === null ? await baseWithComponents() : path.join(ROOT, dir);
    const built = ok(await kube.kubectl(['kustomize', kustomization]), 'kubectl kustomize');
    const expected = built.split(/^---$/m).filter((doc) => /^kind: /m.test(doc)).length;
    const applied = await kube.kubectl(['apply', '--server-side', '-k', kustomization]);
    ok(applied, `kubectl apply --server-side -k ${kustomization}`);
    expect(applied.stderr).toBe('');
    const lines = applied.stdout.trim().split('\n');
    expect(
      lines.every((line) => / serverside-applied$/.test(line)),
      applied.stdout,
    ).toBe(true);
    expect(lines).toHaveLength(expected);
  });
});

describe('issue 29: kubectl against the webhook the shipped manifests register', () => {
  beforeAll(async () => {
    // Back to the base alone: the overlays' patches (cert-manager's CA injection) are undone.
    ok(await kube.kubectl(['apply', '--server-side', '-k', path.join(ROOT, 'manifests/base')]), 'the base again');
    const env = { ...process.env, KUBECTL: kube.kubectlBin, KUBECONFIG: kube.admin.kubeconfig, HOME: path.join(work, 'home') };
    const cert = await runProcess('bash', [path.join(ROOT, 'scripts/make-webhook-cert.sh')], { env, timeoutMs: 60_000 });
    ok(cert, 'scripts/make-webhook-cert.sh');
    const secret = JSON.parse(
      ok(await kube.kubectl(['get', 'secret', '-n', 'etcd-guard', 'etcd-guard-webhook-tls', '-o', 'json']), 'the TLS Secret'),
    ) as {
      data: Record<string, string>;
    };
    certFile = path.join(work, 'tls.crt');
    keyFile = path.join(work, 'tls.key');
    await writeFile(certFile, Buffer.from(secret.data['tls.crt'] ?? '', 'base64'));
    await writeFile(keyFile, Buffer.from(secret.data['tls.key'] ?? '', 'base64'), { mode: 0o600 });
    configFile = path.join(work, 'config.yaml');
    webhookKubeconfig = await kube.serviceAccountKubeconfig('etcd-guard', 'etcd-guard-webhook');
    evaluatorKubeconfig = await kube.serviceAccountKubeconfig('etcd-guard', 'etcd-guard-evaluator');
    await startGuard('enforce');
    ok(
      await applyYaml([
        {
          apiVersion: 'discovery.k8s.io/v1',
          kind: 'EndpointSlice',
          metadata: {
            name: 'etcd-guard-webhook-test',
            namespace: 'etcd-guard',
            labels: { 'kubernetes.io/service-name': 'etcd-guard-webhook' },
          },
          addressType: 'IPv4',
          endpoints: [{ addresses: [WEBHOOK_POD_IP], conditions: { ready: true } }],
          ports: [{ name: 'https', port: WEBHOOK_POD_PORT, protocol: 'TCP' }],
        },
      ]),
      'the EndpointSlice',
    );
    ok(await applyYaml(guardedObjects(3)), 'the guarded objects');
    [oncall, developer] = await Promise.all([kube.user('oncall-alice', ['oncall']), kube.user('dev-bob', ['developers'])]);
    const editor = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'e2e-control-plane-editor' },
      rules: [
        { apiGroups: ['apps'], resources: ['statefulsets', 'statefulsets/scale'], verbs: ['get', 'list', 'patch', 'update'] },
        {
          apiGroups: ['controlplane.cluster.x-k8s.io'],
          resources: ['kubeadmcontrolplanes', 'kubeadmcontrolplanes/scale'],
          verbs: ['get', 'list', 'patch', 'update'],
        },
        { apiGroups: ['druid.gardener.cloud'], resources: ['etcds', 'etcds/scale'], verbs: ['get', 'list', 'patch', 'update'] },
      ],
    };
    const binding = (name: string, roleKind: string, role: string, group: string) => ({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: roleKind === 'ClusterRole' ? 'ClusterRoleBinding' : 'RoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: roleKind, name: role },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group }],
    });
    ok(
      await applyYaml([
        editor,
        binding('e2e-oncall-edit', 'ClusterRole', 'e2e-control-plane-editor', 'oncall'),
        binding('e2e-developers-edit', 'ClusterRole', 'e2e-control-plane-editor', 'developers'),
        // The shipped sample role, bound as rbac-override.yaml's comment says.
        binding('etcd-guard-override-oncall', 'ClusterRole', 'etcd-guard-override', 'oncall'),
      ]),
      'the users RBAC',
    );
  }, 120_000);

  // A control-plane Machine of KCP prod whose Node (and so its etcd member) is the first member.
  const CP_MACHINE = 'prod-cp-0';
  const CP_LABEL = 'cluster.x-k8s.io/control-plane';
  const controlPlaneMachine = (kcpUid: string) => ({
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Machine',
    metadata: {
      name: CP_MACHINE,
      namespace: NS,
      labels: { 'cluster.x-k8s.io/cluster-name': TARGET, [CP_LABEL]: '' },
      ownerReferences: [
        {
          apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
          kind: 'KubeadmControlPlane',
          name: TARGET,
          uid: kcpUid,
          controller: true,
        },
      ],
    },
    spec: {
      clusterName: TARGET,
      bootstrap: { dataSecretName: `${CP_MACHINE}-bootstrap` },
      infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine', name: CP_MACHINE },
    },
  });

  // [kubectl's resource, what kubectl names it, its Kind as the guard names it, replicas now]
  const kinds: Array<{ resource: string; printed: string; kind: string; replicas: number }> = [
    { resource: 'statefulset', printed: 'statefulset.apps', kind: 'StatefulSet', replicas: 3 },
    { resource: 'kcp', printed: 'kubeadmcontrolplane.controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', replicas: 3 },
    // The real Etcd CRD refuses a scale-down other than to 0 (a CEL rule): it only grows here.
    { resource: 'etcds.druid.gardener.cloud', printed: 'etcd.druid.gardener.cloud', kind: 'Etcd', replicas: 3 },
  ];
  const scale = (resource: string, replicas: number, extra: string[] = [], kubeconfig?: string) =>
    kube.kubectl(['scale', resource, TARGET, '-n', NS, `--replicas=${replicas}`, ...extra], kubeconfig ? { kubeconfig } : {});
  const EVEN_SIZE_WARNING = 'Warning: even etcd size 4 tolerates 1 failure, no more than 3 members would\n';

  it.each(kinds)('kubectl scale $resource is allowed while etcd is healthy, with the even-size warning', async (target) => {
    const up = await scale(target.resource, 4);
    expect(up.stdout).toBe(`${target.printed}/${TARGET} scaled\n`);
    expect(calm(up.stderr)).toBe(EVEN_SIZE_WARNING);
    expect(up.code).toBe(0);
    if (target.kind === 'Etcd') {
      target.replicas = 4;
      return;
    }
    const down = await scale(target.resource, 3);
    expect(calm(down.stderr)).toBe('');
    expect(down.stdout).toBe(`${target.printed}/${TARGET} scaled\n`);
  });

  describe('after a member is SIGKILLed', () => {
    let killedUrl: string;
    beforeAll(async () => {
      killedUrl = etcd.members[1]?.clientUrl ?? '';
      await etcd.kill(1);
      const run = await scheduledRun();
      expect(run.stdout, run.stderr).toMatch(/Unhealthy/);
      // A server-side dry run gets the same decision without a side effect: once it is denied,
      // the webhook's evaluation has seen the kill (one from just before may be reused briefly).
      await waitFor(
        'a dry-run scale to be denied',
        30_000,
        async () => (await scale('statefulset', 4, ['--dry-run=server'])).code !== 0,
      );
    });

    it.each(kinds)('kubectl scale $resource is denied with the webhook message, verbatim', async (target) => {
      const denied = await scale(target.resource, target.replicas + 1);
      expect(denied.stdout).toBe('');
      expect(denied.code).toBe(1);
      // Only the evaluation's age and its reasons vary: which of them the probe reached first
      // within its deadline (the dead member refusing, or no member answering in time under load).
      const before =
        `Error from server (Forbidden): admission webhook "etcd-guard.etcd-guard.io" denied the request: ` +
        `etcd-guard denied scale up from ${target.replicas} to ${target.replicas + 1} replicas of ${target.kind} ${NS}/${TARGET}: ` +
        `target ${TARGET} verdict Unhealthy, evaluated `;
      const after =
        `; to override, annotate with etcd-guard.io/override=<reason> (needs RBAC verb override on targets.etcd-guard.io ${TARGET}, ` +
        'or membership in system:masters)\n';
      const reasons = new RegExp(`^${escape(before)}\\d+s ago: (.+)${escape(after)}$`).exec(denied.stderr)?.[1];
      expect(reasons, denied.stderr).toBeDefined();
      // Under load the reasons may also name slow members; one of these two leads or follows them.
      expect(reasons).toMatch(
        new RegExp(
          `member ${escape(etcd.members[1]?.name ?? '')} unreachable: ${escape(killedUrl)}: connection refused; etcd verdict is Unhealthy|` +
            'member list unavailable from every endpoint: opening access to etcd timed out after 5000 ms',
        ),
      );
    });

    it("denies kubectl patch of a KubeadmControlPlane's version (a rollout) with the webhook message", async () => {
      const patched = await kube.kubectl([
        'patch',
        'kcp',
        TARGET,
        '-n',
        NS,
        '--type=merge',
        '-p',
        '{"spec":{"version":"v1.34.5"}}',
      ]);
      expect(patched.stdout).toBe('');
      expect(patched.stderr).toMatch(
        new RegExp(
          `^${escape(
            'Error from server (Forbidden): admission webhook "etcd-guard.etcd-guard.io" denied the request: ' +
              `etcd-guard denied rollout (spec.version changed) of KubeadmControlPlane ${NS}/${TARGET}: target ${TARGET} verdict Unhealthy, evaluated `,
          )}\\d+s ago: .+${escape('(needs RBAC verb override on targets.etcd-guard.io prod, or membership in system:masters)')}\\n$`,
        ),
      );
      expect(patched.code).toBe(1);
    });

    it('denies kubectl label … cluster.x-k8s.io/control-plane- of a control-plane Machine whose healthy member quorum needs', async () => {
      const kcpUid = ok(await kube.kubectl(['get', 'kcp', TARGET, '-n', NS, '-o', 'jsonpath={.metadata.uid}']), 'the KCP uid');
      ok(await applyYaml([controlPlaneMachine(kcpUid)]), 'the control-plane Machine');
      const member = etcd.members[0]?.name ?? '';
      const status = { ...controlPlaneMachine(kcpUid), status: { nodeRef: { name: member } } };
      ok(
        await kube.kubectl(['apply', '--server-side', '--subresource=status', '-f', '-'], { stdin: stringify(status) }),
        'its nodeRef',
      );
      // An ordinary label is never sent (the matchConditions), so it passes while etcd is Unhealthy.
      ok(await kube.kubectl(['label', 'machines.cluster.x-k8s.io', CP_MACHINE, '-n', NS, 'team=infra']), 'an ordinary label');
      const stripped = await kube.kubectl(['label', 'machines.cluster.x-k8s.io', CP_MACHINE, '-n', NS, `${CP_LABEL}-`]);
      expect(stripped.stdout).toBe('');
      expect(stripped.code, stripped.stderr).toBe(1);
      console.log(`label strip while a member is dead: ${stripped.stderr.trim()}`);
      // The member named after its Node leaves with the later DELETE; under load the evaluation
      // may have had no member list, and then which member leaves is undetermined.
      expect(stripped.stderr).toMatch(
        new RegExp(
          `^${escape(
            'Error from server (Forbidden): admission webhook "machine-updates.etcd-guard.etcd-guard.io" denied the request: ' +
              `etcd-guard denied change (removes label ${CP_LABEL}: its deletion would go unseen) of Machine ${NS}/${CP_MACHINE}: ` +
              `target ${TARGET} verdict Unhealthy, evaluated `,
          )}\\d+s ago: deleting Machine ${CP_MACHINE}: (its etcd member ${escape(member)} is healthy and leaves with it; ` +
            `removing 1 member would leave 1 healthy of 2 voting, below quorum 2|the evaluation has no member list).*` +
            `${escape('keep its labels and owner reference; the safe paths: ')}.*${escape('or membership in system:masters)')}\\n$`,
        ),
      );
      const labels = ok(
        await kube.kubectl(['get', 'machines.cluster.x-k8s.io', CP_MACHINE, '-n', NS, '-o', 'json']),
        'the Machine after',
      );
      expect((JSON.parse(labels) as { metadata: { labels: Record<string, string> } }).metadata.labels).toMatchObject({
        [CP_LABEL]: '',
        team: 'infra',
      });
      // The decision's log line is written after its answer, so it can trail kubectl's exit.
      const decided = () =>
        (webhook?.output() ?? '')
          .split('\n')
          .filter((line) => line.includes('"msg":"admission decision"') && line.includes(`"${NS}/${CP_MACHINE}"`));
      await waitFor('the label strip to be decided', 10_000, () => decided().length > 0);
      expect(decided().map((line) => (JSON.parse(line) as { operation: string }).operation)).toEqual(['UPDATE']);
    });

    const overridePatch = (replicas: number, reason: string) =>
      JSON.stringify({ metadata: { annotations: { 'etcd-guard.io/override': reason } }, spec: { replicas } });

    it('lets a user RBAC grants the override verb override the denial (a real SubjectAccessReview)', async () => {
      const sts = kinds[0]!;
      const run = await kube.kubectl(
        [
          'patch',
          'statefulset',
          TARGET,
          '-n',
          NS,
          '--type=merge',
          '-p',
          overridePatch(sts.replicas + 1, 'INC-42 replace the dead member'),
        ],
        {
          kubeconfig: oncall.kubeconfig,
        },
      );
      expect(run.stdout, run.stderr).toBe('statefulset.apps/prod patched\n');
      // The webhook cuts its warnings at MAX_WARNING_LENGTH; the full denial is in the audit annotations.
      expect(calm(run.stderr)).toBe(
        'Warning: etcd-guard override by oncall-alice: INC-42 replace the dead member\n' +
          `Warning: overridden: etcd-guard denied scale up from ${sts.replicas} to ${sts.replicas + 1} replicas of StatefulSet default/prod: target prod verdict Unhealt...\n`,
      );
      expect(run.code).toBe(0);
      sts.replicas += 1;
      // The grant came from RBAC, through a SubjectAccessReview the webhook's own ServiceAccount made.
      const reviews = (await kube.auditEvents()).filter(
        (event) => event.objectRef?.resource === 'subjectaccessreviews' && event.verb === 'create',
      );
      expect(reviews.map((event) => [event.user.username, event.responseStatus?.code])).toContainEqual([
        'system:serviceaccount:etcd-guard:etcd-guard-webhook',
        201,
      ]);
    });

    it('denies the override to a user RBAC does not grant it', async () => {
      const kcp = kinds[1]!;
      const run = await kube.kubectl(
        ['patch', 'kcp', TARGET, '-n', NS, '--type=merge', '-p', overridePatch(kcp.replicas + 1, 'I am sure')],
        {
          kubeconfig: developer.kubeconfig,
        },
      );
      expect(run.stdout).toBe('');
      expect(run.stderr).toBe(
        'Error from server (Forbidden): admission webhook "etcd-guard.etcd-guard.io" denied the request: etcd-guard: user dev-bob ' +
          'is not allowed to override (annotation etcd-guard.io/override needs RBAC verb override on targets.etcd-guard.io prod, ' +
          'or membership in system:masters); remove the annotation\n',
      );
      expect(run.code).toBe(1);
    });

    it('records the denial and the override as Events that kubectl describe shows', async () => {
      // Events are written off the admission path.
      const describe = async () => (await kube.kubectl(['describe', 'statefulset', TARGET, '-n', NS])).stdout;
      await waitFor('the override Event on StatefulSet prod', 15_000, async () => (await describe()).includes('Overridden'));
      const events = (await describe()).split('\nEvents:\n')[1] ?? '';
      expect(events).toMatch(
        /^ {2}Warning {2}Denied +\S+ +etcd-guard\.io\/webhook {2}change by etcd-guard-test-admin denied: etcd-guard denied scale up from 3 to 4 replicas of StatefulSet default\/prod: target prod verdict Unhealthy, evaluated \d+s ago: .+$/m,
      );
      expect(events).toMatch(
        /^ {2}Warning {2}Overridden +\S+ +etcd-guard\.io\/webhook {2}change by oncall-alice allowed by override: etcd-guard override by oncall-alice: INC-42 replace the dead member .+$/m,
      );
      const table = ok(
        await kube.kubectl(['get', 'events', '-n', NS, '--field-selector', 'involvedObject.kind=Etcd']),
        'get events',
      );
      expect(table).toMatch(
        /^\S+ +Warning +Denied +etcd\/prod +change by etcd-guard-test-admin denied: etcd-guard denied scale up from 4 to 5 replicas of Etcd default\/prod/m,
      );
    });

    it('puts the decision into the audit log as annotations of the request', async () => {
      const denials = (await kube.auditEvents()).filter(
        (event) =>
          event.responseStatus?.code === 403 &&
          event.objectRef?.resource === 'kubeadmcontrolplanes' &&
          event.objectRef.subresource === 'scale' &&
          !event.requestURI.includes('dryRun'),
      );
      expect(denials).toHaveLength(1);
      const annotations = Object.fromEntries(
        Object.entries(denials[0]?.annotations ?? {}).filter(([key]) => key.startsWith('etcd-guard.etcd-guard.io/')),
      );
      expect(annotations).toEqual({
        'etcd-guard.etcd-guard.io/decision': 'denied',
        'etcd-guard.etcd-guard.io/enforcement': 'enforce',
        'etcd-guard.etcd-guard.io/evaluation-age-seconds': expect.stringMatching(/^\d+$/),
        'etcd-guard.etcd-guard.io/evidence': expect.stringMatching(/^(live|cached)$/),
        'etcd-guard.etcd-guard.io/evidence-age-ms': expect.stringMatching(/^\d+$/),
        'etcd-guard.etcd-guard.io/reason': 'unhealthy',
        'etcd-guard.etcd-guard.io/target': TARGET,
        'etcd-guard.etcd-guard.io/verdict': 'Unhealthy',
      });
    });

    it('in warn mode lets kubectl scale through and prints the denial as Warning: lines', async () => {
      await startGuard('warn');
      const sts = kinds[0]!;
      const warned = await scale('statefulset', sts.replicas + 1);
      expect(warned.stdout, warned.stderr).toBe('statefulset.apps/prod scaled\n');
      sts.replicas += 1;
      const lines = calm(warned.stderr).trimEnd().split('\n');
      expect(
        lines.every((line) => line.startsWith('Warning: ')),
        warned.stderr,
      ).toBe(true);
      const text = lines.map((line) => line.slice('Warning: '.length)).join(' ');
      expect(text).toMatch(
        new RegExp(
          `^${escape(`etcd-guard would deny (enforcement warn): etcd-guard denied scale up from ${sts.replicas - 1} to ${sts.replicas} replicas of StatefulSet default/prod: target prod verdict Unhealthy, evaluated `)}\\d+s ago: .+ ${escape('to override, annotate with etcd-guard.io/override=<reason> (needs RBAC verb override on targets.etcd-guard.io prod, or membership in system:masters)')}$`,
        ),
      );
    });

    it('in audit mode lets it through silently, with the would-be denial in the audit log', async () => {
      await startGuard('audit');
      const sts = kinds[0]!;
      const audited = await scale('statefulset', sts.replicas + 1);
      expect(audited.stdout, audited.stderr).toBe('statefulset.apps/prod scaled\n');
      expect(calm(audited.stderr)).toBe('');
      sts.replicas += 1;
      const last = (await kube.auditEvents())
        .filter((event) => event.objectRef?.resource === 'statefulsets' && event.verb === 'patch')
        .at(-1);
      expect(last?.responseStatus?.code).toBe(200);
      expect(last?.annotations).toMatchObject({
        'etcd-guard.etcd-guard.io/enforcement': 'audit',
        'etcd-guard.etcd-guard.io/target': TARGET,
        'etcd-guard.etcd-guard.io/verdict': 'Unhealthy',
      });
      await startGuard('enforce');
    });
  });

  describe('after the member is back', () => {
    beforeAll(async () => {
      await etcd.restart(1);
      await etcd.waitHealthy();
      const run = await scheduledRun();
      expect(run.stdout, run.stderr).toMatch(/^target prod: (Healthy|Degraded \(passed\))/);
      await waitFor(
        'a dry-run scale to be allowed',
        30_000,
        async () => (await scale('kcp', 4, ['--dry-run=server'])).code === 0,
      );
    });

    it('sends the webhook only guarded UPDATEs: the real server filters by its rules and namespaceSelector', async () => {
      const statefulSet = (name: string, namespace: string) => ({
        ...(guardedObjects(1)[0] as Record<string, unknown>),
        metadata: { name, namespace },
      });
      // A CREATE (the rules name UPDATE only), a ConfigMap (not guarded), a StatefulSet in the
      // guard's own namespace (the namespaceSelector leaves it out), then its scale and a DELETE.
      ok(
        await applyYaml([
          statefulSet('unrelated', NS),
          statefulSet('own', 'etcd-guard'),
          { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'unrelated', namespace: NS }, data: { a: 'b' } },
        ]),
        'unrelated objects',
      );
      ok(await kube.kubectl(['scale', 'statefulset', 'own', '-n', 'etcd-guard', '--replicas=2']), 'scale in etcd-guard');
      ok(
        await kube.kubectl(['scale', 'statefulset', 'unrelated', '-n', NS, '--replicas=2']),
        'scale of a StatefulSet no target names',
      );
      ok(await kube.kubectl(['annotate', 'configmap', 'unrelated', '-n', NS, 'touched=yes']), 'annotate a ConfigMap');
      ok(await kube.kubectl(['delete', 'statefulset', 'unrelated', '-n', NS]), 'delete a StatefulSet');
      // A guarded request does reach it; its log line comes after any the others would have made.
      ok(await scale('statefulset', kinds[0]!.replicas + 1, ['--dry-run=server']), 'a guarded dry run');
      const decided = () =>
        (webhook?.output() ?? '')
          .split('\n')
          .filter((line) => line.includes('"msg":"admission decision"'))
          .map((line) => JSON.parse(line) as { object: string; kind: string; dryRun: boolean });
      await waitFor('the guarded dry run to be decided', 10_000, () => decided().some((line) => line.dryRun));
      // The scale of `unrelated` in default is an UPDATE of a guarded resource: it does reach the
      // webhook, which finds no target naming it; nothing else of the above does.
      expect(new Set(decided().map((line) => line.object))).toEqual(new Set([`${NS}/${TARGET}`, `${NS}/unrelated`]));
      expect(decided().filter((line) => line.object === `${NS}/unrelated`)).toHaveLength(1);
    });

    it('the ConfigMap store meets a real 409 when another writer wins between its read and write, and retries', async () => {
      const name = `etcd-guard-${TARGET}`;
      const stored = async () =>
        JSON.parse(ok(await kube.kubectl(['get', 'configmap', name, '-n', 'etcd-guard', '-o', 'json']), 'the store')) as {
          metadata: { annotations?: Record<string, string> };
          data?: Record<string, string>;
        };
      const before = await stored();
      // The product's store, as the evaluator ServiceAccount; before its first replace goes out,
      // a second writer (kubectl) changes the object, so the server answers that replace 409.
      const api = createCoreV1Api(evaluatorKubeconfig);
      const replace = api.replaceNamespacedConfigMap.bind(api);
      let raced = false;
      api.replaceNamespacedConfigMap = (async (...args: Parameters<typeof replace>) => {
        if (!raced) {
          raced = true;
          ok(
            await kube.kubectl(['annotate', 'configmap', name, '-n', 'etcd-guard', 'e2e/other-writer=was-here']),
            'the other writer',
          );
        }
        return replace(...args);
      }) as typeof replace;
      const store = new ConfigMapStore({ namespace: 'etcd-guard', api });
      const evaluation = JSON.parse(before.data?.['evaluation.json'] ?? '{}') as Evaluation;
      const newer = { ...evaluation, evaluatedAt: new Date().toISOString() };
      expect(await store.write(newer)).toMatchObject({ written: true });
      expect(raced).toBe(true);

      const puts = (await kube.auditEvents()).filter(
        (event) =>
          event.objectRef?.name === name &&
          event.verb === 'update' &&
          event.user.username === 'system:serviceaccount:etcd-guard:etcd-guard-evaluator',
      );
      expect(puts.map((event) => event.responseStatus?.code).slice(-2)).toEqual([409, 200]);
      const after = await stored();
      expect(JSON.parse(after.data?.['evaluation.json'] ?? '{}')).toMatchObject({ evaluatedAt: newer.evaluatedAt });
      expect(after.metadata.annotations).toMatchObject({ 'e2e/other-writer': 'was-here' });
      expect(Number(after.metadata.annotations?.['etcd-guard.io/sequence'])).toBeGreaterThan(
        Number(before.metadata.annotations?.['etcd-guard.io/sequence']),
      );
    });

    it('allows the same label strip once quorum survives it (a server dry run, warning), and the Machine’s DELETE', async () => {
      const dry = await kube.kubectl([
        'label',
        'machines.cluster.x-k8s.io',
        CP_MACHINE,
        '-n',
        NS,
        `${CP_LABEL}-`,
        '--dry-run=server',
      ]);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toBe(`machine.cluster.x-k8s.io/${CP_MACHINE} unlabeled (server dry run)\n`);
      expect(dry.stderr).toContain(
        `Warning: etcd-guard: this change removes label ${CP_LABEL}: deleting it afterwards goes unseen\n`,
      );
      const deleted = await kube.kubectl(['delete', 'machines.cluster.x-k8s.io', CP_MACHINE, '-n', NS, '--wait=false']);
      expect(deleted.stdout, deleted.stderr).toBe(`machine.cluster.x-k8s.io "${CP_MACHINE}" deleted from ${NS} namespace\n`);
    });

    it.each(kinds)('kubectl scale $resource is allowed again', async (target) => {
      const up = await scale(target.resource, target.replicas + 1);
      expect(up.stdout, up.stderr).toBe(`${target.printed}/${TARGET} scaled\n`);
      expect(up.stderr).not.toMatch(/Error/);
      expect(up.code).toBe(0);
      target.replicas += 1;
    });
  });

  describe('matchConditions (CEL) evaluated by the real server', () => {
    const MC_NS = 'e2e-match-conditions';
    const WORKER = { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine' };
    const machine = (name: string, labels: Record<string, string>, owner?: unknown) => ({
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Machine',
      metadata: {
        name,
        namespace: MC_NS,
        labels: { 'cluster.x-k8s.io/cluster-name': 'mc', ...labels },
        ...(owner ? { ownerReferences: [owner] } : {}),
      },
      spec: { clusterName: 'mc', bootstrap: { dataSecretName: `${name}-bootstrap` }, infrastructureRef: { ...WORKER, name } },
    });
    // No scheduler or kubelet runs: the pods stay unscheduled, and an unscheduled pod's DELETE is immediate.
    const pod = (name: string, owner: { apiVersion: string; kind: string }, container: { name: string; image: string }) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: MC_NS,
        ownerReferences: [{ ...owner, name: `${name}-owner`, uid: '00000000-0000-4000-8000-000000000001', controller: true }],
      },
      spec: { automountServiceAccountToken: false, containers: [container] },
    });
    const STS = { apiVersion: 'apps/v1', kind: 'StatefulSet' };
    const ETCD = { name: 'etcd', image: 'registry.k8s.io/etcd:3.6.5-0' };
    // [what, kubectl's resource, the object (a KCP owner filled in later), reaches the webhook]
    const cases = (
      kcpOwner: unknown,
    ): Array<{ what: string; resource: string; object: { metadata: { name: string } }; reaches: boolean }> => [
      { what: 'a worker Machine', resource: 'machines.cluster.x-k8s.io', object: machine('worker', {}), reaches: false },
      {
        what: 'a pod of a StatefulSet that runs no etcd',
        resource: 'pod',
        object: pod('web-0', STS, { name: 'web', image: 'registry.k8s.io/nginx:1.27' }),
        reaches: false,
      },
      {
        what: 'an etcd container in a pod a ReplicaSet owns',
        resource: 'pod',
        object: pod('etcd-rs', { apiVersion: 'apps/v1', kind: 'ReplicaSet' }, ETCD),
        reaches: false,
      },
      {
        what: 'a control-plane Machine of a KCP',
        resource: 'machines.cluster.x-k8s.io',
        object: machine('cp-0', { 'cluster.x-k8s.io/control-plane': '' }, kcpOwner),
        reaches: true,
      },
      { what: 'an etcd pod of a StatefulSet', resource: 'pod', object: pod('etcd-0', STS, ETCD), reaches: true },
      {
        what: 'a StatefulSet pod running an etcd image under another container name',
        resource: 'pod',
        object: pod('etcd-wrapped-0', STS, { name: 'member', image: 'quay.io/coreos/etcd@sha256:' + 'a'.repeat(64) }),
        reaches: true,
      },
    ];

    /** The shipped webhook for this resource, its matchConditions run through test/harness/cel.ts. */
    function standInMatches(resource: string, oldObject: unknown): boolean {
      const name = resource === 'pod' ? 'pods.etcd-guard.etcd-guard.io' : 'machines.etcd-guard.etcd-guard.io';
      const shipped = objs(at(webhookConfiguration, 'webhooks')).find((webhook) => webhook.name === name);
      return objs(shipped?.matchConditions).every((condition) => {
        const value = evaluateCel(String(condition.expression), { object: null, oldObject, request: {} });
        if (value instanceof CelError) throw new Error(`${String(condition.name)} errs: ${value.message}`);
        return value === true;
      });
    }

    it('sends only member-bearing DELETEs to the webhook, and cel.ts agrees with the real server on each', async () => {
      ok(
        await applyYaml([
          { apiVersion: 'v1', kind: 'Namespace', metadata: { name: MC_NS } },
          // No controller-manager creates it; the ServiceAccount admission plugin requires it.
          { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace: MC_NS } },
          { ...(guardedObjects(3)[1] as Record<string, unknown>), metadata: { name: 'mc-cp', namespace: MC_NS } },
        ]),
        'the namespace and its KCP',
      );
      const kcpUid = ok(
        await kube.kubectl(['get', 'kcp', 'mc-cp', '-n', MC_NS, '-o', 'jsonpath={.metadata.uid}']),
        'the KCP uid',
      );
      const all = cases({
        apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
        kind: 'KubeadmControlPlane',
        name: 'mc-cp',
        uid: kcpUid,
        controller: true,
      });
      ok(await applyYaml(all.map((entry) => entry.object)), 'the Machines and pods');
      // What the server evaluates is the stored object (defaults and server fields included).
      const stored = await Promise.all(
        all.map(
          async (entry) =>
            JSON.parse(
              ok(await kube.kubectl(['get', entry.resource, entry.object.metadata.name, '-n', MC_NS, '-o', 'json']), entry.what),
            ) as unknown,
        ),
      );
      // Those that must not reach go first: once the last reaching one is logged, any of theirs would be too.
      for (const entry of [...all.filter((e) => !e.reaches), ...all.filter((e) => e.reaches)]) {
        const run = await kube.kubectl(['delete', entry.resource, entry.object.metadata.name, '-n', MC_NS, '--wait=false']);
        // Judged as the webhook decides (a denial is an answer too); a matchCondition error would be neither.
        expect(`${run.stdout}${run.stderr}`, entry.what).toMatch(/deleted|denied the request/);
        if (run.code !== 0) console.log(`${entry.what}: ${run.stderr.trim()}`);
      }
      const decided = () =>
        (webhook?.output() ?? '')
          .split('\n')
          .filter((line) => line.includes('"msg":"admission decision"'))
          .map((line) => JSON.parse(line) as { object: string; kind: string; operation: string })
          .filter((line) => line.object.startsWith(`${MC_NS}/`));
      const reaching = all.filter((entry) => entry.reaches).map((entry) => `${MC_NS}/${entry.object.metadata.name}`);
      await waitFor('the reaching DELETEs to be decided', 15_000, () =>
        reaching.every((object) => decided().some((line) => line.object === object)),
      );
      // One DELETE may reach it more than once, each call a review of its own (uid): the
      // graceful-deletion step of a pod validates, the removal again, and again when its cached copy was
      // stale (k8s.io/apiserver's registry Store.Delete and etcd3 conditionalDelete).
      expect(new Set(decided().map((line) => line.object))).toEqual(new Set(reaching));
      expect(new Set(decided().map((line) => line.operation))).toEqual(new Set(['DELETE']));
      // The real server is the reference: the stand-in evaluator must give each the same answer.
      expect(all.map((entry, index) => [entry.what, standInMatches(entry.resource, stored[index])])).toEqual(
        all.map((entry) => [entry.what, entry.reaches]),
      );
      const calls = Object.fromEntries(
        reaching.map((object) => [object, decided().filter((line) => line.object === object).length]),
      );
      console.log(`matchConditions: ${all.length} DELETEs, ${decided().length} webhook calls: ${JSON.stringify(calls)}`);
    });

    it('sends only the Machine and pod UPDATEs that strip what the DELETE webhooks key on, as cel.ts says', async () => {
      const kcpUid = ok(
        await kube.kubectl(['get', 'kcp', 'mc-cp', '-n', MC_NS, '-o', 'jsonpath={.metadata.uid}']),
        'the KCP uid',
      );
      const kcpOwner = {
        apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
        kind: 'KubeadmControlPlane',
        name: 'mc-cp',
        uid: kcpUid,
      };
      ok(
        await applyYaml([
          machine('st-cp', { 'cluster.x-k8s.io/control-plane': '' }, kcpOwner),
          pod('st-etcd-0', STS, ETCD),
          pod('st-wrapped-0', STS, { name: 'member', image: 'quay.io/coreos/etcd:v3.5.17' }),
        ]),
        'the Machine and pods',
      );
      const MACHINE = 'machines.cluster.x-k8s.io';
      const removeOwners = ['--type=json', '-p', '[{"op":"remove","path":"/metadata/ownerReferences"}]'];
      const status = (fields: unknown) => ['--subresource=status', '--type=merge', '-p', JSON.stringify({ status: fields })];
      // [what, kubectl verb and object, reaches the webhook]; those that must not reach go first.
      const edits: Array<[string, string[], boolean]> = [
        ['an ordinary Machine label', ['label', MACHINE, 'st-cp', 'team=infra'], false],
        ['a Machine annotation', ['annotate', MACHINE, 'st-cp', 'note=x'], false],
        ['the Machine’s phase (/status)', ['patch', MACHINE, 'st-cp', ...status({ phase: 'Provisioning' })], false],
        [
          'its first nodeRef (the machine controller)',
          ['patch', MACHINE, 'st-cp', ...status({ nodeRef: { name: 'n-1' } })],
          false,
        ],
        ['an etcd pod label', ['label', 'pod', 'st-etcd-0', 'extra=x'], false],
        [
          'the etcd container’s image (its name says etcd)',
          ['set', 'image', 'pod/st-etcd-0', 'etcd=registry.k8s.io/etcd:3.6.6-0'],
          false,
        ],
        ['the control-plane label removed', ['label', MACHINE, 'st-cp', 'cluster.x-k8s.io/control-plane-'], true],
        ['the Machine’s owner reference removed', ['patch', MACHINE, 'st-cp', ...removeOwners], true],
        ['its nodeRef changed (/status)', ['patch', MACHINE, 'st-cp', ...status({ nodeRef: { name: 'n-2' } })], true],
        ['an etcd pod orphaned', ['patch', 'pod', 'st-etcd-0', ...removeOwners], true],
        ['an etcd image changed to another', ['set', 'image', 'pod/st-wrapped-0', 'member=registry.k8s.io/pause:3.10'], true],
      ];
      const standIn = (webhookName: string, oldObject: unknown, object: unknown) =>
        objs(
          objs(at(webhookConfiguration, 'webhooks')).find((candidate) => candidate.name === webhookName)?.matchConditions,
        ).every((condition) => {
          const value = evaluateCel(String(condition.expression), { object, oldObject, request: {} });
          if (value instanceof CelError) throw new Error(`${String(condition.name)} errs: ${value.message}`);
          return value === true;
        });
      const agreed: Array<[string, boolean]> = [];
      for (const [what, args, _reaches] of edits) {
        const isPod = args.includes('pod') || args.some((arg) => arg.startsWith('pod/'));
        const name = args.find((arg) => arg.startsWith('st-') || arg.startsWith('pod/st-'))?.replace('pod/', '') ?? '';
        const before = JSON.parse(
          ok(await kube.kubectl(['get', isPod ? 'pod' : MACHINE, name, '-n', MC_NS, '-o', 'json']), what),
        ) as unknown;
        const after = JSON.parse(
          ok(await kube.kubectl([...args, '-n', MC_NS, '--dry-run=client', '-o', 'json']), what),
        ) as unknown;
        agreed.push([
          what,
          standIn(isPod ? 'pod-updates.etcd-guard.etcd-guard.io' : 'machine-updates.etcd-guard.etcd-guard.io', before, after),
        ]);
        const run = await kube.kubectl([...args, '-n', MC_NS]);
        // Judged as the webhook decides (mc-cp has no target: a denial; the pods' StatefulSet is
        // guarded by none: allowed); a matchCondition error would be neither.
        expect(`${run.stdout}${run.stderr}`, what).toMatch(/labeled|annotated|patched|image updated|denied the request/);
      }
      const decided = () =>
        (webhook?.output() ?? '')
          .split('\n')
          .filter((line) => line.includes('"msg":"admission decision"'))
          .map((line) => JSON.parse(line) as { object: string; operation: string })
          .filter((line) => line.object.startsWith(`${MC_NS}/st-`));
      const reaching = [`${MC_NS}/st-cp`, `${MC_NS}/st-cp`, `${MC_NS}/st-cp`, `${MC_NS}/st-etcd-0`, `${MC_NS}/st-wrapped-0`];
      await waitFor('the stripping UPDATEs to be decided', 15_000, () => decided().length >= reaching.length);
      expect(decided().map((line) => [line.object, line.operation])).toEqual(reaching.map((object) => [object, 'UPDATE']));
      // The real server is the reference: the stand-in evaluator gives each the same answer.
      expect(agreed).toEqual(edits.map(([what, , reaches]) => [what, reaches]));
    });

    it('sends only topology Cluster UPDATEs that change its version or control plane replicas, as cel.ts says', async () => {
      const cluster = (name: string, topology: boolean) => ({
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'Cluster',
        metadata: { name, namespace: MC_NS },
        spec: {
          controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: 'mc-cp' },
          ...(topology
            ? { topology: { classRef: { name: 'quick-start' }, version: 'v1.33.2', controlPlane: { replicas: 3 } } }
            : {}),
        },
      });
      ok(
        await applyYaml([
          { apiVersion: 'v1', kind: 'Namespace', metadata: { name: MC_NS } },
          cluster('mc-plain', false),
          cluster('mc-topology', true),
        ]),
        'the Clusters',
      );
      // [what, Cluster, merge patch, reaches the webhook]; those that must not reach go first.
      const patches: Array<[string, string, unknown, boolean]> = [
        ['a label on a Cluster without topology', 'mc-plain', { metadata: { labels: { env: 'a' } } }, false],
        ['a label on a topology Cluster', 'mc-topology', { metadata: { labels: { env: 'a' } } }, false],
        [
          'control plane metadata in the topology',
          'mc-topology',
          { spec: { topology: { controlPlane: { metadata: { labels: { tier: 'cp' } } } } } },
          false,
        ],
        ['the topology version', 'mc-topology', { spec: { topology: { version: 'v1.34.1' } } }, true],
        ['the control plane replicas', 'mc-topology', { spec: { topology: { controlPlane: { replicas: 5 } } } }, true],
      ];
      const shipped = objs(at(webhookConfiguration, 'webhooks')).find(
        (candidate) => candidate.name === 'clusters.etcd-guard.etcd-guard.io',
      );
      const standIn = (oldObject: unknown, object: unknown) =>
        objs(shipped?.matchConditions).every((condition) => {
          const value = evaluateCel(String(condition.expression), { object, oldObject, request: {} });
          if (value instanceof CelError) throw new Error(`${String(condition.name)} errs: ${value.message}`);
          return value === true;
        });
      const agreed: Array<[string, boolean]> = [];
      for (const [what, name, patch, _reaches] of patches) {
        const get = async () =>
          JSON.parse(
            ok(await kube.kubectl(['get', 'clusters.cluster.x-k8s.io', name, '-n', MC_NS, '-o', 'json']), what),
          ) as unknown;
        const args = ['patch', 'clusters.cluster.x-k8s.io', name, '-n', MC_NS, '--type=merge', '-p', JSON.stringify(patch)];
        const before = await get();
        const after = JSON.parse(ok(await kube.kubectl([...args, '--dry-run=client', '-o', 'json']), what)) as unknown;
        agreed.push([what, standIn(before, after)]);
        const run = await kube.kubectl(args);
        // Judged as the webhook decides (no target matches mc-cp: a denial); a matchCondition error would be neither.
        expect(`${run.stdout}${run.stderr}`, what).toMatch(/patched|denied the request/);
      }
      const decided = () =>
        (webhook?.output() ?? '')
          .split('\n')
          .filter((line) => line.includes('"msg":"admission decision"'))
          .map((line) => JSON.parse(line) as { object: string; kind: string; operation: string })
          .filter((line) => line.kind === 'cluster.x-k8s.io/Cluster' && line.object.startsWith(`${MC_NS}/`));
      const reaching = patches.filter(([, , , reaches]) => reaches).length;
      await waitFor('the reaching Cluster UPDATEs to be decided', 15_000, () => decided().length >= reaching);
      expect(decided().map((line) => [line.object, line.operation])).toEqual(
        Array.from({ length: reaching }, () => [`${MC_NS}/mc-topology`, 'UPDATE']),
      );
      // The real server is the reference: the stand-in evaluator gives each the same answer.
      expect(agreed).toEqual(patches.map(([what, , , reaches]) => [what, reaches]));
    });
  });
});

describe('issue 29: Cluster API discovery against the real server', () => {
  it('lists a real KubeadmControlPlane and its Cluster as a target, as the evaluator ServiceAccount', async () => {
    // The capi overlay's RBAC (rbac-capi.yaml) is what lets the evaluator list them.
    ok(await kube.kubectl(['apply', '--server-side', '-k', path.join(ROOT, 'manifests/overlays/capi')]), 'the capi overlay');
    const evaluator = await kube.serviceAccountKubeconfig('etcd-guard', 'etcd-guard-evaluator');
    ok(
      await applyYaml([
        {
          apiVersion: 'cluster.x-k8s.io/v1beta2',
          kind: 'Cluster',
          metadata: { name: 'wb', namespace: NS },
          spec: { controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: 'wb-cp' } },
        },
      ]),
      'the Cluster',
    );
    const uid = ok(
      await kube.kubectl(['get', 'cluster.cluster.x-k8s.io', 'wb', '-n', NS, '-o', 'jsonpath={.metadata.uid}']),
      'its uid',
    );
    const kcp = guardedObjects(3)[1] as { spec: Record<string, unknown> };
    ok(
      await applyYaml([
        {
          apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
          kind: 'KubeadmControlPlane',
          metadata: {
            name: 'wb-cp',
            namespace: NS,
            labels: { 'cluster.x-k8s.io/cluster-name': 'wb' },
            ownerReferences: [{ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', name: 'wb', uid, controller: true }],
          },
          spec: kcp.spec,
        },
      ]),
      'the KCP',
    );
    const discoveryConfig = path.join(work, 'discovery.yaml');
    await writeFile(
      discoveryConfig,
      stringify({
        store: { kind: 'configmap', namespace: 'etcd-guard' },
        targets: [],
        discovery: { capi: { namespaces: [NS] } },
      }),
    );
    const run = await runProcess(
      process.execPath,
      [path.join(ROOT, 'bin/etcd-guard.mjs'), 'targets', '--config', discoveryConfig, '--output', 'json'],
      {
        env: { ...process.env, KUBECONFIG: evaluator, LOG_LEVEL: 'warn' },
        timeoutMs: 60_000,
      },
    );
    // The guarded KCP of the other tests has no Cluster: discovery says it skipped it, on stderr.
    for (const line of run.stderr.split('\n').filter((text) => text !== '')) {
      expect(line).toBe(
        `skipped KubeadmControlPlane ${NS}/${TARGET} (capi): it has no Cluster owner reference (the Cluster controller sets it)`,
      );
    }
    expect(run.code).toBe(0);
    const listed = JSON.parse(run.stdout) as {
      targets: unknown[];
      problems: Array<{ object?: { name?: string } }>;
      failures: unknown[];
    };
    listed.problems = listed.problems.filter((problem) => problem.object?.name !== TARGET);
    expect(listed).toMatchObject({
      targets: [
        {
          name: `capi-${NS}-wb`,
          source: 'capi',
          guards: { group: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', namespace: NS, name: 'wb-cp' },
          reach: { kind: 'capi', namespace: NS, clusterName: 'wb' },
        },
      ],
      problems: [],
      failures: [],
    });
    expect(listed.targets).toHaveLength(1);
  });
});

describe('issue 29: etcd-druid discovery and its reads against the real server', () => {
  const ETCD = 'wb-etcd';
  const renewed = (ageMs: number) => new Date(Date.now() - ageMs).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
  const lease = (kind: 'full' | 'delta', ageMs: number) => ({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: `${ETCD}-${kind}-snap`, namespace: NS },
    spec: { holderIdentity: '1024', renewTime: renewed(ageMs) },
  });

  /**
   * What the druid reach and the backup check read, as the evaluator ServiceAccount, from `kubeconfig`:
   * the Etcd's backup facts and the TLS Secrets it names. Members are reached at druid's per-pod DNS
   * names, which need cluster DNS and running pods: a bare apiserver has neither, so evaluating
   * through them stays on the stand-in (test/e2e/druid-backup.test.ts swaps the endpoints).
   */
  async function druidReads(kubeconfig: string) {
    const { createCustomObjectsApi } = await import('../../functions/adapters/kube-discovery.js');
    const { readDruidBackupFacts } = await import('../../functions/adapters/druid-backup.js');
    const { readDruidCredentials } = await import('../../functions/adapters/druid-etcd-access.js');
    const { Deadline } = await import('../../functions/domain/deadline.js');
    const tls = { caSecret: 'ca-etcd-bundle', caDataKey: 'bundle.crt', clientSecret: 'etcd-client-tls' };
    const [facts, credentials] = await Promise.all([
      readDruidBackupFacts(createCustomObjectsApi(kubeconfig), { namespace: NS, name: ETCD }, 3_600_000, Deadline.after(10_000)),
      readDruidCredentials(createCoreV1Api(kubeconfig), NS, tls, Deadline.after(10_000)),
    ]);
    return { facts, credentials: { ca: credentials.ca?.toString('base64'), cert: credentials.cert?.toString('base64') } };
  }

  it('lists a real Etcd as a druid target and reads its Secrets, BackupReady and snapshot Leases as the stand-in does', async () => {
    // The druid overlay's RBAC (rbac-druid.yaml) is what lets the evaluator list Etcds and get their Secrets and Leases.
    ok(await kube.kubectl(['apply', '--server-side', '-k', path.join(ROOT, 'manifests/overlays/druid')]), 'the druid overlay');
    const evaluator = await kube.serviceAccountKubeconfig('etcd-guard', 'etcd-guard-evaluator');
    const { readFile } = await import('node:fs/promises');
    const b64 = async (file: string) => (await readFile(file)).toString('base64');
    const secrets = [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'ca-etcd-bundle', namespace: NS },
        data: { 'bundle.crt': await b64(etcd.clientTls.caFile) },
      },
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'etcd-client-tls', namespace: NS },
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': await b64(etcd.clientTls.certFile), 'tls.key': await b64(etcd.clientTls.keyFile) },
      },
    ];
    const etcdObject = {
      apiVersion: 'druid.gardener.cloud/v1alpha1',
      kind: 'Etcd',
      metadata: { name: ETCD, namespace: NS },
      spec: {
        replicas: 3,
        labels: { app: 'etcd-druid' },
        etcd: {
          clientUrlTls: {
            tlsCASecretRef: { name: 'ca-etcd-bundle', dataKey: 'bundle.crt' },
            serverTLSSecretRef: { name: 'etcd-server-tls' },
            clientTLSSecretRef: { name: 'etcd-client-tls' },
          },
        },
        backup: { store: { provider: 'S3', prefix: `${NS}/${ETCD}`, secretRef: { name: 'etcd-backup' } } },
      },
    };
    ok(await applyYaml([...secrets, etcdObject, lease('full', 2 * 3_600_000), lease('delta', 30_000)]), 'Secrets, Etcd, Leases');
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const status = {
      apiVersion: 'druid.gardener.cloud/v1alpha1',
      kind: 'Etcd',
      metadata: { name: ETCD, namespace: NS },
      status: {
        conditions: [
          {
            type: 'BackupReady',
            status: 'False',
            reason: 'BackupFailed',
            message: 'Stale snapshot leases. Not renewed in a long time',
            lastTransitionTime: now,
            lastUpdateTime: now,
          },
        ],
      },
    };
    ok(
      await kube.kubectl(['apply', '--server-side', '--subresource=status', '-f', '-'], { stdin: stringify(status) }),
      'the Etcd status, as druid writes it',
    );

    const discoveryConfig = path.join(work, 'discovery-druid.yaml');
    await writeFile(
      discoveryConfig,
      stringify({
        store: { kind: 'configmap', namespace: 'etcd-guard' },
        targets: [],
        discovery: { druid: { namespaces: [NS], backup: { maxSnapshotAge: '1h', requiredForChanges: true } } },
      }),
    );
    const run = await runProcess(
      process.execPath,
      [path.join(ROOT, 'bin/etcd-guard.mjs'), 'targets', '--config', discoveryConfig, '--output', 'json'],
      { env: { ...process.env, KUBECONFIG: evaluator, LOG_LEVEL: 'warn' }, timeoutMs: 60_000 },
    );
    expect(run.code, run.stderr).toBe(0);
    const listed = JSON.parse(run.stdout) as { targets: Array<{ name: string }>; failures: unknown[] };
    expect(listed.failures).toEqual([]);
    expect(listed.targets.find((target) => target.name === `druid-${NS}-${ETCD}`)).toMatchObject({
      source: 'druid',
      guards: { group: 'druid.gardener.cloud', kind: 'Etcd', namespace: NS, name: ETCD },
      reach: {
        kind: 'druid',
        namespace: NS,
        tls: { caSecret: 'ca-etcd-bundle', caDataKey: 'bundle.crt', clientSecret: 'etcd-client-tls' },
      },
      endpoints: [0, 1, 2].map((i) => `https://${ETCD}-${i}.${ETCD}-peer.${NS}.svc:2379`),
      backup: { maxSnapshotAge: 3_600_000, requiredForChanges: true },
    });

    const fromReal = await druidReads(evaluator);
    expect(fromReal.facts).toMatchObject({
      storeConfigured: true,
      condition: { status: 'False', reason: 'BackupFailed', message: 'Stale snapshot leases. Not renewed in a long time' },
      leaseProblems: [],
    });
    expect(fromReal.facts.fullSnapshotAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(fromReal.credentials.ca).toBe(await b64(etcd.clientTls.caFile));

    // The same objects, as the real server returns them, on the stand-in: the same reads agree.
    const { startFakeKubeApiServer } = await import('../harness/fake-kube-apiserver.js');
    const fake = await startFakeKubeApiServer();
    try {
      const served = async (resource: string, name: string) =>
        JSON.parse(ok(await kube.kubectl(['get', resource, name, '-n', NS, '-o', 'json']), `get ${resource} ${name}`)) as never;
      fake.putObject('etcds', await served('etcds.druid.gardener.cloud', ETCD));
      for (const name of ['ca-etcd-bundle', 'etcd-client-tls']) fake.putObject('secrets', await served('secret', name));
      for (const name of [`${ETCD}-full-snap`, `${ETCD}-delta-snap`]) fake.putObject('leases', await served('lease', name));
      expect(await druidReads(fake.kubeconfigFile)).toEqual(fromReal);
      // A Lease that is gone: both servers' 404s read as the same problem.
      ok(await kube.kubectl(['delete', 'lease', `${ETCD}-delta-snap`, '-n', NS]), 'delete the delta Lease');
      fake.removeObject('leases', 'coordination.k8s.io/v1', NS, `${ETCD}-delta-snap`);
      const [realGone, standInGone] = [await druidReads(evaluator), await druidReads(fake.kubeconfigFile)];
      expect(realGone.facts.leaseProblems).toHaveLength(1);
      expect(realGone.facts.leaseProblems[0]).toContain(`${ETCD}-delta-snap`);
      expect(standInGone).toEqual(realGone);
    } finally {
      await fake.close();
    }
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
