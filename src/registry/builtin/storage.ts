import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { formatQuantity, parseQuantity } from '../../api/quantity.js';
import { checkDns1123Subdomain, checkQualifiedName } from '../../api/validation.js';
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

const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const ageColumn = col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
});

/** ValidateCSIDriverName: a DNS subdomain of at most 63 characters. */
function checkCsiDriverName(name: string, at: string): StatusCause[] {
  if (name === '') return [FieldErrors.required(at, '')];
  const causes: StatusCause[] = [];
  if (name.length > 63) causes.push(FieldErrors.tooLong(at, 63));
  for (const p of checkDns1123Subdomain(name.toLowerCase())) causes.push(FieldErrors.invalid(at, name, p));
  return causes;
}

const LIFECYCLE_MODES = ['Ephemeral', 'Persistent'];
const FS_GROUP_POLICIES = ['File', 'None', 'ReadWriteOnceWithFSType'];

const csiDrivers: KindInfo = {
  group: 'storage.k8s.io',
  version: 'v1',
  kind: 'CSIDriver',
  resource: 'csidrivers',
  singular: 'csidriver',
  namespaced: false,
  strategy: {
    // SetDefaults_CSIDriver.
    defaults(o) {
      const spec = obj(o.spec);
      if (!isPlainObject(o.spec)) o.spec = spec;
      spec.attachRequired ??= true;
      spec.podInfoOnMount ??= false;
      spec.storageCapacity ??= false;
      spec.fsGroupPolicy ??= 'ReadWriteOnceWithFSType';
      spec.requiresRepublish ??= false;
      spec.seLinuxMount ??= false;
      if (list(spec.volumeLifecycleModes).length === 0) spec.volumeLifecycleModes = ['Persistent'];
    },
    validate(o) {
      const causes = checkCsiDriverName(o.metadata.name ?? '', 'metadata.name');
      const spec = obj(o.spec);
      list(spec.volumeLifecycleModes).forEach((m, i) => {
        if (!LIFECYCLE_MODES.includes(String(m)))
          causes.push(FieldErrors.notSupported(`spec.volumeLifecycleModes[${i}]`, m, LIFECYCLE_MODES));
      });
      if (!FS_GROUP_POLICIES.includes(String(spec.fsGroupPolicy)))
        causes.push(FieldErrors.notSupported('spec.fsGroupPolicy', spec.fsGroupPolicy, FS_GROUP_POLICIES));
      return causes;
    },
    validateUpdate(next, old) {
      const causes: StatusCause[] = [];
      for (const f of ['attachRequired', 'fsGroupPolicy', 'volumeLifecycleModes']) {
        const a = obj(next.spec)[f];
        if (!deepEqual(a, obj(old.spec)[f])) causes.push(FieldErrors.invalid(`spec.${f}`, a, 'field is immutable'));
      }
      return causes;
    },
  },
  columns: [
    col('AttachRequired', (o) => obj(o.spec).attachRequired !== false, {
      type: 'boolean',
      description:
        'attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting.',
    }),
    col('PodInfoOnMount', (o) => obj(o.spec).podInfoOnMount === true, {
      type: 'boolean',
      description:
        'podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true.',
    }),
    col('StorageCapacity', (o) => obj(o.spec).storageCapacity === true, {
      type: 'boolean',
      description:
        'storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.',
    }),
    col(
      'TokenRequests',
      (o) => {
        const requests = list(obj(o.spec).tokenRequests);
        return requests.length === 0 ? '<unset>' : requests.map((r) => String(obj(r).audience ?? '')).join(',');
      },
      {
        description:
          "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication.",
      },
    ),
    col('RequiresRepublish', (o) => obj(o.spec).requiresRepublish === true, {
      type: 'boolean',
      description:
        'requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume.',
    }),
    col('Modes', (o) => list(obj(o.spec).volumeLifecycleModes).map(String).join(',') || '<none>', {
      description: 'volumeLifecycleModes defines what kind of volumes this CSI volume driver supports.',
    }),
    ageColumn,
  ],
  noAge: true,
};

const csiNodes: KindInfo = {
  group: 'storage.k8s.io',
  version: 'v1',
  kind: 'CSINode',
  resource: 'csinodes',
  singular: 'csinode',
  namespaced: false,
  strategy: {
    validate(o) {
      const causes: StatusCause[] = [];
      const names = new Set<string>();
      list(obj(o.spec).drivers).forEach((d, i) => {
        const at = `spec.drivers[${i}]`;
        const driver = obj(d);
        const name = typeof driver.name === 'string' ? driver.name : '';
        causes.push(...checkCsiDriverName(name, `${at}.name`));
        if (names.has(name)) causes.push(FieldErrors.duplicate(`${at}.name`, name));
        names.add(name);
        if (typeof driver.nodeID !== 'string' || driver.nodeID === '')
          causes.push(FieldErrors.required(`${at}.nodeID`, 'nodeID must be provided'));
      });
      return causes;
    },
  },
  columns: [
    col('Drivers', (o) => list(obj(o.spec).drivers).length, {
      type: 'integer',
      description: 'Drivers indicates the number of CSI drivers registered on the node',
    }),
    ageColumn,
  ],
  noAge: true,
};

const csiStorageCapacities: KindInfo = {
  group: 'storage.k8s.io',
  version: 'v1',
  kind: 'CSIStorageCapacity',
  resource: 'csistoragecapacities',
  singular: 'csistoragecapacity',
  namespaced: true,
  strategy: {
    validate(o) {
      const name = typeof o.storageClassName === 'string' ? o.storageClassName : '';
      if (name === '') return [FieldErrors.required('storageClassName', '')];
      return checkDns1123Subdomain(name).map((p) => FieldErrors.invalid('storageClassName', name, p));
    },
  },
  columns: [
    col('StorageClassName', (o) => String(o.storageClassName ?? ''), {
      description:
        'storageClassName represents the name of the StorageClass that the reported capacity applies to. It must meet the same requirements as the name of a StorageClass object (non-empty, DNS subdomain). If that object no longer exists, the CSIStorageCapacity object is obsolete and should be removed by its creator. This field is immutable.',
    }),
    col('Capacity', (o) => (o.capacity === undefined ? '<unset>' : String(o.capacity)), {
      description:
        'capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields.',
    }),
  ],
  noAge: true,
};

const volumeAttachments: KindInfo = {
  group: 'storage.k8s.io',
  version: 'v1',
  kind: 'VolumeAttachment',
  resource: 'volumeattachments',
  singular: 'volumeattachment',
  namespaced: false,
  status: true,
  strategy: {
    validate(o) {
      const spec = obj(o.spec);
      const causes = checkCsiDriverName(typeof spec.attacher === 'string' ? spec.attacher : '', 'spec.attacher');
      const source = obj(spec.source);
      const pv = source.persistentVolumeName;
      const inline = source.inlineVolumeSpec;
      if ((pv === undefined) === (inline === undefined))
        causes.push(
          FieldErrors.invalid(
            'spec.source',
            source,
            'must specify exactly one of inlineVolumeSpec and persistentVolumeName',
          ),
        );
      const node = typeof spec.nodeName === 'string' ? spec.nodeName : '';
      if (node === '') causes.push(FieldErrors.required('spec.nodeName', ''));
      else for (const p of checkDns1123Subdomain(node)) causes.push(FieldErrors.invalid('spec.nodeName', node, p));
      return causes;
    },
    validateUpdate(next, old) {
      return deepEqual(next.spec, old.spec) ? [] : [FieldErrors.invalid('spec', next.spec, 'field is immutable')];
    },
    statusValidation: 'metadata',
  },
  columns: [
    col('Attacher', (o) => String(obj(o.spec).attacher ?? ''), {
      description:
        'attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().',
    }),
    col('PV', (o) => String(obj(obj(o.spec).source).persistentVolumeName ?? ''), {
      description: 'persistentVolumeName represents the name of the persistent volume to attach.',
    }),
    col('Node', (o) => String(obj(o.spec).nodeName ?? ''), {
      description: 'nodeName represents the node that the volume should be attached to.',
    }),
    col('Attached', (o) => obj(o.status).attached === true, {
      type: 'boolean',
      description:
        'attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher.',
    }),
    ageColumn,
  ],
  noAge: true,
};

/** storage.k8s.io/v1's CSI kinds. */
export const csiKinds: KindInfo[] = [csiDrivers, csiNodes, csiStorageCapacities, volumeAttachments];
