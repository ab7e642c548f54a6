// The guard's configuration file (YAML or JSON): one zod schema, parsed once at start by every
// deployable (webhook, scheduled function, HTTP function). Errors name the field and the value.
import path from 'node:path';
import { z } from 'zod';
import { parseDurationMs } from '../shared/duration.js';
import { isDnsLabel } from '../shared/names.js';
import { MAX_TARGET_NAME } from './targets.js';
import { KCP_CONTROLLER_USER } from './machines.js';
import { hasUrlUserinfo } from '../shared/redact.js';
import { formatZodIssues } from '../shared/zod-issues.js';

export const durationSchema = z.union([z.string(), z.number()]).transform((value, ctx) => {
  // A bare number is read as seconds, the way Kubernetes users write timeouts.
  const ms = typeof value === 'number' ? Math.round(value * 1000) : parseDurationMs(value);
  if (ms === null || !(ms > 0) || ms > 600_000) {
    ctx.addIssue({
      code: 'custom',
      message: `invalid duration ${JSON.stringify(value)} (use e.g. "2s", "500ms"; at most 10m)`,
    });
    return z.NEVER;
  }
  return ms;
});

/** Below this not even a TLS connection and one etcd round trip fit, on loopback. */
export const MIN_ETCD_TIMEOUT_MS = 100;

/** A target's budget for talking to etcd, counted from the first etcd call. */
const etcdTimeoutSchema = durationSchema.refine((ms) => ms >= MIN_ETCD_TIMEOUT_MS, {
  error: (issue) =>
    `timeout ${String(issue.input)}ms is too short for a TLS connection and an etcd round trip; use at least ${MIN_ETCD_TIMEOUT_MS}ms (default 2s)`,
});

/** The largest maxAgeSeconds accepted (documented in docs/configuration.md). */
export const MAX_AGE_SECONDS_LIMIT = 3600;

/**
 * How an admission decision gets its evidence: `live` (an evaluation that started at most
 * decisionMaxAgeMs before the request, run inline when there is none), or `cached` (the webhook
 * cannot reach etcd: the stored evaluation decides within maxAgeSeconds, and the answer says so).
 */
export const DECISION_MODES = ['live', 'cached'] as const;
export const decisionModeSchema = z.enum(DECISION_MODES);
export type DecisionMode = z.infer<typeof decisionModeSchema>;
/** Evidence that started at most this long before a request counts as live; default 1000 ms. */
export const decisionMaxAgeMsSchema = z
  .number()
  .int()
  .min(0)
  .max(MAX_AGE_SECONDS_LIMIT * 1000);
export const DEFAULT_DECISION_MAX_AGE_MS = 1_000;

const endpointSchema = z.string().superRefine((value, context) => {
  if (hasUrlUserinfo(value)) {
    // The message must not echo the value: it holds a password.
    context.addIssue({
      code: 'custom',
      message:
        'credentials in an endpoint URL are not allowed (user:password@ removed from this message); ' +
        'reach etcd with client certificates (tls)',
    });
    return;
  }
  let valid = false;
  try {
    const url = new URL(value);
    valid = (url.protocol === 'https:' || url.protocol === 'http:') && url.hostname !== '' && url.port !== '';
  } catch {
    valid = false;
  }
  if (!valid) {
    context.addIssue({
      code: 'custom',
      message: `invalid endpoint ${JSON.stringify(value)} (want http(s)://HOST:PORT)`,
    });
  }
});

export const tlsFilesSchema = z
  .object({
    caFile: z.string().min(1).optional(),
    certFile: z.string().min(1).optional(),
    keyFile: z.string().min(1).optional(),
  })
  .strict()
  .refine((tls) => Boolean(tls.certFile) === Boolean(tls.keyFile), {
    message: 'certFile and keyFile must be given together',
  });
export type TlsFiles = z.infer<typeof tlsFilesSchema>;

/**
 * How a would-be denial is applied: `enforce` denies, `warn` allows with the denial as an admission
 * warning, `audit` allows silently. All three count, audit and record the would-be denial.
 */
export const ENFORCEMENT_MODES = ['enforce', 'warn', 'audit'] as const;
export const enforcementSchema = z.enum(ENFORCEMENT_MODES);
export type EnforcementMode = z.infer<typeof enforcementSchema>;
export const tlsVerifySchema = z.enum(['full', 'chain-only']);

const DAY_MS = 86_400_000;

/** The age a druid target's last snapshot may have: a minute to a week ("30m", "6h"); a number is seconds. */
const SNAPSHOT_AGE = /^(\d{1,6}(?:\.\d{1,3})?)(h|m|s)$/;
const SNAPSHOT_AGE_UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000 };
function snapshotAgeMs(text: string): number | null {
  const match = SNAPSHOT_AGE.exec(text.trim());
  return match ? Math.round(Number(match[1]) * (SNAPSHOT_AGE_UNIT_MS[match[2] ?? ''] ?? Number.NaN)) : null;
}
const ageSchema = (what: string) =>
  z.union([z.string(), z.number()]).transform((value, ctx) => {
    const ms = typeof value === 'number' ? Math.round(value * 1000) : snapshotAgeMs(value);
    if (ms === null || ms < 60_000 || ms > 7 * DAY_MS) {
      ctx.addIssue({
        code: 'custom',
        message: `invalid ${what} ${JSON.stringify(value)} (use e.g. "30m", "6h"; from 1m to 168h)`,
      });
      return z.NEVER;
    }
    return ms;
  });
const snapshotAgeSchema = ageSchema('snapshot age');

/**
 * Where the opt-in consistency check hashes: in the scheduled run (and POST /evaluations, the CLI),
 * and in the webhook's inline evaluations of a scale-up or another change that adds a member.
 * An evaluation that does not hash carries the stored evaluation's consistency result, up to
 * maxAge old (a failure longer: diverged data do not mend by themselves). `true` is shorthand
 * for { scheduled: true }; `false`, or
 * neither place, is off.
 */
const consistencyObjectSchema = z
  .object(
    {
      scheduled: z.boolean().default(false),
      scaleUps: z.boolean().default(false),
      maxAge: ageSchema('consistency age').prefault('1h'),
    },
    { error: 'must be true, false or an object with scheduled, scaleUps and maxAge' },
  )
  .strict();
// The shorthand is read as its object first, so a wrong field is named by its own path.
export const consistencySchema = z
  .preprocess((value) => (typeof value === 'boolean' ? { scheduled: value } : value), consistencyObjectSchema)
  // Hashing nowhere is off: nothing is hashed, nothing carried.
  .transform((setting) => (setting.scheduled || setting.scaleUps ? setting : undefined))
  // What the reference (scripts/config-reference.ts) shows: the preprocess hides the boolean.
  .meta({ acceptedType: 'boolean or object' });
export type ConsistencyConfig = z.output<typeof consistencyObjectSchema>;

/** What an evaluation is for, which says whether it hashes (consistency: where it runs). */
export type EvaluationPurpose = 'scheduled' | 'admission' | 'admission-add';

/** Whether an evaluation for `purpose` hashes every voting member, under the target's setting. */
export function consistencyHashes(setting: ConsistencyConfig | undefined, purpose: EvaluationPurpose = 'scheduled'): boolean {
  if (setting === undefined) return false;
  if (purpose === 'scheduled') return setting.scheduled;
  return purpose === 'admission-add' && setting.scaleUps;
}

/**
 * The backup check of a druid target (its Etcd's BackupReady and snapshot Leases) and whether
 * membership changes and etcd upgrades of it need that check to pass. Present: the check runs.
 */
export const backupPolicySchema = z
  .object({
    maxSnapshotAge: snapshotAgeSchema.prefault('1h'),
    requiredForChanges: z.boolean().default(false),
  })
  .strict();
export type BackupPolicy = z.infer<typeof backupPolicySchema>;

/**
 * When the fragmentation check warns: more than warnRatio of a member's DB file free and at least
 * minFreeBytes of it (the floor keeps a small DB whose few pages are free from warning).
 */
export const fragmentationSchema = z
  .object({
    warnRatio: z.number().gt(0).lt(1).default(0.5),
    minFreeBytes: z
      .number()
      .int()
      .nonnegative()
      .default(100 * 1024 * 1024),
  })
  .strict();
export type FragmentationConfig = z.infer<typeof fragmentationSchema>;

/** Which guarded objects belong to a target. {} matches every object. */
export const matchSchema = z
  .object({
    namespaces: z.array(z.string().min(1)).optional(),
    names: z.array(z.string().min(1)).optional(),
    /** Equality-based selector, e.g. { "cluster.x-k8s.io/cluster-name": "prod" }. */
    labelSelector: z.record(z.string(), z.string()).optional(),
    /** Shorthand for the cluster.x-k8s.io/cluster-name label. */
    clusterName: z.string().min(1).optional(),
  })
  .strict();
export type TargetMatch = z.infer<typeof matchSchema>;

export const inventorySchema = z
  .object({
    /** Kubeconfig of the cluster whose Nodes are listed; in-cluster or KUBECONFIG when absent. */
    kubeconfigFile: z.string().min(1).optional(),
    nodeLabel: z.string().min(1).default('node-role.kubernetes.io/control-plane'),
  })
  .strict();
export type InventoryConfig = z.infer<typeof inventorySchema>;

export const targetSchema = z
  .object({
    name: z
      .string()
      .refine(
        (name) => isDnsLabel(name, MAX_TARGET_NAME),
        `must be a DNS label of at most ${MAX_TARGET_NAME} characters (it becomes part of a ConfigMap name)`,
      ),
    endpoints: z.array(endpointSchema).min(1, 'needs at least one endpoint'),
    tls: tlsFilesSchema.optional(),
    timeout: etcdTimeoutSchema.prefault('2s'),
    /** Backend quota the members run with (--quota-backend-bytes); etcd's default is 2 GiB. */
    quotaBackendBytes: z
      .number()
      .int()
      .positive()
      .default(2 * 1024 * 1024 * 1024),
    match: matchSchema.prefault({}),
    inventory: inventorySchema.optional(),
    /**
     * Opt-in watch round trip (off by default: it writes to etcd). Per member, a watch on a key
     * under /etcd-guard/watch-probe/<target>/ must deliver a write made through another member
     * within the timeout. With etcd auth the client needs readwrite on that prefix.
     */
    watchProbe: z.boolean().optional(),
    /** This target's enforcement; the config's `enforcement` when absent. */
    enforcement: enforcementSchema.optional(),
    /** This target's bound on live evidence; the config's `decisionMaxAgeMs` when absent. */
    decisionMaxAgeMs: decisionMaxAgeMsSchema.optional(),
    /** This target's decision mode; the config's `decision` when absent. */
    decision: decisionModeSchema.optional(),
    /**
     * How members' serving certificates are checked. 'full' (default): the certificate must chain
     * to the CA and name the member's address (or node name, through a port-forward). 'chain-only':
     * the chain alone, for clusters whose etcd serving certificates lack that name (Cluster API's
     * KCP itself verifies nothing). Risk: any certificate the CA issued, e.g. another member's or
     * another cluster's under a shared CA, is then taken for this member.
     */
    tlsVerify: tlsVerifySchema.optional(),
    /**
     * How long a learner may stay unpromoted before the evaluation fails it (a join in progress
     * is Degraded until then); 5 minutes when absent.
     */
    learnerGrace: durationSchema.optional(),
    /** When the fragmentation check warns; 50% and 100 MiB free when absent. */
    fragmentation: fragmentationSchema.optional(),
    /**
     * Opt-in consistency check (off by default: each member hashes its whole keyspace): HashKV of
     * every voting member at one revision, where consistencySchema says.
     */
    consistency: consistencySchema.optional(),
    /**
     * The backup check and rule (backupPolicySchema). Judged for druid targets, whose Etcd is read;
     * a static target has no backup check, so requiring it holds back its membership changes.
     */
    backup: backupPolicySchema.optional(),
  })
  .strict();
export type TargetConfig = z.infer<typeof targetSchema>;

/** Where one provider looks: every namespace unless listed, every object unless the labels are given. */
const discoveryScopeSchema = z
  .object({
    namespaces: z
      .array(z.string().refine((namespace) => isDnsLabel(namespace), 'must be a namespace name (a DNS label)'))
      .min(1, 'omit namespaces to look in every namespace')
      .optional(),
    /** Equality-based selector, e.g. { "etcd-guard.io/guard": "true" }. */
    labelSelector: z.record(z.string(), z.string()).optional(),
    /** Enforcement of every target this provider discovers; the config's `enforcement` when absent. */
    enforcement: enforcementSchema.optional(),
    /** decisionMaxAgeMs of every target this provider discovers; the config's when absent. */
    decisionMaxAgeMs: decisionMaxAgeMsSchema.optional(),
    /** decision of every target this provider discovers; the config's when absent. */
    decision: decisionModeSchema.optional(),
  })
  .strict();
export type DiscoveryScope = z.infer<typeof discoveryScopeSchema>;

export const discoverySchema = z
  .object({
    /** A target per KubeadmControlPlane with stacked etcd. */
    capi: discoveryScopeSchema.optional(),
    /** A target per etcd-druid Etcd; `backup` gives each of them the backup check and rule. */
    druid: discoveryScopeSchema.extend({ backup: backupPolicySchema.optional() }).strict().optional(),
    refreshSeconds: z.number().int().min(10).max(3600).default(60),
    /** Deadline of one evaluation of a discovered target (opening its access included). */
    timeout: durationSchema.prefault('5s'),
    /** Kubeconfig of the management cluster; in-cluster or KUBECONFIG when absent. */
    kubeconfigFile: z.string().min(1).optional(),
    /** The opt-in watch round trip (targets[].watchProbe) for every discovered target. */
    watchProbe: z.boolean().optional(),
    /** targets[].tlsVerify for every discovered target (e.g. chain-only for KCP certificates without the node name). */
    tlsVerify: tlsVerifySchema.optional(),
    /** targets[].learnerGrace for every discovered target. */
    learnerGrace: durationSchema.optional(),
    /** targets[].fragmentation for every discovered target. */
    fragmentation: fragmentationSchema.optional(),
    /** The opt-in consistency check (targets[].consistency) for every discovered target. */
    consistency: consistencySchema.optional(),
  })
  .strict()
  .refine((discovery) => discovery.capi !== undefined || discovery.druid !== undefined, {
    message: 'names no provider: add capi: {} or druid: {}',
  });
export type DiscoveryConfig = z.infer<typeof discoverySchema>;

export const storeConfigSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('file'), dir: z.string().min(1) }).strict(),
  z.object({ kind: z.literal('configmap'), namespace: z.string().min(1).default('etcd-guard') }).strict(),
]);
export type StoreConfig = z.infer<typeof storeConfigSchema>;

export const guardConfigSchema = z
  .object({
    store: storeConfigSchema.default({ kind: 'file', dir: './.etcd-guard' }),
    /** At most an hour: an older evaluation says nothing about etcd now, and the bound keeps timers in range. */
    maxAgeSeconds: z.number().int().positive().max(MAX_AGE_SECONDS_LIMIT).default(120),
    inlineRefresh: z.boolean().default(true),
    /** Live evidence: an evaluation that started at most this long before the request. */
    decisionMaxAgeMs: decisionMaxAgeMsSchema.default(DEFAULT_DECISION_MAX_AGE_MS),
    /** `live` unless set; `inlineRefresh: false` without it means `cached` (what it meant before). */
    decision: decisionModeSchema.optional(),
    /** The enforcement of every target that names none (and of denials no target owns). */
    enforcement: enforcementSchema.default('enforce'),
    /** Kubernetes Events (events.k8s.io/v1) for denials, overrides and verdict transitions. */
    events: z.boolean().default(true),
    /** How many targets the scheduled function evaluates at once. */
    concurrency: z.number().int().min(1).max(256).default(16),
    /**
     * Overall time budget of one scheduled run: targets not finished by then are reported as such.
     * 45 s fits inside the Lambda's 55 s timeout and the CronJob's 50 s activeDeadlineSeconds.
     */
    runBudget: durationSchema.prefault('45s'),
    /**
     * Connections the webhook keeps open between evaluations (etcd member channels; for Cluster
     * API targets the port-forward listeners and their workload API connections). The CLI and
     * the scheduled run open and close them per evaluation.
     */
    connections: z
      .object({
        keep: z.boolean().default(true),
        idleTimeout: durationSchema.prefault('60s'),
        maxPerTarget: z.number().int().min(1).max(1024).default(16),
        maxTotal: z.number().int().min(1).max(65_536).default(512),
      })
      .strict()
      .prefault({}),
    targets: z
      .array(targetSchema)
      .default([])
      .superRefine((targets, ctx) => {
        const seen = new Set<string>();
        targets.forEach((target, index) => {
          if (seen.has(target.name)) {
            ctx.addIssue({
              code: 'custom',
              path: [index, 'name'],
              message: `duplicate target name ${JSON.stringify(target.name)}`,
            });
          }
          seen.add(target.name);
        });
      }),
    override: z
      .object({
        annotation: z.string().min(1).default('etcd-guard.io/override'),
        // kubeadm's admin.conf is in kubeadm:cluster-admins since Kubernetes 1.29, system:masters before.
        groups: z.array(z.string().min(1)).default(['system:masters', 'kubeadm:cluster-admins']),
        /** Ask the API server (SubjectAccessReview) whether the user may `override` targets.etcd-guard.io. */
        subjectAccessReview: z.boolean().default(true),
        /**
         * Ask in the guarded object's namespace, so a Role there grants override (a tenant's own);
         * off (the default), the review is cluster-scoped: only a ClusterRole binding grants it.
         */
        namespaced: z.boolean().default(false),
        reviewTimeout: durationSchema.prefault('1s'),
      })
      .strict()
      .prefault({}),
    /** Member-bearing DELETEs (control-plane Machines, etcd pods) by the controllers themselves. */
    memberDeletes: z
      .object({
        controllerUsers: z.array(z.string().min(1)).default([KCP_CONTROLLER_USER]),
        exemptControllers: z.boolean().default(false),
      })
      .strict()
      .prefault({}),
    /** The Cluster API Runtime Extension's upgrade hooks (docs/runtime-extension.md). */
    runtimeExtension: z
      .object({ retryAfterSeconds: z.number().int().min(1).max(3600).default(30) })
      .strict()
      .prefault({}),
    auth: z
      .object({ tokenFile: z.string().min(1).optional() })
      .strict()
      .prefault({}),
    discovery: discoverySchema.optional(),
  })
  .strict()
  .refine((config) => config.targets.length > 0 || config.discovery !== undefined, {
    path: ['targets'],
    message: 'needs at least one target (or discovery to find them)',
  });
export type GuardConfig = z.infer<typeof guardConfigSchema>;

/** The enforcement that applies to a target (or, with none, to a request no target owns). */
export function enforcementOf(
  config: Pick<GuardConfig, 'enforcement'>,
  target?: Pick<TargetConfig, 'enforcement'>,
): EnforcementMode {
  return target?.enforcement ?? config.enforcement;
}

/** The decision mode of a target: its own, its scope's (copied onto it), the config's, else inlineRefresh's. */
export function decisionModeOf(
  config: Pick<GuardConfig, 'decision' | 'inlineRefresh'>,
  target?: Pick<TargetConfig, 'decision'>,
): DecisionMode {
  return target?.decision ?? config.decision ?? (config.inlineRefresh ? 'live' : 'cached');
}

/** How old, at most, the evidence of a live decision on this target may be. */
export function decisionMaxAgeMsOf(
  config: Pick<GuardConfig, 'decisionMaxAgeMs'>,
  target?: Pick<TargetConfig, 'decisionMaxAgeMs'>,
): number {
  return target?.decisionMaxAgeMs ?? config.decisionMaxAgeMs;
}

export class ConfigError extends Error {
  constructor(
    readonly source: string,
    readonly issues: string[],
  ) {
    super(`invalid configuration in ${source}: ${issues.join('; ')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Validates an already-parsed config object. Relative file paths (TLS files, store dir, token
 * file) resolve against `baseDir`, the directory of the config file.
 */
export function parseGuardConfig(raw: unknown, source: string, baseDir = process.cwd()): GuardConfig {
  const result = guardConfigSchema.safeParse(raw);
  if (!result.success) throw new ConfigError(source, formatZodIssues(result.error, { input: raw }));
  return resolvePaths(result.data, baseDir);
}

function resolvePaths(config: GuardConfig, baseDir: string): GuardConfig {
  const resolve = (file: string | undefined) => (file === undefined ? undefined : path.resolve(baseDir, file));
  return {
    ...config,
    store: config.store.kind === 'file' ? { ...config.store, dir: path.resolve(baseDir, config.store.dir) } : config.store,
    targets: config.targets.map((target) => ({
      ...target,
      tls: target.tls && {
        caFile: resolve(target.tls.caFile),
        certFile: resolve(target.tls.certFile),
        keyFile: resolve(target.tls.keyFile),
      },
      inventory: target.inventory && { ...target.inventory, kubeconfigFile: resolve(target.inventory.kubeconfigFile) },
    })),
    auth: { tokenFile: resolve(config.auth.tokenFile) },
    ...(config.discovery && {
      discovery: { ...config.discovery, kubeconfigFile: resolve(config.discovery.kubeconfigFile) },
    }),
  };
}
