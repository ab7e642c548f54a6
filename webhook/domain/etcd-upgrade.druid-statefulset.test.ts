// Issue 28: the 3.5 → 3.6 upgrade gate for etcd-druid Etcds (spec.etcd.image) and guarded
// StatefulSets (the etcd container's image), with KCP's minimum and wording: a rollout onto a 3.6
// image, or onto an image whose tag says no etcd version, is denied while a member runs below the
// minimum; an image that stays on 3.5, or is not changed at all, is left to the other rules.
import { describe, expect, it } from 'vitest';
import { guardConfigSchema } from '../../functions/domain/config.js';
import { classifyRequest } from './classify.js';
import { decide } from './decide.js';
import { MIN_ETCD_FOR_3_6 } from './etcd-upgrade.js';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';
import {
  druidImageReview as druidImage,
  parsedRequest,
  statefulSetImageReview as statefulSetImage,
  type TestReview,
} from '../../test/harness/reviews.js';

const NOW = new Date('2026-11-30T02:00:00.000Z');
const CONFIG = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [
    { name: 'druid', endpoints: ['https://127.0.0.1:2379'], match: { namespaces: ['shoot--prod--core'], names: ['etcd-main'] } },
    { name: 'sts', endpoints: ['https://127.0.0.1:12379'], match: { namespaces: ['etcd'], names: ['etcd'] } },
  ],
});

function decideOn(review: TestReview, version: string) {
  const request = parsedRequest(review);
  const classification = classifyRequest(request, CONFIG);
  if (classification.kind !== 'needs-evaluation') throw new Error(`not judged: ${JSON.stringify(classification)}`);
  const members = [0, 1, 2].map((index) => makeMember(index, { version, leader: index === 0 }));
  const evaluation = makeEvaluation({ members, evaluatedAt: new Date(NOW.getTime() - 1_000).toISOString() });
  return decide({ request, config: CONFIG, classification, evaluation, now: NOW });
}

const CUSTOM_34 = 'europe-docker.pkg.dev/gardener-project/releases/gardener/etcd-custom-image:v3.4.26-2';
const WRAPPER = 'europe-docker.pkg.dev/gardener-project/releases/gardener/etcd-wrapper';

describe('issue 28: the etcd 3.6 upgrade gate for druid Etcds and StatefulSets', () => {
  it.each([
    [
      'druid: onto quay.io/coreos/etcd:v3.6.5 below the minimum',
      druidImage(CUSTOM_34, 'quay.io/coreos/etcd:v3.6.5'),
      '3.5.16',
      /moves etcd to 3\.6\.5 \(spec\.etcd\.image quay\.io\/coreos\/etcd:v3\.6\.5\)/,
    ],
    [
      'druid: onto etcd-wrapper, whose tag says no etcd version, below the minimum',
      druidImage(`${WRAPPER}:v0.4.2`, `${WRAPPER}:v0.5.0`),
      '3.5.16',
      /whose version is undetermined \(spec\.etcd\.image .*etcd-wrapper's own version, not etcd's/,
    ],
    [
      'druid: to an unset image (druid’s default) below the minimum',
      druidImage(CUSTOM_34, undefined),
      '3.5.16',
      /version is undetermined \(spec\.etcd\.image unset/,
    ],
    [
      'StatefulSet: registry.k8s.io/etcd 3.5.15-0 → 3.6.4-0 below the minimum',
      statefulSetImage('registry.k8s.io/etcd:3.5.15-0', 'registry.k8s.io/etcd:3.6.4-0'),
      '3.5.16',
      /moves etcd to 3\.6\.4 \(container etcd image registry\.k8s\.io\/etcd:3\.6\.4-0\)/,
    ],
    [
      'StatefulSet: the etcd image in a container named otherwise',
      statefulSetImage('quay.io/coreos/etcd:v3.5.17', 'quay.io/coreos/etcd:v3.6.5', 'member'),
      '3.5.16',
      /moves etcd to 3\.6\.5 \(container member image/,
    ],
    [
      'StatefulSet: pinned by digest (undetermined)',
      statefulSetImage('registry.k8s.io/etcd:3.5.15-0', 'registry.k8s.io/etcd@sha256:0123abcd'),
      '3.5.16',
      /pinned by digest/,
    ],
  ] as const)('denies %s', (_name, review, version, text) => {
    const decision = decideOn(review, version);
    expect(decision.response.allowed).toBe(false);
    expect(decision.reason).toBe('etcd-upgrade');
    const message = decision.response.status?.message ?? '';
    expect(message).toMatch(text);
    expect(message).toContain(`requires every member on ${MIN_ETCD_FOR_3_6} or later before any member moves to 3.6`);
    expect(message).toContain('etcd-0 (3.5.16), etcd-1 (3.5.16), etcd-2 (3.5.16) run below it');
  });

  it.each([
    ['druid: onto 3.6 once every member runs the minimum', druidImage(CUSTOM_34, 'quay.io/coreos/etcd:v3.6.5'), MIN_ETCD_FOR_3_6],
    ['druid: a 3.5 patch step', druidImage('quay.io/coreos/etcd:v3.5.16', 'quay.io/coreos/etcd:v3.5.32'), '3.5.16'],
    [
      'druid: etcd-wrapper unchanged while something else rolls',
      druidImage(`${WRAPPER}:v0.4.2`, `${WRAPPER}:v0.4.2`, true),
      '3.5.16',
    ],
    ['druid: already on 3.6 before', druidImage('quay.io/coreos/etcd:v3.6.4', 'quay.io/coreos/etcd:v3.6.5'), '3.6.4'],
    [
      'StatefulSet: a 3.5 patch step',
      statefulSetImage('registry.k8s.io/etcd:3.5.15-0', 'registry.k8s.io/etcd:3.5.21-0'),
      '3.5.15',
    ],
    [
      'StatefulSet: onto 3.6 at the minimum',
      statefulSetImage('registry.k8s.io/etcd:3.5.32-0', 'registry.k8s.io/etcd:3.6.4-0'),
      MIN_ETCD_FOR_3_6,
    ],
  ] as const)('allows %s', (_name, review, version) => {
    const decision = decideOn(review, version);
    expect(decision.response.allowed, decision.response.status?.message).toBe(true);
  });
});
