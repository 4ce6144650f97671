import { isPlainObject, type KubeObject } from '../../api/types.js';
import { col, field, humanDuration as humanAge } from '../printers.js';
import type { KindInfo } from '../types.js';

/**
 * ResourceQuota and LimitRange: stored and printed as kube-apiserver does (no quota admission is simulated).
 * `kubectl describe namespace` lists both, printing "No resource quota." and "No LimitRange resource." when empty.
 */
function quotaColumn(limits: boolean): (o: KubeObject) => string {
  return (o) => {
    const hard = field(o, 'spec.hard');
    if (!isPlainObject(hard)) return '';
    const used = field(o, 'status.used');
    const statusHard = field(o, 'status.hard');
    const q = (m: unknown, k: string): string => (isPlainObject(m) && m[k] !== undefined ? String(m[k]) : '0');
    return Object.keys(hard)
      .sort()
      .filter((r) => (r.split('.').length > 1 && r.split('.')[0] === 'limits') === limits)
      .map((r) => `${r}: ${q(used, r)}/${q(statusHard, r)}`)
      .join(', ');
  };
}

export const quotaKinds: KindInfo[] = [
  {
    group: '',
    version: 'v1',
    kind: 'ResourceQuota',
    resource: 'resourcequotas',
    singular: 'resourcequota',
    namespaced: true,
    shortNames: ['quota'],
    status: true,
    columns: [
      col(
        'Age',
        (o, now) => {
          const t = Date.parse(o.metadata.creationTimestamp ?? '');
          return Number.isNaN(t) ? '<unknown>' : humanAge(now - t);
        },
        { description: 'CreationTimestamp is a timestamp representing the server time when this object was created.' },
      ),
      col('Request', quotaColumn(false), {
        description: 'Request represents a minimum amount of cpu/memory that a container may consume.',
      }),
      col('Limit', quotaColumn(true), {
        description:
          'Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.',
      }),
    ],
    noAge: true,
  },
  {
    group: '',
    version: 'v1',
    kind: 'LimitRange',
    resource: 'limitranges',
    singular: 'limitrange',
    namespaced: true,
    shortNames: ['limits'],
    columns: [
      col('Created At', (o) => o.metadata.creationTimestamp ?? '', {
        type: 'date',
        description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
      }),
    ],
    noAge: true,
  },
];
