import { ApiError } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import {
  ANN_PROVISIONED_BY,
  ANN_SELECTED_NODE,
  ANN_STORAGE_PROVISIONER,
  claimClass,
  claimVolumeName,
  isDelayBinding,
  volumePhase,
} from '../../api/volumes.js';
import { Resources } from '../../client/client.js';
import { cacheKey } from '../../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../../runtime/controller.js';

/**
 * The volume provisioner kind ships (rancher.io/local-path, local-path-provisioner), simulated: a claim that the PV
 * controller hands to it (its `volume.kubernetes.io/storage-provisioner` annotation) gets a PersistentVolume
 * `pvc-<claim uid>` pre-bound to it, a hostPath directory on the node the scheduler chose
 * (`volume.kubernetes.io/selected-node`) with node affinity to that node, for WaitForFirstConsumer classes; for an
 * Immediate class, a volume on a filesystem every node shares (no node affinity), as local-path-provisioner's
 * sharedFileSystemPath makes. A Released volume it made with reclaim policy Delete is deleted.
 */
export const LOCAL_PATH_PROVISIONER = 'rancher.io/local-path';
const COMPONENT = `${LOCAL_PATH_PROVISIONER}_local-path-provisioner`;
const BASE_PATH = '/var/local-path-provisioner';
const HOSTNAME_LABEL = 'kubernetes.io/hostname';

type Obj = Record<string, unknown>;

function spec(obj: KubeObject): Obj {
  return isPlainObject(obj.spec) ? obj.spec : {};
}

/** The PersistentVolume the provisioner makes for a claim (of a class of its) on a node, or shared when none. */
export function localPathVolume(claim: KubeObject, storageClass: KubeObject, node: string | undefined): KubeObject {
  const name = `pvc-${claim.metadata.uid}`;
  const claimSpec = spec(claim);
  const resources = isPlainObject(claimSpec.resources) ? claimSpec.resources : {};
  const requests = isPlainObject(resources.requests) ? resources.requests : {};
  const volumeSpec: Obj = {
    accessModes: claimSpec.accessModes,
    capacity: { storage: requests.storage },
    claimRef: {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      name: claim.metadata.name,
      namespace: claim.metadata.namespace,
      resourceVersion: claim.metadata.resourceVersion,
      uid: claim.metadata.uid,
    },
    hostPath: {
      path: `${BASE_PATH}/${name}_${claim.metadata.namespace}_${claim.metadata.name}`,
      type: 'DirectoryOrCreate',
    },
    persistentVolumeReclaimPolicy: storageClass.reclaimPolicy ?? 'Delete',
    storageClassName: storageClass.metadata.name,
    volumeMode: claimSpec.volumeMode ?? 'Filesystem',
  };
  if (node !== undefined)
    volumeSpec.nodeAffinity = {
      required: {
        nodeSelectorTerms: [{ matchExpressions: [{ key: HOSTNAME_LABEL, operator: 'In', values: [node] }] }],
      },
    };
  const annotations: Record<string, string> = { [ANN_PROVISIONED_BY]: LOCAL_PATH_PROVISIONER };
  if (node !== undefined) annotations['local.path.provisioner/selected-node'] = node;
  return { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name, annotations }, spec: volumeSpec };
}

export function localPathProvisioner(ctx: ControllerContext): Controller {
  const claims = ctx.informers.for(Resources.persistentvolumeclaims);
  const volumes = ctx.informers.for(Resources.persistentvolumes);
  const classes = ctx.informers.for(Resources.storageclasses);
  const nodes = ctx.informers.for(Resources.nodes);
  const recorder = ctx.recorder(COMPONENT);
  const claimLoop = new ReconcileLoop('local-path-provisioner', ctx, provision);
  const volumeLoop = new ReconcileLoop('local-path-provisioner', ctx, release);

  const ours = (c: KubeObject): boolean => c.metadata.annotations?.[ANN_STORAGE_PROVISIONER] === LOCAL_PATH_PROVISIONER;
  claims.addEventHandler({
    add: (c) => ours(c) && claimLoop.queue.add(cacheKey(c)),
    update: (_o, c) => ours(c) && claimLoop.queue.add(cacheKey(c)),
  });
  const made = (v: KubeObject): boolean => v.metadata.annotations?.[ANN_PROVISIONED_BY] === LOCAL_PATH_PROVISIONER;
  volumes.addEventHandler({
    add: (v) => made(v) && volumeLoop.queue.add(v.metadata.name!),
    update: (_o, v) => made(v) && volumeLoop.queue.add(v.metadata.name!),
  });

  async function provision(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const claim = claims.get(key.slice(0, slash), key.slice(slash + 1));
    if (!claim || !ours(claim) || claim.metadata.deletionTimestamp || claimVolumeName(claim) !== '') return;
    const storageClass = classes.get(undefined, claimClass(claim));
    if (!storageClass || storageClass.provisioner !== LOCAL_PATH_PROVISIONER) return;
    const selected = claim.metadata.annotations?.[ANN_SELECTED_NODE];
    if (isDelayBinding(storageClass) && selected === undefined) return;
    if (volumes.get(undefined, `pvc-${claim.metadata.uid}`)) return;
    // The node's kubernetes.io/hostname, which the volume's node affinity names (the node's name without one).
    const node = selected === undefined ? undefined : nodes.get(undefined, selected);
    const hostname = selected === undefined ? undefined : (node?.metadata.labels?.[HOSTNAME_LABEL] ?? selected);
    const where = `${claim.metadata.namespace}/${claim.metadata.name}`;
    recorder.event(claim, 'Normal', 'Provisioning', `External provisioner is provisioning volume for claim "${where}"`);
    const volume = localPathVolume(claim, storageClass, hostname);
    try {
      await ctx.client.create(Resources.persistentvolumes, undefined, volume);
    } catch (err) {
      if (err instanceof ApiError && err.reason === 'AlreadyExists') return;
      recorder.event(
        claim,
        'Warning',
        'ProvisioningFailed',
        `failed to provision volume with StorageClass "${storageClass.metadata.name}": ${(err as Error).message}`,
      );
      throw err;
    }
    recorder.event(claim, 'Normal', 'ProvisioningSucceeded', `Successfully provisioned volume ${volume.metadata.name}`);
  }

  async function release(name: string): Promise<void> {
    const volume = volumes.get(undefined, name);
    if (!volume || volumePhase(volume) !== 'Released' || spec(volume).persistentVolumeReclaimPolicy !== 'Delete')
      return;
    try {
      await ctx.client.delete(Resources.persistentvolumes, undefined, name);
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 404)) throw err;
    }
  }

  return {
    name: 'local-path-provisioner',
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
