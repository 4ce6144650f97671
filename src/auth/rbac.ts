import { isPlainObject, type KubeObject } from '../api/types.js';
import type { Authorizer, Decision, NonResourceRule, PolicyRule, ResourceRule, RulesResult } from './authorizer.js';
import type { RequestAttributes } from './request-info.js';
import type { UserInfo } from './user.js';

const GROUP = 'rbac.authorization.k8s.io';
const KEYS = {
  roles: `${GROUP}/roles`,
  clusterRoles: `${GROUP}/clusterroles`,
  roleBindings: `${GROUP}/rolebindings`,
  clusterRoleBindings: `${GROUP}/clusterrolebindings`,
};

// ---- rule matching: plugin/pkg/auth/authorizer/rbac (RuleAllows and the rbacv1helpers matchers) ----

function verbMatches(rule: PolicyRule, verb: string): boolean {
  return rule.verbs.includes('*') || rule.verbs.includes(verb);
}

function apiGroupMatches(rule: PolicyRule, group: string): boolean {
  const groups = rule.apiGroups ?? [];
  return groups.includes('*') || groups.includes(group);
}

/** "*" matches everything, "pods/log" exactly, and "*\/log" any resource's log subresource (but "pods/*" is not a wildcard). */
function resourceMatches(rule: PolicyRule, combined: string, subresource: string): boolean {
  for (const r of rule.resources ?? []) {
    if (r === '*' || r === combined) return true;
    if (subresource && r.length === subresource.length + 2 && r.startsWith('*/') && r.endsWith(subresource))
      return true;
  }
  return false;
}

/** No resourceNames means any name; with them, only those (so never a list or a create, which have no name). */
function resourceNameMatches(rule: PolicyRule, name: string): boolean {
  const names = rule.resourceNames ?? [];
  return names.length === 0 || names.includes(name);
}

/** "*" matches every path, "/healthz/*" any path under /healthz/, anything else exactly. */
function nonResourceUrlMatches(rule: PolicyRule, path: string): boolean {
  for (const url of rule.nonResourceURLs ?? []) {
    if (url === '*' || url === path) return true;
    if (url.endsWith('*') && path.startsWith(url.slice(0, -1))) return true;
  }
  return false;
}

export function ruleAllows(a: RequestAttributes, rule: PolicyRule): boolean {
  if (a.resourceRequest) {
    const combined = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
    return (
      verbMatches(rule, a.verb) &&
      apiGroupMatches(rule, a.apiGroup) &&
      resourceMatches(rule, combined, a.subresource) &&
      resourceNameMatches(rule, a.name)
    );
  }
  return verbMatches(rule, a.verb) && nonResourceUrlMatches(rule, a.path);
}

// ---- the policy cache ----

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

interface Binding {
  name: string;
  namespace?: string;
  roleRef: { kind: string; name: string };
  subjects: Subject[];
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : []);

export function policyRules(obj: KubeObject | undefined): PolicyRule[] {
  const rules = Array.isArray(obj?.rules) ? (obj!.rules as unknown[]) : [];
  return rules.filter(isPlainObject).map((r) => {
    const rule: PolicyRule = { verbs: strings(r.verbs) };
    if (r.apiGroups !== undefined) rule.apiGroups = strings(r.apiGroups);
    if (r.resources !== undefined) rule.resources = strings(r.resources);
    if (r.resourceNames !== undefined) rule.resourceNames = strings(r.resourceNames);
    if (r.nonResourceURLs !== undefined) rule.nonResourceURLs = strings(r.nonResourceURLs);
    return rule;
  });
}

function toBinding(obj: KubeObject): Binding {
  const ref = isPlainObject(obj.roleRef) ? obj.roleRef : {};
  const subjects = Array.isArray(obj.subjects) ? (obj.subjects as unknown[]).filter(isPlainObject) : [];
  return {
    name: obj.metadata.name!,
    namespace: obj.metadata.namespace,
    roleRef: { kind: String(ref.kind ?? ''), name: String(ref.name ?? '') },
    subjects: subjects.map((s) => ({
      kind: String(s.kind ?? ''),
      name: String(s.name ?? ''),
      namespace: typeof s.namespace === 'string' && s.namespace !== '' ? s.namespace : undefined,
    })),
  };
}

/**
 * The index key of a subject: a ServiceAccount without a namespace in a RoleBinding means the binding's own
 * namespace (in a ClusterRoleBinding it matches nobody, as in Kubernetes).
 */
function subjectKey(subject: Subject, bindingNamespace: string | undefined): string | undefined {
  switch (subject.kind) {
    case 'User':
      return `User:${subject.name}`;
    case 'Group':
      return `Group:${subject.name}`;
    case 'ServiceAccount': {
      const namespace = subject.namespace ?? bindingNamespace;
      return namespace ? `User:system:serviceaccount:${namespace}:${subject.name}` : undefined;
    }
    default:
      return undefined;
  }
}

/** The subject keys a user answers to: its name (a ServiceAccount's included) and each of its groups. */
function userKeys(user: UserInfo): string[] {
  return [`User:${user.username}`, ...user.groups.map((g) => `Group:${g}`)];
}

function describeSubject(subject: Subject, bindingNamespace: string): string {
  if (subject.kind === 'ServiceAccount')
    return `${subject.kind} ${JSON.stringify(`${subject.name}/${subject.namespace ?? bindingNamespace}`)}`;
  return `${subject.kind} ${JSON.stringify(subject.name)}`;
}

class MultiIndex {
  private readonly map = new Map<string, Set<string>>();
  add(key: string, value: string): void {
    let set = this.map.get(key);
    if (!set) this.map.set(key, (set = new Set()));
    set.add(value);
  }
  remove(key: string, value: string): void {
    const set = this.map.get(key);
    set?.delete(value);
    if (set?.size === 0) this.map.delete(key);
  }
  get(key: string): ReadonlySet<string> | undefined {
    return this.map.get(key);
  }
}

/** A change to a stored object, as the store reports it (storage's StoreEvent is one). */
export interface PolicyChange {
  type: string;
  object: KubeObject;
  prevObject?: KubeObject;
}

/**
 * Where RBAC reads its objects (the store is one): every object of a table, then each change as it is written.
 * Tables are named as the store names them (`rbac.authorization.k8s.io/roles`).
 */
export interface PolicySource {
  all(table: string): readonly KubeObject[];
  onChange(listener: (table: string, event: PolicyChange) => void): void;
}

/**
 * RBAC over Roles, ClusterRoles, RoleBindings and ClusterRoleBindings, read from a cache the store keeps current
 * (every write calls back synchronously). Bindings are indexed by subject, so a request looks at the bindings
 * naming its user or one of its groups, never at all of them.
 */
export class RbacAuthorizer implements Authorizer {
  private readonly roles = new Map<string, PolicyRule[]>();
  private readonly clusterRoles = new Map<string, PolicyRule[]>();
  private readonly clusterRoleBindings = new Map<string, Binding>();
  private readonly roleBindings = new Map<string, Binding>();
  /** subject key → ClusterRoleBinding names. */
  private readonly clusterBindingsBySubject = new MultiIndex();
  /** `namespace|subject key` → `namespace/name` of RoleBindings. */
  private readonly roleBindingsBySubject = new MultiIndex();

  constructor(store: PolicySource) {
    for (const obj of store.all(KEYS.roles))
      this.roles.set(`${obj.metadata.namespace}/${obj.metadata.name}`, policyRules(obj));
    for (const obj of store.all(KEYS.clusterRoles)) this.clusterRoles.set(obj.metadata.name!, policyRules(obj));
    for (const obj of store.all(KEYS.clusterRoleBindings)) this.putBinding(obj, true);
    for (const obj of store.all(KEYS.roleBindings)) this.putBinding(obj, false);
    store.onChange((key, event) => this.apply(key, event));
  }

  private apply(key: string, event: PolicyChange): void {
    const obj = event.object;
    const gone = event.type === 'DELETED';
    switch (key) {
      case KEYS.roles: {
        const id = `${obj.metadata.namespace}/${obj.metadata.name}`;
        if (gone) this.roles.delete(id);
        else this.roles.set(id, policyRules(obj));
        return;
      }
      case KEYS.clusterRoles:
        if (gone) this.clusterRoles.delete(obj.metadata.name!);
        else this.clusterRoles.set(obj.metadata.name!, policyRules(obj));
        return;
      case KEYS.clusterRoleBindings:
      case KEYS.roleBindings: {
        const cluster = key === KEYS.clusterRoleBindings;
        this.removeBinding(event.prevObject ?? obj, cluster);
        if (!gone) this.putBinding(obj, cluster);
        return;
      }
    }
  }

  private putBinding(obj: KubeObject, cluster: boolean): void {
    const binding = toBinding(obj);
    if (cluster) {
      this.clusterRoleBindings.set(binding.name, binding);
      for (const s of binding.subjects) {
        const key = subjectKey(s, undefined);
        if (key) this.clusterBindingsBySubject.add(key, binding.name);
      }
    } else {
      const id = `${binding.namespace}/${binding.name}`;
      this.roleBindings.set(id, binding);
      for (const s of binding.subjects) {
        const key = subjectKey(s, binding.namespace);
        if (key) this.roleBindingsBySubject.add(`${binding.namespace}|${key}`, id);
      }
    }
  }

  private removeBinding(obj: KubeObject, cluster: boolean): void {
    const id = cluster ? obj.metadata.name! : `${obj.metadata.namespace}/${obj.metadata.name}`;
    const binding = (cluster ? this.clusterRoleBindings : this.roleBindings).get(id);
    if (!binding) return;
    for (const s of binding.subjects) {
      const key = subjectKey(s, binding.namespace);
      if (!key) continue;
      if (cluster) this.clusterBindingsBySubject.remove(key, id);
      else this.roleBindingsBySubject.remove(`${binding.namespace}|${key}`, id);
    }
    (cluster ? this.clusterRoleBindings : this.roleBindings).delete(id);
  }

  /**
   * Calls `visit` with each rule that applies to the user in the namespace (ClusterRoleBindings first, then the
   * namespace's RoleBindings, each in name order) until it returns false; a missing role is reported to `onError`.
   */
  private visitRules(
    user: UserInfo,
    namespace: string,
    visit: (source: string, rule: PolicyRule) => boolean,
    onError: (message: string) => void,
  ): void {
    const keys = userKeys(user);
    const wanted = new Set(keys);
    const collect = (lookup: (key: string) => ReadonlySet<string> | undefined): string[] => {
      const ids = new Set<string>();
      for (const key of keys) for (const id of lookup(key) ?? []) ids.add(id);
      return [...ids].sort();
    };
    const matchingSubject = (binding: Binding): Subject | undefined =>
      binding.subjects.find((s) => {
        const key = subjectKey(s, binding.namespace);
        return key !== undefined && wanted.has(key);
      });
    for (const name of collect((k) => this.clusterBindingsBySubject.get(k))) {
      const binding = this.clusterRoleBindings.get(name)!;
      const subject = matchingSubject(binding);
      if (!subject) continue;
      const rules = binding.roleRef.kind === 'ClusterRole' ? this.clusterRoles.get(binding.roleRef.name) : undefined;
      if (!rules) {
        onError(`clusterrole.rbac.authorization.k8s.io ${JSON.stringify(binding.roleRef.name)} not found`);
        continue;
      }
      const source = `ClusterRoleBinding ${JSON.stringify(binding.name)} of ClusterRole ${JSON.stringify(binding.roleRef.name)} to ${describeSubject(subject, '')}`;
      for (const rule of rules) if (!visit(source, rule)) return;
    }
    if (!namespace) return;
    for (const id of collect((k) => this.roleBindingsBySubject.get(`${namespace}|${k}`))) {
      const binding = this.roleBindings.get(id)!;
      const subject = matchingSubject(binding);
      if (!subject) continue;
      const rules =
        binding.roleRef.kind === 'ClusterRole'
          ? this.clusterRoles.get(binding.roleRef.name)
          : this.roles.get(`${namespace}/${binding.roleRef.name}`);
      if (!rules) {
        onError(
          `${binding.roleRef.kind === 'ClusterRole' ? 'clusterrole' : 'role'}.rbac.authorization.k8s.io ${JSON.stringify(binding.roleRef.name)} not found`,
        );
        continue;
      }
      const source = `RoleBinding ${JSON.stringify(`${binding.name}/${namespace}`)} of ${binding.roleRef.kind} ${JSON.stringify(binding.roleRef.name)} to ${describeSubject(subject, namespace)}`;
      for (const rule of rules) if (!visit(source, rule)) return;
    }
  }

  /** The rules of the role a roleRef names (a Role in `namespace`, or a ClusterRole); undefined when it does not exist. */
  roleRules(kind: string, name: string, namespace: string): PolicyRule[] | undefined {
    return kind === 'ClusterRole'
      ? this.clusterRoles.get(name)
      : kind === 'Role'
        ? this.roles.get(`${namespace}/${name}`)
        : undefined;
  }

  authorize(user: UserInfo, attributes: RequestAttributes): Decision {
    let reason: string | undefined;
    const errors: string[] = [];
    this.visitRules(
      user,
      attributes.namespace,
      (source, rule) => {
        if (!ruleAllows(attributes, rule)) return true;
        reason = `RBAC: allowed by ${source}`;
        return false;
      },
      (message) => errors.push(message),
    );
    if (reason !== undefined) return { allowed: true, reason };
    return { allowed: false, reason: errors.length > 0 ? `RBAC: ${aggregate(errors)}` : '' };
  }

  rulesFor(user: UserInfo, namespace: string): RulesResult {
    const resourceRules: ResourceRule[] = [];
    const nonResourceRules: NonResourceRule[] = [];
    const errors: string[] = [];
    this.visitRules(
      user,
      namespace,
      (_source, rule) => {
        if ((rule.resources ?? []).length > 0) {
          const r: ResourceRule = { verbs: rule.verbs, apiGroups: rule.apiGroups ?? [], resources: rule.resources! };
          if (rule.resourceNames && rule.resourceNames.length > 0) r.resourceNames = rule.resourceNames;
          resourceRules.push(r);
        }
        if ((rule.nonResourceURLs ?? []).length > 0)
          nonResourceRules.push({ verbs: rule.verbs, nonResourceURLs: rule.nonResourceURLs! });
        return true;
      },
      (message) => errors.push(message),
    );
    const result: RulesResult = { resourceRules, nonResourceRules, incomplete: false };
    if (errors.length > 0) result.evaluationError = aggregate(errors);
    return result;
  }
}

/** utilerrors.NewAggregate(...).Error(): one message as it is, several as `[a, b]`. */
function aggregate(messages: string[]): string {
  return messages.length === 1 ? messages[0]! : `[${messages.join(', ')}]`;
}
