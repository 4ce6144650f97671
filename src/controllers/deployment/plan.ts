import { deploymentSpec } from './model.js';
import { rolloutRecreate } from './recreate.js';
import { rolloutRolling } from './rolling.js';
import {
  isScalingEvent,
  Planner,
  syncPausedCondition,
  syncScale,
  syncStatusOnly,
  type DeploymentInput,
  type DeploymentPlan,
} from './sync.js';

/**
 * syncDeployment's decision, pure: a Deployment being deleted only reports status; a paused one or one whose
 * replicas changed is resized proportionally; otherwise it takes one step of its strategy.
 */
export function planDeployment(input: DeploymentInput): DeploymentPlan {
  const p = new Planner(input);
  if (input.deployment.metadata.deletionTimestamp !== undefined) return syncStatusOnly(p);
  syncPausedCondition(p);
  const spec = deploymentSpec(input.deployment);
  if (spec.paused || isScalingEvent(p)) return syncScale(p);
  return spec.strategy.type === 'Recreate' ? rolloutRecreate(p) : rolloutRolling(p);
}

export type { DeploymentInput, DeploymentPlan };
