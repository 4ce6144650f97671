import { ApiError, ignoreNotFound } from '../api/errors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject, type OwnerReference } from '../api/types.js';
import { Resources } from '../client/client.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';
import { Expectations } from '../runtime/expectations.js';
import {
  controlledBy,
  controllerOf,
  indexByController,
  newControllerRef,
  ownerKey,
  wakeOwnerOnPodEvents,
} from './controller-ref.js';
import {
  CONTROLLER_REVISION_HASH_LABEL,
  newRevision,
  nextRevisionNumber,
  planUpdateRevision,
  revisionsToTruncate,
  templateOfRevision,
  templatePatch,
} from './history.js';
import { isPodAvailable, isRunningAndReady, isTerminating, msUntilAvailable, podPhase } from '../api/pod-util.js';

export const POD_NAME_LABEL = 'statefulset.kubernetes.io/pod-name';
export const POD_INDEX_LABEL = 'apps.kubernetes.io/pod-index';
/** kube-sim's own annotation: the pod's stable DNS name `<pod>.<serviceName>.<namespace>.svc.cluster.local`. */
export const POD_DNS_ANNOTATION = 'kube-sim.dev/dns-name';

interface StatefulSetSpec {
  replicas?: number;
  ordinals?: { start?: number };
  serviceName?: string;
  podManagementPolicy?: 'OrderedReady' | 'Parallel';
  minReadySeconds?: number;
  revisionHistoryLimit?: number;
  template?: {
    metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
    spec?: Record<string, unknown>;
  };
  selector?: { matchLabels?: Record<string, string> };
  volumeClaimTemplates?: KubeObject[];
  updateStrategy?: { type?: string; rollingUpdate?: { partition?: number; maxUnavailable?: number | string } };
  persistentVolumeClaimRetentionPolicy?: { whenDeleted?: string; whenScaled?: string };
}

export interface StatefulSetStatus {
  observedGeneration?: number;
  replicas: number;
  readyReplicas?: number;
  currentReplicas?: number;
  updatedReplicas?: number;
  availableReplicas: number;
  currentRevision?: string;
  updateRevision?: string;
  collisionCount?: number;
  [extra: string]: unknown;
}

export interface SetEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface StatefulSetPlan {
  /** Claims to create before the pods that use them. */
  createClaims: KubeObject[];
  createPods: KubeObject[];
  deletePods: KubeObject[];
  /** Claims to give an owner reference to their pod before it is deleted (whenScaled: Delete). */
  claimOwnerUpdates: Array<{ claim: KubeObject; ownerReferences: OwnerReference[] }>;
  status: StatefulSetStatus;
  events: SetEvent[];
  requeueAfterMs?: number;
}

function setSpec(set: KubeObject): StatefulSetSpec {
  return isPlainObject(set.spec) ? (set.spec as StatefulSetSpec) : {};
}

/** `web-3` → 3; -1 for a name that is not `<set>-<n>`. */
export function ordinalOf(setName: string, pod: KubeObject): number {
  const name = pod.metadata.name ?? '';
  if (!name.startsWith(`${setName}-`)) return -1;
  const rest = name.slice(setName.length + 1);
  return /^(0|[1-9]\d*)$/.test(rest) ? Number(rest) : -1;
}

export function podRevision(pod: KubeObject): string | undefined {
  return pod.metadata.labels?.[CONTROLLER_REVISION_HASH_LABEL];
}

/** Claim name for a template and pod: `<template>-<set>-<ordinal>`. */
export function claimName(template: KubeObject, podName: string): string {
  return `${template.metadata.name}-${podName}`;
}

/** A pod for ordinal `ord` from the template of `revision` (newVersionedStatefulSetPod + identity + storage). */
export function statefulPod(set: KubeObject, revision: KubeObject, ordinal: number): KubeObject {
  const spec = setSpec(set);
  const template = deepCopy(
    (templateOfRevision(revision) ?? spec.template ?? {}) as StatefulSetSpec['template'] & object,
  );
  const name = `${set.metadata.name}-${ordinal}`;
  const labels: Record<string, string> = {
    ...(template.metadata?.labels ?? {}),
    [POD_NAME_LABEL]: name,
    [POD_INDEX_LABEL]: String(ordinal),
    [CONTROLLER_REVISION_HASH_LABEL]: revision.metadata.name!,
  };
  const annotations: Record<string, string> = { ...(template.metadata?.annotations ?? {}) };
  const podSpec = (template.spec ?? {}) as Record<string, unknown>;
  podSpec.hostname = name;
  if (spec.serviceName) {
    podSpec.subdomain = spec.serviceName;
    annotations[POD_DNS_ANNOTATION] = `${name}.${spec.serviceName}.${set.metadata.namespace}.svc.cluster.local`;
  }
  const claims = spec.volumeClaimTemplates ?? [];
  if (claims.length > 0) {
    const volumes = (Array.isArray(podSpec.volumes) ? (podSpec.volumes as Array<Record<string, unknown>>) : []).filter(
      (v) => !claims.some((c) => c.metadata.name === v.name),
    );
    for (const c of claims)
      volumes.push({ name: c.metadata.name, persistentVolumeClaim: { claimName: claimName(c, name) } });
    podSpec.volumes = volumes;
  }
  const metadata: KubeObject['metadata'] = {
    name,
    namespace: set.metadata.namespace,
    labels,
    ownerReferences: [newControllerRef(set, 'apps/v1', 'StatefulSet')],
  };
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec: podSpec };
}

/** The claims a pod needs (getPersistentVolumeClaims), with the retention policy's owner reference. */
export function claimsFor(set: KubeObject, podName: string): KubeObject[] {
  const spec = setSpec(set);
  return (spec.volumeClaimTemplates ?? []).map((t) => {
    const claim = deepCopy(t);
    const metadata: KubeObject['metadata'] = {
      name: claimName(t, podName),
      namespace: set.metadata.namespace,
      labels: { ...(t.metadata.labels ?? {}), ...(spec.selector?.matchLabels ?? {}) },
    };
    if (t.metadata.annotations) metadata.annotations = { ...t.metadata.annotations };
    if (spec.persistentVolumeClaimRetentionPolicy?.whenDeleted === 'Delete') {
      metadata.ownerReferences = [
        {
          apiVersion: 'apps/v1',
          kind: 'StatefulSet',
          name: set.metadata.name!,
          uid: set.metadata.uid!,
          controller: true,
          blockOwnerDeletion: true,
        },
      ];
    }
    return { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata, spec: claim.spec ?? {} };
  });
}

function scaledMaxUnavailable(value: number | string | undefined, replicas: number): number {
  if (value === undefined) return 1;
  if (typeof value === 'number') return Math.max(1, value);
  const m = /^(\d+)%$/.exec(value);
  return Math.max(1, m ? Math.ceil((Number(m[1]) * replicas) / 100) : Number(value) || 1);
}

/**
 * One sync of a StatefulSet (pkg/controller/statefulset/stateful_set_control.go), pure: given the set, its
 * pods, its current and update revisions, the claims that exist and the time, what to create and delete.
 *
 * - Pods `<set>-<ordinal>` for ordinals [start, start+replicas); ordinals below the partition are made
 *   from the current revision, the rest from the update revision.
 * - OrderedReady: one step per sync — ordinal i is created only when 0..i-1 are Running and Ready (and
 *   available for minReadySeconds); scale-down deletes the highest ordinal first, one at a time, and only
 *   while all the others are healthy. Parallel creates and deletes all at once.
 * - RollingUpdate: from the highest ordinal down to the partition, delete pods of an old revision while at
 *   most maxUnavailable pods in that range are unavailable; the replica loop recreates them at the update
 *   revision. OnDelete leaves old pods until someone deletes them.
 *
 * Example: replicas 3, partition 1, all at revision A, template changed to B → web-2 then web-1 are
 * replaced by B pods; web-0 stays A; status updatedReplicas 2, currentRevision stays A.
 */
export function planStatefulSet(
  set: KubeObject,
  pods: readonly KubeObject[],
  current: KubeObject,
  update: KubeObject,
  claims: ReadonlyMap<string, KubeObject>,
  now: number,
): StatefulSetPlan {
  const spec = setSpec(set);
  const setName = set.metadata.name!;
  const setRef = `${set.metadata.namespace}/${setName}`;
  const replicaCount = spec.replicas ?? 1;
  const start = spec.ordinals?.start ?? 0;
  const minReady = spec.minReadySeconds ?? 0;
  const monotonic = spec.podManagementPolicy !== 'Parallel';
  const rolling = (spec.updateStrategy?.type ?? 'RollingUpdate') === 'RollingUpdate';
  const partition = rolling ? Math.max(0, spec.updateStrategy?.rollingUpdate?.partition ?? 0) : 0;
  const plan: StatefulSetPlan = {
    createClaims: [],
    createPods: [],
    deletePods: [],
    claimOwnerUpdates: [],
    status: computeStatus(set, pods, current, update, now),
    events: [],
  };

  const replicas: Array<KubeObject | undefined> = new Array(replicaCount).fill(undefined);
  const condemned: KubeObject[] = [];
  for (const pod of pods) {
    const ord = ordinalOf(setName, pod);
    if (ord < 0) continue;
    if (ord >= start && ord < start + replicaCount) replicas[ord - start] = pod;
    else condemned.push(pod);
  }
  condemned.sort((a, b) => ordinalOf(setName, b) - ordinalOf(setName, a));
  const healthy = (p: KubeObject): boolean =>
    isRunningAndReady(p) && !isTerminating(p) && isPodAvailable(p, minReady, now);
  const firstUnhealthy = [...replicas, ...[...condemned].reverse()].find((p) => p !== undefined && !healthy(p));
  const waitAvailable = (p: KubeObject): void => {
    const left = msUntilAvailable(p, minReady, now);
    if (left !== undefined) plan.requeueAfterMs = Math.min(plan.requeueAfterMs ?? Infinity, left);
  };
  const createClaimsFor = (podName: string): void => {
    for (const claim of claimsFor(set, podName)) {
      if (!claims.has(claim.metadata.name!) && !plan.createClaims.some((c) => c.metadata.name === claim.metadata.name))
        plan.createClaims.push(claim);
    }
  };
  const del = (pod: KubeObject): void => {
    plan.deletePods.push(pod);
    plan.events.push({
      type: 'Normal',
      reason: 'SuccessfulDelete',
      message: `delete Pod ${pod.metadata.name} in StatefulSet ${setName} successful`,
    });
  };

  if (set.metadata.deletionTimestamp) return plan;

  // Replicas, lowest ordinal first.
  for (let i = 0; i < replicaCount; i++) {
    const ord = start + i;
    const pod = replicas[i];
    if (!pod) {
      const revision = rolling && ord < start + partition ? current : update;
      const fresh = statefulPod(set, revision, ord);
      createClaimsFor(fresh.metadata.name!);
      for (const c of claimsFor(set, fresh.metadata.name!)) {
        if (!claims.has(c.metadata.name!))
          plan.events.push({
            type: 'Normal',
            reason: 'SuccessfulCreate',
            message: `create Claim ${c.metadata.name} Pod ${fresh.metadata.name} in StatefulSet ${setName} success`,
          });
      }
      plan.createPods.push(fresh);
      plan.events.push({
        type: 'Normal',
        reason: 'SuccessfulCreate',
        message: `create Pod ${fresh.metadata.name} in StatefulSet ${setName} successful`,
      });
      if (monotonic) return plan;
      continue;
    }
    const phase = podPhase(pod);
    if ((phase === 'Failed' || phase === 'Succeeded') && !isTerminating(pod)) {
      plan.events.push(
        phase === 'Failed'
          ? {
              type: 'Warning',
              reason: 'RecreatingFailedPod',
              message: `StatefulSet ${setRef} is recreating failed Pod ${pod.metadata.name}`,
            }
          : {
              type: 'Normal',
              reason: 'RecreatingTerminatedPod',
              message: `StatefulSet ${setRef} is recreating terminated Pod ${pod.metadata.name}`,
            },
      );
      del(pod);
      if (monotonic) return plan;
      continue;
    }
    if (phase === 'Pending' || phase === '') createClaimsFor(pod.metadata.name!);
    if (!monotonic) continue;
    if (isTerminating(pod) || !isRunningAndReady(pod)) return plan;
    if (!isPodAvailable(pod, minReady, now)) {
      waitAvailable(pod);
      return plan;
    }
  }

  // Condemned pods (beyond the replicas), highest ordinal first.
  for (const pod of condemned) {
    if (isTerminating(pod)) {
      if (monotonic) return plan;
      continue;
    }
    if (monotonic && !isRunningAndReady(pod) && pod !== firstUnhealthy) return plan;
    if (spec.persistentVolumeClaimRetentionPolicy?.whenScaled === 'Delete') {
      for (const c of claimsFor(set, pod.metadata.name!)) {
        const claim = claims.get(c.metadata.name!);
        if (!claim || claim.metadata.ownerReferences?.some((r) => r.uid === pod.metadata.uid)) continue;
        plan.claimOwnerUpdates.push({
          claim,
          ownerReferences: [
            ...(claim.metadata.ownerReferences ?? []),
            { apiVersion: 'v1', kind: 'Pod', name: pod.metadata.name!, uid: pod.metadata.uid! },
          ],
        });
      }
    }
    del(pod);
    if (monotonic) return plan;
  }

  // Rolling update, highest ordinal first, down to the partition.
  if (!rolling) return plan;
  let budget = scaledMaxUnavailable(spec.updateStrategy?.rollingUpdate?.maxUnavailable, replicaCount);
  for (let i = partition; i < replicaCount; i++) {
    const p = replicas[i];
    if (!p || !healthy(p)) budget--;
  }
  for (let i = replicaCount - 1; i >= partition && budget > 0; i--) {
    const pod = replicas[i];
    if (!pod || isTerminating(pod) || podRevision(pod) === update.metadata.name) continue;
    del(pod);
    if (healthy(pod)) budget--;
  }
  return plan;
}

/** Status from the pods (computeReplicaStatus), and currentRevision catching up once a rollout is done. */
function computeStatus(
  set: KubeObject,
  pods: readonly KubeObject[],
  current: KubeObject,
  update: KubeObject,
  now: number,
): StatefulSetStatus {
  const spec = setSpec(set);
  const minReady = spec.minReadySeconds ?? 0;
  const status: StatefulSetStatus = {
    observedGeneration: set.metadata.generation,
    replicas: 0,
    readyReplicas: 0,
    currentReplicas: 0,
    updatedReplicas: 0,
    availableReplicas: 0,
    currentRevision: current.metadata.name,
    updateRevision: update.metadata.name,
    collisionCount: (set.status as { collisionCount?: number } | undefined)?.collisionCount ?? 0,
  };
  for (const pod of pods) {
    if (ordinalOf(set.metadata.name!, pod) < 0) continue;
    const created = podPhase(pod) !== '';
    if (created) status.replicas++;
    if (isRunningAndReady(pod)) {
      status.readyReplicas!++;
      if (isPodAvailable(pod, minReady, now)) status.availableReplicas++;
    }
    if (created && !isTerminating(pod)) {
      if (podRevision(pod) === current.metadata.name) status.currentReplicas!++;
      if (podRevision(pod) === update.metadata.name) status.updatedReplicas!++;
    }
  }
  const rolling = (spec.updateStrategy?.type ?? 'RollingUpdate') === 'RollingUpdate';
  if (rolling && status.updatedReplicas === status.replicas && status.readyReplicas === status.replicas) {
    status.currentRevision = status.updateRevision;
    status.currentReplicas = status.updatedReplicas;
  }
  for (const k of ['readyReplicas', 'currentReplicas', 'updatedReplicas'] as const) if (!status[k]) delete status[k];
  return status;
}

/**
 * The StatefulSet controller: revisions first (a ControllerRevision per template, `<set>-<hash>`), then
 * one planned step of pods and claims, then status. PersistentVolumeClaims are created and left Pending:
 * nothing provisions volumes here, and pods do not wait for their claims.
 */
export function statefulSetController(ctx: ControllerContext): Controller {
  const sets = ctx.informers.for(Resources.statefulsets);
  const pods = ctx.informers.for(Resources.pods);
  const revisions = ctx.informers.for(Resources.controllerrevisions);
  const claimsInformer = ctx.informers.for(Resources.persistentvolumeclaims);
  indexByController(pods);
  indexByController(revisions);
  const expectations = new Expectations(ctx.clock);
  const recorder = ctx.recorder('statefulset-controller');
  const loop = new ReconcileLoop('statefulset', ctx, reconcile, 2);
  const keyOf = (o: KubeObject): string => `${o.metadata.namespace}/${o.metadata.name}`;

  sets.addEventHandler({
    add: (s) => loop.queue.add(keyOf(s)),
    update: (_o, s) => loop.queue.add(keyOf(s)),
    delete: (s) => expectations.forget(keyOf(s)),
  });
  wakeOwnerOnPodEvents(pods, 'StatefulSet', loop.queue, expectations);
  revisions.addEventHandler({
    delete: (r) => {
      const key = ownerKey(r, 'StatefulSet');
      if (key) loop.queue.add(key);
    },
  });

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const set = sets.get(namespace, name);
    if (!set || !expectations.satisfied(key)) return;
    const uid = set.metadata.uid!;
    const owned = controlledBy(pods, uid);
    const { current, update, all } = await syncRevisions(set);
    const claims = new Map<string, KubeObject>();
    for (const t of setSpec(set).volumeClaimTemplates ?? []) {
      for (const pod of owned) {
        const c = claimsInformer.get(namespace, claimName(t, pod.metadata.name!));
        if (c) claims.set(c.metadata.name!, c);
      }
      for (let i = 0; i < (setSpec(set).replicas ?? 1); i++) {
        const c = claimsInformer.get(namespace, claimName(t, `${name}-${(setSpec(set).ordinals?.start ?? 0) + i}`));
        if (c) claims.set(c.metadata.name!, c);
      }
    }
    const plan = planStatefulSet(set, owned, current, update, claims, ctx.clock.now());

    for (const claim of plan.createClaims) {
      try {
        await ctx.client.create(Resources.persistentvolumeclaims, namespace, claim);
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 409)) {
          recorder.event(
            set,
            'Warning',
            'FailedCreate',
            `create Claim ${claim.metadata.name} for Pod in StatefulSet ${name} failed error: ${(err as Error).message}`,
          );
          throw err;
        }
      }
    }
    for (const { claim, ownerReferences } of plan.claimOwnerUpdates) {
      await ignoreNotFound(
        ctx.client.patch(Resources.persistentvolumeclaims, namespace, claim.metadata.name!, 'merge', {
          metadata: { ownerReferences, resourceVersion: claim.metadata.resourceVersion },
        }),
      );
    }
    if (plan.deletePods.length > 0) {
      expectations.expectDeletions(
        key,
        plan.deletePods.map((p) => p.metadata.uid!),
      );
      for (const pod of plan.deletePods) {
        try {
          await ctx.client.delete(Resources.pods, namespace, pod.metadata.name!, {
            preconditions: { uid: pod.metadata.uid! },
          });
        } catch (err) {
          expectations.deletionObserved(key, pod.metadata.uid!);
          if (!(err instanceof ApiError && err.code === 404)) throw err;
        }
      }
    }
    if (plan.createPods.length > 0) {
      expectations.expectCreations(key, plan.createPods.length);
      const results = await Promise.allSettled(
        plan.createPods.map((pod) => ctx.client.create(Resources.pods, namespace, pod)),
      );
      results.forEach((r, i) => {
        if (r.status === 'rejected') {
          expectations.creationObserved(key);
          recorder.event(
            set,
            'Warning',
            'FailedCreate',
            `create Pod ${plan.createPods[i]!.metadata.name} in StatefulSet ${name} failed error: ${(r.reason as Error).message}`,
          );
        }
      });
    }
    for (const e of plan.events) recorder.event(set, e.type, e.reason, e.message);
    const fresh = sets.get(namespace, name) ?? set;
    if (!deepEqual(fresh.status, plan.status))
      await ignoreNotFound(ctx.client.updateStatus(Resources.statefulsets, { ...fresh, status: plan.status }));
    await truncateHistory(set, owned, all, current, update);
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : undefined;
  }

  /** getStatefulSetRevisions: find or make the update revision; the current one comes from status. */
  async function syncRevisions(
    set: KubeObject,
  ): Promise<{ current: KubeObject; update: KubeObject; all: KubeObject[] }> {
    const all = controlledBy(revisions, set.metadata.uid!);
    let collisionCount = (set.status as { collisionCount?: number } | undefined)?.collisionCount ?? 0;
    const template = setSpec(set).template;
    for (let attempt = 0; ; attempt++) {
      const candidate = newRevision(
        set,
        'apps/v1',
        'StatefulSet',
        template?.metadata?.labels,
        templatePatch(template),
        nextRevisionNumber(all),
        collisionCount,
      );
      const step = planUpdateRevision(all, candidate);
      let update: KubeObject;
      if (step.action === 'none') update = step.revision;
      else if (step.action === 'renumber') {
        update = await ctx.client.patch(
          Resources.controllerrevisions,
          set.metadata.namespace,
          step.revision.metadata.name!,
          'merge',
          { revision: step.to },
        );
        const i = all.indexOf(step.revision);
        all[i] = update;
      } else {
        try {
          update = await ctx.client.create(Resources.controllerrevisions, set.metadata.namespace, step.revision);
          all.push(update);
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 409) || attempt > 5) throw err;
          const existing = await ctx.client.get(
            Resources.controllerrevisions,
            set.metadata.namespace,
            step.revision.metadata.name!,
          );
          if (controllerOf(existing)?.uid === set.metadata.uid && deepEqual(existing.data, step.revision.data)) {
            update = existing;
            all.push(existing);
          } else {
            collisionCount++;
            await ctx.client.patch(
              Resources.statefulsets,
              set.metadata.namespace,
              set.metadata.name!,
              'merge',
              { status: { collisionCount } },
              'status',
            );
            continue;
          }
        }
      }
      const currentName = (set.status as { currentRevision?: string } | undefined)?.currentRevision;
      const current = all.find((r) => r.metadata.name === currentName) ?? update;
      return { current, update, all };
    }
  }

  async function truncateHistory(
    set: KubeObject,
    owned: readonly KubeObject[],
    all: readonly KubeObject[],
    current: KubeObject,
    update: KubeObject,
  ): Promise<void> {
    const live = new Set<string>([current.metadata.name!, update.metadata.name!]);
    for (const p of owned) {
      const r = podRevision(p);
      if (r) live.add(r);
    }
    for (const r of revisionsToTruncate(all, live, setSpec(set).revisionHistoryLimit ?? 10)) {
      await ignoreNotFound(ctx.client.delete(Resources.controllerrevisions, set.metadata.namespace, r.metadata.name!));
    }
  }

  return { name: 'statefulset', start: async () => loop.start(), stop: () => loop.stop() };
}
