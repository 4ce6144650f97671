import { isPlainObject, type KubeObject } from '../api/types.js';
import {
  ANN_SELECTED_NODE,
  NO_PROVISIONER,
  claimClass,
  claimIsBound,
  claimVolumeName,
  findMatchingVolume,
  isDelayBinding,
  podClaimNames,
  volumeBoundTo,
  volumeFitsNode,
} from '../api/volumes.js';
import { termMatches } from '../api/node-fit.js';
import { Resources } from '../client/client.js';
import { cacheKey, type Informer } from '../client/informer.js';
import type { ControllerContext } from '../runtime/controller.js';
import type { FilterFailure } from './plugins.js';

/**
 * kube-scheduler's VolumeBinding plugin. PreFilter: every claim a pod names must exist, not be terminating, and be
 * bound unless its class binds at first use (WaitForFirstConsumer); else the pod is unschedulable with the plugin's
 * reason. Filter: a node must satisfy the node affinity of the bound claims' volumes, and for each claim still to
 * bind offer an available volume that fits it there, or a provisioner that can make one. PreBind, on the chosen
 * node: static volumes are pre-bound to their claims (claimRef) and claims to provision get
 * `volume.kubernetes.io/selected-node`; the pod is bound once the PV controller has bound them all.
 */
export const REASON_NODE_CONFLICT = 'node(s) had volume node affinity conflict';
export const REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind";
export const REASON_PV_NOT_EXIST = 'node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)';
/** bindTimeoutSeconds' default. */
export const BIND_TIMEOUT_MS = 600_000;

type Obj = Record<string, unknown>;

export interface PodVolumes {
  /** Claims bound to a volume (the volume, when the cache has it). */
  bound: Array<{ claim: KubeObject; volume?: KubeObject }>;
  /** WaitForFirstConsumer claims not bound yet. */
  toBind: Array<{ claim: KubeObject; storageClass?: KubeObject }>;
}

export interface VolumePlan {
  /** Static volumes to pre-bind to their claims. */
  static: Array<{ claim: KubeObject; volume: KubeObject }>;
  /** Claims for the provisioner to make a volume for on the node. */
  provision: KubeObject[];
}

export class VolumeBinder {
  private readonly claims: Informer;
  private readonly volumes: Informer;
  private readonly classes: Informer;

  constructor(
    private readonly ctx: ControllerContext,
    /** A claim, volume or class changed: pods waiting for (or refused over) their volumes may move on. */
    onChange: (claimKey?: string) => void,
  ) {
    this.claims = ctx.informers.for(Resources.persistentvolumeclaims);
    this.volumes = ctx.informers.for(Resources.persistentvolumes);
    this.classes = ctx.informers.for(Resources.storageclasses);
    this.claims.addEventHandler({
      add: (c) => onChange(cacheKey(c)),
      update: (_o, c) => onChange(cacheKey(c)),
      delete: (c) => onChange(cacheKey(c)),
    });
    this.volumes.addEventHandler({ add: () => onChange(), update: () => onChange() });
    this.classes.addEventHandler({ add: () => onChange() });
  }

  /** PreFilter: the pod's claims, or why it cannot be scheduled anywhere now; undefined when it names none. */
  prefilter(pod: KubeObject): { volumes: PodVolumes } | { failure: string } | undefined {
    const names = podClaimNames(pod);
    if (names.length === 0) return undefined;
    const namespace = pod.metadata.namespace;
    const volumes: PodVolumes = { bound: [], toBind: [] };
    let unboundImmediate = false;
    for (const { claim: name, ephemeral } of names) {
      const claim = this.claims.get(namespace, name);
      if (!claim)
        return {
          failure: ephemeral
            ? `waiting for ephemeral volume controller to create the persistentvolumeclaim "${name}"`
            : `persistentvolumeclaim "${name}" not found`,
        };
      if (ephemeral && !claim.metadata.ownerReferences?.some((r) => r.uid === pod.metadata.uid))
        return {
          failure: `PVC ${namespace}/${name} was not created for pod ${namespace}/${pod.metadata.name} (pod is not owner)`,
        };
      if (claim.metadata.deletionTimestamp) return { failure: `persistentvolumeclaim "${name}" is being deleted` };
      if (claimVolumeName(claim) !== '') {
        volumes.bound.push({ claim, volume: this.volumes.get(undefined, claimVolumeName(claim)) });
        continue;
      }
      const className = claimClass(claim);
      const storageClass = className === '' ? undefined : this.classes.get(undefined, className);
      if (isDelayBinding(storageClass)) volumes.toBind.push({ claim, storageClass });
      else unboundImmediate = true;
    }
    if (unboundImmediate) return { failure: 'pod has unbound immediate PersistentVolumeClaims' };
    return { volumes };
  }

  /** Filter, with the volumes it would use on the node. */
  filter(pod: PodVolumes, node: KubeObject): { failure?: FilterFailure; plan?: VolumePlan } {
    const reasons: string[] = [];
    for (const { volume } of pod.bound) {
      if (!volume) reasons.push(REASON_PV_NOT_EXIST);
      else if (!volumeFitsNode(volume, node)) reasons.push(REASON_NODE_CONFLICT);
    }
    const plan: VolumePlan = { static: [], provision: [] };
    const taken = new Set<string>();
    let unbindable = false;
    for (const { claim, storageClass } of pod.toBind) {
      const volume = findMatchingVolume(claim, this.volumes.list(), { node, excluded: taken });
      if (volume) {
        taken.add(volume.metadata.name!);
        plan.static.push({ claim, volume });
      } else if (storageClass && canProvision(storageClass, node)) plan.provision.push(claim);
      else unbindable = true;
    }
    if (unbindable) reasons.push(REASON_BIND_CONFLICT);
    if (reasons.length > 0) return { failure: { reasons: [...new Set(reasons)], unresolvable: true } };
    return { plan };
  }

  /** PreBind's writes: claimRef on each static volume, the selected node on each claim to provision. */
  async bind(plan: VolumePlan, node: string): Promise<void> {
    for (const { claim, volume } of plan.static)
      await this.ctx.client.update(Resources.persistentvolumes, volumeBoundTo(volume, claim, true));
    for (const claim of plan.provision) {
      if (claim.metadata.annotations?.[ANN_SELECTED_NODE] === node) continue;
      await this.ctx.client.update(Resources.persistentvolumeclaims, {
        ...claim,
        metadata: {
          ...claim.metadata,
          annotations: { ...(claim.metadata.annotations ?? {}), [ANN_SELECTED_NODE]: node },
        },
      });
    }
  }

  /** Every claim of the pod is bound (what PreBind waits for). */
  allBound(pod: KubeObject): boolean {
    return podClaimNames(pod).every(({ claim }) => {
      const c = this.claims.get(pod.metadata.namespace, claim);
      return c !== undefined && claimIsBound(c);
    });
  }
}

/** A provisioner can make a volume on the node: not no-provisioner, and the class's allowedTopologies admit it. */
function canProvision(storageClass: KubeObject, node: KubeObject): boolean {
  if (String(storageClass.provisioner ?? '') === NO_PROVISIONER) return false;
  const topologies = Array.isArray(storageClass.allowedTopologies)
    ? (storageClass.allowedTopologies.filter(isPlainObject) as Obj[])
    : [];
  if (topologies.length === 0) return true;
  return topologies.some((t) =>
    termMatches(
      {
        matchExpressions: (Array.isArray(t.matchLabelExpressions) ? t.matchLabelExpressions : []).map((e: Obj) => ({
          key: String(e.key),
          operator: 'In',
          values: Array.isArray(e.values) ? e.values.map(String) : [],
        })),
      },
      node,
    ),
  );
}
