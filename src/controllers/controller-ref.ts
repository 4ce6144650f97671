import type { KubeObject, OwnerReference } from '../api/types.js';
import type { Informer } from '../client/informer.js';
import type { Expectations } from '../runtime/expectations.js';
import { isTerminating } from '../api/pod-util.js';

/**
 * Controller owner references, shared by the workload controllers (StatefulSet, DaemonSet, Job, CronJob and
 * any other that owns what it creates): the reference a controller stamps on its children, and an informer
 * index from a controller's uid to the objects it controls, so a reconcile reads only its own children.
 */

/** Informer index name: controller owner uid → objects. Every controller registering it uses the same function. */
export const CONTROLLER_UID_INDEX = 'controller-uid';

export function controllerOf(obj: KubeObject): OwnerReference | undefined {
  return obj.metadata.ownerReferences?.find((r) => r.controller === true);
}

/** The reference a controller puts on what it creates (metav1.NewControllerRef). */
export function newControllerRef(owner: KubeObject, apiVersion: string, kind: string): OwnerReference {
  return {
    apiVersion,
    kind,
    name: owner.metadata.name!,
    uid: owner.metadata.uid!,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** Adds the controller-uid index to an informer (idempotent: the same function each time). */
export function indexByController(informer: Informer): void {
  informer.addIndex(CONTROLLER_UID_INDEX, controllerUidIndex);
}

function controllerUidIndex(obj: KubeObject): string[] {
  const ref = controllerOf(obj);
  return ref ? [ref.uid] : [];
}

/** Objects in the informer controlled by the owner with this uid. */
export function controlledBy(informer: Informer, uid: string): KubeObject[] {
  return informer.byIndex(CONTROLLER_UID_INDEX, uid);
}

/** "namespace/name" of the controller of kind `kind` that owns obj, if any: what a child's event enqueues. */
export function ownerKey(obj: KubeObject, kind: string): string | undefined {
  const ref = controllerOf(obj);
  return ref && ref.kind === kind ? `${obj.metadata.namespace}/${ref.name}` : undefined;
}

/**
 * The pod handlers every workload controller shares: a pod event wakes the controller that owns the pod,
 * and tells its expectations that a creation or deletion it asked for has been observed.
 */
export function wakeOwnerOnPodEvents(
  pods: Informer,
  ownerKind: string,
  queue: { add(key: string): void },
  expectations: Expectations,
): void {
  pods.addEventHandler({
    add: (pod) => {
      const key = ownerKey(pod, ownerKind);
      if (!key) return;
      expectations.creationObserved(key);
      queue.add(key);
    },
    update: (old, pod) => {
      const key = ownerKey(pod, ownerKind);
      if (!key) return;
      if (isTerminating(pod) && !isTerminating(old)) expectations.deletionObserved(key, pod.metadata.uid!);
      queue.add(key);
    },
    delete: (pod) => {
      const key = ownerKey(pod, ownerKind);
      if (!key) return;
      expectations.deletionObserved(key, pod.metadata.uid!);
      queue.add(key);
    },
  });
}
