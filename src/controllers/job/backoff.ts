import type { KubeObject } from '../../api/types.js';
import { containerStatuses, creationTime, podCondition } from '../../api/pod-util.js';

/**
 * Pod failure back-off (pkg/controller/job/backoff_utils.go): after a pod fails, the replacement waits
 * 10 s, doubling per consecutive failure since the last success, capped at 10 min. (The Job docs say
 * "capped at six minutes"; the controller's MaxJobPodFailureBackOff is 10 minutes, which is what runs.)
 *
 * Worked example: failures at t=0 (1st), t=10 (2nd), t=30 (3rd) → replacements at t=10, t=30, t=70
 * (waits of 10, 20 and 40 s); after a success the count starts again at 10 s.
 */
export const DEFAULT_POD_FAILURE_BACKOFF_MS = 10_000;
export const MAX_POD_FAILURE_BACKOFF_MS = 10 * 60_000;

export interface BackoffRecord {
  failuresAfterLastSuccess: number;
  lastFailureTime?: number;
}

export const NO_BACKOFF: BackoffRecord = { failuresAfterLastSuccess: 0 };

/** When a pod finished: its containers' latest finishedAt, else Ready=False's transition, else deletion, else creation. */
export function podFinishedTime(pod: KubeObject): number {
  let latest: number | undefined;
  const statuses = containerStatuses(pod);
  let allTerminated = statuses.length > 0;
  for (const s of statuses) {
    const at = s.state?.terminated?.finishedAt ? Date.parse(s.state.terminated.finishedAt) : NaN;
    if (Number.isNaN(at)) {
      allTerminated = false;
      break;
    }
    latest = latest === undefined ? at : Math.max(latest, at);
  }
  if (allTerminated && latest !== undefined) return latest;
  const ready = podCondition(pod, 'Ready');
  if (ready?.status === 'False' && ready.lastTransitionTime) return Date.parse(ready.lastTransitionTime);
  if (pod.metadata.deletionTimestamp)
    return Date.parse(pod.metadata.deletionTimestamp) - (pod.metadata.deletionGracePeriodSeconds ?? 0) * 1000;
  return creationTime(pod);
}

/** The record after newly counted pods: a success resets the count to the failures that came after it. */
export function nextBackoffRecord(
  record: BackoffRecord,
  newSucceeded: readonly KubeObject[],
  newFailed: readonly KubeObject[],
): BackoffRecord {
  const failedTimes = newFailed.map(podFinishedTime).sort((a, b) => a - b);
  if (newSucceeded.length === 0) {
    if (failedTimes.length === 0) return record;
    return {
      failuresAfterLastSuccess: record.failuresAfterLastSuccess + failedTimes.length,
      lastFailureTime: failedTimes[failedTimes.length - 1],
    };
  }
  const lastSuccess = Math.max(...newSucceeded.map(podFinishedTime));
  const after = failedTimes.filter((t) => t > lastSuccess);
  return after.length === 0
    ? { failuresAfterLastSuccess: 0 }
    : { failuresAfterLastSuccess: after.length, lastFailureTime: after[after.length - 1] };
}

/** Milliseconds until a replacement pod may be created (0: now). */
export function remainingBackoffMs(
  record: BackoffRecord,
  now: number,
  baseMs = DEFAULT_POD_FAILURE_BACKOFF_MS,
  maxMs = MAX_POD_FAILURE_BACKOFF_MS,
): number {
  if (record.failuresAfterLastSuccess === 0 || record.lastFailureTime === undefined) return 0;
  let backoff = baseMs;
  for (let i = 1; i < record.failuresAfterLastSuccess; i++) {
    backoff *= 2;
    if (backoff >= maxMs) {
      backoff = maxMs;
      break;
    }
  }
  const elapsed = now - record.lastFailureTime;
  return backoff < elapsed ? 0 : backoff - elapsed;
}
