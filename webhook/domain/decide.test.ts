// The webhook's pure core over real AdmissionReview fixtures (test/fixtures/admission/*.json):
// parse → classify → decide, for every fixture × evaluation state, plus the rules underneath
// (change detection, target matching, review parsing).
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { guardConfigSchema, type GuardConfig } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { classifyRequest } from './classify.js';
import type { AdmissionRequest, Classification, Decision } from './contract.js';
import { decide } from './decide.js';
import { MAX_MESSAGE_LENGTH, MAX_WARNING_LENGTH, MAX_WARNINGS } from './respond.js';
import { detectGuardedChange, escapePointerToken } from './detect-change.js';
import { buildAdmissionReviewResponse, parseAdmissionReview } from './review.js';
import type { GuardedPointer } from './rules.js';
import { makeEvaluation, makeMember, makeMembers } from '../../test/harness/evaluation-fixture.js';
import { admissionFixture, parsedRequest } from '../../test/harness/reviews.js';

const FIXTURE_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../test/fixtures', 'admission');
const NOW = new Date('2026-11-30T02:00:00.000Z');

function loadFixture(name: string): AdmissionRequest {
  return parsedRequest(admissionFixture(name));
}

function makeConfig(overrides: Record<string, unknown> = {}): GuardConfig {
  return guardConfigSchema.parse({
    maxAgeSeconds: 60,
    targets: [
      { name: 'etcd-sts', endpoints: ['https://127.0.0.1:2379'], match: { namespaces: ['etcd'], names: ['etcd'] } },
      { name: 'prod', endpoints: ['https://127.0.0.1:12379'], match: {} },
    ],
    ...overrides,
  });
}

const secondsBefore = (seconds: number) => new Date(NOW.getTime() - seconds * 1000).toISOString();

const EVALUATIONS: Record<string, Evaluation | null> = {
  healthy: makeEvaluation({ evaluatedAt: secondsBefore(12) }),
  degraded: makeEvaluation({
    evaluatedAt: secondsBefore(12),
    verdict: 'Degraded',
    reasons: ['member etcd-1 DB size 1.7 GiB is 85% of the 2 GiB quota'],
    checks: [{ name: 'db-size', status: 'warn', message: 'member etcd-1 DB size 1.7 GiB is 85% of the 2 GiB quota' }],
  }),
  unhealthy: makeEvaluation({
    evaluatedAt: secondsBefore(12),
    verdict: 'Unhealthy',
    members: [makeMember(0), makeMember(1), makeMember(2, { healthy: false, error: 'deadline exceeded after 2000ms' })],
    reasons: ['member etcd-2 (https://127.0.0.1:2399) unreachable: deadline exceeded after 2000ms'],
    checks: [{ name: 'reachable', status: 'fail', message: 'member etcd-2 unreachable' }],
  }),
  stale: makeEvaluation({ evaluatedAt: secondsBefore(200) }),
  missing: null,
};
type EvaluationState = keyof typeof EVALUATIONS;
const STATES = Object.keys(EVALUATIONS) as EvaluationState[];

interface GuardedFixture {
  file: string;
  target: string;
  change: Record<string, unknown>;
  /** Which evaluation states allow the change. */
  allowedIn: EvaluationState[];
  /** Result label when allowed in that state (defaults to 'allowed'). */
  overriddenIn?: EvaluationState[];
}

const GUARDED: GuardedFixture[] = [
  {
    file: 'kcp-scale-up-3-to-5.json',
    target: 'prod',
    change: { kind: 'scale-up', from: 3, to: 5 },
    allowedIn: ['healthy', 'degraded'],
  },
  {
    file: 'kcp-scale-up-dry-run.json',
    target: 'prod',
    change: { kind: 'scale-up', from: 3, to: 5 },
    allowedIn: ['healthy', 'degraded'],
  },
  {
    file: 'kcp-scale-down-3-to-2.json',
    target: 'prod',
    change: { kind: 'scale-down', from: 3, to: 2 },
    allowedIn: ['healthy', 'degraded'],
  },
  {
    file: 'kcp-v1beta1-edit-version.json',
    target: 'prod',
    change: { kind: 'rollout', replicas: 3, changedPaths: ['/spec/version'] },
    allowedIn: ['healthy', 'degraded'],
  },
  {
    file: 'kcp-v1beta2-edit-version.json',
    target: 'prod',
    change: { kind: 'rollout', replicas: 3, changedPaths: ['/spec/machineTemplate', '/spec/version'] },
    allowedIn: ['healthy', 'degraded'],
  },
  {
    file: 'etcd-druid-replicas-3-to-5.json',
    target: 'prod',
    change: { kind: 'scale-up', from: 3, to: 5 },
    allowedIn: ['healthy', 'degraded'],
  },
  {
    file: 'statefulset-scale-3-to-4.json',
    target: 'etcd-sts',
    change: { kind: 'scale-up', from: 3, to: 4 },
    allowedIn: ['healthy', 'degraded'],
  },
  {
    file: 'kcp-override-scale-down.json',
    target: 'prod',
    change: { kind: 'scale-down', from: 3, to: 2 },
    allowedIn: ['healthy', 'degraded', 'unhealthy', 'stale', 'missing'],
    overriddenIn: ['unhealthy', 'stale', 'missing'],
  },
];

function needsEvaluation(classification: Classification): Extract<Classification, { kind: 'needs-evaluation' }> {
  if (classification.kind !== 'needs-evaluation')
    throw new Error(`expected needs-evaluation, got ${JSON.stringify(classification)}`);
  return classification;
}

function run(request: AdmissionRequest, state: EvaluationState, config = makeConfig()): Decision {
  const classification = needsEvaluation(classifyRequest(request, config));
  return decide({ request, config, classification, evaluation: EVALUATIONS[state] ?? null, now: NOW });
}

describe('fixtures are real AdmissionReviews', () => {
  it('every fixture parses and carries the fields the apiserver sends', () => {
    const files = readdirSync(FIXTURE_DIR).filter((file) => file.endsWith('.json'));
    expect(files.length).toBeGreaterThanOrEqual(11);
    for (const file of files) {
      const request = loadFixture(file);
      expect(request.uid, file).toMatch(/^[0-9a-f-]{36}$/);
      expect(request.userInfo.username, file).toBeTruthy();
      expect(request.requestKind, file).toBeDefined();
      expect(request.options, file).toBeDefined();
      const present = request.object ?? request.oldObject;
      expect(present, file).toMatchObject({ metadata: { uid: expect.any(String) as unknown } });
    }
  });
});

describe('classifyRequest', () => {
  it.each(GUARDED)('$file needs an evaluation of target $target', ({ file, target, change }) => {
    const classification = needsEvaluation(classifyRequest(loadFixture(file), makeConfig()));
    expect(classification.target.name).toBe(target);
    expect(classification.change).toEqual(change);
  });

  it.each([
    ['kcp-label-only.json', 'no-guarded-change'],
    ['kcp-create.json', 'create'],
    ['kcp-delete.json', 'delete'],
  ])('%s is allowed without an evaluation (%s)', (file, reason) => {
    expect(classifyRequest(loadFixture(file), makeConfig())).toEqual({ kind: 'allow', reason });
  });

  it('allows a status-only or unrelated-spec change of a KCP', () => {
    const request = loadFixture('kcp-v1beta1-edit-version.json');
    const object = structuredClone(request.oldObject) as { status: { readyReplicas: number }; spec: Record<string, unknown> };
    object.status.readyReplicas = 2;
    object.spec.remediationStrategy = { maxRetry: 5 };
    expect(classifyRequest({ ...request, object }, makeConfig())).toEqual({ kind: 'allow', reason: 'no-guarded-change' });
  });

  it('allows a StatefulSet that no target names, whatever it changes', () => {
    const request = loadFixture('statefulset-scale-3-to-4.json');
    expect(classifyRequest({ ...request, name: 'other' }, makeConfig())).toEqual({ kind: 'allow', reason: 'not-guarded' });
  });

  it('allows the status subresource and other groups', () => {
    const request = loadFixture('kcp-scale-up-3-to-5.json');
    expect(classifyRequest({ ...request, subResource: 'status' }, makeConfig()).kind).toBe('allow');
    expect(
      classifyRequest({ ...request, resource: { group: 'apps', version: 'v1', resource: 'deployments' } }, makeConfig()).kind,
    ).toBe('allow');
  });

  it('denies a guarded change that no target matches, naming the object', () => {
    const config = makeConfig({
      targets: [{ name: 'other', endpoints: ['https://127.0.0.1:2379'], match: { namespaces: ['elsewhere'] } }],
    });
    const classification = classifyRequest(loadFixture('kcp-scale-up-3-to-5.json'), config);
    expect(classification).toMatchObject({ kind: 'deny', reason: 'no-target' });
    expect(classification.kind === 'deny' && classification.message).toContain(
      'no etcd-guard target matches KubeadmControlPlane default/prod-control-plane',
    );
  });

  it('denies a /scale request when a label-selecting target cannot be ruled out (fails closed)', () => {
    const config = makeConfig({
      targets: [
        { name: 'by-cluster', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'prod' } },
        { name: 'catch-all', endpoints: ['https://127.0.0.1:2379'], match: {} },
      ],
    });
    const classification = classifyRequest(loadFixture('kcp-scale-up-3-to-5.json'), config);
    expect(classification.kind === 'deny' && classification.message).toMatch(
      /target by-cluster: a \/scale request carries no labels/,
    );
    // The same change on the parent object carries labels, so the label target matches.
    expect(needsEvaluation(classifyRequest(loadFixture('kcp-override-scale-down.json'), config)).target.name).toBe('by-cluster');
  });

  it('first matching target wins', () => {
    const config = makeConfig({
      targets: [
        { name: 'first', endpoints: ['https://127.0.0.1:2379'], match: { namespaces: ['default'] } },
        { name: 'second', endpoints: ['https://127.0.0.1:2379'], match: {} },
      ],
    });
    expect(needsEvaluation(classifyRequest(loadFixture('kcp-scale-up-3-to-5.json'), config)).target.name).toBe('first');
  });

  it('denies a guarded change whose label edit moves the object to another target', () => {
    const config = makeConfig({
      targets: [
        { name: 'strict', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'prod' } },
        { name: 'lenient', endpoints: ['https://127.0.0.1:2379'], match: {} },
      ],
    });
    const request = loadFixture('kcp-v1beta1-edit-version.json');
    const object = structuredClone(request.object) as { metadata: { labels: Record<string, string> } };
    object.metadata.labels['cluster.x-k8s.io/cluster-name'] = 'something-else';
    const classification = classifyRequest({ ...request, object }, config);
    expect(classification.kind === 'deny' && classification.message).toMatch(/from target strict to target lenient/);
  });

  it('treats replicas and template changed together as a rollout that also scales', () => {
    const request = loadFixture('kcp-v1beta2-edit-version.json');
    const object = structuredClone(request.object) as { spec: { replicas: number } };
    object.spec.replicas = 1;
    const classification = needsEvaluation(classifyRequest({ ...request, object }, makeConfig()));
    expect(classification.change).toMatchObject({ kind: 'rollout', replicas: 1, previousReplicas: 3 });
  });

  it('denies, naming the value, when replicas is not a number', () => {
    const request = loadFixture('kcp-scale-up-3-to-5.json');
    const object = structuredClone(request.object) as { spec: { replicas: unknown } };
    object.spec.replicas = 'five';
    const classification = classifyRequest({ ...request, object }, makeConfig());
    expect(classification.kind === 'deny' && classification.message).toContain('"five"');
  });
});

describe('decide over fixtures × evaluation states', () => {
  const rows = GUARDED.flatMap((fixture) =>
    STATES.map((state) => ({ ...fixture, state, allowed: fixture.allowedIn.includes(state) })),
  );
  it.each(rows)('$file with a $state evaluation → allowed $allowed', ({ file, state, allowed, target, overriddenIn }) => {
    const request = loadFixture(file);
    const decision = run(request, state);
    const { response } = decision;
    expect(response.uid).toBe(request.uid);
    expect(response.allowed).toBe(allowed);
    for (const warning of response.warnings ?? []) {
      expect(warning.length).toBeLessThanOrEqual(MAX_WARNING_LENGTH);
      expect(warning).not.toMatch(/[\r\n]/);
    }
    if (allowed) {
      expect(response.status).toBeUndefined();
      expect(decision.result).toBe(overriddenIn?.includes(state) ? 'overridden' : 'allowed');
      if (state === 'degraded') expect(response.warnings?.join(' | ')).toContain('85% of the 2 GiB quota');
      return;
    }
    expect(decision.result).toBe('denied');
    expect(response.status?.code).toBe(403);
    expect(response.status?.reason).toBe('Forbidden');
    const message = response.status?.message ?? '';
    expect(message).not.toMatch(/[\r\n]/);
    expect(message).toContain(target);
    expect(message).toContain(
      `to override, annotate with etcd-guard.io/override=<reason> (needs RBAC verb override on targets.etcd-guard.io ${target}, or membership in system:masters`,
    );
    if (state === 'missing') expect(message).toContain(`no fresh etcd evaluation for ${target} (none stored)`);
    if (state === 'stale') expect(message).toContain(`no fresh etcd evaluation for ${target} (age 200s, max 60s)`);
    if (state === 'unhealthy') {
      expect(message).toContain('verdict Unhealthy');
      expect(message).toContain('evaluated 12s ago');
      expect(message).toContain('member etcd-2');
    }
    expect(decision.reason).toBe(state);
  });

  it('gives a dryRun request the same decision as the real one', () => {
    const real = loadFixture('kcp-scale-up-3-to-5.json');
    const dry = loadFixture('kcp-scale-up-dry-run.json');
    expect(dry.dryRun).toBe(true);
    for (const state of STATES) {
      const a = run(real, state);
      const b = run(dry, state);
      expect({ ...b.response, uid: real.uid }).toEqual(a.response);
    }
  });

  it('appends the refresh note to a stale denial', () => {
    const request = loadFixture('kcp-scale-up-3-to-5.json');
    const config = makeConfig();
    const decision = decide({
      request,
      config,
      classification: needsEvaluation(classifyRequest(request, config)),
      evaluation: EVALUATIONS.stale ?? null,
      now: NOW,
      refreshNote: 'inline refresh skipped: apiserver budget 0.8s',
    });
    expect(decision.response.status?.message).toMatch(/\(age 200s, max 60s\); inline refresh skipped: apiserver budget 0\.8s/);
  });

  describe('issue 27: what the decision rests on', () => {
    const request = loadFixture('kcp-scale-up-3-to-5.json');
    const config = makeConfig();
    const classification = needsEvaluation(classifyRequest(request, config));
    const onEvidence = (evaluation: Evaluation | null, evidence: Parameters<typeof decide>[0]['evidence']) =>
      decide({ request, config, classification, evaluation, now: NOW, ...(evidence === undefined ? {} : { evidence }) });

    it.each([
      ['live evidence: no warning, annotated live with its age', { kind: 'live' as const }, true, null, 'live'],
      [
        'cached evidence within maxAgeSeconds: allowed, warning naming its age',
        { kind: 'cached' as const, why: 'the target is configured with decision: cached', decisionMaxAgeMs: 1_000 },
        true,
        /decided on the cached evaluation of prod, 12s old \(12000 ms\), not on a live one/,
        'cached',
      ],
      [
        'a live evaluation that failed: denied, nothing older stands in',
        { kind: 'failed' as const, why: 'live evaluation failed: timed out' },
        false,
        null,
        'failed',
      ],
    ])('%s', (_name, evidence, allowed, warning, annotated) => {
      const decision = onEvidence(EVALUATIONS.healthy ?? null, evidence);
      expect(decision.response.allowed).toBe(allowed);
      const warnings = (decision.response.warnings ?? []).join(' ');
      if (warning === null) expect(warnings).not.toMatch(/cached evaluation/);
      else expect(warnings).toMatch(warning);
      expect(decision.response.auditAnnotations).toMatchObject({ evidence: annotated, 'evidence-age-ms': '12000' });
      if (!allowed) {
        expect(decision.reason).toBe('no-live-evaluation');
        expect(decision.response.status?.message).toMatch(
          /^no fresh etcd evaluation for prod \(live evaluation failed: timed out\)/,
        );
      }
    });

    it('cached evidence older than maxAgeSeconds is denied in the usual form, saying why no live one ran', () => {
      const decision = onEvidence(EVALUATIONS.stale ?? null, {
        kind: 'cached',
        why: 'the target is configured with decision: cached',
        decisionMaxAgeMs: 1_000,
      });
      expect(decision.response.allowed).toBe(false);
      expect(decision.response.status?.message).toMatch(
        /^no fresh etcd evaluation for prod \(age 200s, max 60s\); the target is configured with decision: cached/,
      );
    });

    it('an override on cached evidence keeps its own annotations and gains the evidence ones', () => {
      const override = loadFixture('kcp-override-scale-down.json');
      const decision = decide({
        request: override,
        config,
        classification: needsEvaluation(classifyRequest(override, config)),
        evaluation: EVALUATIONS.unhealthy ?? null,
        now: NOW,
        evidence: { kind: 'cached', why: 'no live evaluation: no slot', decisionMaxAgeMs: 1_000 },
      });
      expect(decision.result).toBe('overridden');
      expect(decision.response.auditAnnotations).toMatchObject({
        evidence: 'cached',
        'override-user': expect.any(String) as unknown,
      });
      expect(decision.response.warnings?.[0]).toMatch(/^etcd-guard: decided on the cached evaluation/);
      for (const line of decision.response.warnings ?? []) expect(line.length).toBeLessThanOrEqual(MAX_WARNING_LENGTH);
      expect(decision.response.warnings?.length).toBeLessThanOrEqual(MAX_WARNINGS);
    });
  });

  it('lets an operator remove a dead member from 5, warning which member is unhealthy', () => {
    const request = loadFixture('kcp-scale-down-3-to-2.json');
    const object = structuredClone(request.object) as { spec: { replicas: number } };
    const oldObject = structuredClone(request.oldObject) as { spec: { replicas: number } };
    oldObject.spec.replicas = 5;
    object.spec.replicas = 4;
    const members = makeMembers(5);
    members[4] = makeMember(4, { healthy: false, error: 'connection refused' });
    const evaluation = makeEvaluation({
      evaluatedAt: secondsBefore(5),
      verdict: 'Unhealthy',
      members,
      reasons: ['member etcd-4 unreachable'],
    });
    const config = makeConfig();
    const scaled = { ...request, object, oldObject };
    const decision = decide({
      request: scaled,
      config,
      classification: needsEvaluation(classifyRequest(scaled, config)),
      evaluation,
      now: NOW,
    });
    expect(decision.response.allowed).toBe(true);
    expect(decision.response.warnings?.join(' | ')).toContain('unhealthy etcd members: etcd-4');
  });

  it('records an override by an allowed group in warnings and audit annotations', () => {
    const decision = run(loadFixture('kcp-override-scale-down.json'), 'unhealthy');
    expect(decision).toMatchObject({ result: 'overridden', reason: 'override' });
    expect(decision.response.warnings?.[0]).toBe('etcd-guard override by sre-oncall: INC-4711 remove dead member etcd-2');
    expect(decision.response.auditAnnotations).toMatchObject({
      'override-user': 'sre-oncall',
      'override-reason': 'INC-4711 remove dead member etcd-2',
    });
  });

  it('denies an override by a user outside the override groups, even when etcd is healthy', () => {
    const request = loadFixture('kcp-override-scale-down.json');
    const intruder = { ...request, userInfo: { username: 'dev-jane', groups: ['developers', 'system:authenticated'] } };
    for (const state of STATES) {
      const decision = run(intruder, state);
      expect(decision.response.allowed).toBe(false);
      expect(decision.reason).toBe('forbidden-override');
      expect(decision.response.status?.message).toContain('user dev-jane is not allowed to override');
    }
  });

  it('ignores an override annotation left over from an earlier change', () => {
    const request = loadFixture('kcp-override-scale-down.json');
    const oldObject = structuredClone(request.oldObject) as { metadata: { annotations?: Record<string, string> } };
    oldObject.metadata.annotations = { 'etcd-guard.io/override': 'INC-4711 remove dead member etcd-2' };
    const decision = run({ ...request, oldObject }, 'unhealthy');
    expect(decision.response.allowed).toBe(false);
    expect(decision.reason).toBe('unhealthy');
  });

  it('does not take an evaluation stamped far in the future as fresh', () => {
    const request = loadFixture('kcp-scale-up-3-to-5.json');
    const config = makeConfig();
    const evaluation = makeEvaluation({ evaluatedAt: new Date(NOW.getTime() + 3600_000).toISOString() });
    const decision = decide({
      request,
      config,
      classification: needsEvaluation(classifyRequest(request, config)),
      evaluation,
      now: NOW,
    });
    expect(decision.response.allowed).toBe(false);
    expect(decision.response.status?.message).toContain('evaluated 3600s in the future');
  });

  it('counts surplus etcd members when an object scales down mid-rollout', () => {
    const request = loadFixture('kcp-scale-down-3-to-2.json');
    const config = makeConfig();
    // etcd has 4 voting members (a rollout surged one), one of them not started yet.
    const members = makeMembers(4);
    members[3] = makeMember(3, { healthy: false });
    const evaluation = makeEvaluation({
      evaluatedAt: secondsBefore(1),
      verdict: 'Unhealthy',
      members,
      reasons: ['member etcd-3 not started'],
    });
    const decision = decide({
      request,
      config,
      classification: needsEvaluation(classifyRequest(request, config)),
      evaluation,
      now: NOW,
    });
    // Down to 2 from 4 with 3 healthy: removing two healthy members leaves 1 of 2, below quorum.
    expect(decision.response.allowed).toBe(false);
    expect(decision.response.status?.message).toContain('below quorum 2');
  });

  it('keeps the denial to the top three reasons on one line', () => {
    const request = loadFixture('kcp-scale-up-3-to-5.json');
    const config = makeConfig();
    const evaluation = makeEvaluation({
      evaluatedAt: secondsBefore(3),
      verdict: 'Unhealthy',
      members: [makeMember(0), makeMember(1, { healthy: false }), makeMember(2, { healthy: false })],
      reasons: ['member etcd-1 unreachable\nsecond line', 'member etcd-2 unreachable', 'quorum lost', 'no leader'],
    });
    const decision = decide({
      request,
      config,
      classification: needsEvaluation(classifyRequest(request, config)),
      evaluation,
      now: NOW,
    });
    const message = decision.response.status?.message ?? '';
    expect(message).not.toMatch(/\n/);
    // What is left out is not lost: the message says where every reason can be read.
    expect(message).toMatch(/\(\+\d+ more: all in the evaluation, GET \/evaluations\/(\S+) or ConfigMap etcd-guard-\1\)/);
    expect(message).not.toContain('no leader');
  });
});

describe('issue 11: guarded changes that used to be allowed', () => {
  const decideWith = (request: AdmissionRequest, evaluation: Evaluation | null, config = makeConfig()): Decision =>
    decide({ request, config, classification: needsEvaluation(classifyRequest(request, config)), evaluation, now: NOW });

  it('reads a Scale without spec.replicas (omitempty) as 0 and denies scaling etcd to 0', () => {
    const request = loadFixture('kcp-scale-to-0-omitted-replicas.json');
    expect(request.object).toMatchObject({ kind: 'Scale', spec: {} });
    const classification = needsEvaluation(classifyRequest(request, makeConfig()));
    expect(classification.change).toEqual({ kind: 'scale-down', from: 3, to: 0 });
    const decision = decideWith(request, EVALUATIONS.healthy ?? null);
    expect(decision.response.allowed).toBe(false);
    expect(decision.response.status?.message).toContain('scale down from 3 to 0 replicas');
  });

  const withSpec = (file: string, edit: (spec: Record<string, unknown>) => void): AdmissionRequest => {
    const request = loadFixture(file);
    const object = structuredClone(request.oldObject) as { spec: Record<string, unknown> };
    edit(object.spec);
    return { ...request, object };
  };
  it.each([
    [
      'KCP v1beta1 spec.rolloutBefore',
      'kcp-v1beta1-edit-version.json',
      '/spec/rolloutBefore',
      (spec: Record<string, unknown>) => {
        spec.rolloutBefore = { certificatesExpiryDays: 21 };
      },
    ],
    [
      'druid spec.labels',
      'etcd-druid-replicas-3-to-5.json',
      '/spec/labels',
      (spec: Record<string, unknown>) => {
        spec.labels = { ...(spec.labels as object), team: 'b' };
      },
    ],
    [
      'druid spec.annotations',
      'etcd-druid-replicas-3-to-5.json',
      '/spec/annotations',
      (spec: Record<string, unknown>) => {
        spec.annotations = { 'a.io/x': 'y' };
      },
    ],
    [
      'druid spec.schedulingConstraints',
      'etcd-druid-replicas-3-to-5.json',
      '/spec/schedulingConstraints',
      (spec: Record<string, unknown>) => {
        spec.schedulingConstraints = { affinity: { podAntiAffinity: {} } };
      },
    ],
    [
      'druid spec.priorityClassName',
      'etcd-druid-replicas-3-to-5.json',
      '/spec/priorityClassName',
      (spec: Record<string, unknown>) => {
        spec.priorityClassName = 'critical';
      },
    ],
    [
      'druid spec.sharedConfig',
      'etcd-druid-replicas-3-to-5.json',
      '/spec/sharedConfig',
      (spec: Record<string, unknown>) => {
        spec.sharedConfig = { autoCompactionMode: 'revision' };
      },
    ],
    [
      'StatefulSet spec.ordinals',
      'statefulset-edit-ordinals.json',
      '/spec/ordinals',
      (spec: Record<string, unknown>) => {
        spec.ordinals = { start: 1 };
      },
    ],
  ])('guards a rollout through %s: denied while Unhealthy, allowed while Healthy', (_name, file, pointer, edit) => {
    const request = withSpec(file, edit);
    const classification = needsEvaluation(classifyRequest(request, makeConfig()));
    expect(classification.change).toMatchObject({ kind: 'rollout', changedPaths: [pointer] });
    expect(decideWith(request, EVALUATIONS.unhealthy ?? null).response.allowed).toBe(false);
    expect(decideWith(request, EVALUATIONS.healthy ?? null).response.allowed).toBe(true);
  });

  it.each([
    [
      'KCP v1beta1 spec.remediationStrategy',
      'kcp-v1beta1-edit-version.json',
      (spec: Record<string, unknown>) => {
        spec.remediationStrategy = { maxRetry: 3 };
      },
    ],
    [
      'KCP v1beta2 spec.machineNaming',
      'kcp-v1beta2-edit-version.json',
      (spec: Record<string, unknown>) => {
        spec.machineNaming = { template: '{{ .kubeadmControlPlane.name }}-{{ .random }}' };
      },
    ],
    [
      'StatefulSet spec.minReadySeconds',
      'statefulset-edit-ordinals.json',
      (spec: Record<string, unknown>) => {
        spec.minReadySeconds = 30;
      },
    ],
    [
      'StatefulSet spec.revisionHistoryLimit',
      'statefulset-edit-ordinals.json',
      (spec: Record<string, unknown>) => {
        spec.revisionHistoryLimit = 3;
      },
    ],
  ])('allows a change of the harmless child %s without an evaluation', (_name, file, edit) => {
    expect(classifyRequest(withSpec(file, edit), makeConfig())).toEqual({ kind: 'allow', reason: 'no-guarded-change' });
  });

  const relabelConfig = (withCatchAll: boolean) =>
    makeConfig({
      targets: [
        { name: 'strict', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'prod' } },
        ...(withCatchAll ? [{ name: 'lenient', endpoints: ['https://127.0.0.1:2379'], match: {} }] : []),
      ],
    });
  const relabel = (labels: Record<string, string>): AdmissionRequest => {
    const request = loadFixture('kcp-v1beta1-edit-version.json');
    const object = structuredClone(request.oldObject) as { metadata: { labels: Record<string, string> } };
    object.metadata.labels = labels;
    return { ...request, object };
  };
  it.each([
    ['to another target', true, 'lenient'],
    ['out of every target', false, null],
  ])('judges a label edit that moves a KCP %s against the target it leaves', (_name, withCatchAll, to) => {
    const config = relabelConfig(withCatchAll);
    const request = relabel({ team: 'x' });
    const classification = needsEvaluation(classifyRequest(request, config));
    expect(classification.target.name).toBe('strict');
    expect(classification.change).toEqual({ kind: 'retarget', to });
    const denied = decideWith(request, EVALUATIONS.unhealthy ?? null, config);
    expect(denied.response.allowed).toBe(false);
    expect(denied.response.status?.message).toContain('target strict verdict Unhealthy');
    expect(denied.response.status?.message).not.toMatch(/separate|separately/);
    expect(decideWith(request, EVALUATIONS.stale ?? null, config).response.allowed).toBe(false);
    expect(decideWith(request, EVALUATIONS.healthy ?? null, config).response.allowed).toBe(true);
  });

  it('allows labelling an object that matched no target into one (onboarding), and relabels within one target', () => {
    const config = makeConfig({
      targets: [{ name: 'strict', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'prod' } }],
    });
    const request = loadFixture('kcp-v1beta1-edit-version.json');
    const oldObject = structuredClone(request.oldObject) as { metadata: { labels: Record<string, string> } };
    oldObject.metadata.labels = {};
    const object = structuredClone(request.oldObject) as { metadata: { labels: Record<string, string> } };
    expect(classifyRequest({ ...request, oldObject, object }, config)).toEqual({ kind: 'allow', reason: 'no-guarded-change' });
    object.metadata.labels.extra = 'yes';
    expect(classifyRequest({ ...request, object }, config)).toEqual({ kind: 'allow', reason: 'no-guarded-change' });
  });

  it('denies a guarded change that also moves the object, without suggesting a separate label change', () => {
    const request = loadFixture('kcp-v1beta1-edit-version.json');
    const object = structuredClone(request.object) as { metadata: { labels: Record<string, string> } };
    object.metadata.labels = { team: 'x' };
    const classification = classifyRequest({ ...request, object }, relabelConfig(true));
    expect(classification).toMatchObject({ kind: 'deny', reason: 'moves-target' });
    expect(classification.kind === 'deny' && classification.message).not.toMatch(/separate/);
  });

  it.each([
    [2147483647, 'is more than the 100 replicas'],
    [2 ** 53 + 1, 'is more than the 100 replicas'],
    [2 ** 63, 'is more than the 100 replicas'],
    ['9223372036854775808', 'is not a non-negative integer (got "9223372036854775808")'],
    ['5', 'is not a non-negative integer (got "5")'],
    [-1, 'is not a non-negative integer (got -1)'],
    [2.5, 'is not a non-negative integer (got 2.5)'],
  ])('denies replicas %j at once, before any projection', (replicas, text) => {
    const request = loadFixture('kcp-scale-up-3-to-5.json');
    const object = structuredClone(request.object) as { spec: { replicas: unknown } };
    object.spec.replicas = replicas;
    const classification = classifyRequest({ ...request, object }, makeConfig());
    expect(classification).toMatchObject({ kind: 'deny', reason: 'invalid' });
    expect(classification.kind === 'deny' && classification.message).toContain(
      `object spec.replicas ${typeof replicas === 'number' && replicas > 100 ? JSON.stringify(replicas) + ' ' : ''}${text}`,
    );
  });

  it('does not count an evaluation stamped beyond the clock-skew allowance as fresh', () => {
    const request = loadFixture('kcp-scale-up-3-to-5.json');
    const ahead = (seconds: number) => makeEvaluation({ evaluatedAt: new Date(NOW.getTime() + seconds * 1000).toISOString() });
    expect(decideWith(request, ahead(3)).response.allowed).toBe(true);
    const decision = decideWith(request, ahead(100));
    expect(decision.response.allowed).toBe(false);
    expect(decision.response.status?.message).toContain('evaluated 100s in the future; clock skew?');
  });

  it('caps what a stored evaluation can put into a denial and into warnings', () => {
    const request = loadFixture('kcp-scale-up-3-to-5.json');
    const huge = 'x'.repeat(100_000);
    const unhealthy = makeEvaluation({ evaluatedAt: secondsBefore(1), verdict: 'Unhealthy', reasons: [huge, huge + 'y'] });
    const message = decideWith(request, unhealthy).response.status?.message ?? '';
    expect(message.length).toBeLessThanOrEqual(MAX_MESSAGE_LENGTH);
    const degraded = makeEvaluation({
      evaluatedAt: secondsBefore(1),
      verdict: 'Degraded',
      reasons: Array.from({ length: 5000 }, (_unused, index) => `reason ${index}`),
    });
    const warnings = decideWith(request, degraded).response.warnings ?? [];
    expect(warnings.length).toBeLessThanOrEqual(MAX_WARNINGS);
    expect(warnings.at(-1)).toMatch(
      /^\(\+\d+ more warnings: all in the evaluation, GET \/evaluations\/\S+ or ConfigMap etcd-guard-/,
    );
  });
});

describe('classify and decide on mutated fixtures', () => {
  it('never throw, always echo the uid, and never allow a guarded change without an evaluation', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const junk: unknown[] = [null, 0, -3, 2.5, 1e21, '', 'x', true, [], {}, [1, 'a'], { replicas: '3' }];
    const mutate = (value: unknown, depth: number): unknown => {
      if (random() < 0.08 || depth > 8) return junk[Math.floor(random() * junk.length)];
      if (Array.isArray(value)) return value.map((item) => mutate(item, depth + 1));
      if (value !== null && typeof value === 'object') {
        return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mutate(item, depth + 1)]));
      }
      return value;
    };
    const files = readdirSync(FIXTURE_DIR).filter((file) => file.endsWith('.json'));
    const config = makeConfig();
    let needingEvaluation = 0;
    for (let index = 0; index < 2000; index += 1) {
      const request = loadFixture(files[index % files.length] ?? '');
      const mutated: AdmissionRequest = {
        ...request,
        object: mutate(request.object, 0),
        oldObject: mutate(request.oldObject, 0),
      };
      const classification = classifyRequest(mutated, config);
      if (classification.kind !== 'needs-evaluation') continue;
      needingEvaluation += 1;
      const decision = decide({ request: mutated, config, classification, evaluation: null, now: NOW });
      expect(decision.response.uid).toBe(request.uid);
      // Without an evaluation only a permitted override, a druid hibernation/wake-up, or a change
      // that moves no member (KCP's rollout strategy alone) may allow.
      if (decision.response.allowed && decision.result !== 'overridden') {
        expect(['hibernation', 'wake-up', 'no-membership-change']).toContain(decision.reason);
      }
    }
    expect(needingEvaluation).toBeGreaterThan(100);
  });
});

describe('detectGuardedChange', () => {
  const guard = (pointer: string, harmless: string[] = []): GuardedPointer => ({
    pointer,
    reason: 'test',
    harmless: harmless.map((child) => ({ pointer: child, reason: 'test' })),
  });
  const guarded = [
    guard('/spec', ['/spec/minReadySeconds', '/spec/template/metadata/annotations']),
    guard(`/metadata/annotations/${escapePointerToken('a.io/x~y')}`),
  ];
  it.each([
    ['a replicas change', { spec: { replicas: 3 } }, { spec: { replicas: 4 } }, ['/spec/replicas']],
    [
      'a field no rule names (fails closed)',
      { spec: { ordinals: { start: 0 } } },
      { spec: { ordinals: { start: 1 } } },
      ['/spec/ordinals'],
    ],
    ['a harmless child', { spec: { replicas: 3, minReadySeconds: 1 } }, { spec: { replicas: 3, minReadySeconds: 2 } }, []],
    ['a nested template field', { spec: { template: { a: [1, 2] } } }, { spec: { template: { a: [1, 3] } } }, ['/spec/template']],
    [
      'only a harmless grandchild',
      { spec: { template: { metadata: { annotations: { a: '1' } }, spec: { x: 1 } } } },
      { spec: { template: { metadata: { annotations: { a: '2' } }, spec: { x: 1 } } } },
      [],
    ],
    [
      'a harmless grandchild and its sibling',
      { spec: { template: { metadata: { annotations: { a: '1' } }, spec: { x: 1 } } } },
      { spec: { template: { metadata: { annotations: { a: '2' } }, spec: { x: 2 } } } },
      ['/spec/template'],
    ],
    ['a whole spec appearing', {}, { spec: { replicas: 1 } }, ['/spec/replicas']],
    ['a whole spec appearing with only harmless fields', {}, { spec: { minReadySeconds: 5 } }, []],
    ['a spec that is no longer an object', { spec: { replicas: 3 } }, { spec: 'x' }, ['/spec']],
    [
      'an escaped key (~ and /)',
      { metadata: { annotations: { 'a.io/x~y': '1' } } },
      { metadata: { annotations: { 'a.io/x~y': '2' } } },
      ['/metadata/annotations/a.io~1x~0y'],
    ],
    ['nothing', { spec: { replicas: 3 } }, { spec: { replicas: 3 } }, []],
  ])('detects %s', (_name, before, after, expected) => {
    expect(detectGuardedChange(before, after, guarded).changedPointers).toEqual(expected);
  });

  it('diffs a huge object quickly', () => {
    const containers = Array.from({ length: 5000 }, (_unused, index) => ({ name: `c${index}`, image: `img:${index}` }));
    const before = { spec: { replicas: 3, template: { containers } }, metadata: { managedFields: containers } };
    const after = structuredClone(before);
    after.spec.template.containers[4999] = { name: 'c4999', image: 'img:new' };
    const started = performance.now();
    expect(detectGuardedChange(before, after, [guard('/spec')]).changedPointers).toEqual(['/spec/template']);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('diffs reordered arrays of large elements quickly (no quadratic element walk)', () => {
    const element = (index: number) =>
      Object.fromEntries(Array.from({ length: 300 }, (_unused, key) => [`k${key}`, key === 299 ? `v${index}` : 'same']));
    const before = { spec: { template: { items: Array.from({ length: 99 }, (_unused, index) => element(index)) } } };
    const after = structuredClone(before);
    after.spec.template.items.reverse();
    const started = performance.now();
    expect(detectGuardedChange(before, after, [guard('/spec')]).changedPointers).toEqual(['/spec/template']);
    expect(performance.now() - started).toBeLessThan(500);
  });
});

describe('parseAdmissionReview', () => {
  const valid = JSON.parse(readFileSync(path.join(FIXTURE_DIR, 'kcp-scale-up-3-to-5.json'), 'utf8')) as Record<string, unknown>;
  it.each([
    ['not an object', 'hello', /body is not an AdmissionReview object \(got "hello"\)/],
    ['null', null, /got null/],
    [
      'the wrong apiVersion',
      { ...valid, apiVersion: 'admission.k8s.io/v1beta1' },
      /apiVersion: .*\(got "admission\.k8s\.io\/v1beta1"\)/,
    ],
    [
      'a missing request',
      { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' },
      /request: Invalid input: expected object, received undefined \(got missing\)/,
    ],
    [
      'an empty uid',
      { ...valid, request: { ...(valid.request as object), uid: '' } },
      /request\.uid: must be a non-empty string \(got ""\)/,
    ],
    [
      'an unknown operation',
      { ...valid, request: { ...(valid.request as object), operation: 'PATCH' } },
      /request\.operation: .*\(got "PATCH"\)/,
    ],
  ])('rejects %s with a message naming field and value', (_name, body, message) => {
    const result = parseAdmissionReview(body);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(message);
  });

  it('never throws on garbage', () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const garbage = (depth: number): unknown => {
      const pick = Math.floor(random() * 8);
      if (depth > 3 || pick < 3) return [null, 0, -1.5, '', 'x', true, 1e308][Math.floor(random() * 7)];
      if (pick < 5) return Array.from({ length: Math.floor(random() * 4) }, () => garbage(depth + 1));
      const keys = ['apiVersion', 'kind', 'request', 'uid', 'operation', 'userInfo', 'object', '__proto__', 'constructor'];
      return Object.fromEntries(
        Array.from({ length: Math.floor(random() * 5) }, () => [keys[Math.floor(random() * keys.length)], garbage(depth + 1)]),
      );
    };
    let rejected = 0;
    for (let index = 0; index < 3000; index += 1) {
      const body = index % 2 === 0 ? garbage(0) : { ...valid, request: garbage(1) };
      const result = parseAdmissionReview(body);
      if (!result.ok) {
        rejected += 1;
        expect(result.message.length).toBeGreaterThan(0);
      }
    }
    expect(rejected).toBeGreaterThan(2900);
  });

  it('wraps a response in the AdmissionReview envelope', () => {
    expect(buildAdmissionReviewResponse({ uid: 'u1', allowed: true })).toEqual({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'u1', allowed: true },
    });
  });
});
