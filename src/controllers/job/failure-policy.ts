import { isPlainObject, type KubeObject } from '../../api/types.js';
import { containerStatuses, podConditions } from '../../api/pod-util.js';

/**
 * spec.podFailurePolicy (pkg/controller/job/pod_failure_policy.go): the first rule matching a failed pod
 * decides — FailJob fails the Job at once, Ignore does not count the failure against backoffLimit, Count
 * (and FailIndex outside per-index back-off) counts it as usual.
 */
export type FailurePolicyAction = 'FailJob' | 'FailIndex' | 'Ignore' | 'Count';

export interface FailurePolicyMatch {
  action: FailurePolicyAction;
  /** For FailJob: the Failed condition's message. */
  message: string;
}

interface Rule {
  action?: string;
  onExitCodes?: { containerName?: string; operator?: string; values?: number[] };
  onPodConditions?: Array<{ type?: string; status?: string }>;
}

/** The matching rule's action for a failed pod, or undefined when no rule matches (the default: count it). */
export function matchPodFailurePolicy(job: KubeObject, pod: KubeObject): FailurePolicyMatch | undefined {
  const policy = (job.spec as { podFailurePolicy?: { rules?: Rule[] } } | undefined)?.podFailurePolicy;
  const rules = Array.isArray(policy?.rules) ? policy.rules : [];
  const podName = `${pod.metadata.namespace}/${pod.metadata.name}`;
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    const action = (rule.action ?? 'Count') as FailurePolicyAction;
    if (isPlainObject(rule.onExitCodes)) {
      const req = rule.onExitCodes;
      const values = Array.isArray(req.values) ? req.values : [];
      for (const s of [...containerStatuses(pod, 'initContainerStatuses'), ...containerStatuses(pod)]) {
        if (req.containerName && req.containerName !== s.name) continue;
        const code = s.state?.terminated?.exitCode;
        if (code === undefined || code === 0) continue;
        const inValues = values.includes(code);
        if (req.operator === 'NotIn' ? !inValues : inValues) {
          return {
            action,
            message: `Container ${s.name} for pod ${podName} failed with exit code ${code} matching ${action} rule at index ${i}`,
          };
        }
      }
    }
    if (Array.isArray(rule.onPodConditions)) {
      for (const pattern of rule.onPodConditions) {
        const c = podConditions(pod).find((pc) => pc.type === pattern.type && pc.status === (pattern.status ?? 'True'));
        if (c)
          return { action, message: `Pod ${podName} has condition ${c.type} matching ${action} rule at index ${i}` };
      }
    }
  }
  return undefined;
}
