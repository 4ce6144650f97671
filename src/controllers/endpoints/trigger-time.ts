import type { KubeObject } from '../../api/types.js';
import { podTriggerTime } from './pods.js';

/**
 * endpointsliceutil.TriggerTimeTracker: the `endpoints.kubernetes.io/last-change-trigger-time` of a sync is the
 * earliest change (a pod's Ready transition, the Service's creation) not seen by the previous sync of that Service;
 * none on its first sync. kube-controller-manager compares every pod's time with the one the previous sync saw; here
 * the pods the controller was told changed (podChanged) are compared, which gives the same answer: the others'
 * times are those seen. Every pod is read again on a Service's first sync and when the Service changed (a new
 * selector may select other pods).
 */
interface ServiceState {
  /** The version of the Service the last sync saw. */
  service: KubeObject;
  lastPodTriggerTimes: Map<string, number>;
  lastServiceTriggerTime: number;
  /** Pods changed since the last sync, by name: the new version, or null for one the Service no longer selects. */
  changed: Map<string, KubeObject | null>;
}

export class TriggerTimeTracker {
  private readonly states = new Map<string, ServiceState>();

  /** A pod of the Service (by key) changed, joined it (selected) or left it (not selected, or deleted). */
  podChanged(key: string, pod: KubeObject, selected: boolean): void {
    this.states.get(key)?.changed.set(pod.metadata.name!, selected ? pod : null);
  }

  /** The trigger time (ms) of this sync of `service` over `pods` (the pods it selects), or undefined. */
  compute(key: string, service: KubeObject, pods: Iterable<KubeObject>): number | undefined {
    const state = this.states.get(key);
    let min: number | undefined;
    const seen = (name: string, t: number): void => {
      const before = state?.lastPodTriggerTimes.get(name);
      if (before === undefined || t > before) min = min === undefined ? t : Math.min(min, t);
    };
    let podTimes: Map<string, number>;
    if (state && state.service === service) {
      podTimes = state.lastPodTriggerTimes;
      for (const [name, pod] of state.changed) {
        const t = pod ? podTriggerTime(pod) : Number.NaN;
        if (Number.isNaN(t)) podTimes.delete(name);
        else {
          seen(name, t);
          podTimes.set(name, t);
        }
      }
    } else {
      podTimes = new Map();
      for (const pod of pods) {
        const t = podTriggerTime(pod);
        if (Number.isNaN(t)) continue;
        seen(pod.metadata.name!, t);
        podTimes.set(pod.metadata.name!, t);
      }
    }
    const serviceTime = Date.parse(service.metadata.creationTimestamp ?? '');
    if (!Number.isNaN(serviceTime) && (state === undefined || serviceTime > state.lastServiceTriggerTime))
      min = min === undefined ? serviceTime : Math.min(min, serviceTime);
    this.states.set(key, {
      service,
      lastPodTriggerTimes: podTimes,
      lastServiceTriggerTime: serviceTime,
      changed: new Map(),
    });
    return state === undefined ? undefined : min;
  }

  forget(key: string): void {
    this.states.delete(key);
  }
}

/** The annotation's format: RFC 3339 with nanoseconds' precision trimmed, as Go's time.RFC3339Nano prints it. */
export function rfc3339Nano(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/\.000Z$/, 'Z')
    .replace(/(\.\d*?)0+Z$/, '$1Z');
}
