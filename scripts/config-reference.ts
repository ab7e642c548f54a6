// Prints the configuration reference (a markdown table of every config key) by walking the zod
// schema in functions/domain/config.ts, so the documentation cannot drift from what the code accepts.
//
//   npx tsx scripts/config-reference.ts                  print the table
//   npx tsx scripts/config-reference.ts --check docs/configuration.md exit 1 when its section differs
//   npx tsx scripts/config-reference.ts --write docs/configuration.md rewrite its section
//
// The section sits between <!-- config-reference:start --> and <!-- config-reference:end -->.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { durationSchema, guardConfigSchema } from '../functions/domain/config.js';

export const START_MARKER = '<!-- config-reference:start -->';
export const END_MARKER = '<!-- config-reference:end -->';
export const GENERIC_DESCRIPTION = 'No description yet (add one in scripts/config-reference.ts).';

/** Keyed by dotted path; `[]` marks "each element of the list". */
export const DESCRIPTIONS: Readonly<Record<string, string>> = {
  store: 'Where evaluations are cached; one document per target.',
  'store.kind':
    '`file`: `<dir>/<target>.json`, written atomically. `configmap`: ConfigMap `etcd-guard-<target>`, key `evaluation.json`.',
  'store.dir': 'Directory of the evaluation files; relative to the config file.',
  'store.namespace': 'Namespace of the `etcd-guard-<target>` ConfigMaps (the RBAC in manifests/ grants only this one).',
  maxAgeSeconds:
    'An evaluation older than this is stale. Where no live evaluation can run (see `decision`), a cached one decides only within this age, with a warning; older or none: deny.',
  inlineRefresh:
    "Evaluate during the admission request when no live evaluation is at hand and the apiserver's remaining timeout leaves the target's `timeout` plus 1 s. `false` without `decision` means `decision: cached`.",
  decisionMaxAgeMs:
    'Live evidence: a guarded change is judged on an evaluation of its target that started at most this many milliseconds before the request arrived, else one runs inline (and is stored). Smaller: fresher evidence, more evaluations under load; larger: fewer evaluations, a fault that recent goes unseen. See [the decision rule](#the-decision-rule-live-evidence).',
  decision:
    '`live` (default): decide on live evidence as `decisionMaxAgeMs` says. `cached`: the webhook cannot reach etcd (e.g. a network policy), so the stored evaluation decides within `maxAgeSeconds` and every such answer warns with its age; see [operations](operations.md#a-webhook-that-cannot-reach-etcd-decision-cached).',
  enforcement:
    'What a would-be denial does for every target that names no `enforcement` (and for denials no target owns, e.g. no target matches): `enforce` denies; `warn` allows with the denial as admission warnings (kubectl prints them); `audit` allows silently. All three count it (`etcd_guard_admission_decisions_total{decision="denied",mode=…}`), add audit annotations and record an Event. Adopt with `audit`, then `warn`, then `enforce` (see operations.md).',
  events:
    'Record Kubernetes Events (events.k8s.io/v1) on the guarded object: every denial, would-be denial (`warn`, `audit`) and override from the webhook, and verdict transitions (into and out of Unhealthy) from the scheduled run. Repeats become one Event with a series count, as client-go does; writes are off the admission path. Needs `create` and `patch` on `events.events.k8s.io` (in manifests/).',
  concurrency: 'How many targets the scheduled evaluation probes at once.',
  runBudget:
    'Overall time budget of one scheduled run (CLI `--budget`). Targets not finished by then are reported, logged and make the run exit 1; each is still bounded by its own `timeout`. The default fits the Lambda (55 s) and the CronJob (`activeDeadlineSeconds: 50`).',
  connections:
    "Connections the webhook (and its `POST /evaluations`) keeps open between evaluations, so that a live evaluation costs round trips, not handshakes: each member's gRPC channel and, for Cluster API targets, the port-forward listeners with their workload API connections. A channel on which a call failed or timed out is closed and the next evaluation dials afresh, so a hung member still costs at most the target's `timeout`. The CLI and the scheduled run open and close them per evaluation. See [kept connections](#kept-connections).",
  'connections.keep': '`false`: the webhook opens and closes every connection per evaluation too, as the CLI does.',
  'connections.idleTimeout':
    'A kept connection nobody used for this long is closed (sockets return to where they were). Idle etcd channels are pinged every half of it (at least 5 s).',
  'connections.maxPerTarget':
    'Kept connections per target at most: member channels (one per member), and apart from them Cluster API accesses (one per node set); beyond, the least recently used idle one is closed, and when none is idle the evaluation opens its own and closes it after.',
  'connections.maxTotal': 'Kept connections of the whole process at most, counted and evicted like `maxPerTarget`.',
  targets: 'The etcd clusters to judge, as written. Names must be unique. May be empty when `discovery` finds the targets.',
  'targets[].name': 'DNS label of at most 48 characters; the cached ConfigMap is `etcd-guard-<name>`.',
  'targets[].endpoints': 'Client URL of every member, `http(s)://HOST:PORT`.',
  'targets[].tls': 'Client TLS files for the members; relative paths resolve against the config file.',
  'targets[].tls.caFile': "CA bundle that signed the members' serving certs.",
  'targets[].tls.certFile': 'Client certificate; needs `keyFile`.',
  'targets[].tls.keyFile': 'Client private key; needs `certFile`. Never logged or returned.',
  'targets[].timeout':
    'Budget for talking to etcd in one evaluation of this target, counted from its first etcd call, never from process start; a hung member costs at most this. At least 100ms.',
  'targets[].quotaBackendBytes': "The members' `--quota-backend-bytes`; a DB above 80 % of it is a warning.",
  'targets[].match': 'Which guarded objects belong to this target. Every given field must match; `{}` matches all.',
  'targets[].match.namespaces': 'Namespaces of the guarded objects.',
  'targets[].match.names': 'Names of the guarded objects (a StatefulSet is guarded only when a target names it).',
  'targets[].match.labelSelector': 'Labels the guarded object must carry with exactly these values.',
  'targets[].match.clusterName': 'Shorthand for the label `cluster.x-k8s.io/cluster-name: <clusterName>`.',
  'targets[].inventory': 'When set, members that match no control-plane Node make the evaluation Unhealthy.',
  'targets[].inventory.kubeconfigFile':
    'Kubeconfig of the cluster whose Nodes are listed; in-cluster or `KUBECONFIG` when absent.',
  'targets[].inventory.nodeLabel': 'Label that marks control-plane Nodes.',
  'targets[].watchProbe':
    'Opt-in watch round trip (the `watch` check): per member, a watch on `/etcd-guard/watch-probe/<target>/<member id>` must deliver a write made through another member within `timeout`. Off by default because it writes (one put and one delete per member per evaluation); see [the watch probe](#the-watch-probe-and-the-etcd-permission-it-needs).',
  'targets[].enforcement': "This target's enforcement (`enforce`, `warn` or `audit`); the top-level `enforcement` when absent.",
  'targets[].decisionMaxAgeMs': "This target's `decisionMaxAgeMs`; the top-level one when absent.",
  'targets[].decision': "This target's `decision` (`live` or `cached`); the top-level one when absent.",
  'targets[].tlsVerify':
    "`full` (default): a member's serving certificate must chain to `tls.caFile` and name the member (its address, or its node name through a port-forward); one that does not fails the `tls-identity` check naming both. `chain-only`: the chain alone, for etcd serving certificates without the node name. Risk: any certificate that CA issued is taken for the member; see [TLS identity](#tls-identity-and-chain-only).",
  'targets[].learnerGrace':
    'How long a learner (a member joining; kubeadm adds every one as a learner) may stay unpromoted: within it the `learners` check warns (`learner cp-3 joining for 40s`, Degraded), after it fails (`learner cp-3 not promoted for 7m`, Unhealthy). Its age counts from its Node’s (else Machine’s) creation, else from when an evaluation first saw it. `5m` when absent.',
  'targets[].consistency':
    "The `consistency` check, off by default because each member reads its whole keyspace: every voting member's HashKV at one revision (the lowest current revision among them), compared. A member whose hash differs fails it (data corruption: Unhealthy), a member not hashed in time leaves it not judged (a warning). The object says where it hashes; `true` is shorthand for `{ scheduled: true }` (what `true` meant before, minus the webhook's inline evaluations), `false` or hashing nowhere is off. Hashing runs within the target's `timeout`: size that for the DB; on etcd 3.4 and 3.5 writes wait while the members hash (see [evaluation](evaluation.md#consistency) for measured costs). An evaluation that does not hash shows the stored evaluation's result, dated (`maxAge`).",
  'targets[].consistency.scheduled':
    'Hash in the scheduled run, `POST /evaluations` and `etcd-guard evaluate`: every such evaluation of the target.',
  'targets[].consistency.scaleUps':
    "Hash in the webhook's inline evaluation of a change that adds a member (a scale-up, or a rollout, whose new member joins before an old one leaves and is seeded from the leader's snapshot). Other inline evaluations never hash. A request decided on a cached evaluation runs none.",
  'targets[].consistency.maxAge':
    'How long the last result is shown by evaluations that do not hash, dated (`carried (hashed 12m earlier, at …): …`, and `checks[].measuredAt`): `30m`, `6h` (h, m or s; from 1m to 168h), or seconds as a number. An older pass or not-judged warning is left out (the check is absent); a divergence stays however old, failing, until a hash agrees.',
  'targets[].fragmentation':
    "When the `fragmentation` check warns that a member's DB file is mostly free pages a defrag would return (`dbSize − dbSizeInUse`, etcd 3.4+): both limits must be exceeded. It only warns (Degraded), naming the member and `etcdctl defrag --endpoints=<that member>`. Absent: 50% and 100 MiB. See [evaluation](evaluation.md#fragmentation).",
  'targets[].fragmentation.warnRatio':
    "The free share of a member's DB file above which it warns, between 0 and 1 (exclusive): `0.5` is the etcd mixin's `etcdDatabaseHighFragmentationRatio` share.",
  'targets[].fragmentation.minFreeBytes':
    "The free bytes a member's DB must have at least to warn (104857600 is 100 MiB), so a small or fresh DB whose few pages are free does not.",
  'targets[].backup':
    "The `backup` check and rule of a druid target (set through `discovery.druid.backup`): each evaluation reads the Etcd's `status.conditions[type=BackupReady]` and its snapshot Leases `<etcd>-full-snap` and `<etcd>-delta-snap` (`spec.renewTime`). BackupReady=False fails the check (the verdict is Degraded: etcd still serves), BackupReady not True, no condition or no snapshot time is `backup unknown` (a warning, never a pass), a last snapshot older than `maxSnapshotAge` warns. A static target has no backup check (its Etcd is not read). See [evaluation](evaluation.md#backup-druid).",
  'targets[].backup.maxSnapshotAge':
    'How old the newer of the last full and delta snapshot may be before the check warns (`backup stale`): `30m`, `6h` (h, m or s; from 1m to 168h), or seconds as a number.',
  'targets[].backup.requiredForChanges':
    "`true`: a membership change (scale up or down) or an etcd upgrade (a rollout that changes `spec.etcd.image`) of the target is denied unless its `backup` check passes, naming the check's message. A hibernation (to 0 and back) keeps its own exception; an override lets one change through.",
  override: 'How an authorized user lets one denied change through.',
  'override.annotation':
    'Annotation on the new object that overrides a denial; its value is the reason, recorded in the audit log.',
  'override.groups':
    "Users in one of these groups may override (kubeadm's admin kubeconfig is in `kubeadm:cluster-admins` since Kubernetes 1.29, `system:masters` before); so may users RBAC allows (`override.subjectAccessReview`). Anyone else setting the annotation is denied.",
  'override.subjectAccessReview':
    'Also let users override whom RBAC grants verb `override` on `targets` in API group `etcd-guard.io` (name: the target), asked with a SubjectAccessReview; when that fails or times out, only `override.groups` count.',
  'override.namespaced':
    "Ask that SubjectAccessReview in the guarded object's namespace, so that a Role and RoleBinding there grant override (a tenant overrides its own control planes; a tenant Role with `*` on `*` then grants it too). Off: the review is cluster-scoped and only a ClusterRoleBinding grants override, a platform permission.",
  'override.reviewTimeout': "Deadline of the SubjectAccessReview (within the apiserver's budget for the admission call).",
  memberDeletes:
    'DELETEs that take an etcd member out (a control-plane Machine, an etcd pod of a guarded Etcd or StatefulSet) when the controllers send them; see [member-bearing deletes](#member-bearing-deletes).',
  'memberDeletes.controllerUsers':
    "Users whose member-bearing DELETEs are the controllers' own (default: Cluster API's KubeadmControlPlane manager as clusterctl installs it). They are judged like anyone's and audited as `member-delete-controller`.",
  'memberDeletes.exemptControllers':
    '`true`: a `controllerUsers` DELETE that would be denied is allowed, with a warning and the audit annotation `member-delete-exempt` saying what was judged. The default judges KCP too: its pre-terminate hook removes the member only after the delete was admitted.',
  runtimeExtension:
    'The Cluster API Runtime Extension served on the webhook port: `BeforeClusterUpgrade` and `BeforeControlPlaneUpgrade` are judged as the KubeadmControlPlane version change they precede; see [docs/runtime-extension.md](runtime-extension.md).',
  'runtimeExtension.retryAfterSeconds':
    '`retryAfterSeconds` of an answer while the target does not pass: Cluster API calls the hook again after it and the upgrade waits.',
  auth: 'Access control for `/evaluations`.',
  discovery:
    'Targets found in the management cluster itself, beside `targets`: no endpoint, TLS file or per-target RBAC name. Names: `<source>-<namespace>-<name>` (capi: the Cluster, druid: the Etcd) when the namespace has no `-`, the name is a DNS label without `.` or `--` and the whole fits 48 characters; else a readable prefix, `--` and 16 hex digits of SHA-256 over the JSON array of source, namespace and name (readable names never hold `--`, so the two forms never collide).',
  'discovery.capi':
    "A target per KubeadmControlPlane (v1beta2, else v1beta1) with stacked etcd, guarding that KCP by identity (also via `/scale`). Its Cluster is linked both ways: the KCP's one Cluster owner reference carries that Cluster's uid, and the Cluster's `spec.controlPlaneRef` names the KCP (its `cluster.x-k8s.io/cluster-name` label, when set, must agree); credentials come only from that Cluster's Secrets. Any other KCP in scope is owned but unresolved: its guarded changes are denied naming why, never judged by a static target. Changing the owner reference, that label or a `labelSelector` label of a discovered KCP is judged against the target it leaves. A KCP with external etcd is skipped (reported by `etcd-guard targets`): give it a static target that names it (`match.namespaces` and `match.names`).",
  'discovery.capi.namespaces': 'Namespaces to look in; every namespace when absent.',
  'discovery.capi.labelSelector': 'Labels a KubeadmControlPlane must carry with exactly these values.',
  'discovery.capi.enforcement':
    'Enforcement of every target this provider discovers (`enforce`, `warn` or `audit`); the top-level `enforcement` when absent.',
  'discovery.capi.decisionMaxAgeMs': '`decisionMaxAgeMs` of every target this provider discovers; the top-level one when absent.',
  'discovery.capi.decision':
    '`decision` (`live` or `cached`) of every target this provider discovers; the top-level one when absent.',
  'discovery.druid':
    'A target per etcd-druid Etcd, guarding it by identity: members at `<etcd>-<i>.<etcd>-peer.<namespace>.svc:<clientPort>`, TLS from the Secrets `spec.etcd.clientUrlTls` names (held in memory).',
  'discovery.druid.namespaces': 'Namespaces to look in; every namespace when absent.',
  'discovery.druid.labelSelector': 'Labels an Etcd must carry with exactly these values.',
  'discovery.druid.enforcement':
    'Enforcement of every target this provider discovers (`enforce`, `warn` or `audit`); the top-level `enforcement` when absent.',
  'discovery.druid.decisionMaxAgeMs':
    '`decisionMaxAgeMs` of every target this provider discovers; the top-level one when absent.',
  'discovery.druid.decision':
    '`decision` (`live` or `cached`) of every target this provider discovers; the top-level one when absent.',
  'discovery.druid.backup':
    'Gives every druid target the `backup` check and rule (`targets[].backup`); absent: the Etcd and its Leases are not read and no `backup` check is judged. Needs `get` on `etcds` and `leases` (manifests/overlays/druid).',
  'discovery.druid.backup.maxSnapshotAge': 'Sets `targets[].backup.maxSnapshotAge` for every druid target.',
  'discovery.druid.backup.requiredForChanges': 'Sets `targets[].backup.requiredForChanges` for every druid target.',
  'discovery.fragmentation': 'Sets `targets[].fragmentation` for every discovered target.',
  'discovery.fragmentation.warnRatio': 'Sets `targets[].fragmentation.warnRatio` for every discovered target.',
  'discovery.fragmentation.minFreeBytes': 'Sets `targets[].fragmentation.minFreeBytes` for every discovered target.',
  'discovery.refreshSeconds':
    'How often the webhook lists again (each round within 10 s). A target that disappears stops being evaluated; its last evaluation ages out.',
  'discovery.timeout': 'Hard deadline for one evaluation of a discovered target, opening its access included.',
  'discovery.kubeconfigFile': 'Kubeconfig of the management cluster; in-cluster or `KUBECONFIG` when absent.',
  'discovery.watchProbe': 'Turns `targets[].watchProbe` on for every discovered target.',
  'discovery.consistency': 'Sets `targets[].consistency` for every discovered target.',
  'discovery.consistency.scheduled': 'Sets `targets[].consistency.scheduled` for every discovered target.',
  'discovery.consistency.scaleUps': 'Sets `targets[].consistency.scaleUps` for every discovered target.',
  'discovery.consistency.maxAge': 'Sets `targets[].consistency.maxAge` for every discovered target.',
  'discovery.tlsVerify': 'Sets `targets[].tlsVerify` for every discovered target.',
  'discovery.learnerGrace': 'Sets `targets[].learnerGrace` for every discovered target.',
  'auth.tokenFile': 'File holding the bearer token that `POST /evaluations/<target>` requires; without it, no token is asked.',
};

export interface ConfigReferenceRow {
  path: string;
  type: string;
  /** `required`, `optional`, or the default value as JSON. */
  default: string;
  description: string;
}

interface Unwrapped {
  schema: z.ZodType;
  optional: boolean;
  hasDefault: boolean;
  defaultValue: unknown;
}

/**
 * durationSchema, also after a refinement: zod 4 adds refinements to a copy of the schema, so the
 * copy shares the transform rather than being the same object.
 */
function isDuration(schema: z.ZodType): boolean {
  return schema === durationSchema || (schema instanceof z.ZodPipe && schema.def.out === durationSchema.def.out);
}

/** Peels optional/default/transform layers off a schema, remembering what they said. */
function unwrap(schema: z.ZodType): Unwrapped {
  let current = schema;
  let optional = false;
  let hasDefault = false;
  let defaultValue: unknown;
  for (;;) {
    if (current instanceof z.ZodOptional || current instanceof z.ZodNullable) {
      optional = true;
      current = current.unwrap() as z.ZodType;
    } else if (current instanceof z.ZodDefault || current instanceof z.ZodPrefault) {
      if (!hasDefault) {
        hasDefault = true;
        defaultValue = current.def.defaultValue;
      }
      current = current.def.innerType as z.ZodType;
    } else if (current instanceof z.ZodPipe && current.def.in instanceof z.ZodTransform) {
      // z.preprocess: the schema after it says what is accepted.
      current = current.def.out as z.ZodType;
    } else if (current instanceof z.ZodPipe && !isDuration(current)) {
      current = current.def.in as z.ZodType;
    } else {
      return { schema: current, optional, hasDefault, defaultValue };
    }
  }
}

/** The zod 4 definition of a check: what it checks, and its bound. */
interface CheckDef {
  check: string;
  value?: unknown;
  inclusive?: boolean;
  minimum?: number;
}

function checksOf(schema: z.ZodType): CheckDef[] {
  return (schema.def.checks ?? []).map((check) => check._zod.def as CheckDef);
}

function numberType(schema: z.ZodNumber): string {
  const base = schema.isInt ? 'integer' : 'number';
  const bounds: string[] = [];
  for (const check of checksOf(schema)) {
    if (check.check === 'greater_than') bounds.push(`${check.inclusive ? '≥' : '>'} ${String(check.value)}`);
    if (check.check === 'less_than') bounds.push(`${check.inclusive ? '≤' : '<'} ${String(check.value)}`);
  }
  return bounds.length > 0 ? `${base} ${bounds.join(', ')}` : base;
}

/** A type a schema states in its meta (acceptedType), under optional layers: what a preprocess accepts. */
function acceptedType(schema: z.ZodType): string | undefined {
  const stated = z.globalRegistry.get(schema)?.acceptedType;
  if (typeof stated === 'string') return stated;
  return schema instanceof z.ZodOptional ? acceptedType(schema.unwrap() as z.ZodType) : undefined;
}

/** A short type name; objects and lists of objects are described by their own rows. */
function typeName(schema: z.ZodType): string {
  const accepted = acceptedType(schema);
  if (accepted !== undefined) return accepted;
  if (isDuration(schema)) return 'duration (`"2s"`, `"500ms"`, `"1m"`, or seconds as a number; at most 10m)';
  const { schema: inner } = unwrap(schema);
  if (isDuration(inner)) return typeName(inner);
  if (inner instanceof z.ZodString) return 'string';
  if (inner instanceof z.ZodNumber) return numberType(inner);
  if (inner instanceof z.ZodBoolean) return 'boolean';
  if (inner instanceof z.ZodLiteral) return JSON.stringify(inner.value);
  if (inner instanceof z.ZodEnum) return (inner.options as string[]).map((value) => JSON.stringify(value)).join(' or ');
  if (inner instanceof z.ZodObject) return 'object';
  if (inner instanceof z.ZodDiscriminatedUnion)
    return `object, one of ${discriminatorName(inner)}: ${discriminatorValues(inner).join(', ')}`;
  if (inner instanceof z.ZodRecord) return `map of string to ${typeName(inner.valueType as z.ZodType)}`;
  if (inner instanceof z.ZodUnion) return (inner.options as z.ZodType[]).map(typeName).join(' or ');
  if (inner instanceof z.ZodArray) {
    const element = typeName(inner.element as z.ZodType);
    const min = checksOf(inner).find((check) => check.check === 'min_length')?.minimum;
    const list = element.includes(' ') ? `list of ${element}` : `${element}[]`;
    return min !== undefined && min > 0 ? `${list}, at least ${min}` : list;
  }
  return inner.def.type;
}

type AnyDiscriminatedUnion = z.ZodDiscriminatedUnion;

function discriminatorName(union: AnyDiscriminatedUnion): string {
  return union.def.discriminator;
}

function unionOptions(union: AnyDiscriminatedUnion): z.ZodObject[] {
  return union.options.filter((option): option is z.ZodObject => option instanceof z.ZodObject);
}

function discriminatorValues(union: AnyDiscriminatedUnion): string[] {
  return unionOptions(union).map((option) => {
    const literal = unwrap(option.shape[union.def.discriminator] as z.ZodType).schema;
    return literal instanceof z.ZodLiteral ? String(literal.value) : '?';
  });
}

function formatDefault(field: Unwrapped, parentOptional: boolean): string {
  if (field.hasDefault) return `\`${JSON.stringify(field.defaultValue)}\``;
  if (field.optional || parentOptional) return 'optional';
  return 'required';
}

function describe(pathText: string): string {
  return DESCRIPTIONS[pathText] ?? GENERIC_DESCRIPTION;
}

function walk(schema: z.ZodType, pathText: string, rows: ConfigReferenceRow[], note: string): void {
  const field = unwrap(schema);
  const inner = field.schema;
  if (pathText !== '') {
    rows.push({
      path: pathText,
      type: typeName(schema) + note,
      default: formatDefault(field, false),
      description: describe(pathText),
    });
  }
  const prefix = pathText === '' ? '' : `${pathText}.`;
  if (inner instanceof z.ZodObject) {
    for (const [key, child] of Object.entries(inner.shape as Record<string, z.ZodType>)) {
      walk(child, `${prefix}${key}`, rows, '');
    }
  } else if (inner instanceof z.ZodArray) {
    const element = unwrap(inner.element as z.ZodType).schema;
    if (element instanceof z.ZodObject || element instanceof z.ZodDiscriminatedUnion) {
      walkChildren(element, `${pathText}[]`, rows);
    }
  } else if (inner instanceof z.ZodDiscriminatedUnion) {
    walkChildren(inner, pathText, rows);
  } else if (inner instanceof z.ZodUnion) {
    // A shorthand beside its long form (consistency: true or an object): the object's fields.
    for (const option of inner.options as z.ZodType[]) {
      const element = unwrap(option).schema;
      if (element instanceof z.ZodObject) walkChildren(element, pathText, rows);
    }
  }
}

/** The fields of an object (or of each variant of a discriminated union) under `pathText`. */
function walkChildren(schema: z.ZodType, pathText: string, rows: ConfigReferenceRow[]): void {
  if (schema instanceof z.ZodObject) {
    for (const [key, child] of Object.entries(schema.shape as Record<string, z.ZodType>)) {
      walk(child, `${pathText}.${key}`, rows, '');
    }
    return;
  }
  if (!(schema instanceof z.ZodDiscriminatedUnion)) return;
  const union = schema;
  const key = union.def.discriminator;
  const values = discriminatorValues(union);
  rows.push({
    path: `${pathText}.${key}`,
    type: values.map((value) => JSON.stringify(value)).join(' or '),
    default: 'required',
    description: describe(`${pathText}.${key}`),
  });
  unionOptions(union).forEach((option, index) => {
    for (const [childKey, child] of Object.entries(option.shape as Record<string, z.ZodType>)) {
      if (childKey === key) continue;
      walk(child, `${pathText}.${childKey}`, rows, ` (${key}: ${values[index] ?? '?'})`);
    }
  });
}

/** One row per config key, in schema order. */
export function configReferenceRows(): ConfigReferenceRow[] {
  const rows: ConfigReferenceRow[] = [];
  walk(guardConfigSchema, '', rows, '');
  return rows;
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** The text that belongs between the markers (without them). */
export function renderConfigReference(): string {
  const lines = [
    '_Generated from the zod schema in `functions/domain/config.ts` by `npx tsx scripts/config-reference.ts`; do not edit by hand._',
    '',
    '| Key | Type | Default | Description |',
    '| --- | --- | --- | --- |',
    ...configReferenceRows().map(
      (row) => `| \`${cell(row.path)}\` | ${cell(row.type)} | ${cell(row.default)} | ${cell(row.description)} |`,
    ),
  ];
  return lines.join('\n');
}

export class ReferenceSectionError extends Error {}

/** Splits a document around the generated section; throws naming the file when a marker is missing. */
export function splitAtMarkers(text: string, source: string): { before: string; section: string; after: string } {
  const start = text.indexOf(START_MARKER);
  const end = text.indexOf(END_MARKER);
  if (start === -1 || end === -1 || end < start) {
    throw new ReferenceSectionError(`${source} has no ${START_MARKER} … ${END_MARKER} section`);
  }
  return {
    before: text.slice(0, start + START_MARKER.length),
    section: text.slice(start + START_MARKER.length, end),
    after: text.slice(end),
  };
}

function normalize(text: string): string {
  return text.replace(/\r\n/g, '\n').trim();
}

export function sectionIsCurrent(document: string, source: string): boolean {
  return normalize(splitAtMarkers(document, source).section) === normalize(renderConfigReference());
}

export function withCurrentSection(document: string, source: string): string {
  const parts = splitAtMarkers(document, source);
  return `${parts.before}\n${renderConfigReference()}\n${parts.after}`;
}

const USAGE = 'usage: config-reference.ts [--check FILE | --write FILE]';

export function main(argv: readonly string[]): number {
  const [mode, file, ...extra] = argv;
  if (mode === undefined) {
    process.stdout.write(`${renderConfigReference()}\n`);
    return 0;
  }
  if (mode === '--help' || mode === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if ((mode !== '--check' && mode !== '--write') || file === undefined || extra.length > 0) {
    process.stderr.write(`config-reference: unexpected arguments ${JSON.stringify(argv)}\n${USAGE}\n`);
    return 2;
  }
  let document: string;
  try {
    document = readFileSync(file, 'utf8');
  } catch (error) {
    process.stderr.write(`config-reference: cannot read ${file}: ${(error as Error).message}\n`);
    return 2;
  }
  try {
    if (mode === '--check') {
      if (sectionIsCurrent(document, file)) return 0;
      process.stderr.write(
        `config-reference: the configuration reference in ${file} differs from the schema in functions/domain/config.ts; ` +
          `run: npx tsx scripts/config-reference.ts --write ${file}\n`,
      );
      return 1;
    }
    writeFileSync(file, withCurrentSection(document, file));
    return 0;
  } catch (error) {
    if (error instanceof ReferenceSectionError) {
      process.stderr.write(`config-reference: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (invokedDirectly) {
  process.exitCode = main(process.argv.slice(2));
}
