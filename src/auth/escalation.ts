import { Errors, type ApiError } from '../api/errors.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import type { Requester } from './requester.js';
import type { PolicyRule } from './authorizer.js';
import { policyRules } from './rbac.js';
import type { RequestAttributes } from './request-info.js';
import { SYSTEM_MASTERS } from './user.js';

// RBAC's escalation prevention (pkg/registry/rbac/validation): nobody grants, through a Role, ClusterRole or
// binding, permissions they do not hold themselves — unless RBAC gives them `escalate` on the role or `bind` on
// the role a binding refers to. Members of system:masters may do anything.

const RBAC_GROUP = 'rbac.authorization.k8s.io';

/** One verb on one group/resource (and name), or on one non-resource URL (BreakdownRule). */
function breakdown(rule: PolicyRule): PolicyRule[] {
  const atoms: PolicyRule[] = [];
  for (const group of rule.apiGroups ?? []) {
    for (const resource of rule.resources ?? []) {
      for (const verb of rule.verbs) {
        if ((rule.resourceNames ?? []).length > 0)
          for (const name of rule.resourceNames!)
            atoms.push({ apiGroups: [group], resources: [resource], verbs: [verb], resourceNames: [name] });
        else atoms.push({ apiGroups: [group], resources: [resource], verbs: [verb] });
      }
    }
  }
  for (const url of rule.nonResourceURLs ?? [])
    for (const verb of rule.verbs) atoms.push({ nonResourceURLs: [url], verbs: [verb] });
  return atoms;
}

const hasAll = (set: readonly string[] = [], wanted: readonly string[] = []): boolean =>
  wanted.every((w) => set.includes(w));

function resourcesCovered(owner: readonly string[] = [], wanted: readonly string[] = []): boolean {
  if (owner.includes('*') || hasAll(owner, wanted)) return true;
  return wanted.every(
    (path) => owner.includes(path) || (path.includes('/') && owner.includes(`*/${path.slice(path.indexOf('/') + 1)}`)),
  );
}

function urlsCovered(owner: readonly string[] = [], wanted: readonly string[] = []): boolean {
  return wanted.every((path) =>
    owner.some((o) => o === path || (o.endsWith('*') && path.startsWith(o.replace(/\*+$/, '')))),
  );
}

/** ruleCovers: the owner's rule allows everything the (broken-down) rule does. */
function ruleCovers(owner: PolicyRule, rule: PolicyRule): boolean {
  const names = rule.resourceNames ?? [];
  const ownerNames = owner.resourceNames ?? [];
  return (
    (owner.verbs.includes('*') || hasAll(owner.verbs, rule.verbs)) &&
    ((owner.apiGroups ?? []).includes('*') || hasAll(owner.apiGroups, rule.apiGroups)) &&
    resourcesCovered(owner.resources, rule.resources) &&
    urlsCovered(owner.nonResourceURLs, rule.nonResourceURLs) &&
    (names.length === 0 ? ownerNames.length === 0 : ownerNames.length === 0 || hasAll(ownerNames, names))
  );
}

/** Go's %q of a []string: ["a" "b"]. */
const quoted = (list: readonly string[]): string => `[${list.map((s) => JSON.stringify(s)).join(' ')}]`;

/** rbacv1helpers.CompactString: {APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}. */
function compactString(rule: PolicyRule): string {
  const parts: string[] = [];
  if (rule.apiGroups?.length) parts.push(`APIGroups:${quoted(rule.apiGroups)}`);
  if (rule.resources?.length) parts.push(`Resources:${quoted(rule.resources)}`);
  if (rule.nonResourceURLs?.length) parts.push(`NonResourceURLs:${quoted(rule.nonResourceURLs)}`);
  if (rule.resourceNames?.length) parts.push(`ResourceNames:${quoted(rule.resourceNames)}`);
  if (rule.verbs.length) parts.push(`Verbs:${quoted(rule.verbs)}`);
  return `{${parts.join(', ')}}`;
}

/** CompactRules: atoms on the same group/resource (and at most one name) merged into one rule with their verbs. */
function compact(rules: PolicyRule[]): PolicyRule[] {
  const out: PolicyRule[] = [];
  const simple = new Map<string, PolicyRule>();
  for (const rule of rules) {
    if (
      (rule.resourceNames ?? []).length > 1 ||
      (rule.nonResourceURLs ?? []).length > 0 ||
      rule.apiGroups?.length !== 1 ||
      rule.resources?.length !== 1
    ) {
      out.push(rule);
      continue;
    }
    const key = JSON.stringify([rule.apiGroups[0], rule.resources[0], rule.resourceNames?.[0] ?? null]);
    const existing = simple.get(key);
    if (existing) existing.verbs = [...existing.verbs, ...rule.verbs];
    else simple.set(key, { ...rule, verbs: [...rule.verbs] });
  }
  return [...out, ...simple.values()];
}

/** ConfirmNoEscalation: the 403 reason when the requester's own rules in the namespace do not cover `rules`, else undefined. */
function escalation(requester: Requester, namespace: string, rules: PolicyRule[]): string | undefined {
  const held = requester.authorizer.rulesFor(requester.user, namespace);
  const owner: PolicyRule[] = [
    ...held.resourceRules.map((r) => ({
      verbs: r.verbs,
      apiGroups: r.apiGroups,
      resources: r.resources,
      ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
    })),
    ...held.nonResourceRules.map((r) => ({ verbs: r.verbs, nonResourceURLs: r.nonResourceURLs })),
  ];
  const missing = rules.flatMap(breakdown).filter((atom) => !owner.some((o) => ruleCovers(o, atom)));
  if (missing.length === 0) return undefined;
  const described = [...new Set(compact(missing).map(compactString))].sort();
  let message = `user ${JSON.stringify(requester.user.username)} (groups=${quoted(requester.user.groups)}) is attempting to grant RBAC permissions not currently held:\n${described.join('\n')}`;
  if (held.evaluationError) message += `; resolution errors: [${held.evaluationError}]`;
  return message;
}

function allowedVerb(requester: Requester, verb: string, resource: string, namespace: string, name: string): boolean {
  const attributes: RequestAttributes = {
    resourceRequest: true,
    path: '',
    verb,
    apiGroup: RBAC_GROUP,
    apiVersion: 'v1',
    namespace,
    resource,
    subresource: '',
    name,
  };
  return requester.authorizer.authorize(requester.user, attributes).allowed;
}

/** IsOnlyMutatingGCFields: an update that changes nothing but ownerReferences and finalizers (what the GC writes). */
function onlyGcFields(obj: KubeObject, old: KubeObject): boolean {
  const essence = (o: KubeObject): string => {
    const { metadata, ...rest } = o;
    return JSON.stringify({ ...rest, labels: metadata.labels ?? {}, annotations: metadata.annotations ?? {} });
  };
  return essence(obj) === essence(old);
}

const FULL_AUTHORITY: PolicyRule[] = [
  { verbs: ['*'], apiGroups: ['*'], resources: ['*'] },
  { verbs: ['*'], nonResourceURLs: ['*'] },
];

/**
 * Checks a write of a Role or ClusterRole (`roles`/`clusterroles`) or of a binding (`rolebindings`/
 * `clusterrolebindings`) by `requester`; throws kube-apiserver's 403 when it would grant more than they hold.
 * `rulesOf` resolves a binding's roleRef (undefined when the role does not exist).
 */
export function checkRbacWrite(
  resource: string,
  obj: KubeObject,
  old: KubeObject | undefined,
  requester: Requester,
  rulesOf: (kind: string, name: string, namespace: string) => PolicyRule[] | undefined,
): void {
  if (requester.user.groups.includes(SYSTEM_MASTERS)) return;
  const namespace = obj.metadata.namespace ?? '';
  const name = obj.metadata.name ?? '';
  const deny = (why: string): ApiError => Errors.forbidden({ group: RBAC_GROUP, resource }, name, why);
  if (old && onlyGcFields(obj, old)) return;
  if (resource === 'roles' || resource === 'clusterroles') {
    if (allowedVerb(requester, 'escalate', resource, namespace, name)) return;
    const why = escalation(requester, namespace, policyRules(obj));
    if (why) throw deny(why);
    if (
      resource === 'clusterroles' &&
      isPlainObject(obj.aggregationRule) &&
      escalation(requester, namespace, FULL_AUTHORITY)
    ) {
      throw deny('must have cluster-admin privileges to use the aggregationRule');
    }
    return;
  }
  const ref = isPlainObject(obj.roleRef) ? obj.roleRef : {};
  const roleKind = String(ref.kind ?? '');
  const roleName = String(ref.name ?? '');
  if (allowedVerb(requester, 'bind', roleKind === 'ClusterRole' ? 'clusterroles' : 'roles', namespace, roleName))
    return;
  const rules = rulesOf(roleKind, roleName, namespace);
  if (!rules)
    throw deny(
      `${roleKind === 'ClusterRole' ? 'clusterrole' : 'role'}.rbac.authorization.k8s.io ${JSON.stringify(roleName)} not found`,
    );
  const why = escalation(requester, namespace, rules);
  if (why) throw deny(why);
}
