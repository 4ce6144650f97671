import type { KindInfo } from '../types.js';
import { customResourceDefinitions } from '../crd/kind.js';
import { authorizationKinds } from './authorization.js';
import { autoscalingKinds } from './autoscaling.js';
import { clusterKinds } from './cluster.js';
import { coreKinds } from './core.js';
import { eventsV1 } from './events.js';
import { networkingKinds } from './networking.js';
import { policyKinds } from './policy.js';
import { quotaKinds } from './quota.js';
import { priorityClasses } from './scheduling.js';
import { storageClasses } from './storage.js';
import { workloadKinds } from './workloads.js';

/** Every kind the simulator serves out of the box. */
export const builtinKinds: readonly KindInfo[] = [
  ...coreKinds,
  ...quotaKinds,
  ...workloadKinds,
  ...policyKinds,
  ...clusterKinds,
  eventsV1,
  ...authorizationKinds,
  customResourceDefinitions,
  ...networkingKinds,
  priorityClasses,
  storageClasses,
  ...autoscalingKinds,
];
