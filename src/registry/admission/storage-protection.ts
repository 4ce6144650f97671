import type { AdmissionPlugin, AdmissionRequest } from '../types.js';

/**
 * kube-apiserver's StorageObjectInUseProtection plugin: a new PersistentVolumeClaim gets the
 * `kubernetes.io/pvc-protection` finalizer and a new PersistentVolume `kubernetes.io/pv-protection`, which the
 * protection controllers remove once nothing uses them, so a claim in use or a bound volume outlives its DELETE
 * (Terminating) instead of going under a running pod.
 */
const FINALIZERS: Record<string, string> = {
  persistentvolumeclaims: 'kubernetes.io/pvc-protection',
  persistentvolumes: 'kubernetes.io/pv-protection',
};

export class StorageObjectInUseProtection implements AdmissionPlugin {
  readonly name = 'StorageObjectInUseProtection';

  admit({ info, operation, obj, subresource }: AdmissionRequest): void {
    if (operation !== 'CREATE' || info.group !== '' || subresource !== '' || !obj) return;
    const finalizer = FINALIZERS[info.resource];
    if (!finalizer) return;
    const finalizers = obj.metadata.finalizers ?? [];
    if (!finalizers.includes(finalizer)) obj.metadata.finalizers = [...finalizers, finalizer];
  }
}
