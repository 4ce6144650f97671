import type { KindInfo } from '../types.js';
import { customResourceDefinitions } from '../crd/kind.js';
import { admissionRegistrationKinds } from './admissionregistration.js';
import { apiServices } from './apiregistration.js';
import { authorizationKinds } from './authorization.js';
import { autoscalingKinds } from './autoscaling.js';
import { certificateSigningRequests } from './certificates.js';
import { clusterKinds } from './cluster.js';
import { coreKinds } from './core.js';
import { endpointSlices } from './endpointslices.js';
import { eventsV1 } from './events.js';
import { flowControlKinds } from './flowcontrol.js';
import { networkingKinds } from './networking.js';
import { runtimeClasses } from './node.js';
import { policyKinds } from './policy.js';
import { quotaKinds } from './quota.js';
import { priorityClasses } from './scheduling.js';
import { csiKinds, storageClasses } from './storage.js';
import { coreWorkloadKinds, workloadKinds } from './workloads.js';

/** Every kind the simulator serves out of the box: what kube-apiserver 1.32 serves by default. */
export const builtinKinds: readonly KindInfo[] = [
  ...coreKinds,
  ...coreWorkloadKinds,
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
  ...csiKinds,
  ...autoscalingKinds,
  ...admissionRegistrationKinds,
  apiServices,
  certificateSigningRequests,
  endpointSlices,
  ...flowControlKinds,
  runtimeClasses,
];
