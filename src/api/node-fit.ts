import { isPlainObject, type KubeObject } from './types.js';

/**
 * Whether a pod fits a node by the rules the DaemonSet controller checks before making a pod for it
 * (the scheduler's NodeName, NodeAffinity and TaintToleration filters): spec.nodeName, nodeSelector,
 * required node affinity (matchExpressions on labels, matchFields on metadata.name), and taints against
 * tolerations. Shared helper: a scheduler may use the same functions.
 */

export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

export interface Toleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
  tolerationSeconds?: number;
}

export interface Requirement {
  key: string;
  operator: string;
  values?: string[];
}

interface Term {
  matchExpressions?: Requirement[];
  matchFields?: Requirement[];
}

export function nodeTaints(node: KubeObject): Taint[] {
  const t = (node.spec as { taints?: Taint[] } | undefined)?.taints;
  return Array.isArray(t) ? t : [];
}

/** The pod's spec.tolerations (the well-formed entries). */
export function tolerationsOf(pod: KubeObject): Toleration[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return Array.isArray(spec.tolerations) ? ((spec.tolerations as unknown[]).filter(isPlainObject) as Toleration[]) : [];
}

/** v1 Toleration.ToleratesTaint. */
export function tolerates(toleration: Toleration, taint: Taint): boolean {
  if (toleration.effect && toleration.effect !== taint.effect) return false;
  if (toleration.key && toleration.key !== taint.key) return false;
  if (!toleration.key && toleration.operator !== 'Exists') return false;
  if (toleration.operator === 'Exists') return true;
  return (toleration.value ?? '') === (taint.value ?? '');
}

/** The first taint passing `filter` that no toleration tolerates. */
export function untoleratedTaint(
  taints: readonly Taint[],
  tolerations: readonly Toleration[],
  filter: (t: Taint) => boolean,
): Taint | undefined {
  return taints.find((t) => filter(t) && !tolerations.some((tol) => tolerates(tol, t)));
}

/** A node selector requirement against a label's value (undefined: no such label). */
export function requirementMatches(r: Pick<Requirement, 'operator' | 'values'>, value: string | undefined): boolean {
  const values = r.values ?? [];
  switch (r.operator) {
    case 'In':
      return value !== undefined && values.includes(value);
    case 'NotIn':
      return value === undefined || !values.includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'Gt':
    case 'Lt': {
      if (value === undefined || values.length !== 1) return false;
      const a = Number(value);
      const b = Number(values[0]);
      if (!Number.isInteger(a) || !Number.isInteger(b)) return false;
      return r.operator === 'Gt' ? a > b : a < b;
    }
    default:
      return false;
  }
}

/** A NodeSelectorTerm: all its requirements hold; an empty term matches nothing. */
export function termMatches(term: Term, node: KubeObject): boolean {
  const exprs = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  if (exprs.length === 0 && fields.length === 0) return false;
  const labels = node.metadata.labels ?? {};
  return (
    exprs.every((r) => requirementMatches(r, labels[r.key])) &&
    fields.every((r) => requirementMatches(r, r.key === 'metadata.name' ? node.metadata.name : undefined))
  );
}

/** nodeSelector and requiredDuringSchedulingIgnoredDuringExecution (terms ORed). */
export function fitsNodeAffinity(podSpec: Record<string, unknown>, node: KubeObject): boolean {
  const labels = node.metadata.labels ?? {};
  const selector = isPlainObject(podSpec.nodeSelector) ? (podSpec.nodeSelector as Record<string, string>) : {};
  for (const [k, v] of Object.entries(selector)) if (labels[k] !== v) return false;
  const required = (
    podSpec.affinity as
      | { nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms?: Term[] } } }
      | undefined
  )?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (!required) return true;
  return (required.nodeSelectorTerms ?? []).some((t) => termMatches(t, node));
}

/** The node a pod is bound to, or the one its node affinity pins it to (util.GetTargetNodeName). */
export function targetNodeName(pod: KubeObject): string | undefined {
  const spec = (pod.spec ?? {}) as Record<string, unknown>;
  if (typeof spec.nodeName === 'string' && spec.nodeName) return spec.nodeName;
  const terms =
    (
      spec.affinity as
        | { nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms?: Term[] } } }
        | undefined
    )?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
  for (const t of terms) {
    for (const f of t.matchFields ?? [])
      if (f.key === 'metadata.name' && f.operator === 'In' && f.values?.length === 1) return f.values[0];
  }
  return undefined;
}
