// The etcd 3.5 → 3.6 upgrade gate (webhook/domain/etcd-upgrade.ts) over real AdmissionReview
// fixtures: a KubeadmControlPlane change whose etcd crosses into 3.6 is denied while a member runs
// an etcd below the minimum etcd's upgrade guide names, and left to the other rules otherwise.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { guardConfigSchema } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { classifyRequest } from './classify.js';
import type { AdmissionRequest } from './contract.js';
import { decide } from './decide.js';
import {
  KUBEADM_DEFAULT_ETCD,
  MIN_ETCD_FOR_3_6,
  MIN_ETCD_FOR_3_7,
  judgeEtcdRollout,
  kubeadmDefaultEtcd,
  parseEtcdVersion,
  readEtcdImage,
  readEtcdTag,
} from './etcd-upgrade.js';
import { parseAdmissionReview } from './review.js';
import { makeEvaluation, makeMember } from '../../test/harness/evaluation-fixture.js';

const FIXTURES = path.join(import.meta.dirname, '../../test/fixtures', 'admission');
const NOW = new Date('2026-11-30T02:00:00.000Z');
const CONFIG = guardConfigSchema.parse({
  maxAgeSeconds: 60,
  targets: [{ name: 'prod', endpoints: ['https://127.0.0.1:12379'], match: {} }],
});

function fixture(name: string): AdmissionRequest {
  const parsed = parseAdmissionReview(JSON.parse(readFileSync(path.join(FIXTURES, name), 'utf8')) as unknown);
  if (!parsed.ok) throw new Error(`fixture ${name}: ${parsed.message}`);
  return parsed.review.request;
}

type Spec = Record<string, unknown> & { version?: string };

/** The fixture with its old and new KCP spec edited. */
function edited(name: string, edit: (oldSpec: Spec, newSpec: Spec) => void): AdmissionRequest {
  const request = fixture(name);
  const object = structuredClone(request.object) as { spec: Spec };
  const oldObject = structuredClone(request.oldObject) as { spec: Spec };
  edit(oldObject.spec, object.spec);
  return { ...request, object, oldObject };
}

function withImageTag(spec: Spec, tag: string): void {
  const kubeadm = (spec.kubeadmConfigSpec ??= {}) as { clusterConfiguration?: { etcd?: { local?: Record<string, unknown> } } };
  const cluster = (kubeadm.clusterConfiguration ??= {});
  const etcd = (cluster.etcd ??= {});
  etcd.local = { ...etcd.local, imageTag: tag };
}

function membersAt(...versions: string[]): Evaluation {
  return makeEvaluation({
    evaluatedAt: new Date(NOW.getTime() - 10_000).toISOString(),
    members: versions.map((version, index) => makeMember(index, { version })),
  });
}

function decideOn(request: AdmissionRequest, evaluation: Evaluation) {
  const classification = classifyRequest(request, CONFIG);
  if (classification.kind !== 'needs-evaluation') throw new Error(`not judged: ${JSON.stringify(classification)}`);
  return decide({ request, config: CONFIG, classification, evaluation, now: NOW });
}

// kcp-v1beta2-edit-version.json rolls Kubernetes v1.33.2 → v1.34.0: kubeadm's etcd 3.5 → 3.6.
const TO_3_6 = 'kcp-v1beta2-edit-version.json';
// kcp-v1beta1-edit-version.json rolls v1.30.4 → v1.31.1: etcd stays on 3.5.
const STAYS_ON_3_5 = 'kcp-v1beta1-edit-version.json';

describe('the etcd 3.6 upgrade gate', () => {
  it.each<[string, AdmissionRequest, Evaluation, RegExp | null]>([
    [
      'denies v1.33 → v1.34 while every member runs 3.5.16, naming them all',
      fixture(TO_3_6),
      membersAt('3.5.16', '3.5.16', '3.5.16'),
      /etcd-0 \(3\.5\.16\), etcd-1 \(3\.5\.16\), etcd-2 \(3\.5\.16\) run below it/,
    ],
    [
      'denies v1.33 → v1.34 naming only the one member below 3.5.32',
      fixture(TO_3_6),
      membersAt('3.5.32', '3.5.31', '3.5.40'),
      /and etcd-1 \(3\.5\.31\) runs below it/,
    ],
    [
      'allows v1.33 → v1.34 when every member runs 3.5.32 or later',
      fixture(TO_3_6),
      membersAt('3.5.32', '3.5.33', '3.5.32'),
      null,
    ],
    [
      'allows a version step that stays on 3.5 with members on 3.5.16',
      fixture(STAYS_ON_3_5),
      membersAt('3.5.16', '3.5.16', '3.5.16'),
      null,
    ],
    [
      'denies an explicit etcd imageTag 3.6.5-0 on Kubernetes v1.33',
      edited(STAYS_ON_3_5, (_old, next) => withImageTag(next, '3.6.5-0')),
      membersAt('3.5.21', '3.5.21', '3.5.21'),
      /moves etcd to 3\.6\.5 \(etcd imageTag 3\.6\.5-0\)/,
    ],
    [
      'allows v1.33 → v1.34 that pins etcd to a 3.5 imageTag',
      edited(TO_3_6, (_old, next) => withImageTag(next, '3.5.21-0')),
      membersAt('3.5.16', '3.5.16', '3.5.16'),
      null,
    ],
    [
      'allows a step between two 3.6 Kubernetes versions (the crossing was judged before)',
      edited(TO_3_6, (old, next) => {
        old.version = 'v1.34.0';
        next.version = 'v1.35.1';
      }),
      membersAt('3.5.16', '3.6.5', '3.6.5'),
      null,
    ],
    [
      'denies a Kubernetes minor past kubeadm’s table (nearest entry: 3.6)',
      edited(TO_3_6, (_old, next) => {
        next.version = 'v1.40.0';
      }),
      membersAt('3.5.16', '3.5.16', '3.5.16'),
      /kubeadm's default etcd 3\.6\.9-0 for Kubernetes v1\.40\.0/,
    ],
    [
      'denies members on 3.4 too (3.4 → 3.6 skips a minor)',
      fixture(TO_3_6),
      membersAt('3.4.23', '3.4.23', '3.4.23'),
      /etcd-0 \(3\.4\.23\)/,
    ],
  ])('%s', (_name, request, evaluation, denial) => {
    const decision = decideOn(request, evaluation);
    if (denial === null) {
      expect(decision.response.allowed, decision.response.status?.message).toBe(true);
      return;
    }
    expect(decision.response.allowed).toBe(false);
    expect(decision.reason).toBe('etcd-upgrade');
    expect(decision.response.status?.code).toBe(403);
    const message = decision.response.status?.message ?? '';
    expect(message).toMatch(denial);
    expect(message).toContain(`on ${MIN_ETCD_FOR_3_6} or later before any member moves to 3.6`);
    expect(message).toContain('KubeadmControlPlane default/prod-control-plane');
  });

  it('does not gate a scale-up of a KCP already on a 3.6 Kubernetes', () => {
    const request = edited('kcp-scale-up-3-to-5.json', (old, next) => {
      old.version = 'v1.34.0';
      next.version = 'v1.34.0';
    });
    expect(decideOn(request, membersAt('3.5.16', '3.5.16', '3.5.16')).response.allowed).toBe(true);
  });

  it('lets a permitted override through with the gate’s reason in the audit annotation', () => {
    const request = fixture(TO_3_6);
    const object = structuredClone(request.object) as { metadata: { annotations?: Record<string, string> } };
    object.metadata.annotations = { ...object.metadata.annotations, 'etcd-guard.io/override': 'members patched out of band' };
    const classification = classifyRequest({ ...request, object }, CONFIG);
    if (classification.kind !== 'needs-evaluation') throw new Error('not judged');
    const decision = decide({
      request: { ...request, object, userInfo: { username: 'admin', groups: ['system:masters'] } },
      config: CONFIG,
      classification,
      evaluation: membersAt('3.5.16', '3.5.16', '3.5.16'),
      now: NOW,
    });
    expect(decision.result).toBe('overridden');
    expect(decision.response.auditAnnotations?.['overridden-denial']).toMatch(/3\.5\.32 or later/);
  });

  it.each([
    ['3.5.16', { major: 3, minor: 5, patch: 16 }],
    ['v3.6.5', { major: 3, minor: 6, patch: 5 }],
    ['3.6.9-0', { major: 3, minor: 6, patch: 9 }],
    ['3.5.21-0@sha256:abcd', { major: 3, minor: 5, patch: 21 }],
    ['latest', null],
    ['3.6', null],
    [42, null],
  ])('parses the etcd version %j', (text, expected) => {
    expect(parseEtcdVersion(text)).toEqual(expected);
  });

  it.each([
    ['v1.29.0', '3.5.24-0'],
    ['v1.33.7', '3.5.24-0'],
    ['v1.34.0', '3.6.9-0'],
    ['1.36.1', '3.6.9-0'],
    ['v1.27.3', '3.5.24-0'],
    ['v1.99.0', '3.6.9-0'],
    ['v2.0.0', null],
    ['', null],
  ])('takes kubeadm’s default etcd for Kubernetes %s', (kubernetes, etcd) => {
    expect(kubeadmDefaultEtcd(kubernetes)).toBe(etcd);
  });

  it('keeps kubeadm’s table contiguous from 1.29 with 3.6 from 1.34 on', () => {
    const minors = [...KUBEADM_DEFAULT_ETCD.keys()];
    expect(minors).toEqual(Array.from({ length: minors.length }, (_unused, index) => 29 + index));
    for (const [minor, etcd] of KUBEADM_DEFAULT_ETCD) {
      const reading = readEtcdTag(etcd);
      expect(reading.kind === 'version' && reading.version.minor).toBe(minor >= 34 ? 6 : 5);
    }
  });
});

// etcd's 3.7 guide (https://etcd.io/docs/v3.7/upgrades/upgrade_3_7/, "Update 3.6"): every member
// on 3.6.11 or later before any member moves to 3.7.
describe('the etcd 3.6 → 3.7 upgrade gate', () => {
  const judge = (next: string, previous: string, ...versions: string[]) =>
    judgeEtcdRollout(
      { next: readEtcdTag(next), source: `etcd imageTag ${next}`, previous: readEtcdTag(previous) },
      membersAt(...versions).members,
    );

  it.each<[string, string, string, string[], RegExp | null]>([
    [
      'denies 3.6 → 3.7 naming the one member below 3.6.11',
      '3.7.3-0',
      '3.6.9-0',
      ['3.6.11', '3.6.10', '3.6.16'],
      /^this change moves etcd to 3\.7\.3 \(etcd imageTag 3\.7\.3-0\); etcd's upgrade guide requires every member on 3\.6\.11 or later before any member moves to 3\.7, and etcd-1 \(3\.6\.10\) runs below it: upgrade them to 3\.6\.11\+ first$/,
    ],
    ['allows 3.6 → 3.7 when every member runs 3.6.11 or later', 'v3.7.3', 'v3.6.16', ['3.6.11', '3.6.16', '3.6.16'], null],
    [
      'denies 3.5 → 3.7 (a skipped minor): members on 3.5 are below 3.6.11',
      'v3.7.0',
      '3.5.32-0',
      ['3.5.32', '3.5.32', '3.5.32'],
      /moves etcd to 3\.7\.0 .* on 3\.6\.11 or later .* etcd-0 \(3\.5\.32\), etcd-1 \(3\.5\.32\), etcd-2 \(3\.5\.32\) run below it/,
    ],
    ['allows a 3.7 patch step from a 3.7 release (the crossing was judged before)', 'v3.7.3', 'v3.7.1', ['3.6.5'], null],
    ['denies 3.7 from a 3.7 pre-release', 'v3.7.3', 'v3.7.0-rc.1', ['3.6.5'], /moves etcd to 3\.7\.3/],
    ['allows a 3.6 step on members below 3.6.11 (no crossing)', '3.6.16-0', '3.6.9-0', ['3.6.9'], null],
    [
      'judges a minor no guide names yet (3.8) by the newest minimum',
      'v3.8.0',
      'v3.7.3',
      ['3.6.5', '3.7.3'],
      /moves etcd to 3\.8\.0 .* on 3\.6\.11 or later before any member moves to 3\.7, and etcd-0 \(3\.6\.5\) runs below it/,
    ],
    [
      'denies an undetermined tag while a 3.6 member is below 3.6.11 (it may move to 3.7)',
      'latest',
      '3.6.9-0',
      ['3.6.9', '3.6.16'],
      /undetermined \(etcd imageTag latest: .*\), so it may move etcd to 3\.7; .* on 3\.6\.11 or later .* etcd-0 \(3\.6\.9\) runs below it/,
    ],
    [
      'names both crossings for an undetermined tag in a cluster on 3.5, 3.6 and 3.7',
      'latest',
      'latest',
      ['3.5.16', '3.6.5', '3.7.3'],
      /so it may move etcd to 3\.6 or 3\.7; .* on 3\.5\.32 or later .* moves to 3\.6, and etcd-0 \(3\.5\.16\) runs below it: upgrade them to 3\.5\.32\+ first; .* on 3\.6\.11 or later .* moves to 3\.7, and etcd-1 \(3\.6\.5\) runs below it: upgrade them to 3\.6\.11\+ first$/,
    ],
    [
      'leaves a 3.5 member alone for an undetermined tag when the object ran 3.6 (that crossing was judged)',
      'latest',
      '3.6.16-0',
      ['3.5.16', '3.6.16'],
      null,
    ],
    ['allows an undetermined tag on members all on 3.7 (no guide names a next minimum)', 'latest', '3.7.3-0', ['3.7.3'], null],
  ])('%s', (_name, next, previous, versions, denial) => {
    const blocked = judge(next, previous, ...versions);
    if (denial === null) expect(blocked).toBeNull();
    else expect(blocked).toMatch(denial);
  });

  it('denies a KCP imageTag bump 3.6.9-0 → 3.7.3-0 end to end, with the override hint', () => {
    const request = edited(TO_3_6, (old, next) => {
      withImageTag(old, '3.6.9-0');
      withImageTag(next, '3.7.3-0');
    });
    const decision = decideOn(request, membersAt('3.6.9', '3.6.16', '3.6.16'));
    expect(decision.response.allowed).toBe(false);
    expect(decision.reason).toBe('etcd-upgrade');
    const message = decision.response.status?.message ?? '';
    expect(message).toContain('KubeadmControlPlane default/prod-control-plane');
    expect(message).toContain(`every member on ${MIN_ETCD_FOR_3_7} or later before any member moves to 3.7`);
    expect(message).toContain('etcd-0 (3.6.9) runs below it');
    expect(message).toMatch(/to override, annotate with etcd-guard\.io\/override/);
    expect(decideOn(request, membersAt('3.6.11', '3.6.16', '3.6.16')).response.allowed).toBe(true);
  });
});

// Issue 30 item 3: the gate read only `x.y.z` and let every other tag through.
describe('the 3.5 → 3.6 gate on tags it cannot parse (issue 30 item 3)', () => {
  it.each<[string, string | null, boolean]>([
    // kubeadm's registry.k8s.io/etcd: the version and an image revision.
    ['3.5.21-0', '3.5.21', false],
    ['3.6.4-0', '3.6.4', false],
    // etcd's own releases and pre-releases.
    ['v3.5.21', '3.5.21', false],
    ['v3.6.0-rc.2', '3.6.0', true],
    ['v3.6.0-alpha.0', '3.6.0', true],
    ['3.6.0-beta', '3.6.0', true],
    // Gardener's etcd-custom-image (druid before etcd-wrapper).
    ['v3.4.26-2', '3.4.26', false],
    ['v3.4.13-bootstrap-12', '3.4.13', false],
    // What may run any etcd.
    ['v0.8.2', null, false],
    ['3.6', null, false],
    ['v3.6', null, false],
    ['latest', null, false],
    ['V3.6.5', null, false],
    ['3.6.5_amd64', null, false],
    ['3.6.5.0', null, false],
    ['3.6.5-0@sha256:abcd', null, false],
    ['03.6.5', null, false],
    [' 3.6.5', null, false],
    ['3.5.21-debian-12-r0', null, false],
    ['', null, false],
  ])('reads the tag %j as %s', (tag, version, prerelease) => {
    const reading = readEtcdTag(tag);
    if (version === null) {
      expect(reading.kind).toBe('undetermined');
      return;
    }
    expect(reading).toMatchObject({ kind: 'version', prerelease });
    if (reading.kind === 'version') expect(Object.values(reading.version).join('.')).toBe(version);
  });

  it.each<[string, string | RegExp]>([
    ['registry.k8s.io/etcd:3.5.21-0', '3.5.21'],
    ['registry.local:5000/etcd:v3.6.5', '3.6.5'],
    ['quay.io/coreos/etcd:v3.6.0-rc.2', '3.6.0'],
    ['europe-docker.pkg.dev/gardener-project/public/gardener/etcd:v3.4.26-2', '3.4.26'],
    ['registry.local:5000/etcd', /has no tag/],
    ['etcd', /has no tag/],
    ['registry.k8s.io/etcd:3.5.21-0@sha256:' + 'b'.repeat(64), /pinned by digest/],
    ['registry.k8s.io/etcd@sha256:' + 'b'.repeat(64), /pinned by digest/],
    ['europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.8.2', /etcd-wrapper's own version/],
    ['registry.k8s.io/etcd:latest', /not a published etcd release tag/],
    ['', /no image/],
  ])('reads the image %j', (image, expected) => {
    const reading = readEtcdImage(image, ['etcd-wrapper']);
    if (typeof expected === 'string') {
      expect(reading.kind === 'version' && Object.values(reading.version).join('.')).toBe(expected);
    } else {
      expect(reading.kind === 'undetermined' && reading.why).toMatch(expected);
    }
  });

  const below = membersAt('3.5.16', '3.5.16', '3.5.16').members;
  const ready = membersAt('3.5.32', '3.6.11', '3.5.40').members;
  it.each<[string, string, string, typeof below, RegExp | null]>([
    [
      'denies an undetermined tag while members are below the minimum',
      'latest',
      '3.5.21-0',
      below,
      /version is undetermined \(etcd imageTag latest: tag latest is not a published/,
    ],
    ['allows an undetermined tag once every member runs the minimum', 'latest', '3.5.21-0', ready, null],
    ['denies a 3.6 release whose old tag is a 3.6 pre-release', '3.6.5-0', 'v3.6.0-rc.1', below, /moves etcd to 3\.6\.5/],
    ['denies a rollout whose old tag was undetermined too', 'latest', 'latest', below, /undetermined/],
    ['allows a 3.6 step from a 3.6 release', '3.6.9-0', '3.6.5-0', below, null],
    ['allows a step that stays on 3.5', '3.5.24-0', '3.5.21-0', below, null],
  ])('%s', (_name, next, previous, members, denial) => {
    const blocked = judgeEtcdRollout(
      { next: readEtcdTag(next), source: `etcd imageTag ${next}`, previous: readEtcdTag(previous) },
      members,
    );
    if (denial === null) expect(blocked).toBeNull();
    else expect(blocked).toMatch(denial);
  });

  it('denies a KCP rollout whose Kubernetes version tells no kubeadm default etcd', () => {
    const request = edited(STAYS_ON_3_5, (_old, next) => {
      next.version = 'not-a-version';
    });
    const decision = decideOn(request, membersAt('3.5.16', '3.5.16', '3.5.16'));
    expect(decision.response.allowed).toBe(false);
    expect(decision.reason).toBe('etcd-upgrade');
    expect(decision.response.status?.message).toMatch(
      /undetermined \(kubeadm's default etcd unknown for Kubernetes not-a-version/,
    );
  });
});
