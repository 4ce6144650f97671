import { ApiError, Errors, type Status } from '../../api/errors.js';
import type { MaybePromise } from '../../api/maybe-async.js';
import { applyJsonPatch } from '../../api/patch.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import type { SeededRandom } from '../../clock/random.js';
import type { MemoryStore } from '../../storage/memory-store.js';
import type { Registry } from '../registry.js';
import { groupVersion, type AdmissionPlugin, type AdmissionRequest, type KindInfo } from '../types.js';
import { compileExpression, toCel, type AdmissionProgram } from './cel.js';
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
import {
  clientConfigOf,
  WebhookCallError,
  type WebhookAnswer,
  type WebhookClientConfig,
  type WebhookClients,
} from '../webhook-client.js';

/**
 * MutatingAdmissionWebhook and ValidatingAdmissionWebhook (k8s.io/apiserver admission/plugin/webhook): the webhooks
 * of the Mutating/ValidatingWebhookConfigurations, called with an AdmissionReview over HTTPS. Mutating webhooks run
 * one after another in name order (configurations by name, then webhooks as listed), their JSONPatch applied and
 * the object defaulted and checked again; those with reinvocationPolicy IfNeeded run once more when a later one
 * changed the object. Validating webhooks run all at once. Which webhooks may look at a resource is kept per
 * resource, so a write of a resource no webhook names costs a map lookup.
 */
type Obj = Record<string, unknown>;

const ADMISSION_GROUP = 'admissionregistration.k8s.io';
const MUTATING_TABLE = `${ADMISSION_GROUP}/mutatingwebhookconfigurations`;
const VALIDATING_TABLE = `${ADMISSION_GROUP}/validatingwebhookconfigurations`;
const EXEMPT_KINDS = new Set([
  'ValidatingWebhookConfiguration',
  'MutatingWebhookConfiguration',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
  'MutatingAdmissionPolicy',
  'MutatingAdmissionPolicyBinding',
]);

/** rules.IsExemptAdmissionConfigurationResource: webhooks and policies never judge their own configuration. */
export function isExemptConfiguration(info: KindInfo): boolean {
  return info.group === ADMISSION_GROUP && EXEMPT_KINDS.has(info.kind);
}

/** One webhook of a configuration, with its defaults (as SetDefaults_*Webhook gives them) and its selectors parsed. */
export interface Webhook {
  readonly configuration: string;
  readonly name: string;
  /** Configuration and index: what reinvocation remembers a webhook by. */
  readonly uid: string;
  readonly rules: Rule[];
  readonly matchPolicy: string;
  readonly failurePolicy: string;
  readonly namespaceSelector: ParsedSelector;
  readonly objectSelector: ParsedSelector;
  readonly matchConditions: Array<{ name: string; program: AdmissionProgram | string }>;
  readonly sideEffects: string | undefined;
  readonly timeoutSeconds: number;
  readonly admissionReviewVersions: string[];
  readonly reinvocationPolicy: string;
  readonly clientConfig: WebhookClientConfig;
}

function compileWebhooks(configuration: KubeObject): Webhook[] {
  const hooks = Array.isArray(configuration.webhooks) ? configuration.webhooks : [];
  const configName = configuration.metadata.name ?? '';
  return hooks.filter(isPlainObject).map((h, i) => {
    const clientConfig = clientConfigOf(h.clientConfig);
    const conditions = Array.isArray(h.matchConditions) ? h.matchConditions.filter(isPlainObject) : [];
    return {
      configuration: configName,
      name: String(h.name ?? ''),
      uid: `${configName}/${String(h.name ?? '')}/${i}`,
      rules: (Array.isArray(h.rules) ? h.rules : []).filter(isPlainObject) as Rule[],
      matchPolicy: typeof h.matchPolicy === 'string' ? h.matchPolicy : 'Equivalent',
      failurePolicy: typeof h.failurePolicy === 'string' ? h.failurePolicy : 'Fail',
      namespaceSelector: parseSelector(h.namespaceSelector),
      objectSelector: parseSelector(h.objectSelector),
      matchConditions: conditions.map((c) => ({
        name: String(c.name ?? ''),
        program: compileExpression(String(c.expression ?? '')),
      })),
      sideEffects: typeof h.sideEffects === 'string' ? h.sideEffects : undefined,
      timeoutSeconds: typeof h.timeoutSeconds === 'number' ? h.timeoutSeconds : 10,
      admissionReviewVersions: Array.isArray(h.admissionReviewVersions) ? h.admissionReviewVersions.map(String) : [],
      reinvocationPolicy: typeof h.reinvocationPolicy === 'string' ? h.reinvocationPolicy : 'Never',
      clientConfig,
    };
  });
}

/**
 * The webhooks of one configuration table, kept in step with it, and the ones that may look at a resource
 * (`group/version/resource/subresource`), worked out once per resource until a configuration or the set of kinds
 * changes.
 */
class WebhookSource {
  private hooks: Webhook[] | undefined;
  private readonly byResource = new Map<string, Webhook[]>();

  constructor(
    private readonly store: MemoryStore,
    private readonly registry: Registry,
    private readonly table: string,
  ) {
    store.onChange((key) => {
      if (key !== this.table) return;
      this.hooks = undefined;
      this.byResource.clear();
    });
    registry.onChange(() => this.byResource.clear());
  }

  private all(): Webhook[] {
    if (!this.hooks) {
      const configurations = this.store.resourceKeys().includes(this.table) ? [...this.store.all(this.table)] : [];
      configurations.sort((a, b) => ((a.metadata.name ?? '') < (b.metadata.name ?? '') ? -1 : 1));
      this.hooks = configurations.flatMap(compileWebhooks);
    }
    return this.hooks;
  }

  candidates(info: KindInfo, subresource: string): Webhook[] {
    const key = `${groupVersion(info)}/${info.resource}/${subresource}`;
    let list = this.byResource.get(key);
    if (!list) {
      const all = this.all();
      const equivalents = all.length === 0 ? [] : equivalentsOf(this.registry, info);
      list = all.filter((hook) =>
        hook.matchPolicy === 'Equivalent'
          ? equivalents.some((k) => rulesMayMatch(hook.rules, k, subresource))
          : rulesMayMatch(hook.rules, info, subresource),
      );
      this.byResource.set(key, list);
    }
    return list;
  }
}

/** What a webhook call needs besides the request: the clients, the store, the RNG for request uids. */
export interface WebhookContext {
  store: MemoryStore;
  registry: Registry;
  clients: WebhookClients;
  random: SeededRandom;
}

/** The user a review names when the request has none (no --auth, the server's own components). */
const ADMIN = { username: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] };

/** AdmissionRequest's userInfo (authentication/v1 UserInfo; empty fields left out). */
function userInfoOf(request: AdmissionRequest): Obj {
  const user = request.user ?? ADMIN;
  const info: Obj = {};
  if (user.username) info.username = user.username;
  if ('uid' in user && user.uid) info.uid = user.uid;
  if (user.groups.length > 0) info.groups = user.groups;
  if ('extra' in user && user.extra && Object.keys(user.extra).length > 0) info.extra = user.extra;
  return info;
}

/** The request as CEL's `request` variable and a review's request see it (CreateAdmissionRequest), objects left out. */
export function admissionRequestFields(request: AdmissionRequest, invocation: Invocation): Obj {
  const info = request.info;
  const fields: Obj = {
    kind: invocation.kind,
    resource: invocation.resource,
    requestKind: subKind(info, request.subresource),
    requestResource: { group: info.group, version: info.version, resource: info.resource },
    operation: request.operation,
    userInfo: userInfoOf(request),
    dryRun: request.dryRun,
  };
  if (request.subresource) {
    fields.subResource = request.subresource;
    fields.requestSubResource = request.subresource;
  }
  if (request.name) fields.name = request.name;
  if (request.namespace) fields.namespace = request.namespace;
  return fields;
}

function subKind(info: KindInfo, subresource: string): { group: string; version: string; kind: string } {
  return subresource === 'scale'
    ? { group: 'autoscaling', version: 'v1', kind: 'Scale' }
    : { group: info.group, version: info.version, kind: info.kind };
}

/**
 * The request's objects in the version a matched equivalent serves (a CRD's other version, events.k8s.io's Event
 * for a core Event): through the storage version, as kube-apiserver converts versioned attributes.
 */
export function versioned(obj: KubeObject | undefined, from: KindInfo, to: KindInfo): KubeObject | undefined {
  if (!obj || from === to || obj.apiVersion !== groupVersion(from)) return obj;
  const stored = from.storage ? from.storage.toStorage(obj) : obj;
  return to.storage ? to.storage.fromStorage(stored) : stored;
}

/** The object in the request's own version again, after a webhook patched it in an equivalent's. */
function unversioned(obj: unknown, from: KindInfo, to: KindInfo): unknown {
  if (from === to || !isPlainObject(obj)) return obj;
  const stored = from.storage ? from.storage.toStorage(obj as KubeObject) : obj;
  return to.storage ? to.storage.fromStorage(stored as KubeObject) : stored;
}

/**
 * ShouldCallHook: namespace and object selectors, then the rules (and their equivalents), then the match
 * conditions. A selector's error counts only for a webhook whose rules match; a match condition that errors fails
 * the request (403) under failurePolicy Fail and skips the webhook under Ignore.
 */
function shouldCall(context: WebhookContext, hook: Webhook, request: AdmissionRequest): Invocation | undefined {
  const ns = namespaceMatches(context.store, hook.namespaceSelector, request);
  if (ns === false) return undefined;
  const object = objectMatches(hook.objectSelector, request);
  if (object === false) return undefined;
  const invocation = matchingInvocation(hook.rules, hook.matchPolicy, request, () =>
    equivalentsOf(context.registry, request.info),
  );
  if (!invocation) return undefined;
  if (ns instanceof ApiError) throw ns;
  if (object instanceof ApiError) throw object;
  if (hook.matchConditions.length === 0) return invocation;
  const bindings = {
    object: toCel(versioned(request.obj, request.info, invocation.info) ?? null),
    oldObject: toCel(versioned(request.old, request.info, invocation.info) ?? null),
    request: toCel(admissionRequestFields(request, invocation)),
  };
  const errors: string[] = [];
  for (const condition of hook.matchConditions) {
    const program = condition.program;
    if (typeof program === 'string') {
      errors.push(`compilation failed: ${program}`);
      continue;
    }
    const result = program.run(bindings);
    if ('error' in result) errors.push(result.error);
    else if (result.value === false) return undefined;
    else if (result.value !== true) errors.push(`matchCondition '${condition.name}' must evaluate to bool`);
  }
  if (errors.length === 0) return invocation;
  if (hook.failurePolicy === 'Ignore') return undefined;
  throw Errors.forbidden(
    { group: request.info.group, resource: request.info.resource },
    request.name,
    errors.length === 1 ? errors[0]! : `[${errors.join(', ')}]`,
  );
}

/**
 * admission webhook "x" denied the request: … (webhookerrors.ToStatusErr, 1.32's words). A refusal without an error
 * code is 403 Forbidden, as ToStatusErr gives it since (1.32 answers it 500, or 200 for a code of 200).
 */
function denial(hookName: string, result: unknown): ApiError {
  const r = isPlainObject(result) ? result : {};
  const code = typeof r.code === 'number' && r.code >= 400 && r.code <= 599 ? r.code : 403;
  const given = typeof r.reason === 'string' ? r.reason : '';
  const deniedBy = `admission webhook ${JSON.stringify(hookName)} denied the request`;
  const message =
    typeof r.message === 'string' && r.message !== ''
      ? `${deniedBy}: ${r.message}`
      : given !== ''
        ? `${deniedBy}: ${given}`
        : `${deniedBy} without explanation`;
  const reason = given !== '' ? given : code === 500 ? 'InternalError' : code === 403 ? 'Forbidden' : '';
  return new ApiError(code, reason, message, isPlainObject(r.details) ? (r.details as Status['details']) : undefined);
}

/** The dry-run refusal of a webhook that may have side effects. */
function checkDryRun(hook: Webhook, request: AdmissionRequest): void {
  if (!request.dryRun) return;
  if (hook.sideEffects === undefined) throw new WebhookFailure(hook.name, 'Webhook SideEffects is nil');
  if (hook.sideEffects !== 'None' && hook.sideEffects !== 'NoneOnDryRun')
    throw Errors.badRequest(`admission webhook ${JSON.stringify(hook.name)} does not support dry run`);
}

/** webhookutil.ErrCallingWebhook: a call that failed, which failurePolicy Ignore lets the request past. */
class WebhookFailure extends Error {
  constructor(
    readonly hookName: string,
    reason: string,
  ) {
    super(`failed calling webhook ${JSON.stringify(hookName)}: ${reason}`);
    this.name = 'WebhookFailure';
  }
}

interface Review {
  uid: string;
  body: Obj;
  version: 'v1' | 'v1beta1';
}

function reviewOf(
  context: WebhookContext,
  hook: Webhook,
  request: AdmissionRequest,
  invocation: Invocation,
  object: KubeObject | undefined,
  oldObject: KubeObject | undefined,
): Review {
  const version = hook.admissionReviewVersions.find((v) => v === 'v1' || v === 'v1beta1') as
    | Review['version']
    | undefined;
  if (!version)
    throw new WebhookFailure(
      hook.name,
      'could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)',
    );
  const uid = context.random.uuid();
  return {
    uid,
    version,
    body: {
      kind: 'AdmissionReview',
      apiVersion: `admission.k8s.io/${version}`,
      request: {
        uid,
        ...admissionRequestFields(request, invocation),
        object: object ?? null,
        oldObject: oldObject ?? null,
        options: request.options,
      },
    },
  };
}

/** VerifyAdmissionResponse: the review that came back, checked as kube-apiserver checks it. */
function verify(review: Review, answer: WebhookAnswer, mutating: boolean): Obj {
  const response = answer.response;
  if (!isPlainObject(response)) throw new Error('webhook response was absent');
  if (review.version === 'v1') {
    if (response.uid !== review.uid)
      throw new Error(
        `expected response.uid=${JSON.stringify(review.uid)}, got ${JSON.stringify(String(response.uid ?? ''))}`,
      );
    const gvk = `${typeof answer.apiVersion === 'string' ? answer.apiVersion.replace(/\/?([^/]*)$/, '/$1') : '/'}, Kind=${typeof answer.kind === 'string' ? answer.kind : ''}`;
    if (answer.apiVersion !== 'admission.k8s.io/v1' || answer.kind !== 'AdmissionReview')
      throw new Error(`expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got ${gvk}`);
  }
  const patch = response.patch;
  const patchType = response.patchType;
  if (mutating) {
    if (review.version === 'v1') {
      if (typeof patch === 'string' && patch !== '' && patchType === undefined)
        throw new Error('webhook returned response.patch but not response.patchType');
      if ((patch === undefined || patch === '') && patchType !== undefined)
        throw new Error('webhook returned response.patchType but not response.patch');
      if (patchType !== undefined && patchType === '')
        throw new Error(`webhook returned invalid response.patchType of ""`);
    }
  } else {
    if (typeof patch === 'string' && patch !== '') throw new Error('validating webhook may not return response.patch');
    if (patchType !== undefined) throw new Error('validating webhook may not return response.patchType');
  }
  return response;
}

/** Calls one webhook; a failed call is a WebhookFailure (failurePolicy decides), anything else is the answer. */
function call(context: WebhookContext, hook: Webhook, review: Review, mutating: boolean): Promise<Obj> {
  return context.clients.post(hook.clientConfig, review.body, hook.timeoutSeconds).then(
    (answer) => {
      try {
        return verify(review, answer, mutating);
      } catch (err) {
        throw new WebhookFailure(hook.name, `received invalid webhook response: ${(err as Error).message}`);
      }
    },
    (err: unknown) => {
      const why = err instanceof WebhookCallError ? err.message : err instanceof Error ? err.message : String(err);
      throw new WebhookFailure(hook.name, `failed to call webhook: ${why}`);
    },
  );
}

/** What every answer carries besides the verdict: audit annotations under the webhook's name, and warnings. */
function record(hook: Webhook, request: AdmissionRequest, response: Obj): void {
  if (isPlainObject(response.auditAnnotations))
    for (const [k, v] of Object.entries(response.auditAnnotations))
      if (typeof v === 'string') request.annotate(`${hook.name}/${k}`, v);
  if (Array.isArray(response.warnings))
    for (const w of response.warnings) if (typeof w === 'string' && w.trim() !== '') request.warn(w);
}

interface ReinvocationState {
  lastOutput: unknown;
  previouslyInvoked: Set<string>;
  reinvoke: Set<string>;
}

/** MutatingAdmissionWebhook: the mutating webhooks, one after another. */
export class MutatingWebhooks implements AdmissionPlugin {
  readonly name = 'MutatingAdmissionWebhook';
  readonly operations = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'] as const;
  private readonly source: WebhookSource;

  constructor(private readonly context: WebhookContext) {
    this.source = new WebhookSource(context.store, context.registry, MUTATING_TABLE);
  }

  admit(request: AdmissionRequest): MaybePromise<void> {
    if (isExemptConfiguration(request.info)) return;
    const hooks = this.source.candidates(request.info, request.subresource);
    if (hooks.length === 0) return;
    const values = request.reinvocation.values;
    let state = values.get(this.name) as ReinvocationState | undefined;
    if (!state) {
      state = { lastOutput: undefined, previouslyInvoked: new Set(), reinvoke: new Set() };
      values.set(this.name, state);
    }
    const reinvoking = request.reinvocation.round === 1;
    // In-tree plugins that ran again may have changed the object since the webhooks last saw it.
    if (reinvoking && !deepEqual(state.lastOutput, request.obj)) requireReinvoking(state);
    const run = (index: number): MaybePromise<void> => {
      for (let i = index; i < hooks.length; i++) {
        const hook = hooks[i]!;
        const invocation = shouldCall(this.context, hook, request);
        if (!invocation) continue;
        if (reinvoking && !state.reinvoke.has(hook.uid)) continue;
        return this.invoke(hook, i, invocation, request, state).then(() => run(i + 1));
      }
      state.lastOutput = request.obj === undefined ? undefined : deepCopy(request.obj);
    };
    return run(0);
  }

  private async invoke(
    hook: Webhook,
    index: number,
    invocation: Invocation,
    request: AdmissionRequest,
    state: ReinvocationState,
  ): Promise<void> {
    const round = request.reinvocation.round;
    const key = `round_${round}_index_${index}`;
    let changed = false;
    let failure: unknown;
    try {
      changed = await this.callMutating(hook, key, invocation, request);
    } catch (err) {
      failure = err;
    }
    request.annotate(
      `mutation.webhook.admission.k8s.io/${key}`,
      JSON.stringify({ configuration: hook.configuration, webhook: hook.name, mutated: changed }),
    );
    if (changed) {
      requireReinvoking(state);
      request.reinvocation.shouldReinvoke = true;
    }
    if (hook.reinvocationPolicy === 'IfNeeded') state.previouslyInvoked.add(hook.uid);
    if (failure === undefined) return;
    if (failure instanceof WebhookFailure) {
      if (hook.failurePolicy === 'Ignore') {
        request.annotate(`failed-open.mutation.webhook.admission.k8s.io/${key}`, hook.name);
        return;
      }
      throw Errors.internal(failure.message);
    }
    throw failure;
  }

  /** One call: the review in the matched version, the verdict, then the patch applied. Whether it changed the object. */
  private async callMutating(
    hook: Webhook,
    key: string,
    invocation: Invocation,
    request: AdmissionRequest,
  ): Promise<boolean> {
    checkDryRun(hook, request);
    const object = versioned(request.obj, request.info, invocation.info);
    const review = reviewOf(
      this.context,
      hook,
      request,
      invocation,
      object,
      versioned(request.old, request.info, invocation.info),
    );
    const response = await call(this.context, hook, review, true);
    record(hook, request, response);
    if (response.allowed !== true) throw denial(hook.name, response.status);
    const encoded = response.patch;
    if (typeof encoded !== 'string' || encoded === '') return false;
    let operations: unknown;
    try {
      operations = JSON.parse(Buffer.from(encoded, 'base64').toString('utf8'));
      if (!Array.isArray(operations)) throw new Error('not a JSON array');
    } catch (err) {
      throw new WebhookFailure(hook.name, `received undecodable patch in webhook response: ${(err as Error).message}`);
    }
    if (response.patchType !== undefined && response.patchType !== 'JSONPatch')
      throw new WebhookFailure(hook.name, `unsupported patch type ${JSON.stringify(response.patchType)}`);
    if (operations.length === 0) return false;
    if (object === undefined)
      throw Errors.internal(
        `admission webhook ${JSON.stringify(hook.name)} attempted to modify the object, which is not supported for this operation`,
      );
    let patched: unknown;
    try {
      patched = applyJsonPatch(object, operations);
    } catch (err) {
      throw Errors.internal(err instanceof ApiError ? err.message : (err as Error).message);
    }
    const changed = !deepEqual(object, patched);
    request.annotate(
      `patch.webhook.admission.k8s.io/${key}`,
      JSON.stringify({
        configuration: hook.configuration,
        webhook: hook.name,
        patch: operations,
        patchType: 'JSONPatch',
      }),
    );
    if (changed) request.replace(unversioned(patched, invocation.info, request.info));
    return changed;
  }
}

function requireReinvoking(state: ReinvocationState): void {
  for (const uid of state.previouslyInvoked) state.reinvoke.add(uid);
  state.previouslyInvoked.clear();
}

/** ValidatingAdmissionWebhook: the validating webhooks, all at once; the first refusal (in webhook order) answers. */
export class ValidatingWebhooks implements AdmissionPlugin {
  readonly name = 'ValidatingAdmissionWebhook';
  readonly operations = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'] as const;
  private readonly source: WebhookSource;

  constructor(private readonly context: WebhookContext) {
    this.source = new WebhookSource(context.store, context.registry, VALIDATING_TABLE);
  }

  validate(request: AdmissionRequest): MaybePromise<undefined> {
    if (isExemptConfiguration(request.info)) return undefined;
    const hooks = this.source.candidates(request.info, request.subresource);
    if (hooks.length === 0) return undefined;
    const relevant: Array<[Webhook, Invocation, number]> = [];
    hooks.forEach((hook, i) => {
      const invocation = shouldCall(this.context, hook, request);
      if (invocation) relevant.push([hook, invocation, i]);
    });
    if (relevant.length === 0) return undefined;
    // The object is not changed by validating webhooks: one copy for all of them, taken now.
    const calls = relevant.map(([hook, invocation, i]) => this.callValidating(hook, invocation, i, request));
    return Promise.all(calls).then((errors) => {
      const first = errors.find((e) => e !== undefined);
      if (first) throw first;
      return undefined;
    });
  }

  /** One webhook: undefined when it allows (or fails open), else the error to answer with. */
  private async callValidating(
    hook: Webhook,
    invocation: Invocation,
    index: number,
    request: AdmissionRequest,
  ): Promise<Error | undefined> {
    try {
      checkDryRun(hook, request);
      const review = reviewOf(
        this.context,
        hook,
        request,
        invocation,
        versioned(request.obj, request.info, invocation.info),
        versioned(request.old, request.info, invocation.info),
      );
      const response = await call(this.context, hook, review, false);
      record(hook, request, response);
      return response.allowed === true ? undefined : denial(hook.name, response.status);
    } catch (err) {
      if (err instanceof WebhookFailure) {
        if (hook.failurePolicy === 'Ignore') {
          request.annotate(`failed-open.validating.webhook.admission.k8s.io/round_0_index_${index}`, hook.name);
          return undefined;
        }
        return Errors.internal(err.message);
      }
      return err instanceof Error ? err : new Error(String(err));
    }
  }
}

/** Both webhook plugins, built on one context. */
export function webhookPlugins(context: WebhookContext): {
  mutating: MutatingWebhooks;
  validating: ValidatingWebhooks;
} {
  return { mutating: new MutatingWebhooks(context), validating: new ValidatingWebhooks(context) };
}
