import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { formatQuantity, parseQuantity } from '../../api/quantity.js';
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

const STANDARD_CLASS = {
  apiVersion: 'storage.k8s.io/v1',
  kind: 'StorageClass',
  metadata: { name: 'standard', annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
  provisioner: 'rancher.io/local-path',
  reclaimPolicy: 'Delete',
  volumeBindingMode: 'WaitForFirstConsumer',
};

/**
 * kind's default StorageClass, as kind applies it with kubectl (so it carries kubectl's last-applied annotation, and
 * applying a `standard` class of one's own configures it without a warning): local-path-provisioner's volumes, bound
 * when the first pod uses the claim, deleted with it.
 */
export const defaultStorageClass: KubeObject = {
  ...STANDARD_CLASS,
  metadata: {
    ...STANDARD_CLASS.metadata,
    annotations: {
      ...STANDARD_CLASS.metadata.annotations,
      'kubectl.kubernetes.io/last-applied-configuration': `${JSON.stringify({
        apiVersion: STANDARD_CLASS.apiVersion,
        kind: STANDARD_CLASS.kind,
        metadata: { annotations: STANDARD_CLASS.metadata.annotations, name: 'standard' },
        provisioner: STANDARD_CLASS.provisioner,
        reclaimPolicy: STANDARD_CLASS.reclaimPolicy,
        volumeBindingMode: STANDARD_CLASS.volumeBindingMode,
      })}\n`,
    },
  },
};

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

// ---------------------------------------------------------------------------------------------------
// PersistentVolumeClaim and PersistentVolume rules (ValidatePersistentVolumeClaim, ValidatePersistentVolume)

type Obj = Record<string, unknown>;
const ACCESS_MODES = ['ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOnce', 'ReadWriteOncePod'];
const VOLUME_SOURCES = [
  'hostPath',
  'local',
  'nfs',
  'csi',
  'iscsi',
  'fc',
  'cephfs',
  'rbd',
  'glusterfs',
  'azureFile',
  'azureDisk',
  'awsElasticBlockStore',
  'gcePersistentDisk',
  'cinder',
  'flexVolume',
  'vsphereVolume',
  'portworxVolume',
  'storageos',
  'scaleIO',
  'quobyte',
  'flocker',
  'photonPersistentDisk',
];

function specOf(o: KubeObject): Obj {
  return isPlainObject(o.spec) ? o.spec : {};
}

function accessModeErrors(path: string, modes: unknown): StatusCause[] {
  if (!Array.isArray(modes) || modes.length === 0)
    return [FieldErrors.required(path, 'at least 1 access mode is required')];
  const causes: StatusCause[] = [];
  for (const m of modes)
    if (!ACCESS_MODES.includes(String(m))) causes.push(FieldErrors.notSupported(path, m, ACCESS_MODES));
  if (modes.includes('ReadWriteOncePod') && modes.length > 1)
    causes.push(FieldErrors.forbidden(path, 'may not use ReadWriteOncePod with other access modes'));
  return causes;
}

function storageErrors(path: string, value: unknown): StatusCause[] {
  if (value === undefined) return [FieldErrors.required(path.replace(/\.requests\[storage\]$/, '[storage]'), '')];
  const q = parseQuantity(value);
  return q && q.nanos <= 0n ? [FieldErrors.invalid(path, value, 'must be greater than zero')] : [];
}

export function validateClaim(o: KubeObject): StatusCause[] {
  const s = specOf(o);
  const resources = isPlainObject(s.resources) ? s.resources : {};
  const requests = isPlainObject(resources.requests) ? resources.requests : {};
  return [
    ...accessModeErrors('spec.accessModes', s.accessModes),
    ...storageErrors('spec.resources.requests[storage]', requests.storage),
  ];
}

/**
 * ValidatePersistentVolumeClaimUpdate: the spec is fixed once made, but for the volume it binds to (set once) and,
 * for a bound claim, its storage request (which may grow, not shrink).
 */
export function validateClaimUpdate(next: KubeObject, old: KubeObject): StatusCause[] {
  const a = specOf(next);
  const b = specOf(old);
  const request = (s: Obj) =>
    isPlainObject(s.resources) && isPlainObject(s.resources.requests) ? s.resources.requests.storage : undefined;
  const comparable = (s: Obj, volumeName: unknown): Obj => {
    const { resources: _r, volumeAttributesClassName: _v, ...rest } = s;
    return { ...rest, volumeName };
  };
  const bound = typeof b.volumeName === 'string' && b.volumeName !== '';
  // volumeName may be set once (binding); requests may change only on a bound claim.
  const volumeName = bound ? b.volumeName : a.volumeName;
  const sameRequest = JSON.stringify(request(a)) === JSON.stringify(request(b));
  if (!deepEqual(comparable(a, a.volumeName), comparable(b, volumeName)) || (!bound && !sameRequest))
    return [
      FieldErrors.forbidden(
        'spec',
        'spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims',
      ),
    ];
  const before = parseQuantity(request(b));
  const after = parseQuantity(request(a));
  if (before && after && after.nanos < before.nanos)
    return [FieldErrors.forbidden('spec.resources.requests.storage', 'field can not be less than status.capacity')];
  return [];
}

export function validateVolume(o: KubeObject): StatusCause[] {
  const s = specOf(o);
  const causes = accessModeErrors('spec.accessModes', s.accessModes);
  const capacity = isPlainObject(s.capacity) ? s.capacity : undefined;
  if (!capacity || capacity.storage === undefined) causes.push(FieldErrors.required('spec.capacity', ''));
  else {
    const q = parseQuantity(capacity.storage);
    if (q && q.nanos <= 0n)
      causes.push(FieldErrors.invalid('spec.capacity[storage]', capacity.storage, 'must be greater than zero'));
  }
  const sources = VOLUME_SOURCES.filter((k) => s[k] !== undefined);
  if (sources.length === 0) causes.push(FieldErrors.required('spec', 'must specify a volume type'));
  else if (sources.length > 1)
    causes.push(FieldErrors.forbidden(`spec.${sources[1]}`, 'may not specify more than 1 volume type'));
  const policies = ['Delete', 'Recycle', 'Retain'];
  if (!policies.includes(String(s.persistentVolumeReclaimPolicy)))
    causes.push(
      FieldErrors.notSupported('spec.persistentVolumeReclaimPolicy', s.persistentVolumeReclaimPolicy, policies),
    );
  return causes;
}

/** ValidatePersistentVolumeUpdate: the volume source, its mode and its node affinity are fixed once made. */
export function validateVolumeUpdate(next: KubeObject, old: KubeObject): StatusCause[] {
  const a = specOf(next);
  const b = specOf(old);
  const source = (s: Obj) => Object.fromEntries(VOLUME_SOURCES.filter((k) => s[k] !== undefined).map((k) => [k, s[k]]));
  const causes: StatusCause[] = [];
  if (!deepEqual(source(a), source(b)))
    causes.push(
      FieldErrors.forbidden('spec.persistentvolumesource', 'spec.persistentvolumesource is immutable after creation'),
    );
  if (a.volumeMode !== b.volumeMode)
    causes.push(FieldErrors.invalid('spec.volumeMode', a.volumeMode, 'field is immutable'));
  if (b.nodeAffinity !== undefined && !deepEqual(a.nodeAffinity, b.nodeAffinity))
    causes.push(FieldErrors.invalid('spec.nodeAffinity', a.nodeAffinity, 'field is immutable'));
  return causes;
}

/** printPersistentVolumeClaim / printPersistentVolume: Terminating while being deleted, canonical quantities. */
export function volumePhaseColumn(o: KubeObject): string {
  return o.metadata.deletionTimestamp ? 'Terminating' : str(o, 'status.phase');
}

export function quantityColumn(value: unknown): string {
  const q = parseQuantity(value);
  return q ? formatQuantity(q) : '0';
}
