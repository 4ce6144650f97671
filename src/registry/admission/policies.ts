import { ApiError, Errors } from '../../api/errors.js';
import { FieldSelector, selectorFromObject } from '../../api/selectors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import type { MemoryStore } from '../../storage/memory-store.js';
import type { Registry } from '../registry.js';
import { groupVersion, resourceKey, type AdmissionPlugin, type AdmissionRequest, type KindInfo } from '../types.js';
import { compileExpression, toCel, type AdmissionProgram, type Bindings } from './cel.js';
import {
  equivalentsOf,
  matchingInvocation,
  namespaceMatches,
  objectMatches,
  parseSelector,
  rulesMayMatch,
  type Invocation,
  type ParsedSelector,
  type Rule,
} from './matching.js';
import { admissionRequestFields, isExemptConfiguration, versioned } from './webhooks.js';

/**
 * ValidatingAdmissionPolicy (k8s.io/apiserver admission/plugin/policy/validating): policies of CEL validations,
 * bound to requests by ValidatingAdmissionPolicyBindings. A policy's matchConstraints pick the requests it may
 * judge; each binding narrows them (matchResources) and names its params (paramRef, of the policy's paramKind) and
 * what a failed validation does: Deny the request, Warn the client, or record an Audit annotation. Policies are
 * evaluated synchronously, in the validating chain before the validating webhooks; which policies may judge a
 * resource is kept per resource.
 */
type Obj = Record<string, unknown>;

const GROUP = 'admissionregistration.k8s.io';
const POLICIES = `${GROUP}/validatingadmissionpolicies`;
const BINDINGS = `${GROUP}/validatingadmissionpolicybindings`;
const NAMESPACES = '/namespaces';
const EVERY_FIELD = new FieldSelector([]);

interface MatchResources {
  namespaceSelector: ParsedSelector;
  objectSelector: ParsedSelector;
  resourceRules: Rule[];
  excludeResourceRules: Rule[];
  matchPolicy: string;
}

interface Expression {
  expression: string;
  program: AdmissionProgram | string;
}

interface Validation extends Expression {
  message: string | undefined;
  reason: string | undefined;
  messageExpression: Expression | undefined;
}

interface Policy {
  name: string;
  failurePolicy: string;
  paramKind: { apiVersion: string; kind: string } | undefined;
  match: MatchResources | undefined;
  matchConditions: Array<Expression & { name: string }>;
  validations: Validation[];
  variables: Array<Expression & { name: string }>;
  auditAnnotations: Array<Expression & { key: string }>;
}

interface Binding {
  name: string;
  policyName: string;
  paramRef: Obj | undefined;
  match: MatchResources | undefined;
  actions: string[];
}

const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isPlainObject) : []);
const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

function expression(source: unknown): Expression {
  const expr = String(source ?? '');
  return { expression: expr, program: compileExpression(expr) };
}

function matchResources(spec: unknown): MatchResources | undefined {
  if (!isPlainObject(spec)) return undefined;
  return {
    namespaceSelector: parseSelector(spec.namespaceSelector),
    objectSelector: parseSelector(spec.objectSelector),
    resourceRules: list(spec.resourceRules) as Rule[],
    excludeResourceRules: list(spec.excludeResourceRules) as Rule[],
    matchPolicy: text(spec.matchPolicy) ?? 'Equivalent',
  };
}

function compilePolicy(obj: KubeObject): Policy {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  const paramKind = isPlainObject(spec.paramKind) ? spec.paramKind : undefined;
  return {
    name: obj.metadata.name ?? '',
    failurePolicy: text(spec.failurePolicy) ?? 'Fail',
    paramKind: paramKind
      ? { apiVersion: String(paramKind.apiVersion ?? ''), kind: String(paramKind.kind ?? '') }
      : undefined,
    match: matchResources(spec.matchConstraints),
    matchConditions: list(spec.matchConditions).map((c) => ({
      name: String(c.name ?? ''),
      ...expression(c.expression),
    })),
    validations: list(spec.validations).map((v) => ({
      ...expression(v.expression),
      message: text(v.message),
      reason: text(v.reason),
      messageExpression: typeof v.messageExpression === 'string' ? expression(v.messageExpression) : undefined,
    })),
    variables: list(spec.variables).map((v) => ({ name: String(v.name ?? ''), ...expression(v.expression) })),
    auditAnnotations: list(spec.auditAnnotations).map((a) => ({
      key: String(a.key ?? ''),
      ...expression(a.valueExpression),
    })),
  };
}

function compileBinding(obj: KubeObject): Binding {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  return {
    name: obj.metadata.name ?? '',
    policyName: String(spec.policyName ?? ''),
    paramRef: isPlainObject(spec.paramRef) ? spec.paramRef : undefined,
    match: matchResources(spec.matchResources),
    actions: Array.isArray(spec.validationActions) ? spec.validationActions.map(String) : [],
  };
}

interface Hook {
  policy: Policy;
  bindings: Binding[];
}

/** Policies with their bindings, kept in step with both tables, and per resource the ones that may judge it. */
class PolicySource {
  private hooks: Hook[] | undefined;
  private readonly byResource = new Map<string, Hook[]>();

  constructor(
    private readonly store: MemoryStore,
    private readonly registry: Registry,
  ) {
    store.onChange((key) => {
      if (key !== POLICIES && key !== BINDINGS) return;
      this.hooks = undefined;
      this.byResource.clear();
    });
    registry.onChange(() => this.byResource.clear());
  }

  private all(): Hook[] {
    if (!this.hooks) {
      const keys = this.store.resourceKeys();
      const policies = keys.includes(POLICIES) ? [...this.store.all(POLICIES)] : [];
      const bindings = keys.includes(BINDINGS) ? this.store.all(BINDINGS).map(compileBinding) : [];
      policies.sort((a, b) => ((a.metadata.name ?? '') < (b.metadata.name ?? '') ? -1 : 1));
      bindings.sort((a, b) => (a.name < b.name ? -1 : 1));
      this.hooks = policies.map(compilePolicy).flatMap((policy) => {
        const bound = bindings.filter((b) => b.policyName === policy.name);
        return bound.length > 0 ? [{ policy, bindings: bound }] : [];
      });
    }
    return this.hooks;
  }

  candidates(info: KindInfo, subresource: string): Hook[] {
    const key = `${groupVersion(info)}/${info.resource}/${subresource}`;
    let hooks = this.byResource.get(key);
    if (!hooks) {
      const all = this.all();
      const equivalents = all.length === 0 ? [] : equivalentsOf(this.registry, info);
      hooks = all.filter(({ policy }) => {
        const rules = policy.match?.resourceRules ?? [];
        // No rules match every resource (matching.Matcher), as do Equivalent ones through any version.
        if (rules.length === 0) return true;
        return policy.match!.matchPolicy === 'Equivalent'
          ? equivalents.some((k) => rulesMayMatch(rules, k, subresource))
          : rulesMayMatch(rules, info, subresource);
      });
      this.byResource.set(key, hooks);
    }
    return hooks;
  }
}

/** A ValidatingAdmissionPolicy's decision on one validation. */
interface Decision {
  action: 'admit' | 'deny';
  message: string;
  reason?: string;
}

class ConfigurationError extends Error {}

/**
 * matching.Matcher: selectors, excluded rules, then the rules (no rules: every resource). The invocation names the
 * resource and kind that matched, for `request` and the object's version.
 */
function matches(
  store: MemoryStore,
  registry: Registry,
  match: MatchResources | undefined,
  request: AdmissionRequest,
): Invocation | undefined {
  const own: Invocation = {
    info: request.info,
    resource: { group: request.info.group, version: request.info.version, resource: request.info.resource },
    kind: { group: request.info.group, version: request.info.version, kind: request.info.kind },
  };
  if (!match) return own;
  const ns = namespaceMatches(store, match.namespaceSelector, request);
  if (ns === false) return undefined;
  const object = objectMatches(match.objectSelector, request);
  if (object === false) return undefined;
  const equivalents = (): KindInfo[] => equivalentsOf(registry, request.info);
  if (matchingInvocation(match.excludeResourceRules, match.matchPolicy, request, equivalents, true)) return undefined;
  const invocation =
    match.resourceRules.length === 0
      ? own
      : matchingInvocation(match.resourceRules, match.matchPolicy, request, equivalents, true);
  if (!invocation) return undefined;
  if (ns instanceof ApiError) throw new ConfigurationError(ns.message);
  if (object instanceof ApiError) throw new ConfigurationError(object.message);
  return invocation;
}

/** CreateNamespaceObject: the namespace as `namespaceObject` shows it (no managedFields). */
function namespaceObject(store: MemoryStore, request: AdmissionRequest): unknown {
  const name = request.info.group === '' && request.info.kind === 'Namespace' ? '' : (request.namespace ?? '');
  if (name === '') return null;
  const ns = store.get(NAMESPACES, undefined, name);
  if (!ns) return null;
  const { managedFields: _, ownerReferences: __, finalizers: ___, ...meta } = ns.metadata;
  return { apiVersion: 'v1', kind: 'Namespace', metadata: meta, spec: ns.spec ?? {}, status: ns.status ?? {} };
}

const VARIABLE_REFERENCE = /\bvariables\.([A-Za-z_][A-Za-z0-9_]*)/g;

/** One policy evaluated for one binding and param: its decisions and audit annotations. */
function evaluate(
  policy: Policy,
  bindings: Bindings,
  denyOnError: boolean,
): { decisions: Decision[]; annotations: Array<[string, string]> } {
  const errorDecision = (message: string): Decision => ({ action: denyOnError ? 'deny' : 'admit', message });
  // Match conditions first: one false skips the policy; errors (and no false) follow the failure policy.
  const conditionErrors: string[] = [];
  for (const condition of policy.matchConditions) {
    const result = run(condition, bindings);
    if ('error' in result) conditionErrors.push(result.error);
    else if (result.value === false) return { decisions: [], annotations: [] };
  }
  if (conditionErrors.length > 0) return { decisions: [errorDecision(conditionErrors.join(', '))], annotations: [] };

  // Variables in order, each seeing the ones before it; a validation that uses one that failed fails with it.
  const variables: Obj = {};
  const failed = new Map<string, string>();
  const scope = { ...bindings, variables };
  for (const variable of policy.variables) {
    const result = run(variable, scope);
    if ('error' in result) failed.set(variable.name, result.error);
    else variables[variable.name] = toCel(result.value);
  }
  const usesFailed = (expr: string): string | undefined => {
    for (const m of expr.matchAll(VARIABLE_REFERENCE)) {
      const error = failed.get(m[1]!);
      if (error !== undefined) return error;
    }
    return undefined;
  };

  const decisions = policy.validations.map((validation): Decision => {
    const variableError = usesFailed(validation.expression);
    const result = variableError !== undefined ? { error: variableError } : run(validation, scope);
    if ('error' in result) return errorDecision(result.error);
    if (result.value === true) return { action: 'admit', message: '' };
    if (result.value !== false)
      return errorDecision(`expression '${validation.expression}' resulted in error: must evaluate to bool`);
    let message = '';
    if (validation.messageExpression) {
      const m = run(validation.messageExpression, scope);
      if ('value' in m && typeof m.value === 'string') {
        const trimmed = m.value.trim();
        if (trimmed.length <= 5000 && !trimmed.includes('\n')) message = trimmed;
      }
    }
    if (message === '' && validation.message) message = validation.message.trim();
    if (message === '') message = `failed expression: ${validation.expression.trim()}`;
    return { action: 'deny', message, reason: validation.reason ?? 'Invalid' };
  });

  const annotations: Array<[string, string]> = [];
  for (const annotation of policy.auditAnnotations) {
    const result = run(annotation, scope);
    if ('error' in result) {
      if (denyOnError) decisions.push({ action: 'deny', message: result.error });
      continue;
    }
    const value = result.value;
    if (value === null || value === undefined) continue;
    if (typeof value !== 'string') {
      if (denyOnError)
        decisions.push({
          action: 'deny',
          message: `valueExpression '${annotation.expression}' resulted in unsupported return type: ${typeof value === 'number' ? 'int' : typeof value}. Return type must be either string or null.`,
        });
      continue;
    }
    const trimmed = value.trim();
    if (trimmed !== '') annotations.push([annotation.key, trimmed.slice(0, 10 * 1024)]);
  }
  return { decisions, annotations };
}

/** An expression's value, or the error kube-apiserver's CEL filter reports for it. */
function run(expr: Expression, bindings: Bindings): { value: unknown } | { error: string } {
  if (typeof expr.program === 'string') return { error: `compilation error: ${expr.program}` };
  const result = expr.program.run(bindings);
  if ('error' in result) return { error: `expression '${expr.expression}' resulted in error: ${result.error}` };
  return result;
}

const REASON_CODES: Record<string, number> = {
  Forbidden: 403,
  Unauthorized: 401,
  RequestEntityTooLarge: 413,
  Invalid: 422,
};

export class ValidatingAdmissionPolicies implements AdmissionPlugin {
  readonly name = 'ValidatingAdmissionPolicy';
  readonly operations = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'] as const;
  private readonly source: PolicySource;

  constructor(
    private readonly store: MemoryStore,
    private readonly registry: Registry,
  ) {
    this.source = new PolicySource(store, registry);
  }

  validate(request: AdmissionRequest): undefined {
    if (isExemptConfiguration(request.info)) return undefined;
    const hooks = this.source.candidates(request.info, request.subresource);
    if (hooks.length === 0) return undefined;
    const denied: Array<{ policy: string; binding?: string; decision: Decision }> = [];
    const configError = (policy: Policy, binding: Binding | undefined, err: unknown): void => {
      if (policy.failurePolicy === 'Ignore') return;
      const why = err instanceof Error ? err.message : String(err);
      const message = binding ? `failed to configure binding: ${why}` : `failed to configure policy: ${why}`;
      denied.push({ policy: policy.name, binding: binding?.name, decision: { action: 'deny', message } });
    };
    for (const { policy, bindings } of hooks) {
      let invocation: Invocation | undefined;
      try {
        invocation = matches(this.store, this.registry, policy.match, request);
      } catch (err) {
        configError(policy, undefined, err);
        continue;
      }
      if (!invocation) continue;
      const paramInfo = policy.paramKind
        ? this.registry.byGroupVersionKind(policy.paramKind.apiVersion, policy.paramKind.kind)
        : undefined;
      if (policy.paramKind && !paramInfo) {
        configError(
          policy,
          undefined,
          `failed to find resource referenced by paramKind: '${policy.paramKind.apiVersion}, Kind=${policy.paramKind.kind}'`,
        );
        continue;
      }
      const collected = new Map<string, string[]>();
      for (const binding of bindings) {
        let bindingMatch: Invocation | undefined;
        let params: Array<KubeObject | null>;
        try {
          bindingMatch = binding.match ? matches(this.store, this.registry, binding.match, request) : invocation;
          if (!bindingMatch) continue;
          params = this.params(paramInfo, binding, request);
        } catch (err) {
          configError(policy, binding, err);
          continue;
        }
        const base: Bindings = {
          object: toCel(versioned(request.obj, request.info, invocation.info) ?? null),
          oldObject: toCel(versioned(request.old, request.info, invocation.info) ?? null),
          request: toCel(admissionRequestFields(request, invocation)),
          namespaceObject: toCel(namespaceObject(this.store, request)),
        };
        for (const param of params) {
          const { decisions, annotations } = evaluate(
            policy,
            { ...base, params: toCel(param) },
            policy.failurePolicy !== 'Ignore',
          );
          decisions.forEach((decision, index) => {
            if (decision.action !== 'deny') return;
            for (const action of binding.actions) {
              if (action === 'Deny') denied.push({ policy: policy.name, binding: binding.name, decision });
              else if (action === 'Warn')
                request.warn(
                  `Validation failed for ValidatingAdmissionPolicy '${policy.name}' with binding '${binding.name}': ${decision.message}`,
                );
              else if (action === 'Audit')
                request.annotate(
                  'validation.policy.admission.k8s.io/validation_failure',
                  JSON.stringify([
                    {
                      message: decision.message,
                      policy: policy.name,
                      binding: binding.name,
                      expressionIndex: index,
                      validationActions: binding.actions,
                    },
                  ]),
                );
            }
          });
          for (const [key, value] of annotations) {
            const values = collected.get(key) ?? [];
            if (!values.includes(value)) values.push(value);
            collected.set(key, values);
          }
        }
      }
      for (const [key, values] of collected) request.annotate(`${policy.name}/${key}`, values.join(', '));
    }
    if (denied.length === 0) return undefined;
    const { policy, binding, decision } = denied[0]!;
    const message = binding
      ? `ValidatingAdmissionPolicy '${policy}' with binding '${binding}' denied request: ${decision.message}`
      : `ValidatingAdmissionPolicy '${policy}' denied request: ${decision.message}`;
    const name = request.name || request.obj?.metadata.name || request.obj?.metadata.generateName || 'Unknown';
    const forbidden = Errors.forbidden({ group: request.info.group, resource: request.info.resource }, name, message);
    const reason = decision.reason ?? 'Invalid';
    throw new ApiError(REASON_CODES[reason] ?? 422, reason, forbidden.message, {
      ...forbidden.details,
      causes: [{ reason: '', message }],
    });
  }

  /** CollectParams: the params a binding names (none: one evaluation without params). */
  private params(
    paramInfo: KindInfo | undefined,
    binding: Binding,
    request: AdmissionRequest,
  ): Array<KubeObject | null> {
    const ref = binding.paramRef;
    if (!paramInfo || !ref) return [null];
    const table = resourceKey(paramInfo);
    let namespace: string | undefined;
    if (paramInfo.namespaced) {
      namespace = typeof ref.namespace === 'string' && ref.namespace !== '' ? ref.namespace : request.namespace;
      if (!namespace)
        throw new ConfigurationError(
          'cannot use namespaced paramRef in policy binding that matches cluster-scoped resources',
        );
    } else if (typeof ref.namespace === 'string' && ref.namespace !== '')
      throw new ConfigurationError('paramRef.namespace must not be provided for a cluster-scoped `paramKind`');
    let params: KubeObject[];
    if (typeof ref.name === 'string' && ref.name !== '') {
      if (ref.selector !== undefined)
        throw new ConfigurationError('paramRef.name and paramRef.selector are mutually exclusive');
      const found = this.store.get(table, namespace, ref.name);
      params = found ? [found] : [];
    } else if (ref.selector !== undefined) {
      let selector: ReturnType<typeof selectorFromObject>;
      try {
        selector = selectorFromObject(ref.selector);
      } catch (err) {
        throw new ConfigurationError(err instanceof Error ? err.message : String(err));
      }
      params = this.store.list(table, { namespace, label: selector, field: EVERY_FIELD }).items;
    } else throw new ConfigurationError('one of name or selector must be provided');
    if (params.length === 0 && ref.parameterNotFoundAction === 'Deny')
      throw new ConfigurationError('no params found for policy binding with `Deny` parameterNotFoundAction');
    return params;
  }
}
