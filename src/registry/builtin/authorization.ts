import { Errors, FieldErrors, type StatusCause } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import type { Requester } from '../../auth/requester.js';
import { alwaysAllow, type Authorizer } from '../../auth/authorizer.js';
import type { RequestAttributes } from '../../auth/request-info.js';
import { ISSUER } from '../../auth/service-account-tokens.js';
import type { UserInfo } from '../../auth/user.js';
import type { KindInfo } from '../types.js';

/**
 * authorization.k8s.io and authentication.k8s.io reviews: create-only kinds answered, never stored. With --auth they
 * answer from the same evaluator that judges requests (RBAC), for the requester (Self*) or the user in the spec, and
 * TokenReview from the same authenticator.
 * Without it the simulator has no authorization (kube-apiserver's AlwaysAllow): every review is allowed, every rules
 * review lists everything, and `auth whoami` names the admin kubectl would be.
 */
export const UNAUTHENTICATED_ADMIN: UserInfo = {
  username: 'kubernetes-admin',
  groups: ['kubeadm:cluster-admins', 'system:authenticated'],
};
const NO_AUTHORIZATION_REASON = 'no authorization is configured: every request is allowed';
const NO_AUTHENTICATION = 'no authenticator is configured (sim serve runs without --auth): tokens are not checked';

type Obj = Record<string, unknown>;

function who(requester: Requester | undefined): { user: UserInfo; authorizer: Authorizer } {
  return requester ?? { user: UNAUTHENTICATED_ADMIN, authorizer: alwaysAllow };
}

function answer(obj: KubeObject, status: Record<string, unknown>): KubeObject {
  const out: KubeObject = {
    kind: obj.kind,
    apiVersion: obj.apiVersion,
    metadata: { ...obj.metadata, creationTimestamp: null as unknown as string },
  };
  out.spec = isPlainObject(obj.spec) ? obj.spec : {};
  out.status = status;
  return out;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : []);

/** The request a SubjectAccessReviewSpec describes (authorizationutil.ResourceAttributesFrom / NonResourceAttributesFrom). */
function attributesOf(spec: Obj): RequestAttributes {
  if (isPlainObject(spec.resourceAttributes)) {
    const r = spec.resourceAttributes;
    return {
      resourceRequest: true,
      path: '',
      verb: str(r.verb),
      apiGroup: str(r.group),
      apiVersion: str(r.version),
      namespace: str(r.namespace),
      resource: str(r.resource),
      subresource: str(r.subresource),
      name: str(r.name),
    };
  }
  const n = isPlainObject(spec.nonResourceAttributes) ? spec.nonResourceAttributes : {};
  return {
    resourceRequest: false,
    path: str(n.path),
    verb: str(n.verb),
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
  };
}

/** ValidateSubjectAccessReviewSpec: exactly one of resourceAttributes and nonResourceAttributes. */
function validateAttributes(spec: Obj): StatusCause[] {
  const hasResource = isPlainObject(spec.resourceAttributes);
  const hasNonResource = isPlainObject(spec.nonResourceAttributes);
  if (!hasResource && !hasNonResource)
    return [
      FieldErrors.required(
        'spec.resourceAttributes',
        'exactly one of nonResourceAttributes or resourceAttributes must be specified',
      ),
    ];
  if (hasResource && hasNonResource)
    return [
      FieldErrors.invalid(
        'spec.nonResourceAttributes',
        spec.nonResourceAttributes,
        'cannot be specified in combination with resourceAttributes',
      ),
    ];
  return [];
}

function decide(obj: KubeObject, user: UserInfo, authorizer: Authorizer, noAuth: boolean): KubeObject {
  const decision = authorizer.authorize(user, attributesOf(obj.spec as Obj));
  const status: Obj = { allowed: decision.allowed };
  const reason = noAuth ? NO_AUTHORIZATION_REASON : decision.reason;
  if (reason) status.reason = reason;
  return answer(obj, status);
}

function specOf(obj: KubeObject, kind: string): Obj {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  const causes = validateAttributes(spec);
  if (kind !== 'SelfSubjectAccessReview' && str(spec.user) === '' && strings(spec.groups).length === 0)
    causes.push(FieldErrors.invalid('spec.user', str(spec.user), 'at least one of user or group must be specified'));
  if (kind === 'LocalSubjectAccessReview' && isPlainObject(spec.nonResourceAttributes))
    causes.push(
      FieldErrors.invalid(
        'spec.nonResourceAttributes',
        spec.nonResourceAttributes,
        'disallowed on this kind of request',
      ),
    );
  if (causes.length > 0) throw Errors.invalid('authorization.k8s.io', kind, obj.metadata.name ?? '', causes);
  return spec;
}

/** The user a (Local)SubjectAccessReview asks about: exactly what its spec says (no groups are added). */
function specUser(spec: Obj): UserInfo {
  const user: UserInfo = { username: str(spec.user), groups: strings(spec.groups) };
  if (str(spec.uid)) user.uid = str(spec.uid);
  if (isPlainObject(spec.extra))
    user.extra = Object.fromEntries(Object.entries(spec.extra).map(([k, v]) => [k, strings(v)]));
  return user;
}

function selfSubjectAccessReview(obj: KubeObject, _ctx: unknown, requester?: Requester): KubeObject {
  specOf(obj, 'SelfSubjectAccessReview');
  const { user, authorizer } = who(requester);
  return decide(obj, user, authorizer, !requester);
}

function subjectAccessReview(obj: KubeObject, _ctx: unknown, requester?: Requester): KubeObject {
  const spec = specOf(obj, 'SubjectAccessReview');
  return decide(obj, specUser(spec), who(requester).authorizer, !requester);
}

function localSubjectAccessReview(obj: KubeObject, _ctx: unknown, requester?: Requester): KubeObject {
  const spec = specOf(obj, 'LocalSubjectAccessReview');
  const namespace = obj.metadata.namespace ?? '';
  if (str((spec.resourceAttributes as Obj).namespace) !== namespace)
    throw Errors.badRequest(`spec.resourceAttributes.namespace must match namespace: ${namespace}`);
  return decide(obj, specUser(spec), who(requester).authorizer, !requester);
}

function selfSubjectRulesReview(obj: KubeObject, _ctx: unknown, requester?: Requester): KubeObject {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  const { user, authorizer } = who(requester);
  const rules = authorizer.rulesFor(user, str(spec.namespace));
  const status: Obj = {
    resourceRules: rules.resourceRules,
    nonResourceRules: rules.nonResourceRules,
    incomplete: rules.incomplete,
  };
  if (rules.evaluationError) status.evaluationError = rules.evaluationError;
  return answer(obj, status);
}

/** authentication.k8s.io/v1 UserInfo as Go writes it: every field omitted when empty. */
function userInfoOf(user: UserInfo | undefined): Obj {
  const info: Obj = {};
  if (!user) return info;
  if (user.username) info.username = user.username;
  if (user.uid) info.uid = user.uid;
  if (user.groups.length > 0) info.groups = user.groups;
  if (user.extra && Object.keys(user.extra).length > 0) info.extra = user.extra;
  return info;
}

function selfSubjectReview(_obj: KubeObject, _ctx: unknown, requester?: Requester): KubeObject {
  const { user } = who(requester);
  return {
    kind: 'SelfSubjectReview',
    apiVersion: 'authentication.k8s.io/v1',
    metadata: { creationTimestamp: null as unknown as string },
    status: { userInfo: userInfoOf(user) },
  };
}

/**
 * TokenReview (pkg/registry/authentication/tokenreview): the token checked by the same authenticator that checks
 * requests, for spec.audiences or else the API server's own; the spec comes back as sent. Without --auth there is
 * no authenticator, and kube-apiserver with none hands the review back unanswered (not authenticated); ours says
 * why in status.error.
 */
function tokenReview(obj: KubeObject, _ctx: unknown, requester?: Requester): KubeObject {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  const token = str(spec.token);
  if (token === '') throw Errors.badRequest('token is required for TokenReview in authentication');
  const audiences = strings(spec.audiences);
  const status: Obj = {};
  if (requester?.reviewToken) {
    const result = requester.reviewToken(token, audiences.length > 0 ? audiences : [ISSUER]);
    if (result.authenticated) status.authenticated = true;
    status.user = userInfoOf(result.user);
    if (result.audiences && result.audiences.length > 0) status.audiences = result.audiences;
    if (result.error) status.error = result.error;
  } else {
    status.user = {};
    status.error = NO_AUTHENTICATION;
  }
  const out = answer(obj, status);
  out.spec = audiences.length > 0 ? { token, audiences } : { token };
  return out;
}

function review(
  kind: string,
  resource: string,
  namespaced: boolean,
  respond: NonNullable<KindInfo['ephemeral']>,
  group = 'authorization.k8s.io',
): KindInfo {
  return {
    group,
    version: 'v1',
    kind,
    resource,
    singular: kind.toLowerCase(),
    namespaced,
    verbs: ['create'],
    ephemeral: respond,
    nameRule: 'path-segment',
  };
}

export const authorizationKinds: KindInfo[] = [
  review('SelfSubjectAccessReview', 'selfsubjectaccessreviews', false, selfSubjectAccessReview),
  review('SubjectAccessReview', 'subjectaccessreviews', false, subjectAccessReview),
  review('LocalSubjectAccessReview', 'localsubjectaccessreviews', true, localSubjectAccessReview),
  review('SelfSubjectRulesReview', 'selfsubjectrulesreviews', false, selfSubjectRulesReview),
  review('SelfSubjectReview', 'selfsubjectreviews', false, selfSubjectReview, 'authentication.k8s.io'),
  review('TokenReview', 'tokenreviews', false, tokenReview, 'authentication.k8s.io'),
];
