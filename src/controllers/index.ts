import type { ControllerFactory } from '../runtime/manager.js';
import { csrApprovingController } from './certificates/approver.js';
import { csrCleanerController } from './certificates/cleaner.js';
import { csrSigningController } from './certificates/signer.js';
import { clusterRoleAggregationController } from './clusterrole-aggregation.js';
import { configWatcher } from './configwatcher.js';
import { cronJobController } from './cronjob/controller.js';
import { daemonSetController } from './daemonset.js';
import { endpointsController } from './endpoints/endpoints.js';
import { endpointSliceController } from './endpoints/endpointslices.js';
import { endpointSliceMirroringController } from './endpoints/mirroring.js';
import { deploymentController } from './deployment/controller.js';
import { disruptionController } from './disruption.js';
import { garbageCollector } from './garbage-collector.js';
import { hpaController } from './hpa/controller.js';
import { jobController } from './job/controller.js';
import { namespaceController } from './namespace.js';
import { nodeLifecycleController } from './node-lifecycle.js';
import { podGarbageCollector } from './podgc.js';
import { replicaSetController, replicationManager } from './replicaset.js';
import { resourceQuotaController } from './resourcequota.js';
import { rootCaCertPublisher } from './root-ca-cert-publisher.js';
import { serviceAccountController } from './serviceaccount.js';
import { statefulSetController } from './statefulset.js';
import { ttlAfterFinishedController } from './ttl-after-finished.js';
import { persistentVolumeBinder } from './volume/binder.js';
import { ephemeralVolumeController } from './volume/ephemeral.js';
import { localPathProvisioner } from './volume/local-path-provisioner.js';
import { claimProtectionController, volumeProtectionController } from './volume/protection.js';

/**
 * Every controller `--controllers` can name, in kube-controller-manager's vocabulary. A name listed in
 * CONTROLLER_NAMES without a factory yet is accepted and simply not started.
 */
export const CONTROLLER_NAMES = [
  'replicaset',
  'replicationcontroller',
  'deployment',
  'statefulset',
  'daemonset',
  'job',
  'cronjob',
  'ttl-after-finished',
  'garbagecollector',
  'namespace',
  'nodelifecycle',
  'podgc',
  'configwatcher',
  'clusterrole-aggregation',
  'serviceaccount',
  'disruption',
  'horizontalpodautoscaling',
  'resourcequota',
  'root-ca-cert-publisher',
  'csrapproving',
  'csrsigning',
  'csrcleaner',
  'persistentvolume-binder',
  'persistentvolumeclaim-protection',
  'persistentvolume-protection',
  'ephemeral-volume',
  'endpoint',
  'endpointslice',
  'endpointslicemirroring',
  // Not kube-controller-manager's: the provisioner kind runs beside it (a Deployment in local-path-storage).
  'local-path-provisioner',
] as const;

export const controllerFactories: ReadonlyMap<string, ControllerFactory> = new Map<string, ControllerFactory>([
  ['replicaset', replicaSetController],
  ['replicationcontroller', replicationManager],
  ['deployment', deploymentController],
  ['namespace', namespaceController],
  ['garbagecollector', garbageCollector],
  ['configwatcher', configWatcher],
  ['statefulset', statefulSetController],
  ['daemonset', daemonSetController],
  ['job', jobController],
  ['cronjob', cronJobController],
  ['ttl-after-finished', ttlAfterFinishedController],
  ['nodelifecycle', nodeLifecycleController],
  ['podgc', podGarbageCollector],
  ['clusterrole-aggregation', clusterRoleAggregationController],
  ['serviceaccount', serviceAccountController],
  ['disruption', disruptionController],
  ['horizontalpodautoscaling', (ctx) => hpaController(ctx)],
  ['resourcequota', resourceQuotaController],
  ['root-ca-cert-publisher', rootCaCertPublisher],
  ['csrapproving', csrApprovingController],
  ['csrsigning', csrSigningController],
  ['csrcleaner', csrCleanerController],
  ['persistentvolume-binder', persistentVolumeBinder],
  ['persistentvolumeclaim-protection', claimProtectionController],
  ['persistentvolume-protection', volumeProtectionController],
  ['ephemeral-volume', ephemeralVolumeController],
  ['local-path-provisioner', localPathProvisioner],
  ['endpoint', endpointsController],
  ['endpointslice', endpointSliceController],
  ['endpointslicemirroring', endpointSliceMirroringController],
]);
