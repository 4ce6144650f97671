import type { KubeObject } from '../../api/types.js';
import { podTriggerTime } from './pods.js';

/**
 * endpointsliceutil.TriggerTimeTracker: the `endpoints.kubernetes.io/last-change-trigger-time` of a sync is the
 * earliest change (a pod's Ready transition, the Service's creation) not seen by the previous sync of that Service;
 * none on its first sync. One record per Service, replaced on each sync.
 */
interface ServiceState {
  lastPodTriggerTimes: Map<string, number>;
  lastServiceTriggerTime: number;
}

export class TriggerTimeTracker {
  private readonly states = new Map<string, ServiceState>();

  /** The trigger time (ms) of this sync of `service` over `pods`, or undefined. */
  compute(key: string, service: KubeObject, pods: readonly KubeObject[]): number | undefined {
    const state = this.states.get(key);
    let min: number | undefined;
    const podTimes = new Map<string, number>();
    for (const pod of pods) {
      const t = podTriggerTime(pod);
      if (Number.isNaN(t)) continue;
      podTimes.set(pod.metadata.name!, t);
      const before = state?.lastPodTriggerTimes.get(pod.metadata.name!);
      if (before === undefined || t > before) min = min === undefined ? t : Math.min(min, t);
    }
    const serviceTime = Date.parse(service.metadata.creationTimestamp ?? '');
    if (!Number.isNaN(serviceTime) && (state === undefined || serviceTime > state.lastServiceTriggerTime))
      min = min === undefined ? serviceTime : Math.min(min, serviceTime);
    this.states.set(key, { lastPodTriggerTimes: podTimes, lastServiceTriggerTime: serviceTime });
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
