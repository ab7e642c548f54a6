// The end-to-end arrangement: a real 3-member etcd, one target guarding the KCPs of one Cluster
// API cluster, the real scheduled run writing to a file store, and the HTTPS webhook whose cache
// polls that store. Inline refresh is off: the scheduled run is what feeds the gate.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createStore } from '../../functions/adapters/store-factory.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { EvaluationStore } from '../../functions/domain/store.js';
import { parseGuardConfig, type GuardConfig } from '../../functions/domain/config.js';
import { createLogger } from '../../functions/shared/logger.js';
import { evaluateTarget } from '../../functions/usecases/evaluate-target.js';
import { runScheduledEvaluation } from '../../functions/usecases/scheduled-run.js';
import { generateTestCerts, type TestCerts } from './certs.js';
import { startEtcdCluster, type EtcdTestCluster, type StartEtcdClusterOptions } from './etcd-cluster.js';
import { startTestWebhook, type TestWebhook, type TestWebhookOptions } from './webhook.js';

export interface EtcdWebhookOptions {
  /** Names the etcd members and the temp dir. */
  name: string;
  /** The target's name, which is also the cluster-name label of the KCPs it guards. */
  target: string;
  /** The target's probe deadline, e.g. '2s'. */
  timeout: string;
  /** The target's match; by default the KCPs labelled with its name as their cluster-name. */
  match?: Record<string, unknown>;
  /** Further keys of the guarded target (raw), e.g. consistency. */
  targetConfig?: Record<string, unknown>;
  /** Further targets of the config (raw config entries); the scheduled run never evaluates them. */
  otherTargets?: Record<string, unknown>[];
  webhook?: Omit<TestWebhookOptions, 'config' | 'certs' | 'store'>;
  /** Further top-level config keys (raw), e.g. runtimeExtension. */
  config?: Record<string, unknown>;
  /** The etcd binaries the members start on (etcdBinaries()'s otherwise). */
  etcdBinaries?: StartEtcdClusterOptions['binaries'];
}

export interface EtcdWebhook {
  workDir: string;
  cluster: EtcdTestCluster;
  certs: TestCerts;
  config: GuardConfig;
  store: EvaluationStore;
  webhook: TestWebhook;
  /** One scheduled run of the target, then a wait (5 s at most) until the webhook's cache holds what it stored. */
  scheduledEvaluation(): Promise<Evaluation>;
  /** Stops the webhook and etcd, removes the temp dir. */
  close(): Promise<void>;
}

const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });

export async function startEtcdWebhook(options: EtcdWebhookOptions): Promise<EtcdWebhook> {
  const workDir = await mkdtemp(path.join(os.tmpdir(), `etcd-guard-${options.name}-`));
  let cluster: EtcdTestCluster | undefined;
  let webhook: TestWebhook | undefined;
  const close = async () => {
    await webhook?.close();
    await cluster?.destroy();
    await rm(workDir, { recursive: true, force: true });
  };
  try {
    const [etcd, certs] = await Promise.all([
      startEtcdCluster({ size: 3, name: options.name, binaries: options.etcdBinaries }),
      generateTestCerts(workDir),
    ]);
    cluster = etcd;
    const guarded = {
      name: options.target,
      endpoints: etcd.endpoints,
      tls: etcd.clientTls,
      timeout: options.timeout,
      match: options.match ?? { clusterName: options.target },
      ...options.targetConfig,
    };
    const config = parseGuardConfig(
      {
        store: { kind: 'file', dir: path.join(workDir, 'store') },
        maxAgeSeconds: 60,
        inlineRefresh: false,
        targets: [guarded, ...(options.otherTargets ?? [])],
        ...options.config,
      },
      `${options.name} config`,
    );
    const store = createStore(config.store);
    const running = await startTestWebhook({ pollIntervalMs: 100, ...options.webhook, config, certs, store });
    webhook = running;
    const scheduledConfig = { ...config, targets: config.targets.filter((target) => target.name === options.target) };
    const scheduledEvaluation = async () => {
      const [result] = await runScheduledEvaluation({
        config: scheduledConfig,
        store,
        // As the CronJob does: the stored evaluation is read back (learner ages, the last membership).
        evaluate: (target, context) => evaluateTarget(target, context),
        logger: silent,
      });
      if (!result?.ok) throw new Error(`the scheduled run failed: ${JSON.stringify(result)}`);
      const stored = await store.read(options.target);
      if (stored === null) throw new Error('the scheduled run stored nothing');
      await running.waitCached(stored);
      return stored;
    };
    return { workDir, cluster: etcd, certs, config, store, webhook: running, scheduledEvaluation, close };
  } catch (error) {
    await close();
    throw error;
  }
}
