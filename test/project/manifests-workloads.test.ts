// The webhook Deployment and the evaluate CronJob: hardened pods, args the CLI's own flag table
// accepts, mounted config and TLS files, probes, replicas, the Service and the schedule.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  at,
  configMap,
  containerOf,
  cronJob,
  deployment,
  guardConfig,
  isObj,
  labelsMatch,
  name,
  type Obj,
  objs,
  only,
  parseCliArgs,
  service,
  strings,
  workloads,
} from '../harness/manifests.js';

/** Where each file of the pod's volumes appears in the container: mount path + item path. */
function mountedFiles(podSpec: Obj, container: Obj): Map<string, { configMap?: string; secret?: string; key: string }> {
  const files = new Map<string, { configMap?: string; secret?: string; key: string }>();
  const volumes = objs(podSpec.volumes);
  for (const mount of objs(container.volumeMounts)) {
    const volume = volumes.find((candidate) => candidate.name === mount.name);
    const mountPath = String(mount.mountPath);
    const sources = [
      ...objs(at(volume, 'projected', 'sources')),
      ...(isObj(at(volume, 'configMap')) ? [{ configMap: at(volume, 'configMap') }] : []),
      ...(isObj(at(volume, 'secret'))
        ? [{ secret: { ...(at(volume, 'secret') as Obj), name: at(volume, 'secret', 'secretName') } }]
        : []),
    ];
    for (const source of sources) {
      const kind = isObj(source.configMap) ? 'configMap' : isObj(source.secret) ? 'secret' : undefined;
      if (kind === undefined) continue;
      const sourceName = String(at(source, kind, 'name'));
      const items = objs(at(source, kind, 'items'));
      // Without items every key of the object appears under its own name; tls Secrets have these.
      const entries =
        items.length > 0
          ? items.map((item) => ({ key: String(item.key), path: String(item.path) }))
          : ['tls.crt', 'tls.key', 'ca.crt'].map((key) => ({ key, path: key }));
      for (const entry of entries) files.set(path.posix.join(mountPath, entry.path), { [kind]: sourceName, key: entry.key });
    }
  }
  return files;
}
describe('workloads', () => {
  it.each(workloads.map((workload) => [workload.what, workload] as const))(
    '%s runs non-root, read-only, without privileges or capabilities',
    (_label, workload) => {
      const { podSpec } = workload;
      expect(at(podSpec, 'securityContext', 'runAsNonRoot')).toBe(true);
      expect(at(podSpec, 'securityContext', 'runAsUser')).toBe(10001);
      expect(at(podSpec, 'securityContext', 'seccompProfile', 'type')).toBe('RuntimeDefault');
      expect(podSpec.hostNetwork ?? false).toBe(false);
      expect(podSpec.hostPID ?? false).toBe(false);
      expect(objs(podSpec.volumes).filter((volume) => volume.hostPath !== undefined)).toEqual([]);
      const container = containerOf(podSpec);
      expect(at(container, 'securityContext', 'runAsNonRoot')).toBe(true);
      expect(at(container, 'securityContext', 'runAsUser')).toBe(10001);
      expect(at(container, 'securityContext', 'readOnlyRootFilesystem')).toBe(true);
      expect(at(container, 'securityContext', 'allowPrivilegeEscalation')).toBe(false);
      expect(strings(at(container, 'securityContext', 'capabilities', 'drop'))).toContain('ALL');
      expect(at(container, 'securityContext', 'capabilities', 'add')).toBeUndefined();
      expect(at(container, 'securityContext', 'privileged') ?? false).toBe(false);
      expect(at(container, 'securityContext', 'seccompProfile', 'type')).toBe('RuntimeDefault');
      for (const kind of ['requests', 'limits']) {
        for (const resource of ['cpu', 'memory'])
          expect(at(container, 'resources', kind, resource), `${kind}.${resource}`).toBeDefined();
      }
      expect(String(container.image)).toMatch(/^ghcr\.io\/etcd-guard\/etcd-guard:\d+\.\d+\.\d+$/);
    },
  );

  it.each(workloads.map((workload) => [workload.what, workload] as const))(
    '%s has a writable /tmp (TMPDIR) under a read-only root',
    (_label, workload) => {
      const container = containerOf(workload.podSpec);
      const tmpMount = objs(container.volumeMounts).find((mount) => mount.mountPath === '/tmp');
      const volume = objs(workload.podSpec.volumes).find((candidate) => candidate.name === tmpMount?.name);
      expect(volume?.emptyDir, 'an emptyDir at /tmp').toBeDefined();
      expect(tmpMount?.readOnly ?? false).toBe(false);
    },
  );

  it.each(workloads.map((workload) => [workload.what, workload] as const))(
    "%s has a memory limit and keeps the image's ENTRYPOINT, whose flags make half of it V8's heap cap",
    (_label, workload) => {
      const container = containerOf(workload.podSpec);
      expect(String(at(container, 'resources', 'limits', 'memory'))).toMatch(/^\d+(Mi|Gi)$/);
      // A command would replace the ENTRYPOINT and its node flags (test/project/launcher-flags.test.ts).
      expect(container.command).toBeUndefined();
      const nodeOptions = objs(container.env).find((variable) => variable.name === 'NODE_OPTIONS');
      expect(String(nodeOptions?.value ?? '')).not.toMatch(/max[-_]old[-_]space/);
      // Nothing reads the limit from the downward API any more: node reads the cgroup itself.
      expect(objs(container.env).map((variable) => variable.name)).not.toContain('ETCD_GUARD_MEMORY_LIMIT');
    },
  );

  it.each(workloads.map((workload) => [workload.what, workload] as const))(
    '%s is started with a CLI command and flags the CLI accepts, and its config file and every TLS file it names are mounted',
    (_label, workload) => {
      const container = containerOf(workload.podSpec);
      expect(container.command, 'the image ENTRYPOINT runs the CLI').toBeUndefined();
      const { flags } = parseCliArgs(strings(container.args));
      const files = mountedFiles(workload.podSpec, container);
      const configFile = flags.get('--config');
      expect(typeof configFile).toBe('string');
      expect(files.get(String(configFile))).toEqual({ configMap: name(configMap), key: 'config.yaml' });
      for (const target of guardConfig().targets) {
        for (const file of [target.tls?.caFile, target.tls?.certFile, target.tls?.keyFile]) {
          expect(file, `${target.name} tls file`).toBeDefined();
          expect(files.get(String(file))?.secret, `${String(file)} comes from the etcd client Secret`).toBe(
            'etcd-guard-etcd-client',
          );
        }
      }
    },
  );

  it('the webhook serves HTTPS on 8443 with the mounted serving cert', () => {
    const { podSpec } = workloads[0] as (typeof workloads)[number];
    const container = containerOf(podSpec);
    const { command, flags } = parseCliArgs(strings(container.args));
    expect(command).toBe('webhook');
    expect(flags.has('--insecure-http')).toBe(false);
    expect(flags.get('--listen')).toBe('0.0.0.0:8443');
    const files = mountedFiles(podSpec, container);
    expect(files.get(String(flags.get('--tls-cert')))).toEqual({ secret: 'etcd-guard-webhook-tls', key: 'tls.crt' });
    expect(files.get(String(flags.get('--tls-key')))).toEqual({ secret: 'etcd-guard-webhook-tls', key: 'tls.key' });
    expect(objs(container.ports).map((port) => port.containerPort)).toContain(8443);
  });

  it('the webhook Deployment probes /healthz and /readyz over HTTPS on the serving port', () => {
    const container = containerOf(workloads[0]?.podSpec ?? {});
    const resolvePort = (port: unknown) =>
      typeof port === 'number' ? port : objs(container.ports).find((candidate) => candidate.name === port)?.containerPort;
    for (const [probe, probePath] of [
      ['livenessProbe', '/healthz'],
      ['readinessProbe', '/readyz'],
    ] as const) {
      expect(at(container, probe, 'httpGet', 'path'), probe).toBe(probePath);
      expect(at(container, probe, 'httpGet', 'scheme'), probe).toBe('HTTPS');
      expect(resolvePort(at(container, probe, 'httpGet', 'port')), probe).toBe(8443);
    }
  });

  it('the webhook runs two replicas spread over nodes, kept at one by a PodDisruptionBudget', () => {
    const podLabels = workloads[0]?.podLabels ?? {};
    expect(at(deployment, 'spec', 'replicas')).toBe(2);
    expect(labelsMatch(at(deployment, 'spec', 'selector'), podLabels)).toBe(true);
    const antiAffinity = at(deployment, 'spec', 'template', 'spec', 'affinity', 'podAntiAffinity');
    const terms = [
      ...objs(at(antiAffinity, 'requiredDuringSchedulingIgnoredDuringExecution')),
      ...objs(at(antiAffinity, 'preferredDuringSchedulingIgnoredDuringExecution')).map(
        (term) => (at(term, 'podAffinityTerm') ?? {}) as Obj,
      ),
    ];
    expect(
      terms.some((term) => term.topologyKey === 'kubernetes.io/hostname' && labelsMatch(term.labelSelector, podLabels)),
    ).toBe(true);
    const budget = only('PodDisruptionBudget');
    expect(at(budget, 'spec', 'minAvailable')).toBe(1);
    expect(labelsMatch(at(budget, 'spec', 'selector'), podLabels)).toBe(true);
  });

  it('the webhook serves metrics on a port of its own, and the Service names it for the ServiceMonitor', () => {
    const container = containerOf(workloads[0]?.podSpec ?? {});
    const { flags } = parseCliArgs(strings(container.args));
    const metricsListen = String(flags.get('--metrics-listen'));
    const metricsPort = Number(metricsListen.split(':').at(-1));
    expect(metricsPort).not.toBe(8443);
    const named = objs(container.ports).find((port) => port.name === 'metrics');
    expect(at(named, 'containerPort')).toBe(metricsPort);
    const servicePort = objs(at(service, 'spec', 'ports')).find((port) => port.name === 'metrics');
    expect(at(servicePort, 'targetPort')).toBe('metrics');
  });

  it('the Service sends 443 to the webhook pods on 8443', () => {
    const container = containerOf(workloads[0]?.podSpec ?? {});
    const [port] = objs(at(service, 'spec', 'ports'));
    expect(at(port, 'port')).toBe(443);
    const target = at(port, 'targetPort');
    const resolved =
      typeof target === 'number' ? target : objs(container.ports).find((candidate) => candidate.name === target)?.containerPort;
    expect(resolved).toBe(8443);
    const selector = at(service, 'spec', 'selector');
    expect(labelsMatch({ matchLabels: selector }, workloads[0]?.podLabels ?? {})).toBe(true);
  });

  it('the CronJob evaluates every minute, one run at a time, each killed before the next is due', () => {
    expect(at(cronJob, 'spec', 'schedule')).toBe('* * * * *');
    expect(at(cronJob, 'spec', 'concurrencyPolicy')).toBe('Forbid');
    expect(at(cronJob, 'spec', 'startingDeadlineSeconds')).toEqual(expect.any(Number));
    const activeDeadline = at(cronJob, 'spec', 'jobTemplate', 'spec', 'activeDeadlineSeconds');
    expect(activeDeadline).toBe(50);
    expect(at(cronJob, 'spec', 'jobTemplate', 'spec', 'backoffLimit')).toBe(0);
    for (const limit of ['successfulJobsHistoryLimit', 'failedJobsHistoryLimit']) {
      const value = at(cronJob, 'spec', limit);
      expect(typeof value === 'number' && value >= 0 && value <= 3, limit).toBe(true);
    }
    const { command } = parseCliArgs(strings(containerOf(workloads[1]?.podSpec ?? {}).args));
    expect(command).toBe('evaluate');
  });

  it('rejects args the CLI would reject (the arg parser of this test is not a rubber stamp)', () => {
    const cases: Array<[string[], RegExp]> = [
      [['serve', '--config', 'x'], /unknown command/],
      [['webhook', '--port', '8443'], /unknown flag "--port"/],
      [['webhook', '--config'], /--config needs a value/],
      [['evaluate', '--config', 'a', '--config', 'b'], /given twice/],
    ];
    for (const [args, message] of cases) expect(() => parseCliArgs(args), args.join(' ')).toThrow(message);
    expect(parseCliArgs(['evaluate', '--config=/x.yaml']).flags.get('--config')).toBe('/x.yaml');
    // Read from the CLI's own table, so flags added there (--every, --help) are known here too.
    expect(parseCliArgs(['evaluate', '--config', 'a', '--every', '30s']).flags.get('--every')).toBe('30s');
    expect(parseCliArgs(['webhook', '--help']).flags.get('--help')).toBe(true);
  });
});
