import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { yaml } from '../api/yaml.js';
import { parseDuration } from '../clock/clock.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { ACTION_NAMES, crashLoopDelayMs, type ActionName } from './actions.js';
import { shippedDocuments } from './shipped-yaml.js';

/**
 * Pod lifecycle as data, after kwok's Stage resources: each stage is a selector over the pod's current state,
 * a delay, and what happens next (a built-in status action, a status patch, events, log lines, deletion).
 * There is no state machine: which stage applies, and when, is a function of the pod, its settings and the clock,
 * and of two things the pod cannot say, which the kubelet keeps in its record of the pod (pod-record.ts) and passes
 * in as the StageContext: when a stage timed from its first match first matched, and which stages already ran
 * on the pod as it stands without changing it.
 *
 *   apiVersion: kube-sim.dev/v1alpha1
 *   kind: Stage
 *   metadata: {name: pod-ready}
 *   spec:
 *     resourceRef: {kind: Pod}
 *     selector:
 *       matchExpressions:
 *       - {key: .status.phase, operator: In, values: [Running]}
 *       - {key: '.status.conditions[type=Ready].status', operator: NotIn, values: ['True']}
 *     delay: {fromAnnotation: kube-sim.dev/ready-delay, since: '.status.containerStatuses[*].state.running.startedAt'}
 *     next: {action: Ready}
 */
export interface StageExpression {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  values: string[];
}

export interface StageDelay {
  /** A fixed delay; the default when the annotation or field below is absent. */
  durationMs?: number;
  /**
   * A setting holding a duration ("90s", "2m"): the pod's annotation, else the node's, else the `sim serve`
   * default. When nothing sets it and there is no durationMs, the stage does not apply.
   */
  fromAnnotation?: string;
  /** A field of the pod holding seconds (.spec.activeDeadlineSeconds); absent and no durationMs → no match. */
  fromField?: string;
  /** A timestamp field the delay counts from (the latest, when it names several); else the time the stage first matched. */
  since?: string;
  /**
   * When nothing above sets the delay, what the pod's containers take. stopDelay: how long the running ones take
   * to exit after SIGTERM (their images' stop delays, their commands' exits; StageContext.stopDelayMs); no match
   * while one will not exit by itself. exit: when the first running container whose command the exec shell runs
   * exited (StageContext.commandExitAt); no match while none has.
   */
  fromContainers?: 'stopDelay' | 'exit';
  /**
   * CrashLoop: the kubelet's CrashLoopBackOff, 0 for the first restart, then 10 s doubling to 5 min, by restart
   * count. ImagePull: its image back-off, 10 s doubling to 5 min by failed pulls, from the last failure (what the
   * kubelet's record of the pod holds: StageContext.pullRetryAt); `since` does not apply.
   */
  backoff?: 'CrashLoop' | 'ImagePull';
}

export interface StageEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface StageNext {
  action?: ActionName;
  params?: Record<string, unknown>;
  /** A JSON merge patch of status applied after the action; strings may use ${now}, ${podIP}, ${hostIP}, ${nodeName}, ${name}, ${namespace}. */
  statusPatch?: Record<string, unknown>;
  events?: StageEvent[];
  /** Lines written to every container's log. */
  log?: string[];
  /** Remove the pod from the API (the kubelet's final delete, grace period 0). */
  delete?: boolean;
}

export interface Stage {
  name: string;
  expressions: StageExpression[];
  delay: StageDelay;
  next: StageNext;
}

/** What a stage's delay may read besides the pod. */
export interface StageContext {
  now: number;
  /** Pod annotation, else node annotation, else the server-wide default for this key. */
  setting(key: string): string | undefined;
  /** When this pod was first seen matching the stage in its current state (for stages without `since`). */
  firstSeen(stage: string): number;
  /** Stages already applied to the pod as it stands without changing it (Kill's SIGTERM): not applied again. */
  done?(stage: string): boolean;
  /** When the image may be pulled again after failed pulls (the kubelet's image back-off); undefined if none failed. */
  pullRetryAt?(image: string): number | undefined;
  /** How long the pod's running containers take to exit after a SIGTERM sent at `since`; undefined: one never does. */
  stopDelayMs?(pod: KubeObject, since: number): number | undefined;
  /** When the first of the pod's running containers whose command the exec shell runs exited; undefined: none has. */
  commandExitAt?(pod: KubeObject): number | undefined;
}

/** A stage that applies to a pod now or later, with when it is due. */
export interface StageDecision {
  stage: Stage;
  dueAt: number;
}

// ---------------------------------------------------------------------------------------------------------
// Paths: .a.b, .(a|b) (either field), [*] (every element), [N], ["key.with/dots"], [field=value] (elements whose
// field equals value) and [field!=value].

type Segment =
  | { kind: 'field'; name: string }
  | { kind: 'fields'; names: string[] }
  | { kind: 'all' }
  | { kind: 'index'; index: number }
  | { kind: 'where'; field: string; value: string; negated: boolean };

/** Whether an element passes a [field=value] or [field!=value] filter. */
function passes(item: unknown, seg: Extract<Segment, { kind: 'where' }>): boolean {
  return isPlainObject(item) && (String(item[seg.field]) === seg.value) !== seg.negated;
}

const pathCache = new Map<string, Segment[]>();

export function compilePath(path: string): Segment[] {
  const cached = pathCache.get(path);
  if (cached) return cached;
  const segments: Segment[] = [];
  let i = 0;
  const fail = (): never => {
    throw new Error(
      `invalid path ${JSON.stringify(path)} at ${i}: use .field, .(field|other), [*], [N], ["key"], [field=value] or [field!=value]`,
    );
  };
  while (i < path.length) {
    const c = path[i];
    if (c === '.' && path[i + 1] === '(') {
      const m = /^\(([A-Za-z0-9_-]+(?:\|[A-Za-z0-9_-]+)*)\)/.exec(path.slice(i + 1));
      if (!m) fail();
      segments.push({ kind: 'fields', names: m![1]!.split('|') });
      i += 1 + m![0].length;
    } else if (c === '.') {
      const m = /^[A-Za-z0-9_-]+/.exec(path.slice(i + 1));
      if (!m) fail();
      segments.push({ kind: 'field', name: m![0] });
      i += 1 + m![0].length;
    } else if (c === '[') {
      const end = path.indexOf(']', i);
      if (end < 0) fail();
      const inner = path.slice(i + 1, end).trim();
      if (inner === '*') segments.push({ kind: 'all' });
      else if (/^\d+$/.test(inner)) segments.push({ kind: 'index', index: Number(inner) });
      else if (/^(["']).*\1$/.test(inner)) segments.push({ kind: 'field', name: inner.slice(1, -1) });
      else if (inner.includes('=')) {
        const eq = inner.indexOf('=');
        const negated = inner[eq - 1] === '!';
        segments.push({
          kind: 'where',
          field: inner.slice(0, negated ? eq - 1 : eq).trim(),
          negated,
          value: inner
            .slice(eq + 1)
            .trim()
            .replace(/^(["'])(.*)\1$/, '$2'),
        });
      } else fail();
      i = end + 1;
    } else fail();
  }
  if (pathCache.size > 1000) pathCache.clear();
  pathCache.set(path, segments);
  return segments;
}

/** Every value the path reaches (an empty list when it reaches nothing). */
export function evaluatePath(obj: unknown, path: string): unknown[] {
  let current: unknown[] = [obj];
  for (const seg of compilePath(path)) {
    const next: unknown[] = [];
    for (const value of current) {
      if (seg.kind === 'field') {
        if (isPlainObject(value) && value[seg.name] !== undefined && value[seg.name] !== null)
          next.push(value[seg.name]);
      } else if (seg.kind === 'fields') {
        if (isPlainObject(value))
          for (const name of seg.names) if (value[name] !== undefined && value[name] !== null) next.push(value[name]);
      } else if (Array.isArray(value)) {
        if (seg.kind === 'all') next.push(...value);
        else if (seg.kind === 'index') {
          if (value[seg.index] !== undefined) next.push(value[seg.index]);
        } else for (const item of value) if (passes(item, seg)) next.push(item);
      }
    }
    current = next;
  }
  return current;
}

function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

/**
 * Whether any value the path reaches from `value` (segments from `i` on) satisfies `accept` (any at all without
 * one): evaluatePath's walk, stopping at the first hit and building no lists. The kubelet asks every stage's
 * selector on every reconcile of every pod.
 */
function anyValue(value: unknown, segments: readonly Segment[], i: number, accept?: readonly string[]): boolean {
  for (; i < segments.length; i++) {
    const seg = segments[i]!;
    if (seg.kind === 'field') {
      if (!isPlainObject(value)) return false;
      const v = value[seg.name];
      if (v === undefined || v === null) return false;
      value = v;
      continue;
    }
    if (seg.kind === 'fields') {
      if (!isPlainObject(value)) return false;
      for (const name of seg.names) {
        const v = value[name];
        if (v !== undefined && v !== null && anyValue(v, segments, i + 1, accept)) return true;
      }
      return false;
    }
    if (!Array.isArray(value)) return false;
    if (seg.kind === 'index') {
      if (value[seg.index] === undefined) return false;
      value = value[seg.index];
      continue;
    }
    for (const item of value) {
      if (seg.kind === 'where' && !passes(item, seg)) continue;
      if (anyValue(item, segments, i + 1, accept)) return true;
    }
    return false;
  }
  return accept === undefined || accept.includes(scalar(value) ?? '\u0000');
}

export function expressionMatches(pod: KubeObject, e: StageExpression): boolean {
  const segments = compilePath(e.key);
  switch (e.operator) {
    case 'Exists':
      return anyValue(pod, segments, 0);
    case 'DoesNotExist':
      return !anyValue(pod, segments, 0);
    case 'In':
      return anyValue(pod, segments, 0, e.values);
    case 'NotIn':
      return !anyValue(pod, segments, 0, e.values);
  }
}

export function stageMatches(pod: KubeObject, stage: Stage): boolean {
  for (const e of stage.expressions) if (!expressionMatches(pod, e)) return false;
  return true;
}

function latestTimestamp(pod: KubeObject, path: string): number | undefined {
  let latest: number | undefined;
  for (const v of evaluatePath(pod, path)) {
    const t = typeof v === 'string' ? Date.parse(v) : NaN;
    if (!Number.isNaN(t) && (latest === undefined || t > latest)) latest = t;
  }
  return latest;
}

/**
 * The restart count whose back-off is due: the highest of the containers waiting in CrashLoopBackOff (init
 * containers too), else of all the app containers.
 */
function maxRestartCount(pod: KubeObject): number {
  let max = 0;
  let waiting = false;
  for (const cs of evaluatePath(pod, '.status.(initContainerStatuses|containerStatuses)[*]')) {
    if (!isPlainObject(cs) || !isPlainObject(cs.state) || !isPlainObject(cs.state.waiting)) continue;
    if (cs.state.waiting.reason !== 'CrashLoopBackOff' || typeof cs.restartCount !== 'number') continue;
    if (!waiting || cs.restartCount > max) max = cs.restartCount;
    waiting = true;
  }
  if (waiting) return max;
  for (const v of evaluatePath(pod, '.status.containerStatuses[*].restartCount'))
    if (typeof v === 'number' && v > max) max = v;
  return max;
}

/** The stage's delay for this pod in ms, or undefined when it has nothing to go on (the stage does not apply). */
export function stageDelayMs(stage: Stage, pod: KubeObject, ctx: Pick<StageContext, 'setting'>): number | undefined {
  const d = stage.delay;
  let delay = d.durationMs;
  if (d.fromAnnotation !== undefined) {
    const text = ctx.setting(d.fromAnnotation);
    if (text !== undefined) {
      try {
        delay = parseDuration(text);
      } catch {
        // an unparseable setting counts as unset
      }
    }
  }
  if (d.fromField !== undefined) {
    const seconds = evaluatePath(pod, d.fromField).find(
      (v) => typeof v === 'number' || (typeof v === 'string' && v.trim() !== '' && !Number.isNaN(Number(v))),
    );
    if (seconds !== undefined) delay = Number(seconds) * 1000;
  }
  if (d.backoff === 'CrashLoop') delay = (delay ?? 0) + crashLoopDelayMs(maxRestartCount(pod));
  // The image back-off is a time the kubelet's record gives (stageDueAt), not a delay of the pod's.
  if (d.backoff === 'ImagePull') return undefined;
  return delay === undefined ? undefined : Math.max(0, delay);
}

/** The earliest time a container waiting in ImagePullBackOff may pull its image again. */
function pullRetryAt(pod: KubeObject, ctx: StageContext): number | undefined {
  let earliest: number | undefined;
  for (const cs of evaluatePath(
    pod,
    '.status.(initContainerStatuses|containerStatuses|ephemeralContainerStatuses)[*]',
  )) {
    if (!isPlainObject(cs) || !isPlainObject(cs.state) || !isPlainObject(cs.state.waiting)) continue;
    if (cs.state.waiting.reason !== 'ImagePullBackOff') continue;
    const at = ctx.pullRetryAt?.(String(cs.image)) ?? ctx.now;
    if (earliest === undefined || at < earliest) earliest = at;
  }
  return earliest;
}

/** When the stage is due for this pod, or undefined when its delay has nothing to go on. */
export function stageDueAt(stage: Stage, pod: KubeObject, ctx: StageContext): number | undefined {
  const d = stage.delay;
  if (d.backoff === 'ImagePull') return pullRetryAt(pod, ctx);
  const anchor = (): number =>
    d.since !== undefined ? (latestTimestamp(pod, d.since) ?? ctx.now) : ctx.firstSeen(stage.name);
  const delay = stageDelayMs(stage, pod, ctx);
  if (delay !== undefined) return anchor() + delay;
  if (d.fromContainers === 'exit') return ctx.commandExitAt?.(pod);
  if (d.fromContainers !== 'stopDelay' || !ctx.stopDelayMs) return undefined;
  const since = anchor();
  const containers = ctx.stopDelayMs(pod, since);
  return containers === undefined ? undefined : since + containers;
}

/**
 * The stage that applies to the pod: among the matching stages with a due time, the one due first (the
 * earlier in the file on a tie). A pod that runs for 5 s with a ready delay of 10 s exits before it is ready.
 */
export function nextStage(stages: readonly Stage[], pod: KubeObject, ctx: StageContext): StageDecision | undefined {
  let best: StageDecision | undefined;
  for (const stage of stages) {
    if (ctx.done?.(stage.name) || !stageMatches(pod, stage)) continue;
    const dueAt = stageDueAt(stage, pod, ctx);
    if (dueAt === undefined) continue;
    if (!best || dueAt < best.dueAt) best = { stage, dueAt };
  }
  return best;
}

// ---------------------------------------------------------------------------------------------------------
// Stage files.

function fail(where: string, message: string): never {
  throw new Error(`${where}: ${message}`);
}

function parseStage(doc: unknown, where: string): Stage {
  if (!isPlainObject(doc)) fail(where, 'a stage must be an object');
  if (doc.kind !== 'Stage') fail(where, `kind must be Stage (got ${JSON.stringify(doc.kind)})`);
  const meta = isPlainObject(doc.metadata) ? doc.metadata : {};
  const name = typeof meta.name === 'string' && meta.name !== '' ? meta.name : fail(where, 'metadata.name is required');
  const at = `${where} (stage ${name})`;
  const spec = isPlainObject(doc.spec) ? doc.spec : fail(at, 'spec is required');
  const ref = isPlainObject(spec.resourceRef) ? spec.resourceRef : { kind: 'Pod' };
  if (ref.kind !== 'Pod') fail(at, `only Pod stages are supported (resourceRef.kind ${JSON.stringify(ref.kind)})`);

  const selector = isPlainObject(spec.selector) ? spec.selector : {};
  const expressions: StageExpression[] = [];
  for (const raw of Array.isArray(selector.matchExpressions) ? selector.matchExpressions : []) {
    if (!isPlainObject(raw) || typeof raw.key !== 'string') fail(at, 'each matchExpression needs a key');
    const operator = raw.operator;
    if (operator !== 'In' && operator !== 'NotIn' && operator !== 'Exists' && operator !== 'DoesNotExist')
      fail(at, `operator must be In, NotIn, Exists or DoesNotExist (got ${JSON.stringify(operator)})`);
    const values = Array.isArray(raw.values) ? raw.values.map((v) => String(v)) : [];
    if ((operator === 'In' || operator === 'NotIn') && values.length === 0)
      fail(at, `${raw.key}: ${operator} needs values`);
    try {
      compilePath(raw.key);
    } catch (err) {
      fail(at, (err as Error).message);
    }
    expressions.push({ key: raw.key, operator, values });
  }
  for (const [field, prefix] of [
    ['matchLabels', '.metadata.labels'],
    ['matchAnnotations', '.metadata.annotations'],
  ] as const) {
    const map = selector[field];
    if (isPlainObject(map))
      for (const [k, v] of Object.entries(map))
        expressions.push({ key: `${prefix}["${k}"]`, operator: 'In', values: [String(v)] });
  }

  const rawDelay = isPlainObject(spec.delay) ? spec.delay : {};
  const delay: StageDelay = {};
  if (rawDelay.duration !== undefined) {
    try {
      delay.durationMs =
        typeof rawDelay.duration === 'number' ? rawDelay.duration * 1000 : parseDuration(String(rawDelay.duration));
    } catch {
      fail(at, `delay.duration ${JSON.stringify(rawDelay.duration)} is not a duration ("5s", "1m30s")`);
    }
  }
  if (typeof rawDelay.durationMilliseconds === 'number') delay.durationMs = rawDelay.durationMilliseconds;
  if (typeof rawDelay.fromAnnotation === 'string') delay.fromAnnotation = rawDelay.fromAnnotation;
  if (typeof rawDelay.fromField === 'string') delay.fromField = rawDelay.fromField;
  if (typeof rawDelay.since === 'string') delay.since = rawDelay.since;
  if (rawDelay.fromContainers !== undefined) {
    if (rawDelay.fromContainers !== 'stopDelay' && rawDelay.fromContainers !== 'exit')
      fail(at, 'delay.fromContainers must be stopDelay or exit');
    delay.fromContainers = rawDelay.fromContainers;
  }
  if (rawDelay.backoff !== undefined) {
    if (rawDelay.backoff !== 'CrashLoop' && rawDelay.backoff !== 'ImagePull')
      fail(at, 'delay.backoff must be CrashLoop or ImagePull');
    delay.backoff = rawDelay.backoff;
  }
  if (
    delay.fromAnnotation === undefined &&
    delay.fromField === undefined &&
    delay.durationMs === undefined &&
    delay.backoff !== 'ImagePull' &&
    delay.fromContainers === undefined
  )
    delay.durationMs = 0;

  const rawNext = isPlainObject(spec.next) ? spec.next : {};
  const next: StageNext = {};
  if (rawNext.action !== undefined) {
    if (typeof rawNext.action !== 'string' || !(ACTION_NAMES as readonly string[]).includes(rawNext.action))
      fail(at, `next.action must be one of ${ACTION_NAMES.join(', ')} (got ${JSON.stringify(rawNext.action)})`);
    next.action = rawNext.action as ActionName;
  }
  if (isPlainObject(rawNext.params)) next.params = rawNext.params;
  if (isPlainObject(rawNext.statusPatch)) next.statusPatch = rawNext.statusPatch;
  if (Array.isArray(rawNext.events)) {
    next.events = rawNext.events.map((e) => {
      if (!isPlainObject(e) || typeof e.reason !== 'string') fail(at, 'each event needs a reason');
      return {
        type: e.type === 'Warning' ? 'Warning' : 'Normal',
        reason: e.reason as string,
        message: typeof e.message === 'string' ? e.message : '',
      };
    });
  }
  if (Array.isArray(rawNext.log)) next.log = rawNext.log.map((l) => String(l));
  if (rawNext.delete === true) next.delete = true;
  return { name, expressions, delay, next };
}

/** Parses a stage file: YAML documents of kind Stage (or one StageList with items). */
export function parseStages(text: string, source = 'stages'): Stage[] {
  const docs = yaml().parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  return stagesOf(
    list.map((doc, i) => {
      if (doc.errors.length > 0) fail(`${source}: document ${i + 1}`, doc.errors[0]!.message);
      return doc.toJS() as unknown;
    }),
    source,
  );
}

/** The stages of a stage file's documents, parsed. */
function stagesOf(values: readonly unknown[], source: string): Stage[] {
  const stages: Stage[] = [];
  values.forEach((value, i) => {
    if (value === null || value === undefined) return;
    if (isPlainObject(value) && value.kind === 'StageList') {
      (Array.isArray(value.items) ? value.items : []).forEach((item, j) =>
        stages.push(parseStage(item, `${source}: document ${i + 1} item ${j + 1}`)),
      );
    } else stages.push(parseStage(value, `${source}: document ${i + 1}`));
  });
  const names = new Set<string>();
  for (const s of stages) {
    if (names.has(s.name)) fail(source, `two stages are named ${s.name}`);
    names.add(s.name);
  }
  if (stages.length === 0) fail(source, 'no stages found');
  return stages;
}

export function loadStageFile(path: string): Stage[] {
  return parseStages(readFileSync(path, 'utf8'), path);
}

/** fixtures/stages/default.yaml: the kubelet's default lifecycle. */
export const DEFAULT_STAGES_PATH = fileURLToPath(new URL('../../../fixtures/stages/default.yaml', import.meta.url));

let defaults: Stage[] | undefined;
export function defaultStages(): Stage[] {
  if (defaults) return defaults;
  const shipped = shippedDocuments(DEFAULT_STAGES_PATH);
  defaults = shipped ? stagesOf(shipped, DEFAULT_STAGES_PATH) : loadStageFile(DEFAULT_STAGES_PATH);
  return defaults;
}
