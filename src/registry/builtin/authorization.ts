import { isPlainObject, type KubeObject } from '../../api/types.js';
import type { KindInfo } from '../types.js';

/**
 * authorization.k8s.io and authentication.k8s.io reviews: create-only kinds answered, never stored. The simulator
 * has no authorization configured (kube-apiserver's AlwaysAllow), so every access review is allowed and every
 * rules review lists everything — which is what `kubectl auth can-i [--list]` and `auth whoami` then print.
 */
const ADMIN = { username: 'kubernetes-admin', groups: ['kubeadm:cluster-admins', 'system:authenticated'] };

function answer(obj: KubeObject, status: Record<string, unknown>): KubeObject {
  const out: KubeObject = { kind: obj.kind, apiVersion: obj.apiVersion, metadata: { ...obj.metadata, creationTimestamp: null as unknown as string } };
  out.spec = isPlainObject(obj.spec) ? obj.spec : {};
  out.status = status;
  return out;
}

const allowed = (obj: KubeObject): KubeObject => answer(obj, { allowed: true, reason: 'no authorization is configured: every request is allowed' });

function review(kind: string, resource: string, namespaced: boolean, respond: (obj: KubeObject) => KubeObject, group = 'authorization.k8s.io'): KindInfo {
  return { group, version: 'v1', kind, resource, singular: kind.toLowerCase(), namespaced, verbs: ['create'], ephemeral: respond, nameRule: 'path-segment' };
}

export const authorizationKinds: KindInfo[] = [
  review('SelfSubjectAccessReview', 'selfsubjectaccessreviews', false, allowed),
  review('SubjectAccessReview', 'subjectaccessreviews', false, allowed),
  review('LocalSubjectAccessReview', 'localsubjectaccessreviews', true, allowed),
  review('SelfSubjectRulesReview', 'selfsubjectrulesreviews', false, (obj) =>
    answer(obj, {
      resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }],
      nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
      incomplete: false,
    }),
  ),
  review(
    'SelfSubjectReview',
    'selfsubjectreviews',
    false,
    (obj) => {
      const out: KubeObject = { kind: 'SelfSubjectReview', apiVersion: 'authentication.k8s.io/v1', metadata: { creationTimestamp: null as unknown as string } };
      out.status = { userInfo: ADMIN };
      void obj;
      return out;
    },
    'authentication.k8s.io',
  ),
];
