import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { col, humanDuration as humanAge, str } from '../printers.js';
import type { KindInfo, TableColumn } from '../types.js';

type Obj = Record<string, unknown>;

const createdAt: TableColumn = col('Created At', (o) => o.metadata.creationTimestamp ?? '', {
  type: 'date',
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
});

function subjects(kind: string): (o: KubeObject) => string {
  return (o) => {
    const list = Array.isArray(o.subjects) ? (o.subjects as Obj[]) : [];
    return list
      .filter((s) => s.kind === kind)
      .map((s) => (kind === 'ServiceAccount' ? `${String(s.namespace ?? '')}/${String(s.name)}` : String(s.name)))
      .join(', ');
  };
}

function bindingColumns(): TableColumn[] {
  return [
    col('Role', (o) => `${str(o, 'roleRef.kind')}/${str(o, 'roleRef.name')}`, {
      description: 'RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.',
    }),
    col(
      'Age',
      (o, now) => {
        const created = Date.parse(o.metadata.creationTimestamp ?? '');
        return Number.isNaN(created) ? '<unknown>' : humanAge(now - created);
      },
      { description: 'CreationTimestamp is a timestamp representing the server time when this object was created.' },
    ),
    col('Users', subjects('User'), { priority: 1, description: 'Users in the binding' }),
    col('Groups', subjects('Group'), { priority: 1, description: 'Groups in the binding' }),
    col('ServiceAccounts', subjects('ServiceAccount'), { priority: 1, description: 'ServiceAccounts in the binding' }),
  ];
}

function validateRoleRef(obj: KubeObject) {
  const ref = obj.roleRef;
  if (!isPlainObject(ref)) return [FieldErrors.required('roleRef', '')];
  const causes = [];
  if (ref.kind !== 'Role' && ref.kind !== 'ClusterRole')
    causes.push(FieldErrors.notSupported('roleRef.kind', ref.kind, ['Role', 'ClusterRole']));
  if (!ref.name) causes.push(FieldErrors.required('roleRef.name', ''));
  if (ref.apiGroup !== 'rbac.authorization.k8s.io')
    causes.push(FieldErrors.notSupported('roleRef.apiGroup', ref.apiGroup, ['rbac.authorization.k8s.io']));
  return causes;
}

const RBAC_GROUP = 'rbac.authorization.k8s.io';
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** ValidatePolicyRule: verbs, and either resources with API groups or (cluster-wide only) non-resource URLs. */
function validateRules(obj: KubeObject, namespaced: boolean): StatusCause[] {
  const causes: StatusCause[] = [];
  list(obj.rules).forEach((rule, i) => {
    const path = `rules[${i}]`;
    if (!isPlainObject(rule)) {
      causes.push(FieldErrors.invalid(path, rule, 'must be an object'));
      return;
    }
    if (list(rule.verbs).length === 0)
      causes.push(FieldErrors.required(`${path}.verbs`, 'verbs must contain at least one value'));
    if (list(rule.nonResourceURLs).length > 0) {
      if (namespaced)
        causes.push(
          FieldErrors.invalid(
            `${path}.nonResourceURLs`,
            rule.nonResourceURLs,
            'namespaced rules cannot apply to non-resource URLs',
          ),
        );
      if (list(rule.apiGroups).length > 0 || list(rule.resources).length > 0 || list(rule.resourceNames).length > 0) {
        causes.push(
          FieldErrors.invalid(
            `${path}.nonResourceURLs`,
            rule.nonResourceURLs,
            'rules cannot apply to both regular resources and non-resource URLs',
          ),
        );
      }
      return;
    }
    if (list(rule.apiGroups).length === 0)
      causes.push(FieldErrors.required(`${path}.apiGroups`, 'resource rules must supply at least one api group'));
    if (list(rule.resources).length === 0)
      causes.push(FieldErrors.required(`${path}.resources`, 'resource rules must supply at least one resource'));
  });
  if (obj.aggregationRule !== undefined && obj.aggregationRule !== null) {
    const selectors = isPlainObject(obj.aggregationRule) ? list(obj.aggregationRule.clusterRoleSelectors) : [];
    if (selectors.length === 0)
      causes.push(
        FieldErrors.required(
          'aggregationRule.clusterRoleSelectors',
          'at least one clusterRoleSelector required if aggregationRule is non-nil',
        ),
      );
  }
  return causes;
}

/** SetDefaults_Subject: Users and Groups are rbac.authorization.k8s.io subjects (ServiceAccounts have no group). */
function defaultSubjects(obj: KubeObject): void {
  for (const subject of list(obj.subjects)) {
    if (isPlainObject(subject) && !subject.apiGroup && (subject.kind === 'User' || subject.kind === 'Group'))
      subject.apiGroup = RBAC_GROUP;
  }
}

/** ValidateRoleBindingSubject: a name, a known kind with its API group, and a namespace for ServiceAccounts of ClusterRoleBindings. */
function validateSubjects(obj: KubeObject, namespaced: boolean): StatusCause[] {
  const causes: StatusCause[] = [];
  list(obj.subjects).forEach((subject, i) => {
    const path = `subjects[${i}]`;
    if (!isPlainObject(subject)) {
      causes.push(FieldErrors.invalid(path, subject, 'must be an object'));
      return;
    }
    if (!subject.name) causes.push(FieldErrors.required(`${path}.name`, ''));
    const apiGroup = subject.apiGroup ?? '';
    switch (subject.kind) {
      case 'ServiceAccount':
        if (apiGroup !== '') causes.push(FieldErrors.notSupported(`${path}.apiGroup`, apiGroup, ['']));
        if (!namespaced && !subject.namespace) causes.push(FieldErrors.required(`${path}.namespace`, ''));
        break;
      case 'User':
      case 'Group':
        if (apiGroup !== RBAC_GROUP) causes.push(FieldErrors.notSupported(`${path}.apiGroup`, apiGroup, [RBAC_GROUP]));
        break;
      default:
        causes.push(FieldErrors.notSupported(`${path}.kind`, subject.kind, ['ServiceAccount', 'User', 'Group']));
    }
  });
  return causes;
}

const rbac = (kind: string, resource: string, namespaced: boolean, binding: boolean): KindInfo => ({
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  kind,
  resource,
  singular: kind.toLowerCase(),
  namespaced,
  nameRule: 'path-segment',
  strategy: binding
    ? {
        defaults: defaultSubjects,
        validate: (obj) => [...validateRoleRef(obj), ...validateSubjects(obj, namespaced)],
        validateUpdate(next, old) {
          return JSON.stringify(next.roleRef) === JSON.stringify(old.roleRef)
            ? []
            : [FieldErrors.invalid('roleRef', next.roleRef, 'cannot change roleRef')];
        },
      }
    : { validate: (obj) => validateRules(obj, namespaced) },
  columns: binding ? bindingColumns() : [createdAt],
  noAge: true,
});

const leases: KindInfo = {
  group: 'coordination.k8s.io',
  version: 'v1',
  kind: 'Lease',
  resource: 'leases',
  singular: 'lease',
  namespaced: true,
  columns: [col('Holder', (o) => str(o, 'spec.holderIdentity'), { description: 'The holder of the lease.' })],
};

export const clusterKinds: KindInfo[] = [
  leases,
  rbac('Role', 'roles', true, false),
  rbac('RoleBinding', 'rolebindings', true, true),
  rbac('ClusterRole', 'clusterroles', false, false),
  rbac('ClusterRoleBinding', 'clusterrolebindings', false, true),
];
