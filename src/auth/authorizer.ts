import { Errors, type ApiError } from '../api/errors.js';
import type { RequestAttributes } from './request-info.js';
import { SYSTEM_MASTERS, type UserInfo } from './user.js';

export interface PolicyRule {
  verbs: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

export interface ResourceRule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
}

export interface NonResourceRule {
  verbs: string[];
  nonResourceURLs: string[];
}

export interface Decision {
  allowed: boolean;
  /** Why (RBAC: which binding allowed it, or the errors met while looking); may be empty. */
  reason: string;
}

export interface RulesResult {
  resourceRules: ResourceRule[];
  nonResourceRules: NonResourceRule[];
  incomplete: boolean;
  evaluationError?: string;
}

/** One evaluator answers requests, access reviews and rules reviews alike. */
export interface Authorizer {
  authorize(user: UserInfo, attributes: RequestAttributes): Decision;
  rulesFor(user: UserInfo, namespace: string): RulesResult;
}

const ALL_RESOURCE_RULE: ResourceRule = { verbs: ['*'], apiGroups: ['*'], resources: ['*'] };
const ALL_NON_RESOURCE_RULE: NonResourceRule = { verbs: ['*'], nonResourceURLs: ['*'] };

/** No authorization configured (sim serve without --auth): kube-apiserver's AlwaysAllow. */
export const alwaysAllow: Authorizer = {
  authorize: () => ({ allowed: true, reason: '' }),
  rulesFor: () => ({
    resourceRules: [ALL_RESOURCE_RULE],
    nonResourceRules: [ALL_NON_RESOURCE_RULE],
    incomplete: false,
  }),
};

/**
 * kube-apiserver's chain with --authorization-mode=RBAC: members of system:masters are allowed everything first
 * (the privileged-group authorizer), then RBAC decides. Rules reviews collect the rules of both.
 */
export class UnionAuthorizer implements Authorizer {
  constructor(private readonly rbac: Authorizer) {}

  authorize(user: UserInfo, attributes: RequestAttributes): Decision {
    if (user.groups.includes(SYSTEM_MASTERS)) return { allowed: true, reason: '' };
    return this.rbac.authorize(user, attributes);
  }

  rulesFor(user: UserInfo, namespace: string): RulesResult {
    const rbac = this.rbac.rulesFor(user, namespace);
    if (!user.groups.includes(SYSTEM_MASTERS)) return rbac;
    return {
      ...rbac,
      resourceRules: [ALL_RESOURCE_RULE, ...rbac.resourceRules],
      nonResourceRules: [ALL_NON_RESOURCE_RULE, ...rbac.nonResourceRules],
    };
  }
}

/** responsewriters.forbiddenMessage: `User "u" cannot VERB resource "r[/sub]" in API group "g" in the namespace "ns"` etc. */
export function forbiddenMessage(username: string, a: RequestAttributes): string {
  if (!a.resourceRequest) return `User ${JSON.stringify(username)} cannot ${a.verb} path ${JSON.stringify(a.path)}`;
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const scope = a.namespace ? `in the namespace ${JSON.stringify(a.namespace)}` : 'at the cluster scope';
  return `User ${JSON.stringify(username)} cannot ${a.verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(a.apiGroup)} ${scope}`;
}

/** The 403 kube-apiserver answers for a denied request (responsewriters.Forbidden), with the RBAC reason appended. */
export function forbidden(username: string, a: RequestAttributes, reason: string): ApiError {
  const why = reason ? `${forbiddenMessage(username, a)}: ${reason}` : forbiddenMessage(username, a);
  return Errors.forbidden({ group: a.apiGroup, resource: a.resource }, a.name, why);
}
