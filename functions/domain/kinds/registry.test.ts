// ARCHITECTURE.md's "How to add a guarded kind", followed for a fourth, made-up control-plane kind:
// ONE module object (toyControlPlane below) and ONE registration call, nothing else edited. The
// webhook's core then guards it (a scale-down that breaks quorum is denied, a safe one allowed,
// judged by the toy's own removal order) and discovery maps its objects to targets. The
// registration is undone after the file, and a repeated identity is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardConfigSchema } from '../config.js';
import type { Evaluation, MemberReport } from '../evaluation-document.js';
import { discoveredTargets } from '../discovery-mapping.js';
import { provide, targetDefaults } from './discovery-common.js';
import { at } from '../../shared/records.js';
import type { ControllerKind } from './kind.js';
import { ordinalProjection } from './ordinal-removal.js';
import { kindOf, registerControllerKind } from './registry.js';
import { discoveredTargetName, staticTarget, type Target } from '../targets.js';
import { classifyRequest } from '../../../webhook/domain/classify.js';
import type { AdmissionRequest, Classification } from '../../../webhook/domain/contract.js';
import { decide } from '../../../webhook/domain/decide.js';
import { parseAdmissionReview } from '../../../webhook/domain/review.js';
import { makeEvaluation, makeMember } from '../../../test/harness/evaluation-fixture.js';

const TOY = { group: 'controlplane.toy.example', kind: 'ToyControlPlane', resource: 'toycontrolplanes' } as const;
const TOY_VERSION = 'v1alpha1';

// Step 1 of ARCHITECTURE.md: the kind's module. The toy's controller names its pods
// `<name>-<ordinal>` from 0 and removes the highest ordinal first; each object lists its members'
// client URLs in status.endpoints, which discovery reads and the evaluation reaches statically.
const toyControlPlane: ControllerKind = {
  rule: {
    ...TOY,
    versions: [TOY_VERSION],
    guarded: [
      {
        pointer: '/spec',
        reason: 'the toy controller rolls every member on any spec change',
        harmless: [{ pointer: '/spec/paused', reason: 'only stops reconciling; no member moves' }],
      },
    ],
    replicasPointer: '/spec/replicas',
    defaultReplicas: 3,
    scope: 'all',
  },
  removal: {
    projectionOptions: (facts) => ordinalProjection(facts.members, facts.object.name, 0, facts.shrink, ''),
  },
  discovery: {
    source: 'toy',
    lists: [{ group: TOY.group, versions: [TOY_VERSION], plural: TOY.resource }],
    toTargets: ([objects = []], defaults) =>
      provide(objects, { source: 'toy', id: TOY }, (object, guards, problem) => {
        const endpoints = at(object, 'status', 'endpoints');
        if (!Array.isArray(endpoints) || endpoints.length === 0 || !endpoints.every((url) => typeof url === 'string')) {
          return problem('status.endpoints lists no client URL');
        }
        return {
          name: discoveredTargetName('toy', guards.namespace, guards.name),
          source: 'toy',
          guards,
          reach: { kind: 'static' },
          endpoints: endpoints as string[],
          quotaBackendBytes: 2 * 1024 ** 3,
          ...targetDefaults(defaults),
        };
      }),
    identityLabels: [],
    followsClusterOwner: false,
  },
  reach: 'static',
};

const NOW = new Date('2026-12-01T12:00:00.000Z');
const config = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [{ name: 'elsewhere', endpoints: ['https://127.0.0.1:12379'], match: { namespaces: ['other'] } }],
});

function toyObject(replicas: number, name = 'alpha', namespace = 'fleet'): Record<string, unknown> {
  return {
    apiVersion: `${TOY.group}/${TOY_VERSION}`,
    kind: TOY.kind,
    metadata: { name, namespace, uid: '6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f', resourceVersion: '4711', generation: 3 },
    spec: { replicas, version: '1.0.0' },
    status: { endpoints: [0, 1, 2, 3].map((i) => `https://${name}-${i}.${namespace}.svc:2379`) },
  };
}

/** An AdmissionReview as the API server sends it for a kubectl patch of spec.replicas. */
function scaleReview(from: number, to: number, subResource?: 'scale'): AdmissionRequest {
  const resource = { group: TOY.group, version: TOY_VERSION, resource: TOY.resource };
  const scale = (replicas: number) => ({
    apiVersion: 'autoscaling/v1',
    kind: 'Scale',
    metadata: { name: 'alpha', namespace: 'fleet' },
    spec: { replicas },
    status: { replicas: from },
  });
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '0b7c3a52-9d1e-4f60-8a2b-3c4d5e6f7a81',
      kind: subResource
        ? { group: 'autoscaling', version: 'v1', kind: 'Scale' }
        : { group: TOY.group, version: TOY_VERSION, kind: TOY.kind },
      resource,
      ...(subResource ? { subResource } : {}),
      requestKind: { group: TOY.group, version: TOY_VERSION, kind: TOY.kind },
      requestResource: resource,
      name: 'alpha',
      namespace: 'fleet',
      operation: 'UPDATE',
      userInfo: { username: 'kubernetes-admin', groups: ['kubeadm:cluster-admins', 'system:authenticated'] },
      object: subResource ? scale(to) : toyObject(to),
      oldObject: subResource ? scale(from) : toyObject(from),
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'UpdateOptions', fieldManager: 'kubectl-patch' },
    },
  };
  const parsed = parseAdmissionReview(JSON.parse(JSON.stringify(review)) as unknown);
  if (!parsed.ok) throw new Error(`the toy review does not parse: ${parsed.message}`);
  return parsed.review.request;
}

/** Four voting members alpha-0..3 (alpha-0 leads); `sick` is the one that has not started. */
function evaluationWithSick(sick: number): Evaluation {
  const members: MemberReport[] = [0, 1, 2, 3].map((i) =>
    makeMember(i, { name: `alpha-${i}`, ...(i === sick ? { healthy: false, error: 'connection refused' } : {}) }),
  );
  return makeEvaluation({
    evaluatedAt: new Date(NOW.getTime() - 5000).toISOString(),
    verdict: 'Unhealthy',
    members,
    reasons: [`member alpha-${sick} unreachable: connection refused`],
  });
}

function needsEvaluation(classification: Classification): Extract<Classification, { kind: 'needs-evaluation' }> {
  if (classification.kind !== 'needs-evaluation')
    throw new Error(`expected needs-evaluation, got ${JSON.stringify(classification)}`);
  return classification;
}

/** What discovery makes of a listing: one good object, one without endpoints, one without namespace. */
function discover() {
  const noEndpoints = { ...toyObject(3, 'beta'), status: {} };
  return discoveredTargets('toy', [[toyObject(4), noEndpoints, { metadata: { name: 'x' } }]], { timeout: 5000 });
}

describe('a fourth controller kind added by one module and one registration', () => {
  let discovered: Target;
  // Step 2 of ARCHITECTURE.md: the registration (BUILT_IN in registry.ts for a real kind).
  let registration: { unregister: () => void } | undefined;
  beforeAll(() => {
    expect(classifyRequest(scaleReview(4, 2), config)).toEqual({ kind: 'allow', reason: 'not-guarded' });
    registration = registerControllerKind(toyControlPlane);
    discovered = discover().targets[0] as Target;
  });
  afterAll(() => registration?.unregister());

  it('discovery maps a listed ToyControlPlane to a target, and one without endpoints to a problem', () => {
    const result = discover();
    expect(result.problems).toEqual([
      {
        source: 'toy',
        object: { group: TOY.group, kind: TOY.kind, namespace: 'fleet', name: 'beta' },
        message: 'status.endpoints lists no client URL',
      },
      { source: 'toy', object: null, message: 'a ToyControlPlane without namespace or name' },
    ]);
    expect(result.targets).toHaveLength(1);
    expect(result.targets[0]).toMatchObject({
      name: 'toy-fleet-alpha',
      source: 'toy',
      guards: { group: TOY.group, kind: TOY.kind, namespace: 'fleet', name: 'alpha' },
      reach: { kind: 'static' },
      endpoints: [
        'https://alpha-0.fleet.svc:2379',
        'https://alpha-1.fleet.svc:2379',
        'https://alpha-2.fleet.svc:2379',
        'https://alpha-3.fleet.svc:2379',
      ],
    });
  });

  const targets = () => [...config.targets.map(staticTarget), discovered];

  it('classifies a replicas change of its object as a scale-down judged against its discovered target', () => {
    const classification = needsEvaluation(classifyRequest(scaleReview(4, 2), config, undefined, targets()));
    expect(classification.target.name).toBe('toy-fleet-alpha');
    expect(classification.change).toEqual({ kind: 'scale-down', from: 4, to: 2 });
    expect(classification.object).toMatchObject({ group: TOY.group, kind: TOY.kind, viaScale: false });
    // Its harmless child moves no member.
    const paused = scaleReview(4, 4);
    (paused.object as { spec: Record<string, unknown> }).spec.paused = true;
    expect(classifyRequest(paused, config, undefined, targets())).toEqual({ kind: 'allow', reason: 'no-guarded-change' });
  });

  // 4 → 2 removes alpha-3 then alpha-2 (highest ordinal first). The worst case (a healthy member
  // each time) would deny both rows; the toy's removal order tells them apart.
  const rows = [
    {
      behaviour: 'denies a scale-down that leaves the sick member and one healthy one: below quorum',
      sick: 1,
      allowed: false,
      subResource: undefined,
    },
    { behaviour: 'allows a scale-down that removes the sick member first', sick: 3, allowed: true, subResource: undefined },
    { behaviour: 'judges the same through /scale', sick: 1, allowed: false, subResource: 'scale' as const },
    { behaviour: 'allows the safe one through /scale', sick: 3, allowed: true, subResource: 'scale' as const },
  ];
  it.each(rows)('$behaviour', ({ sick, allowed, subResource }) => {
    const request = scaleReview(4, 2, subResource);
    const classification = needsEvaluation(classifyRequest(request, config, undefined, targets()));
    const decision = decide({ request, config, classification, evaluation: evaluationWithSick(sick), now: NOW });
    expect(decision.response.allowed).toBe(allowed);
    if (!allowed) {
      expect(decision.response.status?.message).toContain('ToyControlPlane fleet/alpha');
      expect(decision.response.status?.message).toContain('below quorum 2');
    }
  });

  it('refuses a second kind with the same identity or discovery source', () => {
    expect(() => registerControllerKind(toyControlPlane)).toThrow(/ToyControlPlane.*already registered/);
    const sameSource = { ...toyControlPlane, rule: { ...toyControlPlane.rule, kind: 'Other', resource: 'others' } };
    expect(() => registerControllerKind(sameSource)).toThrow(/discovery source toy is already registered/);
  });

  it('is forgotten once unregistered', () => {
    const again = registerControllerKind({
      ...toyControlPlane,
      rule: { ...toyControlPlane.rule, group: 'toy.other' },
      discovery: undefined,
    });
    expect(kindOf({ group: 'toy.other', kind: TOY.kind })).toBeDefined();
    again.unregister();
    expect(kindOf({ group: 'toy.other', kind: TOY.kind })).toBeUndefined();
    expect(kindOf(TOY)).toBe(toyControlPlane);
  });
});
