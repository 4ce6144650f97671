import { rfc3339 } from '../../clock/clock.js';
import { ignoreNotFound } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import {
  ANN_BETA_STORAGE_PROVISIONER,
  ANN_BIND_COMPLETED,
  ANN_BOUND_BY_CONTROLLER,
  ANN_PROVISIONED_BY,
  ANN_SELECTED_NODE,
  ANN_STORAGE_PROVISIONER,
  NO_PROVISIONER,
  claimClass,
  claimRefOf,
  claimVolumeName,
  findMatchingVolume,
  isDelayBinding,
  isVolumeBoundToClaim,
  volumeBoundTo,
  volumePhase,
} from '../../api/volumes.js';
import { Resources } from '../../client/client.js';
import { cacheKey } from '../../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../../runtime/controller.js';

/**
 * kube-controller-manager's persistentvolume-binder (the PV controller): binds each pending claim to the smallest
 * available volume that fits it, or to the one pre-bound to it (by its author, the scheduler or a provisioner);
 * asks the external provisioner named by its StorageClass for one when none fits (the
 * `volume.kubernetes.io/storage-provisioner` annotation and an ExternalProvisioning event), waits for the first
 * consumer with WaitForFirstConsumer classes; keeps volume phases (Available, Bound, Released, Failed) and claim
 * phases (Pending, Bound, Lost); and reclaims a volume whose claim is gone: Retain keeps it Released, Delete leaves
 * a provisioned volume to its provisioner (a static one has no deleter: Failed), Recycle makes it Available again.
 */
const COMPONENT = 'persistentvolume-controller';
const CLAIM_INDEX = 'claimRef';

type Obj = Record<string, unknown>;

function spec(obj: KubeObject): Obj {
  return isPlainObject(obj.spec) ? obj.spec : {};
}

function claimPhase(claim: KubeObject): string {
  return isPlainObject(claim.status) ? String(claim.status.phase ?? '') : '';
}

export function persistentVolumeBinder(ctx: ControllerContext): Controller {
  const volumes = ctx.informers.for(Resources.persistentvolumes);
  const claims = ctx.informers.for(Resources.persistentvolumeclaims);
  const classes = ctx.informers.for(Resources.storageclasses);
  const recorder = ctx.recorder(COMPONENT);
  const claimLoop = new ReconcileLoop('persistentvolume-binder', ctx, syncClaim);
  const volumeLoop = new ReconcileLoop('persistentvolume-binder', ctx, syncVolume);

  volumes.addIndex(CLAIM_INDEX, (v) => {
    const ref = claimRefOf(v);
    return ref?.name ? [`${ref.namespace ?? ''}/${ref.name}`] : [];
  });
  claims.addIndex('class', (c) => [claimClass(c)]);

  const volumeChanged = (v: KubeObject): void => {
    volumeLoop.queue.add(v.metadata.name!);
    const ref = claimRefOf(v);
    if (ref?.name) claimLoop.queue.add(`${ref.namespace ?? ''}/${ref.name}`);
  };
  volumes.addEventHandler({ add: volumeChanged, update: (_o, v) => volumeChanged(v), delete: volumeChanged });
  claims.addEventHandler({
    add: (c) => claimLoop.queue.add(cacheKey(c)),
    update: (_o, c) => claimLoop.queue.add(cacheKey(c)),
    // The volumes it was bound to are Released now.
    delete: (c) => {
      for (const v of volumes.byIndex(CLAIM_INDEX, cacheKey(c))) volumeLoop.queue.add(v.metadata.name!);
    },
  });
  // A class made after its claims: they may be provisioned now.
  classes.addEventHandler({
    add: (sc) => {
      for (const c of claims.byIndex('class', sc.metadata.name!)) claimLoop.queue.add(cacheKey(c));
    },
  });

  async function setVolumePhase(volume: KubeObject, phase: string, message?: string): Promise<KubeObject> {
    if (volumePhase(volume) === phase) return volume;
    const status: Obj = { phase, lastPhaseTransitionTime: rfc3339(ctx.clock.now()) };
    if (message) status.message = message;
    return ctx.client.updateStatus(Resources.persistentvolumes, { ...volume, status });
  }

  async function setClaimStatus(claim: KubeObject, status: Obj): Promise<void> {
    const current: Obj = isPlainObject(claim.status) ? claim.status : {};
    if (Object.entries(status).every(([k, v]) => JSON.stringify(current[k]) === JSON.stringify(v))) return;
    await ctx.client.updateStatus(Resources.persistentvolumeclaims, { ...claim, status: { ...current, ...status } });
  }

  /** bind: the volume's claimRef and phase, then the claim's volumeName, annotations and status. */
  async function bind(volume: KubeObject, claim: KubeObject): Promise<void> {
    const ref = claimRefOf(volume);
    if (!ref?.uid || !isVolumeBoundToClaim(volume, claim))
      // A volume the controller chose (not pre-bound to the claim) is marked so that it may be unbound again.
      volume = await ctx.client.update(
        Resources.persistentvolumes,
        volumeBoundTo(volume, claim, !isVolumeBoundToClaim(volume, claim)),
      );
    volume = await setVolumePhase(volume, 'Bound');
    const volumeName = volume.metadata.name!;
    if (claimVolumeName(claim) !== volumeName || claim.metadata.annotations?.[ANN_BIND_COMPLETED] !== 'yes') {
      const annotations: Record<string, string> = {
        ...(claim.metadata.annotations ?? {}),
        [ANN_BIND_COMPLETED]: 'yes',
      };
      if (claimVolumeName(claim) === '') annotations[ANN_BOUND_BY_CONTROLLER] = 'yes';
      claim = await ctx.client.update(Resources.persistentvolumeclaims, {
        ...claim,
        metadata: { ...claim.metadata, annotations },
        spec: { ...spec(claim), volumeName },
      });
    }
    await setClaimStatus(claim, {
      phase: 'Bound',
      accessModes: spec(volume).accessModes,
      capacity: spec(volume).capacity,
    });
  }

  async function syncClaim(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const claim = claims.get(key.slice(0, slash), key.slice(slash + 1));
    if (!claim) return;
    if (claim.metadata.annotations?.[ANN_BIND_COMPLETED] !== undefined) return syncBoundClaim(claim);
    const volumeName = claimVolumeName(claim);
    if (volumeName !== '') {
      // Pre-bound by its author to a volume.
      const volume = volumes.get(undefined, volumeName);
      if (!volume) {
        await setClaimStatus(claim, { phase: 'Pending' });
        recorder.event(claim, 'Warning', 'FailedBinding', `volume "${volumeName}" not found`);
      } else if (!claimRefOf(volume) || isVolumeBoundToClaim(volume, claim)) await bind(volume, claim);
      else {
        await setClaimStatus(claim, { phase: 'Pending' });
        recorder.event(claim, 'Warning', 'FailedBinding', `volume "${volumeName}" already bound to a different claim.`);
      }
      return;
    }
    const className = claimClass(claim);
    const storageClass = className === '' ? undefined : classes.get(undefined, className);
    const delay = isDelayBinding(storageClass);
    const volume = findMatchingVolume(claim, volumes.list(), { delayBinding: delay });
    if (volume) return bind(volume, claim);
    await setClaimStatus(claim, { phase: 'Pending' });
    if (delay && claim.metadata.annotations?.[ANN_SELECTED_NODE] === undefined) {
      recorder.event(
        claim,
        'Normal',
        'WaitForFirstConsumer',
        'waiting for first consumer to be created before binding',
      );
      return;
    }
    if (className === '') {
      recorder.event(
        claim,
        'Normal',
        'FailedBinding',
        'no persistent volumes available for this claim and no storage class is set',
      );
      return;
    }
    if (!storageClass) {
      recorder.event(claim, 'Warning', 'ProvisioningFailed', `storageclass.storage.k8s.io "${className}" not found`);
      return;
    }
    const provisioner = String(storageClass.provisioner ?? '');
    if (provisioner === NO_PROVISIONER) return;
    if (claim.metadata.annotations?.[ANN_STORAGE_PROVISIONER] !== provisioner) {
      await ctx.client.update(Resources.persistentvolumeclaims, {
        ...claim,
        metadata: {
          ...claim.metadata,
          annotations: {
            ...(claim.metadata.annotations ?? {}),
            [ANN_BETA_STORAGE_PROVISIONER]: provisioner,
            [ANN_STORAGE_PROVISIONER]: provisioner,
          },
        },
      });
    }
    recorder.event(
      claim,
      'Normal',
      'ExternalProvisioning',
      `Waiting for a volume to be created either by the external provisioner '${provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.`,
    );
  }

  async function syncBoundClaim(claim: KubeObject): Promise<void> {
    const volumeName = claimVolumeName(claim);
    const lost = async (message: string, reason = 'ClaimLost'): Promise<void> => {
      if (claimPhase(claim) === 'Lost') return;
      await setClaimStatus(claim, { phase: 'Lost' });
      recorder.event(claim, 'Warning', reason, message);
    };
    if (volumeName === '')
      return lost('Bound claim has lost reference to PersistentVolume. Data on the volume is lost!');
    const volume = volumes.get(undefined, volumeName);
    if (!volume) return lost('Bound claim has lost its PersistentVolume. Data on the volume is lost!');
    if (!claimRefOf(volume) || isVolumeBoundToClaim(volume, claim)) return bind(volume, claim);
    return lost('Two claims are bound to the same volume, this one is bound incorrectly', 'ClaimMisbound');
  }

  async function syncVolume(name: string): Promise<void> {
    const volume = volumes.get(undefined, name);
    if (!volume) return;
    const ref = claimRefOf(volume);
    if (!ref) {
      await setVolumePhase(volume, 'Available');
      return;
    }
    const claim = ref.name ? claims.get(ref.namespace, ref.name) : undefined;
    if (!ref.uid) {
      // Pre-bound by its author; the claim's sync binds it.
      if (claim && claimVolumeName(claim) === '') claimLoop.queue.add(cacheKey(claim));
      await setVolumePhase(volume, 'Available');
      return;
    }
    if (!claim || claim.metadata.uid !== ref.uid) return reclaim(volume);
    const bound = claimVolumeName(claim);
    if (bound === '') claimLoop.queue.add(cacheKey(claim));
    else if (bound === name) await setVolumePhase(volume, 'Bound');
    else if (volume.metadata.annotations?.[ANN_BOUND_BY_CONTROLLER] === 'yes') {
      // The claim went to another volume before this binding completed: this one is free again.
      const annotations = { ...(volume.metadata.annotations ?? {}) };
      delete annotations[ANN_BOUND_BY_CONTROLLER];
      const { claimRef: _, ...rest } = spec(volume);
      const unbound = await ctx.client.update(Resources.persistentvolumes, {
        ...volume,
        metadata: { ...volume.metadata, annotations },
        spec: rest,
      });
      await setVolumePhase(unbound, 'Available');
    }
  }

  /** The claim is gone: Released, then the reclaim policy. */
  async function reclaim(volume: KubeObject): Promise<void> {
    const phase = volumePhase(volume);
    if (phase === 'Failed') return;
    if (phase !== 'Released') volume = await setVolumePhase(volume, 'Released');
    const policy = String(spec(volume).persistentVolumeReclaimPolicy ?? 'Retain');
    if (policy === 'Recycle') {
      const { claimRef: _, ...rest } = spec(volume);
      const recycled = await ctx.client.update(Resources.persistentvolumes, { ...volume, spec: rest });
      await setVolumePhase(recycled, 'Available');
      recorder.event(volume, 'Normal', 'VolumeRecycled', 'Volume recycled');
    } else if (policy === 'Delete' && volume.metadata.annotations?.[ANN_PROVISIONED_BY] === undefined) {
      // Deleting is a provisioner's (or a volume plugin's) work; a hand-made volume has no deleter.
      const message = `error getting deleter volume plugin for volume "${volume.metadata.name}": no deletable volume plugin matched`;
      await ignoreNotFound(setVolumePhase(volume, 'Failed', message));
      recorder.event(volume, 'Warning', 'VolumeFailedDelete', message);
    }
  }

  return {
    name: 'persistentvolume-binder',
    start: async () => {
      claimLoop.start();
      volumeLoop.start();
    },
    stop: () => {
      claimLoop.stop();
      volumeLoop.stop();
    },
  };
}
