import { isPlainObject } from '../../api/types.js';

/**
 * What the HPA controller remembers of each HPA between syncs (horizontal.go's recommendations, scaleUpEvents and
 * scaleDownEvents maps, kept here as one record per HPA), and the normalization of a desired replica count with it:
 *
 * - without spec.behavior: the highest recommendation of the last 5 minutes (--horizontal-pod-autoscaler-downscale-
 *   stabilization) on the way down, and at most max(2 × current, 4) replicas on the way up;
 * - with spec.behavior (autoscaling/v2): stabilization windows both ways (the lowest recent recommendation on the way
 *   up, the highest on the way down), then the policies' rate limits over their periods, picked by selectPolicy.
 *
 * Worked example of a policy: scale-up {Pods 4 per 15 s, Percent 100 per 15 s}, selectPolicy Max. 3 replicas, 2
 * added 10 s ago: the period started at 3 − 2 = 1 replica, so Pods allows 1 + 4 = 5 and Percent 1 × 2 = 2; Max
 * takes 5, so a desired 9 becomes 5 (ScalingLimited True, ScaleUpLimit).
 */
export const DOWNSCALE_STABILIZATION_MS = 5 * 60_000;
const SCALE_UP_LIMIT_FACTOR = 2;
const SCALE_UP_LIMIT_MINIMUM = 4;

export interface ScalingPolicy {
  type: string;
  value: number;
  periodSeconds: number;
}

/** HPAScalingRules with autoscaling/v2's defaults filled in (GenerateHPAScaleUpRules / GenerateHPAScaleDownRules). */
export interface ScalingRules {
  stabilizationWindowSeconds: number;
  selectPolicy: string;
  policies: ScalingPolicy[];
}

export interface Behavior {
  scaleUp: ScalingRules;
  scaleDown: ScalingRules;
}

/** A condition normalization sets on the HPA (AbleToScale, ScalingLimited). */
export interface ConditionChange {
  type: 'AbleToScale' | 'ScalingLimited';
  status: 'True' | 'False';
  reason: string;
  message: string;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

const DEFAULT_SCALE_UP: ScalingRules = {
  stabilizationWindowSeconds: 0,
  selectPolicy: 'Max',
  policies: [
    { type: 'Pods', value: 4, periodSeconds: 15 },
    { type: 'Percent', value: 100, periodSeconds: 15 },
  ],
};
const DEFAULT_SCALE_DOWN: ScalingRules = {
  // Unset in the API; the controller fills in its downscale stabilization (maybeInitScaleDownStabilizationWindow).
  stabilizationWindowSeconds: DOWNSCALE_STABILIZATION_MS / 1000,
  selectPolicy: 'Max',
  policies: [{ type: 'Percent', value: 100, periodSeconds: 15 }],
};

function rulesOf(raw: unknown, defaults: ScalingRules): ScalingRules {
  const r = obj(raw);
  return {
    stabilizationWindowSeconds:
      typeof r.stabilizationWindowSeconds === 'number'
        ? r.stabilizationWindowSeconds
        : defaults.stabilizationWindowSeconds,
    selectPolicy: typeof r.selectPolicy === 'string' ? r.selectPolicy : defaults.selectPolicy,
    policies: Array.isArray(r.policies)
      ? r.policies.map((p) => {
          const policy = obj(p);
          return {
            type: String(policy.type ?? ''),
            value: typeof policy.value === 'number' ? policy.value : 0,
            periodSeconds: typeof policy.periodSeconds === 'number' ? policy.periodSeconds : 0,
          };
        })
      : defaults.policies,
  };
}

/** spec.behavior with its unset parts defaulted, or undefined when the HPA has none. */
export function behaviorOf(spec: Obj): Behavior | undefined {
  if (!isPlainObject(spec.behavior)) return undefined;
  return {
    scaleUp: rulesOf(spec.behavior.scaleUp, DEFAULT_SCALE_UP),
    scaleDown: rulesOf(spec.behavior.scaleDown, DEFAULT_SCALE_DOWN),
  };
}

interface Recommendation {
  replicas: number;
  at: number;
}

interface ScaleEvent {
  change: number;
  at: number;
  outdated: boolean;
}

/** The replicas changed by events younger than the period (getReplicasChangePerPeriod). */
function changedWithin(periodSeconds: number, events: readonly ScaleEvent[], now: number): number {
  const cutoff = now - periodSeconds * 1000;
  let replicas = 0;
  for (const e of events) if (e.at > cutoff) replicas += e.change;
  return replicas;
}

/** Scale events of both directions, for the policies' periods. */
export interface ScaleEvents {
  up: readonly ScaleEvent[];
  down: readonly ScaleEvent[];
}

/**
 * The replica count each policy allows now, from the count its period started with (the current one less what was
 * added in it, plus what was removed), chosen by selectPolicy: `most` picks for Max (the biggest change), `least`
 * for Min; Disabled allows no change.
 */
function policyLimit(
  current: number,
  events: ScaleEvents,
  rules: ScalingRules,
  now: number,
  allowed: (start: number, policy: ScalingPolicy) => number,
  most: (a: number, b: number) => number,
  least: (a: number, b: number) => number,
): number {
  if (rules.selectPolicy === 'Disabled') return current;
  const pick = rules.selectPolicy === 'Min' ? least : most;
  let result: number | undefined;
  for (const policy of rules.policies) {
    const start =
      current -
      changedWithin(policy.periodSeconds, events.up, now) +
      changedWithin(policy.periodSeconds, events.down, now);
    const proposed = allowed(start, policy);
    result = result === undefined ? proposed : pick(result, proposed);
  }
  // No policy: the starting value Go picks with (math.MinInt32 for a maximum, math.MaxInt32 for a minimum).
  return result ?? (pick === Math.max ? Number.MIN_SAFE_INTEGER : Number.MAX_SAFE_INTEGER);
}

/** calculateScaleUpLimitWithScalingRules: the most replicas the policies allow now. */
export function scaleUpLimit(current: number, events: ScaleEvents, rules: ScalingRules, now: number): number {
  return policyLimit(
    current,
    events,
    rules,
    now,
    (start, policy) =>
      policy.type === 'Pods'
        ? start + policy.value
        : // Rounded up: a rounded-down increase might never add a replica.
          policy.type === 'Percent'
          ? Math.ceil(start * (1 + policy.value / 100))
          : 0,
    Math.max,
    Math.min,
  );
}

/** calculateScaleDownLimitWithBehaviors: the fewest replicas the policies allow now. */
export function scaleDownLimit(current: number, events: ScaleEvents, rules: ScalingRules, now: number): number {
  return policyLimit(
    current,
    events,
    rules,
    now,
    (start, policy) =>
      policy.type === 'Pods'
        ? start - policy.value
        : policy.type === 'Percent'
          ? Math.trunc(start * (1 - policy.value / 100))
          : 0,
    Math.min,
    Math.max,
  );
}

export interface Normalization {
  current: number;
  desired: number;
  min: number;
  max: number;
  now: number;
}

/** One HPA's remembered recommendations and scale events, with the transitions the controller makes on them. */
export class ScaleHistory {
  private readonly recommendations: Recommendation[] = [];
  private readonly upEvents: ScaleEvent[] = [];
  private readonly downEvents: ScaleEvent[] = [];

  constructor(private readonly downscaleStabilizationMs = DOWNSCALE_STABILIZATION_MS) {}

  /** recordInitialRecommendation: the first sync remembers the current size as a recommendation. */
  recordInitial(current: number, now: number): void {
    if (this.recommendations.length === 0) this.recommendations.push({ replicas: current, at: now });
  }

  /** Records a recommendation, reusing an outdated slot as horizontal.go does (the last one found). */
  private remember(replicas: number, now: number, outdated: (r: Recommendation) => boolean): void {
    let index = -1;
    this.recommendations.forEach((r, i) => {
      if (outdated(r)) index = i;
    });
    if (index >= 0) this.recommendations[index] = { replicas, at: now };
    else this.recommendations.push({ replicas, at: now });
  }

  /** normalizeDesiredReplicas (no spec.behavior). */
  normalize(n: Normalization): { replicas: number; conditions: ConditionChange[] } {
    const cutoff = n.now - this.downscaleStabilizationMs;
    let stabilized = n.desired;
    for (const r of this.recommendations) if (r.at >= cutoff && r.replicas > stabilized) stabilized = r.replicas;
    this.remember(n.desired, n.now, (r) => r.at < cutoff);
    const conditions: ConditionChange[] = [
      stabilized !== n.desired
        ? {
            type: 'AbleToScale',
            status: 'True',
            reason: 'ScaleDownStabilized',
            message: 'recent recommendations were higher than current one, applying the highest recent recommendation',
          }
        : {
            type: 'AbleToScale',
            status: 'True',
            reason: 'ReadyForNewScale',
            message: 'recommended size matches current size',
          },
    ];
    // convertDesiredReplicasWithRules: bogus usage reports must not multiply the replicas at once.
    const upLimit = Math.max(SCALE_UP_LIMIT_FACTOR * n.current, SCALE_UP_LIMIT_MINIMUM);
    let limit: { replicas: number; reason: string; message: string };
    const [maxAllowed, overReason, overMessage] =
      n.max > upLimit
        ? [upLimit, 'ScaleUpLimit', 'the desired replica count is increasing faster than the maximum scale rate']
        : [n.max, 'TooManyReplicas', 'the desired replica count is more than the maximum replica count'];
    if (stabilized < n.min)
      limit = {
        replicas: n.min,
        reason: 'TooFewReplicas',
        message: 'the desired replica count is less than the minimum replica count',
      };
    else if (stabilized > maxAllowed) limit = { replicas: maxAllowed, reason: overReason, message: overMessage };
    else
      limit = {
        replicas: stabilized,
        reason: 'DesiredWithinRange',
        message: 'the desired count is within the acceptable range',
      };
    conditions.push({
      type: 'ScalingLimited',
      status: limit.replicas === stabilized ? 'False' : 'True',
      reason: limit.reason,
      message: limit.message,
    });
    return { replicas: limit.replicas, conditions };
  }

  /** normalizeDesiredReplicasWithBehaviors. */
  normalizeWithBehavior(n: Normalization, behavior: Behavior): { replicas: number; conditions: ConditionChange[] } {
    // stabilizeRecommendationWithBehaviors.
    const upCutoff = n.now - behavior.scaleUp.stabilizationWindowSeconds * 1000;
    const downCutoff = n.now - behavior.scaleDown.stabilizationWindowSeconds * 1000;
    let up = n.desired;
    let down = n.desired;
    for (const r of this.recommendations) {
      if (r.at > upCutoff) up = Math.min(r.replicas, up);
      if (r.at > downCutoff) down = Math.max(r.replicas, down);
    }
    let stabilized = n.current;
    if (stabilized < up) stabilized = up;
    if (stabilized > down) stabilized = down;
    this.remember(n.desired, n.now, (r) => r.at < upCutoff && r.at < downCutoff);
    const conditions: ConditionChange[] = [];
    if (stabilized !== n.desired) {
      conditions.push(
        n.desired >= n.current
          ? {
              type: 'AbleToScale',
              status: 'True',
              reason: 'ScaleUpStabilized',
              message: 'recent recommendations were lower than current one, applying the lowest recent recommendation',
            }
          : {
              type: 'AbleToScale',
              status: 'True',
              reason: 'ScaleDownStabilized',
              message:
                'recent recommendations were higher than current one, applying the highest recent recommendation',
            },
      );
    } else
      conditions.push({
        type: 'AbleToScale',
        status: 'True',
        reason: 'ReadyForNewScale',
        message: 'recommended size matches current size',
      });

    // convertDesiredReplicasWithBehaviorRate.
    let replicas = stabilized;
    let reason = 'DesiredWithinRange';
    let message = 'the desired count is within the acceptable range';
    if (stabilized > n.current) {
      const limit = Math.max(
        scaleUpLimit(n.current, { up: this.upEvents, down: this.downEvents }, behavior.scaleUp, n.now),
        n.current,
      );
      const [allowed, r, m] =
        n.max > limit
          ? [limit, 'ScaleUpLimit', 'the desired replica count is increasing faster than the maximum scale rate']
          : [n.max, 'TooManyReplicas', 'the desired replica count is more than the maximum replica count'];
      if (stabilized > allowed) [replicas, reason, message] = [allowed, r, m];
    } else if (stabilized < n.current) {
      const limit = Math.min(
        scaleDownLimit(n.current, { up: this.upEvents, down: this.downEvents }, behavior.scaleDown, n.now),
        n.current,
      );
      const [allowed, r, m] =
        n.min < limit
          ? [limit, 'ScaleDownLimit', 'the desired replica count is decreasing faster than the maximum scale rate']
          : [n.min, 'TooFewReplicas', 'the desired replica count is less than the minimum replica count'];
      if (stabilized < allowed) [replicas, reason, message] = [allowed, r, m];
    }
    conditions.push({ type: 'ScalingLimited', status: replicas === stabilized ? 'False' : 'True', reason, message });
    return { replicas, conditions };
  }

  /** storeScaleEvent: a rescale remembered for the policies' periods (outdated slots reused), with a behavior only. */
  recordScale(behavior: Behavior | undefined, previous: number, next: number, now: number): void {
    if (!behavior) return;
    const [events, rules, change] =
      next > previous
        ? [this.upEvents, behavior.scaleUp, next - previous]
        : [this.downEvents, behavior.scaleDown, previous - next];
    const longest = Math.max(0, ...rules.policies.map((p) => p.periodSeconds));
    const cutoff = now - longest * 1000;
    let index = -1;
    events.forEach((e, i) => {
      if (e.at < cutoff) e.outdated = true;
      if (e.outdated) index = i;
    });
    const event = { change, at: now, outdated: false };
    if (index >= 0) events[index] = event;
    else events.push(event);
  }
}
