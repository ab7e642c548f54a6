// Issue 30 item 2, "a combined change takes the wrong enforcement mode", through the HTTPS webhook:
// top-level `enforcement` × the target's (and `discovery.capi`'s) enforcement, every etcd Unhealthy.
// A change that moves an object between targets (its labels, a discovered KCP's owner reference),
// alone or together with spec.replicas 3→5, is judged in the strictest mode of the targets it
// touches: before the fix the combined deny carried no target, so it fell back to the top-level
// mode (audit: allowed), and the discovered moves-target deny recorded no Event.
import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../functions/adapters/store-factory.js';
import { parseGuardConfig, type EnforcementMode } from '../../functions/domain/config.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { EventRecorder, lazyKubeEventSink } from '../../functions/usecases/event-recorder.js';
import { WEBHOOK_EVENT_CONTROLLER } from '../../webhook/server/main.js';
import { makeEvaluation, makeMember } from '../harness/evaluation-fixture.js';
import { startFakeKubeApiServer, type FakeKubeApiServer, type FakeObject } from '../harness/fake-kube-apiserver.js';
import { fixtureReview, type TestReview } from '../harness/reviews.js';
import { waitFor } from '../harness/wait.js';
import { startTestWebhook, type TestWebhook } from '../harness/webhook.js';

const MODES: EnforcementMode[] = ['enforce', 'warn', 'audit'];
const STRICTNESS = { audit: 0, warn: 1, enforce: 2 } as const;
const strictest = (...modes: EnforcementMode[]) => modes.reduce((a, b) => (STRICTNESS[b] > STRICTNESS[a] ? b : a));
const CLUSTER_NAME = 'cluster.x-k8s.io/cluster-name';
const DISCOVERED = 'capi-fleet-prod';
const discoveryObject = (name: string) =>
  JSON.parse(readFileSync(new URL(`../fixtures/discovery/${name}.json`, import.meta.url), 'utf8')) as FakeObject;

function unhealthy(target: string): Evaluation {
  return makeEvaluation({
    target,
    evaluatedAt: new Date().toISOString(),
    verdict: 'Unhealthy',
    members: [makeMember(0), makeMember(1), makeMember(2, { healthy: false, error: 'connection refused' })],
    reasons: ['member etcd-2 unreachable: connection refused'],
  });
}

type Kcp = FakeObject & { spec: { replicas: number } };

/** An UPDATE of a KCP from `before` to `after` (each a copy of `base` edited). */
function update(base: FakeObject, before: (kcp: Kcp) => void, after: (kcp: Kcp) => void): TestReview {
  const review = fixtureReview('kcp-v1beta1-edit-version.json', {
    namespace: base.metadata.namespace,
    name: base.metadata.name,
  });
  const oldObject = structuredClone(base) as Kcp;
  before(oldObject);
  const object = structuredClone(oldObject);
  after(object);
  Object.assign(review.request, { oldObject, object });
  return review;
}

/** A static-target KCP in namespace default, labelled into target `src`. */
function staticKcp(name: string): FakeObject {
  const kcp = structuredClone(discoveryObject('kcp-v1beta1'));
  Object.assign(kcp.metadata, { namespace: 'default', name, uid: `${name}-uid`, labels: { [CLUSTER_NAME]: 'src' } });
  kcp.metadata.ownerReferences = [];
  return kcp;
}
const relabel = (cluster: string) => (kcp: Kcp) => void (kcp.metadata.labels = { [CLUSTER_NAME]: cluster });
const scaleTo5 = (kcp: Kcp) => void (kcp.spec.replicas = 5);
const both =
  (...edits: ((kcp: Kcp) => void)[]) =>
  (kcp: Kcp) => {
    for (const edit of edits) edit(kcp);
  };
const keep = () => undefined;
const rePoint = (kcp: Kcp) => {
  const owners = kcp.metadata.ownerReferences as Array<Record<string, unknown>>;
  kcp.metadata.ownerReferences = owners.map((owner) => ({
    ...owner,
    name: 'decoy',
    uid: '00000000-0000-4000-8000-0000000000de',
  }));
};

describe.each(MODES.flatMap((top) => MODES.map((target) => ({ top, target }))))(
  'a combined change in the wrong enforcement mode (issue 30 item 2): top-level $top, target and discovery.capi $target',
  ({ top, target }) => {
    let workDir: string;
    let kube: FakeKubeApiServer;
    let webhook: TestWebhook;

    beforeAll(async () => {
      workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-combined-move-'));
      kube = await startFakeKubeApiServer();
      kube.putObject('kubeadmcontrolplanes', discoveryObject('kcp-v1beta1'));
      kube.putObject('clusters', discoveryObject('cluster-prod'));
      const config = parseGuardConfig(
        {
          store: { kind: 'file', dir: path.join(workDir, 'store') },
          maxAgeSeconds: 600,
          inlineRefresh: false,
          enforcement: top,
          targets: [
            { name: 'src', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'src' }, enforcement: target },
            { name: 'dst', endpoints: ['https://127.0.0.1:2379'], match: { clusterName: 'dst' } },
          ],
          discovery: { capi: { namespaces: ['fleet'], enforcement: target }, kubeconfigFile: kube.kubeconfigFile },
        },
        'combined move config',
      );
      const store = createStore(config.store);
      for (const name of ['src', 'dst', DISCOVERED]) await store.write(unhealthy(name));
      webhook = await startTestWebhook({
        config,
        store,
        kubeconfigFile: kube.kubeconfigFile,
        evaluate: (each) => Promise.resolve(unhealthy(each.name)),
        eventRecorder: new EventRecorder({
          sink: lazyKubeEventSink(kube.kubeconfigFile),
          reportingController: WEBHOOK_EVENT_CONTROLLER,
          reportingInstance: 'etcd-guard-combined-move-test',
        }),
        ready: true,
      });
    }, 30_000);

    afterAll(async () => {
      await webhook?.close();
      await kube?.close();
      if (workDir) await rm(workDir, { recursive: true, force: true });
    });

    /** The answer as the mode says: enforce denies; warn allows with the denial as a warning; audit allows silently. */
    async function expectJudgedIn(mode: EnforcementMode, review: TestReview, denial: RegExp) {
      const answer = await webhook.postReview(review);
      const text = answer.allowed ? (answer.warnings ?? []).join(' ') : (answer.status?.message ?? '');
      expect({ allowed: answer.allowed, mode: answer.auditAnnotations?.enforcement }).toEqual({
        allowed: mode !== 'enforce',
        mode,
      });
      expect(answer.auditAnnotations?.decision).toBe('denied');
      if (mode === 'warn') expect(text).toMatch(denial);
      if (mode === 'audit') expect(answer.warnings).toBeUndefined();
      if (mode !== 'enforce') expect(answer.auditAnnotations?.['would-deny']).toMatch(denial);
    }

    it(`replicas 3→5 with a label move from target src to dst is judged in ${strictest(top, target)}`, async () => {
      const kcp = staticKcp('move-cp');
      await expectJudgedIn(strictest(top, target), update(kcp, keep, both(relabel('dst'), scaleTo5)), /moves .* from target src/);
    });

    it(`replicas 3→5 with a label move out of every target is judged in ${strictest(top, target)}`, async () => {
      const kcp = staticKcp('away-cp');
      await expectJudgedIn(strictest(top, target), update(kcp, keep, both(relabel('nowhere'), scaleTo5)), /no etcd-guard target/);
    });

    it(`a label move alone from src to dst is judged in ${strictest(top, target)}`, async () => {
      const kcp = staticKcp('relabel-cp');
      await expectJudgedIn(strictest(top, target), update(kcp, keep, relabel('dst')), /change of what decides its target/);
    });

    it(`replicas 3→5 with the discovered KCP's owner reference re-pointed is judged in ${target} and leaves an Event`, async () => {
      const kcp = discoveryObject('kcp-v1beta1');
      await expectJudgedIn(target, update(kcp, keep, both(rePoint, scaleTo5)), /moves .* away from target capi-fleet-prod/);
      const reason = target === 'enforce' ? 'Denied' : 'WouldDeny';
      await waitFor(`a ${reason} Event on fleet/prod-control-plane`, 10_000, () =>
        kube
          .events()
          .some(
            (event) =>
              event.regarding.name === 'prod-control-plane' &&
              event.reason === reason &&
              /away from target/.test(event.note ?? ''),
          ),
      );
    });
  },
);
