// AdmissionReviews for tests, built from the real ones in test/fixtures/admission (as an apiserver
// sends them) and aimed at the object a test guards. Every call returns a fresh copy with its own
// request uid, so a test may edit what it gets.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { AdmissionRequest } from '../../webhook/domain/contract.js';
import { parseAdmissionReview } from '../../webhook/domain/review.js';

const FIXTURE_DIR = path.join(import.meta.dirname, '..', 'fixtures', 'admission');

/** A Kubernetes object as a review carries it: a KCP, an Etcd, a StatefulSet or an autoscaling/v1 Scale. */
export interface ReviewObject {
  apiVersion: string;
  kind: string;
  metadata: { name?: string; namespace?: string; uid?: string; labels?: Record<string, string> } & Record<string, unknown>;
  spec?: { replicas?: number } & Record<string, unknown>;
  [field: string]: unknown;
}

export interface TestReview {
  apiVersion: string;
  kind: string;
  request: {
    uid: string;
    name?: string;
    namespace?: string;
    dryRun?: boolean;
    userInfo?: { username?: string; groups?: string[] } & Record<string, unknown>;
    object: ReviewObject | null;
    oldObject: ReviewObject | null;
    [field: string]: unknown;
  };
  [field: string]: unknown;
}

/** Where a review is aimed: the request's and both objects' name and namespace, the Cluster API cluster. */
export interface ReviewAim {
  namespace?: string;
  name?: string;
  /** Replaces the objects' cluster-name label; a Scale carries no labels and gets none. */
  clusterName?: string;
  uid?: string;
}

const fixtureTexts = new Map<string, string>();
let uidCounter = 0;

/** A uid shaped as the apiserver's (a UUID), unique in this process. */
export function nextReviewUid(): string {
  uidCounter += 1;
  return `00000000-0000-4000-8000-${String(uidCounter).padStart(12, '0')}`;
}

/** The fixture's review as parsed JSON, untouched (uid included): for tests that send it as recorded. */
export function admissionFixture(file: string): TestReview {
  let text = fixtureTexts.get(file);
  if (text === undefined) {
    text = readFileSync(path.join(FIXTURE_DIR, file), 'utf8');
    fixtureTexts.set(file, text);
  }
  return JSON.parse(text) as TestReview;
}

/** Aims a review in place (see ReviewAim) and returns it. */
export function aimReview<R extends TestReview>(review: R, aim: ReviewAim): R {
  const { request } = review;
  if (aim.uid !== undefined) request.uid = aim.uid;
  if (aim.namespace !== undefined) request.namespace = aim.namespace;
  if (aim.name !== undefined) request.name = aim.name;
  for (const object of [request.object, request.oldObject]) {
    if (object === null || object === undefined) continue;
    if (aim.namespace !== undefined) object.metadata.namespace = aim.namespace;
    if (aim.name !== undefined) object.metadata.name = aim.name;
    if (aim.clusterName !== undefined && object.metadata.labels !== undefined) {
      object.metadata.labels = { 'cluster.x-k8s.io/cluster-name': aim.clusterName };
    }
  }
  return review;
}

/** A fixture's review with a fresh uid, aimed. */
export function fixtureReview(file: string, aim: ReviewAim = {}): TestReview {
  return aimReview(admissionFixture(file), { uid: nextReviewUid(), ...aim });
}

/** Sets the replicas a review changes: `from` on the old object, `to` on the new (a KCP, Etcd, StatefulSet or Scale). */
export function withReplicas<R extends TestReview>(review: R, from: number, to: number): R {
  for (const [object, replicas] of [
    [review.request.oldObject, from],
    [review.request.object, to],
  ] as const) {
    if (object === null) throw new Error('withReplicas: the review has no object to set replicas on');
    object.spec = { ...object.spec, replicas };
  }
  return review;
}

/** A spec edit of a KubeadmControlPlane (v1beta2) that changes only its replicas, `from` → `to`. */
export function kcpReplicasReview(from: number, to: number, aim: ReviewAim = {}): TestReview {
  return withReplicas(fixtureReview('kcp-v1beta2-replicas-3-to-2.json', aim), from, to);
}

/** The apiserver's /scale review of a KubeadmControlPlane (autoscaling/v1 Scale, no labels), `from` → `to`. */
export function kcpScaleReview(from: number, to: number, aim: ReviewAim = {}): TestReview {
  return withReplicas(fixtureReview('kcp-scale-up-3-to-5.json', aim), from, to);
}

/** The review's request as the webhook's core reads it (for tests that call classify and decide directly). */
export function parsedRequest(review: TestReview): AdmissionRequest {
  const parsed = parseAdmissionReview(review);
  if (!parsed.ok) throw new Error(`the review does not parse: ${parsed.message}`);
  return parsed.review.request;
}

type Json = Record<string, unknown>;

/** An etcd-druid Etcd (shoot--prod--core/etcd-main) spec edit: spec.etcd.image `from` → `to` (undefined: unset), replicas unchanged. */
export function druidImageReview(from: string | undefined, to: string | undefined, otherEdit = false): TestReview {
  const review = fixtureReview('etcd-druid-replicas-3-to-5.json');
  const { oldObject, object } = review.request;
  if (oldObject === null || object === null) throw new Error('fixture lacks an object');
  review.request.object = structuredClone(oldObject);
  for (const [which, image] of [
    [review.request.oldObject, from],
    [review.request.object, to],
  ] as const) {
    const etcd = (which?.spec as Json).etcd as Json;
    if (image === undefined) delete etcd.image;
    else etcd.image = image;
  }
  if (otherEdit) (((review.request.object.spec as Json).etcd as Json).resources as Json).limits = { memory: '2G' };
  return review;
}

/** A StatefulSet (etcd/etcd) template edit: the etcd container's image `from` → `to`, ordinals unchanged. */
export function statefulSetImageReview(from: string, to: string, container = 'etcd'): TestReview {
  const review = fixtureReview('statefulset-edit-ordinals.json');
  const { oldObject } = review.request;
  if (oldObject === null) throw new Error('fixture lacks oldObject');
  review.request.object = structuredClone(oldObject);
  for (const [which, image] of [
    [review.request.oldObject, from],
    [review.request.object, to],
  ] as const) {
    const containers = ((which?.spec as Json).template as { spec: { containers: Json[] } }).spec.containers;
    containers[0] = { ...containers[0], name: container, image };
  }
  return review;
}
