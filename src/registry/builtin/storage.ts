import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { checkQualifiedName } from '../../api/validation.js';
import { ageOf, col, str } from '../printers.js';
import type { KindInfo, StrategyContext } from '../types.js';
import { newestDefault } from './networking.js';

/** storage.k8s.io/v1 StorageClass and the DefaultStorageClass admission plugin for PersistentVolumeClaims. */
const STORAGE_CLASSES = 'storage.k8s.io/storageclasses';
const DEFAULT_ANNOTATIONS = [
  'storageclass.kubernetes.io/is-default-class',
  'storageclass.beta.kubernetes.io/is-default-class',
];
const CLAIM_CLASS_ANNOTATION = 'volume.beta.kubernetes.io/storage-class';
const RECLAIM_POLICIES = ['Delete', 'Retain'];
const BINDING_MODES = ['Immediate', 'WaitForFirstConsumer'];

function validateStorageClass(o: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const provisioner = typeof o.provisioner === 'string' ? o.provisioner : '';
  if (provisioner === '') causes.push(FieldErrors.required('provisioner', ''));
  else
    for (const p of checkQualifiedName(provisioner.toLowerCase()))
      causes.push(FieldErrors.invalid('provisioner', provisioner, p));
  if (!RECLAIM_POLICIES.includes(String(o.reclaimPolicy)))
    causes.push(FieldErrors.notSupported('reclaimPolicy', o.reclaimPolicy, RECLAIM_POLICIES));
  if (!BINDING_MODES.includes(String(o.volumeBindingMode)))
    causes.push(FieldErrors.notSupported('volumeBindingMode', o.volumeBindingMode, BINDING_MODES));
  return causes;
}

/** ValidateStorageClassUpdate: parameters, provisioner, reclaimPolicy and volumeBindingMode are fixed at creation. */
function validateStorageClassUpdate(next: KubeObject, old: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  if (!deepEqual(next.parameters ?? {}, old.parameters ?? {}))
    causes.push(FieldErrors.forbidden('parameters', 'updates to parameters are forbidden.'));
  if (next.provisioner !== old.provisioner)
    causes.push(FieldErrors.forbidden('provisioner', 'updates to provisioner are forbidden.'));
  if (next.reclaimPolicy !== old.reclaimPolicy)
    causes.push(FieldErrors.forbidden('reclaimPolicy', 'updates to reclaimPolicy are forbidden.'));
  if (next.volumeBindingMode !== old.volumeBindingMode)
    causes.push(FieldErrors.invalid('volumeBindingMode', next.volumeBindingMode, 'field is immutable'));
  return causes;
}

function isDefault(o: KubeObject): boolean {
  return DEFAULT_ANNOTATIONS.some((a) => o.metadata.annotations?.[a] === 'true');
}

/**
 * The DefaultStorageClass admission plugin on a claim's create: a claim that names no class (no storageClassName,
 * not even "", and no beta annotation) gets the default StorageClass, the newest if several are marked default.
 */
export function defaultClaimStorageClass(claim: KubeObject, ctx: StrategyContext): void {
  const spec = isPlainObject(claim.spec) ? claim.spec : (claim.spec = {});
  if (spec.storageClassName !== undefined && spec.storageClassName !== null) return;
  if (claim.metadata.annotations?.[CLAIM_CLASS_ANNOTATION] !== undefined) return;
  const newest = newestDefault(ctx.objects(STORAGE_CLASSES), ...DEFAULT_ANNOTATIONS);
  if (newest) spec.storageClassName = newest.metadata.name;
}

export const storageClasses: KindInfo = {
  group: 'storage.k8s.io',
  version: 'v1',
  kind: 'StorageClass',
  resource: 'storageclasses',
  singular: 'storageclass',
  namespaced: false,
  shortNames: ['sc'],
  strategy: {
    defaults(o) {
      o.reclaimPolicy ??= 'Delete';
      o.volumeBindingMode ??= 'Immediate';
    },
    validate: validateStorageClass,
    validateUpdate: validateStorageClassUpdate,
  },
  // printStorageClass marks the default class in the NAME column itself.
  noName: true,
  noAge: true,
  columns: [
    col('Name', (o) => `${o.metadata.name ?? ''}${isDefault(o) ? ' (default)' : ''}`, {
      format: 'name',
      description:
        'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
    }),
    col('Provisioner', (o) => str(o, 'provisioner'), {
      description: 'provisioner indicates the type of the provisioner.',
    }),
    col('ReclaimPolicy', (o) => str(o, 'reclaimPolicy', 'Delete'), {
      description:
        'reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.',
    }),
    col('VolumeBindingMode', (o) => str(o, 'volumeBindingMode', 'Immediate'), {
      description:
        'volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.',
    }),
    col('AllowVolumeExpansion', (o) => o.allowVolumeExpansion === true, {
      description: 'allowVolumeExpansion shows whether the storage class allow volume expand.',
    }),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
  ],
};
