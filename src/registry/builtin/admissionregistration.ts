import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { checkDns1123Subdomain, checkQualifiedName } from '../../api/validation.js';
import { compileError } from '../crd/cel.js';
import { ageOf, col, selectorString } from '../printers.js';
import type { KindInfo, TableColumn } from '../types.js';
import { validateLabelSelector } from './policy.js';

/**
 * admissionregistration.k8s.io/v1: webhook configurations and ValidatingAdmissionPolicies with their bindings, stored,
 * defaulted and validated as kube-apiserver does (calling the webhooks and evaluating the policies is admission's).
 */
type Obj = Record<string, unknown>;

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

const FAILURE_POLICIES = ['Fail', 'Ignore'];
const MATCH_POLICIES = ['Equivalent', 'Exact'];
const SIDE_EFFECTS = ['None', 'NoneOnDryRun'];
const REVIEW_VERSIONS = ['v1', 'v1beta1'];
const OPERATIONS = ['*', 'CONNECT', 'CREATE', 'DELETE', 'UPDATE'];
const SCOPES = ['*', 'Cluster', 'Namespaced'];
const REINVOCATION = ['IfNeeded', 'Never'];
const VALIDATION_ACTIONS = ['Audit', 'Deny', 'Warn'];
const REASONS = ['Forbidden', 'Invalid', 'RequestEntityTooLarge', 'Unauthorized'];
const NOT_FOUND_ACTIONS = ['Allow', 'Deny'];

/** SetDefaults_Rule: a rule with no scope covers both ("*"). */
function defaultRules(rules: unknown): void {
  for (const r of list(rules)) if (isPlainObject(r)) r.scope ??= '*';
}

/** SetDefaults_MatchResources: empty selectors (everything) and the Equivalent match policy. */
function defaultMatchResources(match: unknown): void {
  if (!isPlainObject(match)) return;
  match.namespaceSelector ??= {};
  match.objectSelector ??= {};
  match.matchPolicy ??= 'Equivalent';
  defaultRules(match.resourceRules);
  defaultRules(match.excludeResourceRules);
}

/** SetDefaults_ValidatingWebhook / MutatingWebhook and SetDefaults_ServiceReference. */
function defaultWebhooks(o: KubeObject, mutating: boolean): void {
  for (const hook of list(o.webhooks)) {
    if (!isPlainObject(hook)) continue;
    hook.failurePolicy ??= 'Fail';
    hook.matchPolicy ??= 'Equivalent';
    hook.namespaceSelector ??= {};
    hook.objectSelector ??= {};
    hook.timeoutSeconds ??= 10;
    if (mutating) hook.reinvocationPolicy ??= 'Never';
    defaultRules(hook.rules);
    const service = obj(obj(hook.clientConfig).service);
    if (isPlainObject(obj(hook.clientConfig).service)) service.port ??= 443;
  }
}

/** validateRule: operations, groups, versions and resources, each required, and a known scope. */
function validateRule(rule: unknown, at: string, withOperations: boolean): StatusCause[] {
  const r = obj(rule);
  const causes: StatusCause[] = [];
  if (withOperations) {
    if (list(r.operations).length === 0) causes.push(FieldErrors.required(`${at}.operations`, ''));
    list(r.operations).forEach((op, i) => {
      if (!OPERATIONS.includes(String(op)))
        causes.push(FieldErrors.notSupported(`${at}.operations[${i}]`, op, OPERATIONS));
    });
  }
  if (list(r.apiGroups).length === 0) causes.push(FieldErrors.required(`${at}.apiGroups`, ''));
  if (list(r.apiVersions).length === 0) causes.push(FieldErrors.required(`${at}.apiVersions`, ''));
  if (list(r.resources).length === 0) causes.push(FieldErrors.required(`${at}.resources`, ''));
  if (r.scope !== undefined && !SCOPES.includes(String(r.scope)))
    causes.push(FieldErrors.notSupported(`${at}.scope`, r.scope, SCOPES));
  return causes;
}

/** ValidateWebhookClientConfig: exactly one of an https URL and a service reference. */
function validateClientConfig(config: unknown, at: string): StatusCause[] {
  const c = obj(config);
  const hasUrl = typeof c.url === 'string' && c.url !== '';
  const hasService = isPlainObject(c.service);
  if (hasUrl === hasService) return [FieldErrors.required(at, 'exactly one of url or service is required')];
  const causes: StatusCause[] = [];
  if (hasUrl) {
    let url: URL | undefined;
    try {
      url = new URL(String(c.url));
    } catch {
      causes.push(FieldErrors.invalid(`${at}.url`, c.url, 'host must be specified'));
    }
    if (url && url.protocol !== 'https:')
      causes.push(FieldErrors.invalid(`${at}.url`, c.url, "'https' is the only allowed URL scheme"));
    return causes;
  }
  const s = obj(c.service);
  if (!s.name) causes.push(FieldErrors.required(`${at}.service.name`, 'service name is required'));
  if (!s.namespace) causes.push(FieldErrors.required(`${at}.service.namespace`, 'service namespace is required'));
  if (typeof s.path === 'string' && s.path !== '' && !s.path.startsWith('/'))
    causes.push(FieldErrors.invalid(`${at}.service.path`, s.path, "must start with a '/'"));
  const port = s.port;
  if (typeof port === 'number' && (port < 1 || port > 65535))
    causes.push(
      FieldErrors.invalid(`${at}.service.port`, port, 'port is not valid: must be between 1 and 65535, inclusive'),
    );
  return causes;
}

/** validateValidatingWebhook / validateMutatingWebhook, and unique names (ValidateValidatingWebhookConfiguration). */
function validateWebhooks(o: KubeObject, mutating: boolean): StatusCause[] {
  const causes: StatusCause[] = [];
  const names = new Set<string>();
  list(o.webhooks).forEach((webhook, i) => {
    const at = `webhooks[${i}]`;
    const hook = obj(webhook);
    const name = typeof hook.name === 'string' ? hook.name : '';
    if (name === '') causes.push(FieldErrors.required(`${at}.name`, ''));
    else {
      for (const p of checkDns1123Subdomain(name)) causes.push(FieldErrors.invalid(`${at}.name`, name, p));
      if (name.split('.').length < 3)
        causes.push(
          FieldErrors.invalid(`${at}.name`, name, 'should be a domain with at least three segments separated by dots'),
        );
      if (names.has(name)) causes.push(FieldErrors.duplicate(`${at}.name`, name));
      names.add(name);
    }
    list(hook.rules).forEach((r, j) => causes.push(...validateRule(r, `${at}.rules[${j}]`, true)));
    if (!FAILURE_POLICIES.includes(String(hook.failurePolicy)))
      causes.push(FieldErrors.notSupported(`${at}.failurePolicy`, hook.failurePolicy, FAILURE_POLICIES));
    if (!MATCH_POLICIES.includes(String(hook.matchPolicy)))
      causes.push(FieldErrors.notSupported(`${at}.matchPolicy`, hook.matchPolicy, MATCH_POLICIES));
    if (hook.sideEffects === undefined || hook.sideEffects === '')
      causes.push(FieldErrors.required(`${at}.sideEffects`, `must specify one of ${SIDE_EFFECTS.join(', ')}`));
    else if (!SIDE_EFFECTS.includes(String(hook.sideEffects)))
      causes.push(FieldErrors.notSupported(`${at}.sideEffects`, hook.sideEffects, SIDE_EFFECTS));
    const timeout = hook.timeoutSeconds;
    if (typeof timeout === 'number' && (timeout < 1 || timeout > 30))
      causes.push(
        FieldErrors.invalid(`${at}.timeoutSeconds`, timeout, 'the timeout value must be between 1 and 30 seconds'),
      );
    const versions = list(hook.admissionReviewVersions);
    if (versions.length === 0)
      causes.push(
        FieldErrors.required(`${at}.admissionReviewVersions`, `must specify one of ${REVIEW_VERSIONS.join(', ')}`),
      );
    else if (!versions.some((v) => REVIEW_VERSIONS.includes(String(v))))
      causes.push(
        FieldErrors.invalid(
          `${at}.admissionReviewVersions`,
          versions,
          `must include at least one of ${REVIEW_VERSIONS.join(', ')}`,
        ),
      );
    causes.push(...validateClientConfig(hook.clientConfig, `${at}.clientConfig`));
    causes.push(...validateLabelSelector(hook.namespaceSelector, `${at}.namespaceSelector`));
    causes.push(...validateLabelSelector(hook.objectSelector, `${at}.objectSelector`));
    if (mutating && !REINVOCATION.includes(String(hook.reinvocationPolicy)))
      causes.push(FieldErrors.notSupported(`${at}.reinvocationPolicy`, hook.reinvocationPolicy, REINVOCATION));
    list(hook.matchConditions).forEach((c, j) =>
      causes.push(...validateExpression(c, `${at}.matchConditions[${j}]`, 'condition')),
    );
  });
  return causes;
}

/**
 * A CEL expression that is there and compiles (kube-apiserver also type-checks it; kube-sim compiles it). `kind`
 * says whose: match conditions (a qualified name, "" details), variables (a name, "… is not specified") or
 * validations (no name).
 */
function validateExpression(item: unknown, at: string, kind: 'condition' | 'variable' | 'validation'): StatusCause[] {
  const it = obj(item);
  const causes: StatusCause[] = [];
  const name = typeof it.name === 'string' ? it.name.trim() : '';
  if (kind === 'condition') {
    if (name === '') causes.push(FieldErrors.required(`${at}.name`, ''));
    else for (const p of checkQualifiedName(name)) causes.push(FieldErrors.invalid(`${at}.name`, name, p));
  } else if (kind === 'variable') {
    if (name === '') causes.push(FieldErrors.required(`${at}.name`, 'name is not specified'));
    else if (!/^[_a-zA-Z][_a-zA-Z0-9]*$/.test(name))
      causes.push(FieldErrors.invalid(`${at}.name`, name, 'must be a valid CEL identifier'));
  }
  const expression = typeof it.expression === 'string' ? it.expression : '';
  if (expression.trim() === '')
    causes.push(FieldErrors.required(`${at}.expression`, kind === 'condition' ? '' : 'expression is not specified'));
  else {
    const error = compileError(expression);
    if (error) causes.push(FieldErrors.invalid(`${at}.expression`, expression, `compilation failed: ${error}`));
  }
  return causes;
}

/** validateMatchResources: the rules a policy's constraints need, and selectors that parse. */
function validateMatchResources(match: unknown, at: string, required: boolean): StatusCause[] {
  if (!isPlainObject(match)) return required ? [FieldErrors.required(at, '')] : [];
  const causes: StatusCause[] = [];
  if (required && list(match.resourceRules).length === 0) causes.push(FieldErrors.required(`${at}.resourceRules`, ''));
  for (const key of ['resourceRules', 'excludeResourceRules'])
    list(match[key]).forEach((r, i) => causes.push(...validateRule(r, `${at}.${key}[${i}]`, true)));
  if (!MATCH_POLICIES.includes(String(match.matchPolicy)))
    causes.push(FieldErrors.notSupported(`${at}.matchPolicy`, match.matchPolicy, MATCH_POLICIES));
  causes.push(...validateLabelSelector(match.namespaceSelector, `${at}.namespaceSelector`));
  causes.push(...validateLabelSelector(match.objectSelector, `${at}.objectSelector`));
  return causes;
}

function validatePolicy(o: KubeObject): StatusCause[] {
  const spec = obj(o.spec);
  const causes: StatusCause[] = [];
  if (!FAILURE_POLICIES.includes(String(spec.failurePolicy)))
    causes.push(FieldErrors.notSupported('spec.failurePolicy', spec.failurePolicy, FAILURE_POLICIES));
  if (spec.paramKind !== undefined) {
    const kind = obj(spec.paramKind);
    if (!kind.apiVersion) causes.push(FieldErrors.required('spec.paramKind.apiVersion', ''));
    if (!kind.kind) causes.push(FieldErrors.required('spec.paramKind.kind', ''));
  }
  causes.push(...validateMatchResources(spec.matchConstraints, 'spec.matchConstraints', true));
  const validations = list(spec.validations);
  const audits = list(spec.auditAnnotations);
  if (validations.length === 0 && audits.length === 0)
    causes.push(
      FieldErrors.required('spec.validations', 'validations or auditAnnotations must contain at least one item'),
    );
  validations.forEach((v, i) => {
    causes.push(...validateExpression(v, `spec.validations[${i}]`, 'validation'));
    const reason = obj(v).reason;
    if (reason !== undefined && !REASONS.includes(String(reason)))
      causes.push(FieldErrors.notSupported(`spec.validations[${i}].reason`, reason, REASONS));
  });
  audits.forEach((a, i) => {
    const at = `spec.auditAnnotations[${i}]`;
    const key = obj(a).key;
    if (typeof key !== 'string' || key === '') causes.push(FieldErrors.required(`${at}.key`, ''));
    const value = obj(a).valueExpression;
    if (typeof value !== 'string' || value.trim() === '')
      causes.push(FieldErrors.required(`${at}.valueExpression`, 'valueExpression is not specified'));
  });
  list(spec.matchConditions).forEach((c, i) =>
    causes.push(...validateExpression(c, `spec.matchConditions[${i}]`, 'condition')),
  );
  list(spec.variables).forEach((v, i) => causes.push(...validateExpression(v, `spec.variables[${i}]`, 'variable')));
  return causes;
}

function validateBinding(o: KubeObject): StatusCause[] {
  const spec = obj(o.spec);
  const causes: StatusCause[] = [];
  if (typeof spec.policyName !== 'string' || spec.policyName === '')
    causes.push(FieldErrors.required('spec.policyName', ''));
  const actions = list(spec.validationActions);
  if (actions.length === 0)
    causes.push(FieldErrors.required('spec.validationActions', 'at least one validation action is required'));
  const seen = new Set<string>();
  actions.forEach((a, i) => {
    if (!VALIDATION_ACTIONS.includes(String(a)))
      causes.push(FieldErrors.notSupported(`spec.validationActions[${i}]`, a, VALIDATION_ACTIONS));
    if (seen.has(String(a))) causes.push(FieldErrors.duplicate(`spec.validationActions[${i}]`, a));
    seen.add(String(a));
  });
  if (seen.has('Deny') && seen.has('Warn'))
    causes.push(
      FieldErrors.invalid(
        'spec.validationActions',
        actions,
        'must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)',
      ),
    );
  if (spec.paramRef !== undefined) {
    const ref = obj(spec.paramRef);
    if (ref.name !== undefined && ref.selector !== undefined) {
      causes.push(FieldErrors.forbidden('spec.paramRef.name', 'name and selector are mutually exclusive'));
      causes.push(FieldErrors.forbidden('spec.paramRef.selector', 'name and selector are mutually exclusive'));
    }
    if (ref.name === undefined && ref.selector === undefined)
      causes.push(FieldErrors.required('spec.paramRef', 'one of name or selector must be specified'));
    if (ref.parameterNotFoundAction === undefined)
      causes.push(FieldErrors.required('spec.paramRef.parameterNotFoundAction', ''));
    else if (!NOT_FOUND_ACTIONS.includes(String(ref.parameterNotFoundAction)))
      causes.push(
        FieldErrors.notSupported(
          'spec.paramRef.parameterNotFoundAction',
          ref.parameterNotFoundAction,
          NOT_FOUND_ACTIONS,
        ),
      );
  }
  causes.push(...validateMatchResources(spec.matchResources, 'spec.matchResources', false));
  return causes;
}

const age: TableColumn = col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
});

const webhookConfiguration = (kind: string, resource: string, mutating: boolean): KindInfo => ({
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  kind,
  resource,
  singular: kind.toLowerCase(),
  namespaced: false,
  categories: ['api-extensions'],
  generation: true,
  strategy: {
    defaults: (o) => defaultWebhooks(o, mutating),
    validate: (o) => validateWebhooks(o, mutating),
    // The generation moves when the webhooks change (its strategy's PrepareForUpdate).
    bumpsGeneration: (next, old) => !deepEqual(next.webhooks, old.webhooks),
  },
  columns: [
    col('Webhooks', (o) => list(o.webhooks).length, {
      type: 'integer',
      description: 'Webhooks indicates the number of webhooks registered in this configuration',
    }),
    age,
  ],
  noAge: true,
});

const validatingAdmissionPolicies: KindInfo = {
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  kind: 'ValidatingAdmissionPolicy',
  resource: 'validatingadmissionpolicies',
  singular: 'validatingadmissionpolicy',
  namespaced: false,
  categories: ['api-extensions'],
  status: true,
  generation: true,
  strategy: {
    defaults(o) {
      const spec = obj(o.spec);
      if (!isPlainObject(o.spec)) o.spec = spec;
      spec.failurePolicy ??= 'Fail';
      defaultMatchResources(spec.matchConstraints);
    },
    validate: validatePolicy,
    statusValidation: 'metadata',
  },
  columns: [
    col('Validations', (o) => list(obj(o.spec).validations).length, {
      type: 'integer',
      description: 'Validations indicates the number of validation rules defined in this configuration',
    }),
    col(
      'ParamKind',
      (o) => {
        const kind = obj(o.spec).paramKind;
        return isPlainObject(kind) ? `${String(kind.apiVersion ?? '')}/${String(kind.kind ?? '')}` : '<unset>';
      },
      { description: 'ParamKind specifies the kind of resources used to parameterize this policy' },
    ),
    age,
  ],
  noAge: true,
};

const validatingAdmissionPolicyBindings: KindInfo = {
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  kind: 'ValidatingAdmissionPolicyBinding',
  resource: 'validatingadmissionpolicybindings',
  singular: 'validatingadmissionpolicybinding',
  namespaced: false,
  categories: ['api-extensions'],
  generation: true,
  strategy: {
    defaults(o) {
      const spec = obj(o.spec);
      if (!isPlainObject(o.spec)) o.spec = spec;
      defaultMatchResources(spec.matchResources);
      if (isPlainObject(spec.paramRef)) spec.paramRef.parameterNotFoundAction ??= 'Deny';
    },
    validate: validateBinding,
  },
  columns: [
    col('PolicyName', (o) => String(obj(o.spec).policyName ?? ''), {
      description: 'PolicyName indicates the policy definition which the policy binding binded to',
    }),
    col(
      'ParamRef',
      (o) => {
        const ref = obj(o.spec).paramRef;
        if (!isPlainObject(ref)) return '<unset>';
        if (typeof ref.name === 'string' && ref.name !== '')
          return ref.namespace ? `${String(ref.namespace)}/${ref.name}` : `*/${ref.name}`;
        return ref.selector !== undefined ? selectorString(ref.selector) : '<unset>';
      },
      { description: 'ParamRef indicates the param resource which sets the configration param' },
    ),
    age,
  ],
  noAge: true,
};

export const admissionRegistrationKinds: KindInfo[] = [
  webhookConfiguration('MutatingWebhookConfiguration', 'mutatingwebhookconfigurations', true),
  webhookConfiguration('ValidatingWebhookConfiguration', 'validatingwebhookconfigurations', false),
  validatingAdmissionPolicies,
  validatingAdmissionPolicyBindings,
];
