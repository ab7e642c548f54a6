// Asks the API server whether a user may do something (a SubjectAccessReview), so "may override"
// is granted like any other permission: RBAC verb `override` on `targets` in `etcd-guard.io`. The
// webhook's own ServiceAccount needs `create` on subjectaccessreviews. Every call has a deadline.
import { AuthorizationV1Api, type KubeConfig, type V1SubjectAccessReview } from '@kubernetes/client-node';
import type { Deadline } from '../domain/deadline.js';
import { callKube } from './kube.js';

/** Who asks (from the AdmissionRequest's userInfo) and what for. */
export interface AccessQuestion {
  user: string;
  uid?: string;
  groups: readonly string[];
  extra?: Readonly<Record<string, readonly string[]>>;
  verb: string;
  group: string;
  resource: string;
  /** The object's name (e.g. the target); omitted: any. */
  name?: string;
  /** Namespace the question is about; omitted: cluster scope. */
  namespace?: string;
}

/** True when the API server's authorizers allow it; rejects when the review itself failed. */
export type AccessReviewer = (question: AccessQuestion, deadline: Deadline) => Promise<boolean>;

export function subjectAccessReviewOf(question: AccessQuestion): V1SubjectAccessReview {
  return {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    spec: {
      user: question.user,
      groups: [...question.groups],
      ...(question.uid === undefined ? {} : { uid: question.uid }),
      ...(question.extra === undefined
        ? {}
        : { extra: Object.fromEntries(Object.entries(question.extra).map(([key, values]) => [key, [...values]])) }),
      resourceAttributes: {
        verb: question.verb,
        group: question.group,
        resource: question.resource,
        ...(question.name === undefined ? {} : { name: question.name }),
        ...(question.namespace === undefined ? {} : { namespace: question.namespace }),
      },
    },
  };
}

export function createAccessReviewer(kubeConfig: KubeConfig): AccessReviewer {
  const api = kubeConfig.makeApiClient(AuthorizationV1Api);
  return async (question, deadline) => {
    const review = await callKube(
      { verb: 'create', resource: 'subjectaccessreviews.authorization.k8s.io' },
      deadline,
      (options) => api.createSubjectAccessReview({ body: subjectAccessReviewOf(question) }, options),
    );
    return review.status?.allowed === true && review.status.denied !== true;
  };
}
