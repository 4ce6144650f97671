import { ApiError } from '../api/errors.js';
import { parseLabelSelector } from '../api/selectors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { evaluateJsonPath, renderValue } from '../api/jsonpath.js';
import { closestWord } from '../api/closest.js';
import { objectKey, type History, type HistoryEvent } from './history.js';
import type { ApiResource, ApiResources } from './resources.js';
import type { ScenarioTarget } from './target.js';
import type {
  AlwaysAssertion,
  Assertion,
  Comparison,
  CountCondition,
  EventMatcher,
  EventsAssertion,
  ObjectCondition,
  ObjectRef,
  OrderAssertion,
  Selector,
  StateCondition,
  Window,
} from './types.js';

/** What an assertion found: whether it holds, what it expected, and what it saw instead. */
export interface Outcome {
  ok: boolean;
  /** "count of Pod app=webapp in default equals 1" */
  description: string;
  /** What was there, e.g. "2: webapp-abc, webapp-def". */
  found: string;
}

/** Everything an assertion can look at. */
export interface EvalContext {
  target: ScenarioTarget;
  resources: ApiResources;
  history: History;
  namespace: string;
  startTime: number;
  /** Step names (index 0 is step 1), for windows. */
  stepNames: ReadonlyArray<string | undefined>;
  stepActions: ReadonlyArray<string>;
  /** 1-based index of the step evaluating. */
  current: number;
}

export function offset(ms: number, start: number): string {
  const total = ms - start;
  if (total === 0) return 'T+0s';
  const sign = total < 0 ? '-' : '+';
  let rest = Math.abs(total);
  const parts: string[] = [];
  const units: Array<[string, number]> = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
  ];
  for (const [unit, size] of units) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  if (rest > 0) parts.push(rest % 1000 === 0 ? `${rest / 1000}s` : `${(rest / 1000).toFixed(3).replace(/0+$/, '')}s`);
  return `T${sign}${parts.join('')}`;
}

// ---- comparisons -------------------------------------------------------------------------------------

function sameValue(actual: unknown, expected: unknown): boolean {
  if (deepEqual(actual, expected)) return true;
  const scalar = (v: unknown): boolean => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
  return scalar(actual) && scalar(expected) && String(actual) === String(expected);
}

function describeComparison(c: Comparison, defaultText: string): string {
  const parts: string[] = [];
  if (c.equals !== undefined) parts.push(`equals ${renderValue(c.equals)}`);
  if (c.notEquals !== undefined) parts.push(`differs from ${renderValue(c.notEquals)}`);
  if (c.matches !== undefined) parts.push(`matches /${c.matches}/`);
  if (c.min !== undefined) parts.push(`≥ ${c.min}`);
  if (c.max !== undefined) parts.push(`≤ ${c.max}`);
  if (c.exists !== undefined) parts.push(c.exists ? 'exists' : 'does not exist');
  return parts.length > 0 ? parts.join(' and ') : defaultText;
}

function hasComparison(c: Comparison): boolean {
  return (
    c.equals !== undefined ||
    c.notEquals !== undefined ||
    c.matches !== undefined ||
    c.min !== undefined ||
    c.max !== undefined ||
    c.exists !== undefined
  );
}

function compare(value: unknown, c: Comparison): boolean {
  if (c.exists !== undefined && (value !== undefined) !== c.exists) return false;
  if (c.equals !== undefined && !sameValue(value, c.equals)) return false;
  if (c.notEquals !== undefined && sameValue(value, c.notEquals)) return false;
  if (c.matches !== undefined && (value === undefined || !new RegExp(c.matches).test(renderValue(value)))) return false;
  if (c.min !== undefined && !(Number(value) >= c.min)) return false;
  if (c.max !== undefined && !(Number(value) <= c.max)) return false;
  return true;
}

// ---- objects -----------------------------------------------------------------------------------------

function namespaceFor(
  ctx: EvalContext,
  resource: ApiResource,
  namespace: string | undefined,
  all = false,
): string | undefined {
  if (!resource.namespaced || all) return undefined;
  return namespace ?? ctx.namespace;
}

function refText(resource: ApiResource, name: string | undefined, namespace: string | undefined): string {
  return `${resource.kind}${name !== undefined ? ` ${namespace ? `${namespace}/` : ''}${name}` : ''}`;
}

function selectorText(ctx: EvalContext, resource: ApiResource, sel: Omit<Selector, 'kind'>): string {
  const ns = namespaceFor(ctx, resource, sel.namespace, sel.allNamespaces);
  const parts = [resource.kind];
  if (sel.name !== undefined) parts.push(sel.name);
  if (sel.selector) parts.push(sel.selector);
  if (sel.owner) parts.push(`owned by ${sel.owner}`);
  if (sel.where)
    parts.push(
      `where ${Object.entries(sel.where)
        .map(([k, v]) => `${k}=${renderValue(v)}`)
        .join(', ')}`,
    );
  if (ns) parts.push(`in ${ns}`);
  return parts.join(' ');
}

/** Whether obj is owned, directly or through owners of owners, by an object of this kind and name. */
export async function ownedBy(
  ctx: EvalContext,
  obj: KubeObject,
  owner: string,
  live: boolean,
  depth = 0,
): Promise<boolean> {
  const [ownerKind, ownerName] = owner.split('/') as [string, string];
  const kind = ctx.resources.resolve(ownerKind).kind;
  for (const ref of obj.metadata.ownerReferences ?? []) {
    if (ref.kind === kind && ref.name === ownerName) return true;
    if (depth >= 5) continue;
    let parent = ctx.history.byUidLatest(ref.uid)?.object;
    if (!parent && live) {
      const resource = ctx.resources.byKind(ref.apiVersion, ref.kind);
      if (resource) {
        try {
          parent = await ctx.target.client.get(
            resource.gvr,
            resource.namespaced ? obj.metadata.namespace : undefined,
            ref.name,
          );
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 404)) throw err;
        }
      }
    }
    if (parent && parent.metadata.uid === ref.uid && (await ownedBy(ctx, parent, owner, live, depth + 1))) return true;
  }
  return false;
}

/** Every JSONPath selects the value given; null means the path selects nothing (the field is absent). */
function whereHolds(obj: KubeObject, where: Record<string, unknown> | undefined): boolean {
  for (const [path, expected] of Object.entries(where ?? {})) {
    const values = evaluateJsonPath(obj, path);
    const value = values.length === 0 ? undefined : values.length === 1 ? values[0] : values;
    if (expected === null ? value !== undefined && value !== null : !sameValue(value, expected)) return false;
  }
  return true;
}

/** Objects matching a selector, read live through the API. */
export async function selectLive(
  ctx: EvalContext,
  sel: Selector,
): Promise<{ resource: ApiResource; items: KubeObject[] }> {
  const resource = ctx.resources.resolve(sel.kind, sel.apiVersion);
  const ns = namespaceFor(ctx, resource, sel.namespace, sel.allNamespaces);
  const list = await ctx.target.client.list(resource.gvr, ns, sel.selector ? { labelSelector: sel.selector } : {});
  const items: KubeObject[] = [];
  for (const obj of list.items) {
    if (sel.name !== undefined && obj.metadata.name !== sel.name) continue;
    if (sel.owner && !(await ownedBy(ctx, obj, sel.owner, true))) continue;
    if (!whereHolds(obj, sel.where)) continue;
    items.push(obj);
  }
  items.sort((a, b) => nameOf(a).localeCompare(nameOf(b)));
  return { resource, items };
}

function nameOf(obj: KubeObject): string {
  return obj.metadata.namespace ? `${obj.metadata.namespace}/${obj.metadata.name}` : (obj.metadata.name ?? '');
}

/** Names for a message; pods with their state ("web-0 (Terminating)"), since that is usually the question. */
function listNames(items: KubeObject[], namespaced: boolean, limit = 8): string {
  const names = items.map(
    (o) =>
      `${namespaced ? (o.metadata.name ?? '') : nameOf(o)}${o.kind === 'Pod' || (isPlainObject(o.spec) && Array.isArray(o.spec.containers)) ? ` (${podState(o)})` : ''}`,
  );
  return names.length <= limit
    ? names.join(', ')
    : `${names.slice(0, limit).join(', ')}, … (${names.length - limit} more)`;
}

async function objectCondition(ctx: EvalContext, cond: ObjectCondition): Promise<Outcome> {
  const resource = ctx.resources.resolve(cond.object.kind, cond.object.apiVersion);
  const ns = namespaceFor(ctx, resource, cond.object.namespace);
  const what = refText(resource, cond.object.name, ns);
  let obj: KubeObject | undefined;
  try {
    obj = await ctx.target.client.get(resource.gvr, ns, cond.object.name);
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 404)) throw err;
  }
  let path = cond.jsonpath;
  const comparison: Comparison = { ...cond };
  if (cond.condition !== undefined) {
    path = `{.status.conditions[?(@.type=="${cond.condition}")].status}`;
    if (!hasComparison(cond)) comparison.equals = 'True';
  }
  if (path === undefined) {
    const exists = cond.exists ?? true;
    return {
      ok: (obj !== undefined) === exists,
      description: `${what} ${exists ? 'exists' : 'does not exist'}`,
      found: obj ? 'it exists' : 'not found',
    };
  }
  const label = cond.condition !== undefined ? `condition ${cond.condition} of ${what}` : `${path} of ${what}`;
  if (!hasComparison(comparison)) comparison.exists = true;
  const description = `${label} ${describeComparison(comparison, 'exists')}`;
  if (!obj) return { ok: false, description, found: `${what} not found` };
  const values = evaluateJsonPath(obj, path);
  const value = values.length === 0 ? undefined : values.length === 1 ? values[0] : values;
  const found =
    value !== undefined
      ? renderValue(value)
      : cond.condition !== undefined
        ? `no condition ${cond.condition}${conditionTypes(obj)}`
        : `no value: ${missingField(obj, path) ?? 'the jsonpath selects nothing'}`;
  return { ok: compare(value, comparison), description, found };
}

function conditionTypes(obj: KubeObject): string {
  const conditions = isPlainObject(obj.status) && Array.isArray(obj.status.conditions) ? obj.status.conditions : [];
  const types = conditions.flatMap((c) => (isPlainObject(c) && typeof c.type === 'string' ? [c.type] : []));
  return types.length === 0 ? ' (it has no conditions yet)' : ` (its conditions: ${types.join(', ')})`;
}

/**
 * For a plain path ({.status.readyReplica}), which field is missing and what is there instead, with the closest
 * name: `.status has no field "readyReplica" (did you mean "readyReplicas"?; it has: …)`. Undefined for paths
 * with filters or wildcards, or when the path does reach a field.
 */
export function missingField(obj: unknown, path: string): string | undefined {
  const m = /^\{((?:\.[A-Za-z0-9_-]+|\[\d+\])+)\}$/.exec(path.trim());
  if (!m) return undefined;
  const parts = [...m[1]!.matchAll(/\.([^.[\]]+)|\[(\d+)\]/g)].map((p) => p[1] ?? Number(p[2]));
  let current: unknown = obj;
  let at = '';
  for (const part of parts) {
    if (typeof part === 'number') {
      if (!Array.isArray(current) || part >= current.length)
        return `${at || 'the object'} ${Array.isArray(current) ? `has ${current.length} item(s), no [${part}]` : 'is not a list'}`;
      current = current[part];
      at += `[${part}]`;
      continue;
    }
    if (!isPlainObject(current))
      return `${at || 'the object'} is ${renderValue(current)}, not an object with "${part}"`;
    if (!(part in current)) {
      const keys = Object.keys(current);
      const near = closestWord(part, keys);
      return `${at || 'the object'} has no field "${part}"${near ? ` (did you mean "${near}"?)` : ''}${keys.length > 0 ? `; it has: ${keys.slice(0, 12).join(', ')}${keys.length > 12 ? ', …' : ''}` : ''}`;
    }
    current = current[part];
    at += `.${part}`;
  }
  return undefined;
}

async function countCondition(ctx: EvalContext, cond: CountCondition): Promise<Outcome> {
  const { resource, items } = await selectLive(ctx, cond.count);
  const comparison: Comparison = hasComparison(cond) ? cond : { min: 1 };
  const description = `count of ${selectorText(ctx, resource, cond.count)} ${describeComparison(comparison, '')}`;
  return {
    ok: compare(items.length, comparison),
    description,
    found: items.length === 0 ? '0' : `${items.length}: ${listNames(items, resource.namespaced)}`,
  };
}

export async function evaluateState(ctx: EvalContext, cond: StateCondition): Promise<Outcome> {
  return 'object' in cond ? objectCondition(ctx, cond) : countCondition(ctx, cond);
}

// ---- history -----------------------------------------------------------------------------------------

function resolveStep(ctx: EvalContext, ref: string | number): number {
  if (typeof ref === 'number') {
    if (ref < 1 || ref > ctx.stepNames.length)
      throw new Error(`there is no step ${ref} (the scenario has ${ctx.stepNames.length})`);
    return ref;
  }
  if (ref === 'previous') return previousStep(ctx);
  const i = ctx.stepNames.indexOf(ref);
  if (i < 0) throw new Error(`no step is named ${JSON.stringify(ref)}`);
  return i + 1;
}

function previousStep(ctx: EvalContext): number {
  for (let i = ctx.current - 1; i >= 1; i--) if (ctx.stepActions[i - 1] !== 'expect') return i;
  return 0;
}

/** Inclusive range of step indices a window covers (0 is the cluster's start-up). */
export function resolveWindow(
  ctx: EvalContext,
  window: Window | undefined,
): { from: number; to: number; text: string } {
  if (window === undefined || window === 'all') return { from: 0, to: ctx.current, text: 'during the whole scenario' };
  if (typeof window === 'object') {
    const from = window.from === undefined ? 0 : resolveStep(ctx, window.from);
    const to = window.to === undefined ? ctx.current : resolveStep(ctx, window.to);
    return { from, to, text: `from step ${from} to step ${to}` };
  }
  const step = resolveStep(ctx, window);
  const name = ctx.stepNames[step - 1];
  return { from: step, to: step, text: `during step ${step}${name ? ` (${name})` : ''}` };
}

const EVENT_TYPES: Record<string, string> = { created: 'ADDED', modified: 'MODIFIED', deleted: 'DELETED' };

async function eventMatches(
  ctx: EvalContext,
  m: EventMatcher,
  resource: ApiResource,
  e: HistoryEvent,
): Promise<boolean> {
  if (e.resource.gvr.group !== resource.gvr.group || e.resource.gvr.resource !== resource.gvr.resource) return false;
  if (m.event === 'terminating') {
    if (!e.deletionStarted) return false;
  } else if (m.event !== undefined && (EVENT_TYPES[m.event] ?? m.event) !== e.type) return false;
  const ns = namespaceFor(ctx, resource, m.namespace, m.allNamespaces);
  if (ns !== undefined && e.object.metadata.namespace !== ns) return false;
  if (m.name !== undefined && e.object.metadata.name !== m.name) return false;
  if (m.selector && !parseLabelSelector(m.selector).matches(e.object.metadata.labels)) return false;
  if (m.owner && !(await ownedBy(ctx, e.object, m.owner, false))) return false;
  return whereHolds(e.object, m.where);
}

function matcherText(ctx: EvalContext, m: EventMatcher): string {
  const resource = ctx.resources.resolve(m.kind, m.apiVersion);
  const verb = m.event
    ? (({ ADDED: 'created', MODIFIED: 'modified', DELETED: 'deleted' } as Record<string, string>)[
        EVENT_TYPES[m.event] ?? m.event
      ] ?? m.event)
    : 'changed';
  return `${selectorText(ctx, resource, m)} ${verb}`;
}

async function matching(ctx: EvalContext, m: EventMatcher, from: number, to: number): Promise<HistoryEvent[]> {
  const resource = ctx.resources.resolve(m.kind, m.apiVersion);
  const out: HistoryEvent[] = [];
  for (const e of ctx.history.ordered())
    if (e.step >= from && e.step <= to && (await eventMatches(ctx, m, resource, e))) out.push(e);
  return out;
}

function eventText(ctx: EvalContext, e: HistoryEvent): string {
  const verb =
    e.deletionStarted && e.type === 'MODIFIED'
      ? 'terminating'
      : { ADDED: 'created', MODIFIED: 'modified', DELETED: 'deleted' }[e.type];
  return `${e.resource.kind} ${e.object.metadata.name} ${verb} at ${offset(e.time, ctx.startTime)} (resourceVersion ${e.rv}, step ${e.step})`;
}

async function orderAssertion(ctx: EvalContext, a: OrderAssertion): Promise<Outcome> {
  const w = resolveWindow(ctx, a.during);
  const firstText = matcherText(ctx, a.order.first);
  const thenText = matcherText(ctx, a.order.then);
  const description = `every "${firstText}" came before every "${thenText}" ${w.text}`;
  const first = await matching(ctx, a.order.first, w.from, w.to);
  const then = await matching(ctx, a.order.then, w.from, w.to);
  if (first.length === 0) return { ok: false, description, found: `nothing matched "${firstText}"` };
  if (then.length === 0) return { ok: false, description, found: `nothing matched "${thenText}"` };
  const lastFirst = first[first.length - 1]!;
  const earliestThen = then[0]!;
  if (lastFirst.rv < earliestThen.rv) {
    return {
      ok: true,
      description,
      found: `${first.length} before, ${then.length} after; last before: ${eventText(ctx, lastFirst)}; first after: ${eventText(ctx, earliestThen)}`,
    };
  }
  return { ok: false, description, found: `${eventText(ctx, lastFirst)}, after ${eventText(ctx, earliestThen)}` };
}

async function eventsAssertion(ctx: EvalContext, a: EventsAssertion): Promise<Outcome> {
  const w = resolveWindow(ctx, a.during);
  const comparison: Comparison = hasComparison(a) ? a : { min: 1 };
  const description = `number of "${matcherText(ctx, a.events)}" ${w.text} ${describeComparison(comparison, '')}`;
  const found = await matching(ctx, a.events, w.from, w.to);
  const shown = found.slice(0, 6).map((e) => eventText(ctx, e));
  return {
    ok: compare(found.length, comparison),
    description,
    found: `${found.length}${shown.length > 0 ? `: ${shown.join('; ')}${found.length > 6 ? '; …' : ''}` : ''}`,
  };
}

function podReady(pod: KubeObject): boolean {
  const conditions =
    (pod.status as { conditions?: Array<{ type?: string; status?: string }> } | undefined)?.conditions ?? [];
  return conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

export function podPhase(pod: KubeObject): string {
  return ((pod.status as { phase?: string } | undefined)?.phase ?? 'Pending') as string;
}

/** Pending, Running, ready, Terminating, Succeeded or Failed. */
export function podState(pod: KubeObject): string {
  if (pod.metadata.deletionTimestamp) return 'Terminating';
  const phase = podPhase(pod);
  if (phase === 'Running' && podReady(pod)) return 'Ready';
  return phase;
}

async function alwaysAssertion(ctx: EvalContext, a: AlwaysAssertion): Promise<Outcome> {
  const w = resolveWindow(ctx, a.during ?? 'previous');
  const spec = a.always;
  const pods = ctx.resources.resolve('pods');
  const owner = spec.owner;
  let ownerResource: ApiResource | undefined;
  let ownerKey: string | undefined;
  if (owner) {
    ownerResource = ctx.resources.resolve(owner.kind, owner.apiVersion);
    const ns = namespaceFor(ctx, ownerResource, owner.namespace);
    ownerKey = objectKey(ownerResource, { metadata: { name: owner.name, namespace: ns } });
  }
  const podSelector: Selector | undefined = spec.pods ? { ...spec.pods, kind: 'Pod' } : undefined;
  const subject = owner
    ? `pods of ${ownerResource!.kind} ${owner.name}`
    : selectorText(ctx, pods, spec.pods ?? {}).replace(/^Pod/, 'pods');
  const checks: string[] = [];
  if (spec.maxUnavailable !== undefined) checks.push(`at most ${spec.maxUnavailable} unavailable`);
  if (spec.maxSurge !== undefined) checks.push(`at most ${spec.maxSurge} above desired`);
  if (spec.minReady !== undefined) checks.push(`at least ${spec.minReady} ready`);
  if (spec.maxPods !== undefined) checks.push(`at most ${spec.maxPods} pods`);
  if (spec.minPods !== undefined) checks.push(`at least ${spec.minPods} pods`);
  const description = `${subject}: ${checks.join(', ') || '(no limits given)'} at all times ${w.text}`;
  if ((spec.maxUnavailable !== undefined || spec.maxSurge !== undefined) && !owner) {
    return {
      ok: false,
      description,
      found: 'maxUnavailable and maxSurge need an owner (its spec.replicas is the desired count)',
    };
  }

  // Replay the history: the state before the window, then after each change inside it.
  const state = new Map<string, KubeObject>();
  for (const [key, { object }] of ctx.history.initial) state.set(key, object);
  const matchesPod = async (pod: KubeObject): Promise<boolean> => {
    if (owner)
      return (
        (await ownedBy(ctx, pod, `${ownerResource!.kind}/${owner.name}`, false)) &&
        (ownerResource!.namespaced
          ? pod.metadata.namespace === namespaceFor(ctx, ownerResource!, owner.namespace)
          : true)
      );
    const ns = namespaceFor(ctx, pods, podSelector!.namespace, podSelector!.allNamespaces);
    if (ns !== undefined && pod.metadata.namespace !== ns) return false;
    if (podSelector!.name !== undefined && pod.metadata.name !== podSelector!.name) return false;
    if (podSelector!.selector && !parseLabelSelector(podSelector!.selector).matches(pod.metadata.labels)) return false;
    if (podSelector!.owner && !(await ownedBy(ctx, pod, podSelector!.owner, false))) return false;
    return whereHolds(pod, podSelector!.where);
  };
  const podPrefix = `${pods.gvr.group}/${pods.gvr.resource}/`;
  let worst: { text: string; excess: number } | undefined;
  let checked = 0;
  const evaluate = async (when: string): Promise<void> => {
    checked++;
    const mine: KubeObject[] = [];
    for (const [key, obj] of state) if (key.startsWith(podPrefix) && (await matchesPod(obj))) mine.push(obj);
    const active = mine.filter(
      (p) => !p.metadata.deletionTimestamp && podPhase(p) !== 'Succeeded' && podPhase(p) !== 'Failed',
    );
    const ready = active.filter(podReady);
    const ownerObj = ownerKey ? state.get(ownerKey) : undefined;
    const desiredRaw = ownerObj && isPlainObject(ownerObj.spec) ? ownerObj.spec.replicas : undefined;
    const desired = typeof desiredRaw === 'number' ? desiredRaw : ownerObj ? 1 : undefined;
    const problems: Array<[number, string]> = [];
    if (spec.maxUnavailable !== undefined && desired !== undefined && desired - ready.length > spec.maxUnavailable) {
      problems.push([
        desired - ready.length - spec.maxUnavailable,
        `${desired - ready.length} of ${desired} desired pods unavailable (max ${spec.maxUnavailable})`,
      ]);
    }
    if (spec.maxSurge !== undefined && desired !== undefined && active.length - desired > spec.maxSurge) {
      problems.push([
        active.length - desired - spec.maxSurge,
        `${active.length} pods for ${desired} desired (max surge ${spec.maxSurge})`,
      ]);
    }
    if (spec.minReady !== undefined && ready.length < spec.minReady)
      problems.push([spec.minReady - ready.length, `${ready.length} ready (min ${spec.minReady})`]);
    if (spec.maxPods !== undefined && active.length > spec.maxPods)
      problems.push([active.length - spec.maxPods, `${active.length} pods (max ${spec.maxPods})`]);
    if (spec.minPods !== undefined && active.length < spec.minPods)
      problems.push([spec.minPods - active.length, `${active.length} pods (min ${spec.minPods})`]);
    for (const [excess, text] of problems) {
      if (worst && worst.excess >= excess) continue;
      const listed = mine
        .map((p) => `${p.metadata.name} (${podState(p)})`)
        .sort()
        .join(', ');
      worst = { excess, text: `${when}: ${text}; pods: ${listed || 'none'}` };
    }
  };
  let started = false;
  for (const e of ctx.history.ordered()) {
    if (e.step > w.to) break;
    if (e.step >= w.from && !started) {
      started = true;
      await evaluate(`at the start of step ${w.from}`);
    }
    const key = objectKey(e.resource, e.object);
    if (e.type === 'DELETED') state.delete(key);
    else state.set(key, e.object);
    if (started) await evaluate(`at ${offset(e.time, ctx.startTime)} after ${eventText(ctx, e)}`);
  }
  if (!started) await evaluate(`during step ${w.from} (no changes)`);
  if (worst) return { ok: false, description, found: worst.text };
  return { ok: true, description, found: `held at all ${checked} moments checked` };
}

export async function evaluateAssertion(ctx: EvalContext, a: Assertion): Promise<Outcome> {
  let outcome: Outcome;
  if ('order' in a) outcome = await orderAssertion(ctx, a);
  else if ('events' in a) outcome = await eventsAssertion(ctx, a);
  else if ('always' in a) outcome = await alwaysAssertion(ctx, a);
  else outcome = await evaluateState(ctx, a);
  if (a.description) outcome.description = `${a.description} (${outcome.description})`;
  return outcome;
}

export function refFor(ctx: EvalContext, ref: ObjectRef): { resource: ApiResource; namespace: string | undefined } {
  const resource = ctx.resources.resolve(ref.kind, ref.apiVersion);
  return { resource, namespace: namespaceFor(ctx, resource, ref.namespace) };
}
