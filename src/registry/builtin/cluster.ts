import { FieldErrors } from '../../api/errors.js';
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
    col('Role', (o) => `${str(o, 'roleRef.kind')}/${str(o, 'roleRef.name')}`, { description: 'RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.' }),
    col('Age', (o, now) => {
      const created = Date.parse(o.metadata.creationTimestamp ?? '');
      return Number.isNaN(created) ? '<unknown>' : humanAge(now - created);
    }, { description: 'CreationTimestamp is a timestamp representing the server time when this object was created.' }),
    col('Users', subjects('User'), { priority: 1, description: 'Users in the binding' }),
    col('Groups', subjects('Group'), { priority: 1, description: 'Groups in the binding' }),
    col('ServiceAccounts', subjects('ServiceAccount'), { priority: 1, description: 'ServiceAccounts in the binding' }),
  ];
}

function validateRoleRef(obj: KubeObject) {
  const ref = obj.roleRef;
  if (!isPlainObject(ref)) return [FieldErrors.required('roleRef', '')];
  const causes = [];
  if (ref.kind !== 'Role' && ref.kind !== 'ClusterRole') causes.push(FieldErrors.notSupported('roleRef.kind', ref.kind, ['Role', 'ClusterRole']));
  if (!ref.name) causes.push(FieldErrors.required('roleRef.name', ''));
  if (ref.apiGroup !== 'rbac.authorization.k8s.io') causes.push(FieldErrors.notSupported('roleRef.apiGroup', ref.apiGroup, ['rbac.authorization.k8s.io']));
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
        validate: validateRoleRef,
        validateUpdate(next, old) {
          return JSON.stringify(next.roleRef) === JSON.stringify(old.roleRef) ? [] : [FieldErrors.invalid('roleRef', next.roleRef, 'cannot change roleRef')];
        },
      }
    : {},
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
