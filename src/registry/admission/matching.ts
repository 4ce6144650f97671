import { ApiError, Errors } from '../../api/errors.js';
import { selectorFromObject, type LabelSelector } from '../../api/selectors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import type { MemoryStore } from '../../storage/memory-store.js';
import type { Registry } from '../registry.js';
import { resourceKey, type AdmissionRequest, type KindInfo } from '../types.js';

/**
 * Which requests a webhook or policy looks at (k8s.io/apiserver admission/plugin/webhook/predicates and
 * policy/matching): rules of operations, groups, versions, resources with their subresources and scope; namespace
 * and object label selectors; and matchPolicy Equivalent, which also matches the request's resource as another
 * version serves it (a CRD's other versions, core/v1 and events.k8s.io/v1 Events), the object then sent in that
 * version.
 */
export interface Rule {
  operations?: unknown;
  apiGroups?: unknown;
  apiVersions?: unknown;
  resources?: unknown;
  scope?: unknown;
  /** A policy's NamedRuleWithOperations. */
  resourceNames?: unknown;
}

/** The group/version/resource and kind a matching rule named: the request's own, or an equivalent's. */
export interface Invocation {
  /** The kind as served in the matched version. */
  info: KindInfo;
  resource: { group: string; version: string; resource: string };
  kind: { group: string; version: string; kind: string };
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
const exactOrWildcard = (items: string[], requested: string): boolean =>
  items.some((i) => i === '*' || i === requested);

/** rules.Matcher: scope, operation, group, version, and resource with its subresource. */
export function ruleMatches(rule: Rule, request: AdmissionRequest, info: KindInfo, withOperation = true): boolean {
  return (
    (!withOperation || scopeMatches(rule, request, info)) &&
    (!withOperation || strings(rule.operations).some((op) => op === '*' || op === request.operation)) &&
    exactOrWildcard(strings(rule.apiGroups), info.group) &&
    exactOrWildcard(strings(rule.apiVersions), info.version) &&
    resourceMatches(strings(rule.resources), info.resource, request.subresource)
  );
}

function isNamespaceResource(info: KindInfo): boolean {
  return info.group === '' && info.version === 'v1' && info.resource === 'namespaces';
}

function scopeMatches(rule: Rule, request: AdmissionRequest, info: KindInfo): boolean {
  const scope = typeof rule.scope === 'string' ? rule.scope : '*';
  const namespaced = (request.namespace ?? '') !== '';
  if (scope === '*') return true;
  if (scope === 'Namespaced') return !isNamespaceResource(info) && namespaced;
  if (scope === 'Cluster') return isNamespaceResource(info) || !namespaced;
  return false;
}

function resourceMatches(resources: string[], resource: string, subresource: string): boolean {
  for (const entry of resources) {
    const slash = entry.indexOf('/');
    const res = slash < 0 ? entry : entry.slice(0, slash);
    const sub = slash < 0 ? '' : entry.slice(slash + 1);
    if ((res === '*' || res === resource) && (sub === '*' || sub === subresource)) return true;
  }
  return false;
}

/** Whether any rule could match requests for this resource and subresource, whatever their operation: the index key. */
export function rulesMayMatch(rules: readonly Rule[], info: KindInfo, subresource: string): boolean {
  return rules.some(
    (r) =>
      exactOrWildcard(strings(r.apiGroups), info.group) &&
      exactOrWildcard(strings(r.apiVersions), info.version) &&
      resourceMatches(strings(r.resources), info.resource, subresource),
  );
}

/**
 * The kinds that serve the same objects as `info` (the EquivalentResourceMapper): the kinds of its storage table,
 * the request's own first.
 */
export function equivalentsOf(registry: Registry, info: KindInfo): KindInfo[] {
  const key = resourceKey(info);
  return [info, ...registry.kinds().filter((k) => k !== info && resourceKey(k) === key)];
}

/** The kind of a subresource's objects as webhooks receive them (Scale for /scale, the kind itself for /status). */
export function subresourceKind(info: KindInfo, subresource: string): { group: string; version: string; kind: string } {
  if (subresource === 'scale') return { group: 'autoscaling', version: 'v1', kind: 'Scale' };
  const extra = info.extraSubresources?.find((s) => s.name === subresource);
  if (extra) return { group: extra.group ?? '', version: extra.version ?? 'v1', kind: extra.kind };
  return { group: info.group, version: info.version, kind: info.kind };
}

function invocationOf(info: KindInfo, subresource: string): Invocation {
  return {
    info,
    resource: { group: info.group, version: info.version, resource: info.resource },
    kind: subresourceKind(info, subresource),
  };
}

/**
 * The first rule that matches the request (webhook ShouldCallHook / policy matchesResourceRules): its own resource
 * first, then, under matchPolicy Equivalent, the equivalent resources in order. `names`: a policy rule's
 * resourceNames must name the object.
 */
export function matchingInvocation(
  rules: readonly Rule[],
  matchPolicy: string,
  request: AdmissionRequest,
  equivalents: () => KindInfo[],
  names = false,
): Invocation | undefined {
  const named = (rule: Rule): boolean => {
    if (!names) return true;
    const list = strings(rule.resourceNames);
    return list.length === 0 || list.includes(request.name);
  };
  for (const rule of rules)
    if (ruleMatches(rule, request, request.info) && named(rule)) return invocationOf(request.info, request.subresource);
  if (matchPolicy !== 'Equivalent') return undefined;
  const others = equivalents().filter((k) => k !== request.info);
  if (others.length === 0) return undefined;
  for (const rule of rules) {
    for (const other of others) {
      if (request.subresource !== '' && !hasSubresource(other, request.subresource)) continue;
      if (ruleMatches(rule, request, other) && named(rule)) return invocationOf(other, request.subresource);
    }
  }
  return undefined;
}

function hasSubresource(info: KindInfo, subresource: string): boolean {
  if (subresource === 'status') return info.status === true;
  if (subresource === 'scale') return info.scale !== undefined;
  return (info.extraSubresources ?? []).some((s) => s.name === subresource);
}

/** A parsed label selector of a configuration, or the error it gave (reported only when the rules match). */
export type ParsedSelector = LabelSelector | ApiError;

/** metav1.LabelSelectorAsSelector of a webhook's or policy's selector; unset is everything. */
export function parseSelector(selector: unknown): ParsedSelector {
  if (selector === undefined || selector === null) return selectorFromObject({});
  try {
    return selectorFromObject(isPlainObject(selector) ? selector : {});
  } catch (err) {
    return Errors.internal(err instanceof Error ? err.message : String(err));
  }
}

const NAMESPACES = '/namespaces';

/**
 * namespace.Matcher: cluster-scoped requests (but for Namespaces) always match; a Namespace's own create or update
 * is judged by its new labels; everything else by its namespace's stored labels — a 404 when it is not there.
 */
export function namespaceMatches(
  store: MemoryStore,
  selector: ParsedSelector,
  request: AdmissionRequest,
): boolean | ApiError {
  const namespaceRequest = isNamespaceResource(request.info);
  if ((request.namespace ?? '') === '' && !namespaceRequest) return true;
  if (selector instanceof ApiError) return selector;
  if (selector.empty) return true;
  if (
    namespaceRequest &&
    request.subresource === '' &&
    (request.operation === 'CREATE' || request.operation === 'UPDATE')
  )
    return selector.matches(request.obj?.metadata.labels);
  const namespace = store.get(NAMESPACES, undefined, request.namespace ?? '');
  if (!namespace) return Errors.notFound({ group: '', resource: 'namespaces' }, request.namespace ?? '');
  return selector.matches(namespace.metadata.labels);
}

/** object.Matcher: the object's labels, or the stored object's. */
export function objectMatches(selector: ParsedSelector, request: AdmissionRequest): boolean | ApiError {
  if (selector instanceof ApiError) return selector;
  if (selector.empty) return true;
  const labelsOf = (o: KubeObject | undefined): boolean => o !== undefined && selector.matches(o.metadata?.labels);
  return labelsOf(request.obj) || labelsOf(request.old);
}
