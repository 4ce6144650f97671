import { termMatches } from './node-fit.js';
import { compareQuantities, parseQuantity } from './quantity.js';
import { selectorFromObject } from './selectors.js';
import { isPlainObject, type KubeObject } from './types.js';

/**
 * PersistentVolume and PersistentVolumeClaim helpers shared by the PV controller and the scheduler's VolumeBinding
 * plugin (k8s.io/component-helpers/storage/volume and the controller's findMatchingVolume): the classes, which
 * volume a claim can bind to, a volume's node affinity, and the annotations binding uses.
 */
type Obj = Record<string, unknown>;

export const ANN_BIND_COMPLETED = 'pv.kubernetes.io/bind-completed';
export const ANN_BOUND_BY_CONTROLLER = 'pv.kubernetes.io/bound-by-controller';
export const ANN_SELECTED_NODE = 'volume.kubernetes.io/selected-node';
export const ANN_STORAGE_PROVISIONER = 'volume.kubernetes.io/storage-provisioner';
export const ANN_BETA_STORAGE_PROVISIONER = 'volume.beta.kubernetes.io/storage-provisioner';
export const ANN_PROVISIONED_BY = 'pv.kubernetes.io/provisioned-by';
export const NO_PROVISIONER = 'kubernetes.io/no-provisioner';
const BETA_CLASS = 'volume.beta.kubernetes.io/storage-class';

function spec(obj: KubeObject): Obj {
  return isPlainObject(obj.spec) ? obj.spec : {};
}

function status(obj: KubeObject): Obj {
  return isPlainObject(obj.status) ? obj.status : {};
}

/** GetPersistentVolumeClaimClass: the beta annotation, else spec.storageClassName, else "". */
export function claimClass(claim: KubeObject): string {
  const beta = claim.metadata.annotations?.[BETA_CLASS];
  if (beta !== undefined) return beta;
  const name = spec(claim).storageClassName;
  return typeof name === 'string' ? name : '';
}

/** GetPersistentVolumeClass. */
export function volumeClass(volume: KubeObject): string {
  const beta = volume.metadata.annotations?.[BETA_CLASS];
  if (beta !== undefined) return beta;
  const name = spec(volume).storageClassName;
  return typeof name === 'string' ? name : '';
}

export function volumePhase(volume: KubeObject): string {
  return String(status(volume).phase ?? '');
}

export interface ClaimRef {
  name?: string;
  namespace?: string;
  uid?: string;
}

export function claimRefOf(volume: KubeObject): ClaimRef | undefined {
  const ref = spec(volume).claimRef;
  return isPlainObject(ref) ? (ref as ClaimRef) : undefined;
}

/** The claim a volume is (pre-)bound to is this one: same namespace and name, and its uid unless none is given. */
export function isVolumeBoundToClaim(volume: KubeObject, claim: KubeObject): boolean {
  const ref = claimRefOf(volume);
  if (!ref || ref.name !== claim.metadata.name || ref.namespace !== claim.metadata.namespace) return false;
  return ref.uid === undefined || ref.uid === '' || ref.uid === claim.metadata.uid;
}

/**
 * BindVolumeToClaim: the volume with its claimRef naming the claim (uid and resourceVersion included), marked
 * `pv.kubernetes.io/bound-by-controller` when the binder chose it (it may then unbind it again).
 */
export function volumeBoundTo(volume: KubeObject, claim: KubeObject, byController: boolean): KubeObject {
  const annotations = { ...(volume.metadata.annotations ?? {}) };
  if (byController) annotations[ANN_BOUND_BY_CONTROLLER] = 'yes';
  return {
    ...volume,
    metadata: { ...volume.metadata, annotations },
    spec: {
      ...spec(volume),
      claimRef: {
        kind: 'PersistentVolumeClaim',
        namespace: claim.metadata.namespace,
        name: claim.metadata.name,
        uid: claim.metadata.uid,
        apiVersion: 'v1',
        resourceVersion: claim.metadata.resourceVersion,
      },
    },
  };
}

/** spec.volumeName: the volume a claim is bound (or pre-bound) to. */
export function claimVolumeName(claim: KubeObject): string {
  const name = spec(claim).volumeName;
  return typeof name === 'string' ? name : '';
}

/** The claim has completed binding to a volume. */
export function claimIsBound(claim: KubeObject): boolean {
  return claimVolumeName(claim) !== '' && status(claim).phase === 'Bound';
}

function claimRequest(claim: KubeObject) {
  const resources = isPlainObject(spec(claim).resources) ? (spec(claim).resources as Obj) : {};
  const requests = isPlainObject(resources.requests) ? resources.requests : {};
  return parseQuantity(requests.storage);
}

export function volumeCapacity(volume: KubeObject) {
  const capacity = isPlainObject(spec(volume).capacity) ? (spec(volume).capacity as Obj) : {};
  return parseQuantity(capacity.storage);
}

function modes(obj: KubeObject): string[] {
  const m = spec(obj).accessModes;
  return Array.isArray(m) ? m.map(String) : [];
}

/** The volume's node affinity (spec.nodeAffinity.required) admits the node; a volume without one fits anywhere. */
export function volumeFitsNode(volume: KubeObject, node: KubeObject): boolean {
  const affinity = isPlainObject(spec(volume).nodeAffinity) ? (spec(volume).nodeAffinity as Obj) : undefined;
  const required = affinity && isPlainObject(affinity.required) ? affinity.required : undefined;
  if (!required) return true;
  const terms = Array.isArray(required.nodeSelectorTerms) ? required.nodeSelectorTerms.filter(isPlainObject) : [];
  return terms.some((t) => termMatches(t, node));
}

/**
 * findMatchingVolume: the smallest available volume the claim fits (class, volume mode, access modes, size,
 * selector, and the node's affinity when one is given), or the one pre-bound to it. With delayed binding
 * (WaitForFirstConsumer) only a pre-bound volume is taken unless a node is given: the scheduler picks the rest.
 */
export function findMatchingVolume(
  claim: KubeObject,
  volumes: Iterable<KubeObject>,
  options: { node?: KubeObject; delayBinding?: boolean; excluded?: ReadonlySet<string> } = {},
): KubeObject | undefined {
  const request = claimRequest(claim);
  const wantClass = claimClass(claim);
  const wantModes = modes(claim);
  const wantMode = String(spec(claim).volumeMode ?? 'Filesystem');
  const selector = spec(claim).selector;
  const labelSelector = isPlainObject(selector) ? selectorFromObject(selector) : undefined;
  let best: KubeObject | undefined;
  for (const volume of volumes) {
    if (options.excluded?.has(volume.metadata.name!)) continue;
    if (volume.metadata.deletionTimestamp) continue;
    if (volumeClass(volume) !== wantClass) continue;
    if (String(spec(volume).volumeMode ?? 'Filesystem') !== wantMode) continue;
    if (options.node && !volumeFitsNode(volume, options.node)) continue;
    if (isVolumeBoundToClaim(volume, claim)) return volume;
    if (claimRefOf(volume)) continue;
    if (volumePhase(volume) !== 'Available') continue;
    if (options.delayBinding && !options.node) continue;
    if (labelSelector && !labelSelector.matches(volume.metadata.labels)) continue;
    const have = modes(volume);
    if (!wantModes.every((m) => have.includes(m))) continue;
    const capacity = volumeCapacity(volume);
    if (!request || !capacity || compareQuantities(capacity, request) < 0) continue;
    if (!best || compareQuantities(capacity, volumeCapacity(best)!) < 0) best = volume;
  }
  return best;
}

/** The claims a pod's volumes name: persistentVolumeClaim volumes, and `<pod>-<volume>` for ephemeral ones. */
export function podClaimNames(pod: KubeObject): Array<{ claim: string; ephemeral: boolean }> {
  const volumes = spec(pod).volumes;
  if (!Array.isArray(volumes)) return [];
  const out: Array<{ claim: string; ephemeral: boolean }> = [];
  for (const v of volumes) {
    if (!isPlainObject(v)) continue;
    if (isPlainObject(v.persistentVolumeClaim) && typeof v.persistentVolumeClaim.claimName === 'string')
      out.push({ claim: v.persistentVolumeClaim.claimName, ephemeral: false });
    else if (isPlainObject(v.ephemeral)) out.push({ claim: `${pod.metadata.name}-${String(v.name)}`, ephemeral: true });
  }
  return out;
}

/** The StorageClass binds when the first pod uses a claim (WaitForFirstConsumer), not at once. */
export function isDelayBinding(storageClass: KubeObject | undefined): boolean {
  return storageClass?.volumeBindingMode === 'WaitForFirstConsumer';
}

/** AccessModes as kubectl prints them (GetAccessModesAsString): a fixed order, each once. */
export function accessModesString(value: unknown): string {
  const list = Array.isArray(value) ? value.map(String) : [];
  const short: Array<[string, string]> = [
    ['ReadWriteOnce', 'RWO'],
    ['ReadOnlyMany', 'ROX'],
    ['ReadWriteMany', 'RWX'],
    ['ReadWriteOncePod', 'RWOP'],
  ];
  return short
    .filter(([m]) => list.includes(m))
    .map(([, s]) => s)
    .join(',');
}
