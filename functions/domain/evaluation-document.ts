// The Evaluation document: the one thing every writer (CLI, scheduled function, HTTP) produces
// and every reader (webhook cache, stores) consumes. One schema, shared by all of them.
import { z } from 'zod';
import { formatZodIssues } from '../shared/zod-issues.js';

export const SCHEMA_VERSION = 'etcd-guard.io/v1' as const;

/**
 * Additive revisions of the v1 document (a new check, a new field): a newer writer raises it, an
 * older reader still reads the document, and an older writer does not replace it while it is fresh
 * (writeDecision in store.ts). Absent in documents from before revisions were stamped: 1.
 * schemaVersion changes only when an old reader would misjudge a new document (docs/evaluation.md).
 */
export const FORMAT_REVISION = 9;

export const verdictSchema = z.enum(['Healthy', 'Degraded', 'Unhealthy']);
export type Verdict = z.infer<typeof verdictSchema>;

export const checkStatusSchema = z.enum(['pass', 'warn', 'fail']);
export type CheckStatus = z.infer<typeof checkStatusSchema>;

const rfc3339Utc = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/, 'must be an RFC 3339 UTC timestamp ending in Z')
  .refine((value) => !Number.isNaN(Date.parse(value)), 'must be a valid date');

export const memberSchema = z.object({
  /** etcd member id as a decimal string (etcd ids are uint64 and do not fit a JS number). */
  id: z.string(),
  name: z.string(),
  endpoint: z.string(),
  healthy: z.boolean(),
  leader: z.boolean(),
  learner: z.boolean(),
  version: z.string().nullable(),
  dbSizeBytes: z.number().nullable(),
  dbSizeInUseBytes: z.number().nullable(),
  raftIndex: z.number().nullable(),
  raftTerm: z.number().nullable(),
  latencyMs: z.number().nullable(),
  alarms: z.array(z.string()),
  error: z.string().optional(),
  /**
   * Learners only: when its join began as far as known (its Node's or Machine's creation, else when
   * an evaluation first saw it). Carried from one stored evaluation to the next; optional, so
   * documents written before it existed still parse.
   */
  learnerSince: rfc3339Utc.optional(),
  /**
   * The cluster's downgrade as this member reports it (etcd 3.6+ Status `downgradeInfo`; absent
   * for older members). Revision 5.
   */
  downgrade: z.object({ enabled: z.boolean(), targetVersion: z.string() }).optional(),
});
export type MemberReport = z.infer<typeof memberSchema>;

export const clusterSummarySchema = z.object({
  /** Member id of the leader every reachable voting member agrees on, or null. */
  leaderId: z.string().nullable(),
  votingMembers: z.number().int().nonnegative(),
  learners: z.number().int().nonnegative(),
  healthyVoting: z.number().int().nonnegative(),
  quorum: z.number().int().nonnegative(),
  /** Voting members that may still fail before quorum is lost; 0 when it already is. */
  faultTolerance: z.number().int().nonnegative(),
});
export type ClusterSummary = z.infer<typeof clusterSummarySchema>;

/** Check names, in the order they appear in every evaluation. */
export const CHECK_NAMES = [
  'member-list',
  'member-list-agreement',
  'cluster-id',
  'reachable',
  'tls-identity',
  'linearizable-read',
  'watch',
  'leader',
  'quorum',
  'alarms',
  'consistency',
  'learners',
  'db-size',
  'fragmentation',
  'raft-index',
  'version',
  'downgrade',
  'latency',
  'leader-changes',
  'backup',
  'member-count',
  'inventory',
  'node-members',
] as const;
export type CheckName = (typeof CHECK_NAMES)[number];

/** A check name: one of CHECK_NAMES from this writer, any such slug from a newer one. */
const CHECK_NAME_PATTERN = /^[a-z][a-z0-9-]{0,62}$/;

export const checkSchema = z.object({
  name: z.string().regex(CHECK_NAME_PATTERN, 'must be a check name (lower-case letters, digits and dashes)'),
  status: checkStatusSchema,
  message: z.string(),
  /**
   * Set on a result carried from an earlier evaluation (consistency, when this one did not
   * hash): when it was measured. Revision 9; an older reader drops it.
   */
  measuredAt: rfc3339Utc.optional(),
});
export type Check = z.infer<typeof checkSchema>;

const KNOWN_CHECKS: ReadonlySet<string> = new Set(CHECK_NAMES);

/** The document's format revision: 1 when it does not say. */
export function formatRevisionOf(evaluation: Pick<Evaluation, 'formatRevision'>): number {
  return evaluation.formatRevision ?? 1;
}

/**
 * A document from a newer writer as this reader judges it: unknown fields were dropped by the
 * schema; checks this reader does not know are kept and trusted through the writer's verdict, and
 * named in the reasons only when they did not pass, since only then do they explain the verdict.
 */
export function withUnknownChecksExplained(evaluation: Evaluation, known: ReadonlySet<string> = KNOWN_CHECKS): Evaluation {
  const unknown = evaluation.checks.filter((check) => !known.has(check.name) && check.status !== 'pass');
  if (unknown.length === 0) return evaluation;
  const notes = unknown.map(
    (check) => `check ${check.name} (${check.status}) comes from a newer etcd-guard; this reader keeps its verdict`,
  );
  return { ...evaluation, reasons: [...evaluation.reasons, ...notes] };
}

/**
 * The voting size of the last evaluation that got a member list, and when that was: carried from
 * one stored evaluation to the next while none does (a hibernated etcd-druid Etcd answers nothing),
 * so that a wake-up can be told to return to it. Written only by etcd-guard, never read from the
 * guarded object. Revision 2; absent from older documents (then unknown).
 */
export const lastMembershipSchema = z.object({
  votingMembers: z.number().int().positive(),
  evaluatedAt: rfc3339Utc,
});
export type LastMembership = z.infer<typeof lastMembershipSchema>;

/**
 * The etcd cluster ID a discovered target's first evaluation saw, kept from one stored evaluation
 * to the next: a later evaluation that reaches another cluster fails the cluster-id check (a
 * tenant re-pointing its own target at a healthy etcd) until an operator resets it. Revision 4.
 */
export const clusterIdPinSchema = z.object({
  /** Decimal, as etcd's uint64 does not fit a JS number. */
  clusterId: z.string().regex(/^\d{1,20}$/, 'must be a decimal etcd cluster ID'),
  since: rfc3339Utc,
});
export type ClusterIdPin = z.infer<typeof clusterIdPinSchema>;

export const evaluationSchema = z
  .object({
    schemaVersion: z.literal(SCHEMA_VERSION),
    formatRevision: z.number().int().positive().optional(),
    target: z.string().min(1),
    evaluatedAt: rfc3339Utc,
    durationMs: z.number().nonnegative(),
    verdict: verdictSchema,
    passed: z.boolean(),
    reasons: z.array(z.string()),
    cluster: clusterSummarySchema,
    members: z.array(memberSchema),
    checks: z.array(checkSchema),
    lastMembership: lastMembershipSchema.optional(),
    clusterIdPin: clusterIdPinSchema.optional(),
  })
  .refine((doc) => doc.passed === (doc.verdict !== 'Unhealthy'), {
    message: 'passed must be true exactly when verdict is Healthy or Degraded',
    path: ['passed'],
  });
export type Evaluation = z.infer<typeof evaluationSchema>;

/** Majority of the voting members; learners never count. */
export function quorumOf(votingMembers: number): number {
  return Math.floor(votingMembers / 2) + 1;
}

/**
 * Checks about what surrounds etcd rather than etcd serving: their failure degrades the verdict
 * and never makes it Unhealthy (a failing backup leaves etcd serving; whether it holds changes
 * back is the webhook's configured rule, backup.requiredForChanges).
 */
export const DEGRADING_ONLY_CHECKS: ReadonlySet<string> = new Set<CheckName>(['backup']);

export function verdictFromChecks(checks: readonly Check[]): Verdict {
  if (checks.some((check) => check.status === 'fail' && !DEGRADING_ONLY_CHECKS.has(check.name))) return 'Unhealthy';
  if (checks.some((check) => check.status !== 'pass')) return 'Degraded';
  return 'Healthy';
}

export class EvaluationParseError extends Error {
  constructor(
    readonly source: string,
    readonly issues: string[],
  ) {
    super(`${source} is not a valid etcd-guard evaluation: ${issues.join('; ')}`);
    this.name = 'EvaluationParseError';
  }
}

/** Parses untrusted JSON text into an Evaluation; the error names the source and each bad field. */
export function parseEvaluationJson(text: string, source: string): Evaluation {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    // JSON.parse quotes the text around the error; the file may be a link to a secret, so only say where.
    const position = /position (\d+)/.exec((error as Error).message)?.[1];
    throw new EvaluationParseError(source, [
      `not JSON (${position !== undefined ? `syntax error at character ${position}` : /end of JSON/.test((error as Error).message) ? 'cut short' : 'malformed'}, ${text.length} characters)`,
    ]);
  }
  const result = evaluationSchema.safeParse(raw);
  if (!result.success) {
    throw new EvaluationParseError(source, formatZodIssues(result.error, { untrusted: true, maxIssues: 5 }));
  }
  return withUnknownChecksExplained(result.data);
}

/** A few targets' timestamps: bounded, since a long-running webhook sees a new one per evaluation. */
const PARSED_KEPT = 256;
const parsedEvaluatedAt = new Map<string, number>();

/**
 * Date.parse of an evaluation's evaluatedAt, remembered per string: an admission request reads
 * its evaluation's age several times (freshness, decision, audit), each a parse. Only UTC ("Z")
 * stamps are kept, the stored format; any other text is parsed each time, as it depends on TZ.
 */
export function evaluatedAtMs(evaluatedAt: string): number {
  const known = parsedEvaluatedAt.get(evaluatedAt);
  if (known !== undefined) return known;
  const parsed = Date.parse(evaluatedAt);
  if (evaluatedAt.endsWith('Z')) {
    if (parsedEvaluatedAt.size >= PARSED_KEPT) parsedEvaluatedAt.clear();
    parsedEvaluatedAt.set(evaluatedAt, parsed);
  }
  return parsed;
}

/** Milliseconds since the epoch of a Date or of such a number (a caller without a Date need not make one). */
export function epochMs(now: Date | number): number {
  return typeof now === 'number' ? now : now.getTime();
}

/** Age of an evaluation in whole milliseconds at `now`; never negative (clock skew clamps to 0). */
export function evaluationAgeMs(evaluation: Pick<Evaluation, 'evaluatedAt'>, now: Date | number): number {
  return Math.max(0, epochMs(now) - evaluatedAtMs(evaluation.evaluatedAt));
}
