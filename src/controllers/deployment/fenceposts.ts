import type { KubeObject } from '../../api/types.js';
import { deploymentSpec, isRollingUpdate, type IntOrString } from './model.js';

/**
 * maxSurge and maxUnavailable as numbers of pods (intstr.GetScaledValueFromIntOrPercent and
 * deploymentutil.ResolveFenceposts): an integer is itself, "N%" is N% of the desired replicas — surge rounded
 * up, unavailable rounded down, so a percentage never makes a rollout less safe than asked. Both 0 would
 * deadlock a rollout, so unavailable becomes 1.
 *
 * Worked examples, 10 desired replicas:
 *   25% / 25%  → surge ceil(2.5) = 3, unavailable floor(2.5) = 2: between 8 available and 13 pods.
 *   0 / 10%    → surge 0, unavailable 1: one pod replaced at a time, never more than 10 pods.
 *   1% / 0%    → surge ceil(0.1) = 1, unavailable 0 (kept: surge is not 0): one extra pod at a time.
 *   0% / 0%    → surge 0, unavailable 0 → 1 (validation refuses 0 and 0 as integers, not this).
 */

/** The number an int-or-percent stands for out of `total`; undefined when it is neither (validation's job). */
export function scaledValue(value: IntOrString | undefined, total: number, roundUp: boolean): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') return Number.isInteger(value) ? value : undefined;
  const match = /^(-?\d+)%$/.exec(value);
  if (!match) return undefined;
  const scaled = (Number(match[1]) * total) / 100;
  return roundUp ? Math.ceil(scaled) : Math.floor(scaled);
}

export function resolveFenceposts(
  maxSurge: IntOrString | undefined,
  maxUnavailable: IntOrString | undefined,
  desired: number,
): { surge: number; unavailable: number } {
  const surge = scaledValue(maxSurge ?? 0, desired, true) ?? 0;
  let unavailable = scaledValue(maxUnavailable ?? 0, desired, false) ?? 0;
  if (surge === 0 && unavailable === 0) unavailable = 1;
  return { surge, unavailable };
}

/** Pods a rolling deployment may run above spec.replicas (0 for Recreate). */
export function maxSurge(d: KubeObject): number {
  if (!isRollingUpdate(d)) return 0;
  const s = deploymentSpec(d);
  return resolveFenceposts(s.strategy.rollingUpdate?.maxSurge, s.strategy.rollingUpdate?.maxUnavailable, s.replicas)
    .surge;
}

/** Pods a rolling deployment may have unavailable (0 for Recreate and for 0 replicas; never above replicas). */
export function maxUnavailable(d: KubeObject): number {
  const s = deploymentSpec(d);
  if (!isRollingUpdate(d) || s.replicas === 0) return 0;
  const { unavailable } = resolveFenceposts(
    s.strategy.rollingUpdate?.maxSurge,
    s.strategy.rollingUpdate?.maxUnavailable,
    s.replicas,
  );
  return Math.min(unavailable, s.replicas);
}
