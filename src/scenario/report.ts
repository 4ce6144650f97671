import { createHash } from 'node:crypto';
import { rfc3339Micro } from '../clock/clock.js';
import type { KubeObject } from '../api/types.js';
import { isPlainObject } from '../api/types.js';
import { offset, podState } from './conditions.js';
import { objectKey, type HistoryEvent } from './history.js';
import type { RunProgress, RunResult, StepResult } from './runner.js';

/** The machine-readable replay report (`--report`). Everything in it derives from the seed and the virtual clock. */
export interface ReplayReport {
  apiVersion: 'kube-sim.dev/v1alpha1';
  kind: 'ReplayReport';
  result: 'passed' | 'failed';
  scenarios: ScenarioReport[];
}

export interface ChangeReport {
  at: string;
  time: string;
  resourceVersion: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  kind: string;
  namespace?: string;
  name: string;
  summary: string;
}

export interface StepReport {
  index: number;
  name: string;
  action: string;
  status: 'passed' | 'failed' | 'skipped';
  at: string;
  start: string;
  end: string;
  notes: string[];
  message?: string;
  expectations: Array<{ ok: boolean; description: string; found: string }>;
  kubectl?: { args: string[]; exitCode: number | null; stdout: string; stderr: string };
  changes: ChangeReport[];
  /** Changes left out of `changes` because the object's summary did not change (status bookkeeping). */
  otherChanges: number;
  /** The run was interrupted (Ctrl-C, SIGTERM) while this step ran. */
  interrupted?: boolean;
}

/** Times are ms after the scenario's start; steps say which step's span of the timeline they fall in (0: start-up). */
export interface PodSegment {
  from: number;
  fromStep: number;
  to: number;
  toStep: number;
  state: string;
}

export interface PodTimeline {
  name: string;
  namespace: string;
  /** The ReplicaSet that owns it directly (a Deployment's pods), with that ReplicaSet's revision. */
  replicaSet?: string;
  revision?: string;
  node?: string;
  created: number;
  createdStep: number;
  deleted?: number;
  deletedStep?: number;
  segments: PodSegment[];
}

export interface OwnerTimeline {
  owner: string;
  pods: PodTimeline[];
}

/** A node's condition over time: Ready, NotReady or Unknown, with its taints and whether it is cordoned. */
export interface NodeSegment extends PodSegment {
  taints: string[];
  unschedulable: boolean;
}

export interface NodeTimeline {
  name: string;
  segments: NodeSegment[];
  deleted?: number;
}

/**
 * A Deployment's pods against what it wants, after each change of its status: desired (spec.replicas) with the
 * band its strategy allows — desired − maxUnavailable available at least, desired + maxSurge pods at most.
 */
export interface RolloutPoint {
  at: number;
  step: number;
  desired: number;
  pods: number;
  updated: number;
  ready: number;
  available: number;
  maxSurge: number;
  maxUnavailable: number;
}

export interface RolloutTimeline {
  deployment: string;
  points: RolloutPoint[];
}

export interface ScenarioReport {
  name: string;
  description?: string;
  file: string;
  mode: 'embedded' | 'remote';
  seed: number;
  start: string;
  end: string;
  /** Cluster time the scenario took, in ms. */
  durationMs: number;
  result: 'passed' | 'failed';
  summary: {
    steps: number;
    passed: number;
    failed: number;
    skipped: number;
    expectations: { passed: number; failed: number };
  };
  /** One line per failure: the step, the expectation, what was found. */
  failures: string[];
  problems: string[];
  steps: StepReport[];
  /** Pods grouped by their top-level owner; times are ms after `start`. */
  pods: OwnerTimeline[];
  /** Nodes' Ready condition, taints and cordon over time; times are ms after `start`. */
  nodes: NodeTimeline[];
  /** Deployments' desired, ready and available pods over time (RollingUpdate band included). */
  rollouts: RolloutTimeline[];
  /** The step that was running when the replay was interrupted; the report holds what happened until then. */
  interruptedAt?: number;
}

export function isoTime(ms: number): string {
  return rfc3339Micro(ms).replace(/(\.\d{3})000Z$/, '$1Z');
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined;
}

function field(obj: KubeObject, ...path: string[]): unknown {
  let cur: unknown = obj;
  for (const p of path) cur = isPlainObject(cur) ? cur[p] : undefined;
  return cur;
}

function conditionStatus(obj: KubeObject, type: string): string | undefined {
  const conditions = field(obj, 'status', 'conditions');
  if (!Array.isArray(conditions)) return undefined;
  const c = conditions.find((x) => isPlainObject(x) && x.type === type) as { status?: string } | undefined;
  return c?.status;
}

/** A one-line state of an object, for the timeline: what a person watching `kubectl get -w` would notice. */
export function summarize(kind: string, obj: KubeObject): string {
  const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
  switch (kind) {
    case 'Pod': {
      const node = str(field(obj, 'spec', 'nodeName'));
      const statuses = field(obj, 'status', 'containerStatuses');
      const restarts = Array.isArray(statuses)
        ? statuses.reduce((s: number, c) => s + n(isPlainObject(c) ? c.restartCount : 0), 0)
        : 0;
      // Why a container is not running: CrashLoopBackOff, ContainerCreating, Error (exit 3)…
      const reasons = new Set<string>();
      if (Array.isArray(statuses)) {
        for (const c of statuses) {
          if (!isPlainObject(c) || !isPlainObject(c.state)) continue;
          const waiting = c.state.waiting;
          const terminated = c.state.terminated;
          if (isPlainObject(waiting) && typeof waiting.reason === 'string') reasons.add(waiting.reason);
          if (isPlainObject(terminated))
            reasons.add(
              `${typeof terminated.reason === 'string' ? terminated.reason : 'Terminated'} (exit ${n(terminated.exitCode)})`,
            );
        }
      }
      const why = reasons.size > 0 ? ` [${[...reasons].join(', ')}]` : '';
      return `${podState(obj)}${why}${node ? ` on ${node}` : ''}${restarts > 0 ? `, ${restarts} restart${restarts === 1 ? '' : 's'}` : ''}`;
    }
    case 'Node': {
      const ready = conditionStatus(obj, 'Ready');
      const state =
        ready === 'True'
          ? 'Ready'
          : ready === 'False'
            ? 'NotReady'
            : ready === 'Unknown'
              ? 'Unknown'
              : 'no Ready condition';
      const taints = field(obj, 'spec', 'taints');
      const tainted =
        Array.isArray(taints) && taints.length > 0
          ? `, taints: ${taints.map((t) => (isPlainObject(t) ? `${t.key}:${t.effect}` : '')).join(' ')}`
          : '';
      return `${state}${field(obj, 'spec', 'unschedulable') === true ? ', unschedulable' : ''}${tainted}`;
    }
    case 'Deployment':
      return `replicas ${n(field(obj, 'spec', 'replicas'))}: updated ${n(field(obj, 'status', 'updatedReplicas'))}, ready ${n(field(obj, 'status', 'readyReplicas'))}, available ${n(field(obj, 'status', 'availableReplicas'))}`;
    case 'ReplicaSet':
    case 'StatefulSet':
      return `replicas ${n(field(obj, 'spec', 'replicas'))}: current ${n(field(obj, 'status', 'replicas'))}, ready ${n(field(obj, 'status', 'readyReplicas'))}`;
    case 'DaemonSet':
      return `desired ${n(field(obj, 'status', 'desiredNumberScheduled'))}, ready ${n(field(obj, 'status', 'numberReady'))}`;
    case 'Job': {
      const done =
        conditionStatus(obj, 'Complete') === 'True'
          ? ', Complete'
          : conditionStatus(obj, 'Failed') === 'True'
            ? ', Failed'
            : '';
      return `active ${n(field(obj, 'status', 'active'))}, succeeded ${n(field(obj, 'status', 'succeeded'))}, failed ${n(field(obj, 'status', 'failed'))}${done}`;
    }
    case 'CronJob': {
      const active = field(obj, 'status', 'active');
      const last = str(field(obj, 'status', 'lastScheduleTime'));
      return `${field(obj, 'spec', 'suspend') === true ? 'suspended, ' : ''}active ${Array.isArray(active) ? active.length : 0}${last ? `, last scheduled ${last}` : ''}`;
    }
    case 'PersistentVolumeClaim':
    case 'PersistentVolume':
    case 'Namespace':
      return str(field(obj, 'status', 'phase')) ?? '';
    case 'ConfigMap':
    case 'Secret': {
      const data = {
        ...(isPlainObject(obj.data) ? obj.data : {}),
        ...(isPlainObject(obj.binaryData) ? obj.binaryData : {}),
      };
      const keys = Object.keys(data).length;
      const hash = createHash('sha256')
        .update(JSON.stringify(Object.entries(data).sort(([a], [b]) => (a < b ? -1 : 1))))
        .digest('hex')
        .slice(0, 8);
      return `${keys} key${keys === 1 ? '' : 's'}, data ${hash}`;
    }
    default:
      return obj.metadata.generation !== undefined ? `generation ${obj.metadata.generation}` : '';
  }
}

/** The top-level owner of an object ("Deployment default/webapp"), following owner references through the history. */
function topOwner(run: RunResult, obj: KubeObject): string {
  let current = obj;
  let label: string | undefined;
  for (let depth = 0; depth < 8; depth++) {
    const ref = current.metadata.ownerReferences?.find((r) => r.controller) ?? current.metadata.ownerReferences?.[0];
    if (!ref) break;
    label = `${ref.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${ref.name}`;
    const parent = run.history.byUidLatest(ref.uid)?.object;
    if (!parent) break;
    current = parent;
  }
  return label ?? `(no owner) ${obj.metadata.namespace ?? ''}`.trim();
}

function podTimelines(run: RunResult, end: number): OwnerTimeline[] {
  const pods = new Map<string, PodTimeline & { owner: string; last?: PodSegment }>();
  const touch = (obj: KubeObject, time: number, step: number, type: HistoryEvent['type'] | 'INITIAL'): void => {
    const uid = obj.metadata.uid ?? `${obj.metadata.namespace}/${obj.metadata.name}`;
    let pod = pods.get(uid);
    if (!pod) {
      pod = {
        name: obj.metadata.name ?? '',
        namespace: obj.metadata.namespace ?? '',
        created: time - run.startTime,
        createdStep: step,
        segments: [],
        owner: topOwner(run, obj),
      };
      pods.set(uid, pod);
    }
    const node = str(field(obj, 'spec', 'nodeName'));
    if (node) pod.node = node;
    const set = obj.metadata.ownerReferences?.find((r) => r.controller && r.kind === 'ReplicaSet');
    if (set && !pod.replicaSet) {
      pod.replicaSet = set.name;
      const revision = run.history.byUidLatest(set.uid)?.object.metadata.annotations?.[
        'deployment.kubernetes.io/revision'
      ];
      if (revision) pod.revision = revision;
    }
    const t = time - run.startTime;
    if (pod.last) {
      pod.last.to = t;
      pod.last.toStep = step;
    }
    if (type === 'DELETED') {
      pod.deleted = t;
      pod.deletedStep = step;
      pod.last = undefined;
      return;
    }
    const state = podState(obj);
    if (pod.last && pod.last.state === state) return;
    const segment = { from: t, fromStep: step, to: t, toStep: step, state };
    pod.segments.push(segment);
    pod.last = segment;
  };
  for (const { resource, object } of run.history.initial.values())
    if (resource.kind === 'Pod' && resource.gvr.group === '') touch(object, run.startTime, 0, 'INITIAL');
  for (const e of run.history.ordered())
    if (e.resource.kind === 'Pod' && e.resource.gvr.group === '') touch(e.object, e.time, e.step, e.type);
  const byOwner = new Map<string, PodTimeline[]>();
  for (const pod of pods.values()) {
    if (pod.last) {
      pod.last.to = end - run.startTime;
      pod.last.toStep = run.steps.length + 1;
    }
    const { owner, last: _last, ...timeline } = pod;
    const list = byOwner.get(owner) ?? [];
    list.push(timeline);
    byOwner.set(owner, list);
  }
  return [...byOwner.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([owner, list]) => ({ owner, pods: groupedByReplicaSet(list) }));
}

/**
 * Pods in creation order, those of one ReplicaSet kept together (sets in the order their first pod came): a pod an
 * old ReplicaSet makes after a newer one's (a replacement for an evicted one) joins its set's lanes.
 */
function groupedByReplicaSet(list: PodTimeline[]): PodTimeline[] {
  const byCreation = list.sort((a, b) => a.created - b.created || (a.name < b.name ? -1 : 1));
  const setOrder = new Map<string, number>();
  for (const pod of byCreation)
    if (!setOrder.has(pod.replicaSet ?? '')) setOrder.set(pod.replicaSet ?? '', setOrder.size);
  return byCreation
    .map((pod, i) => ({ pod, i }))
    .sort((a, b) => setOrder.get(a.pod.replicaSet ?? '')! - setOrder.get(b.pod.replicaSet ?? '')! || a.i - b.i)
    .map(({ pod }) => pod);
}

type ChangeBucket = { changes: ChangeReport[]; other: number };

/**
 * The history's changes as the timeline shows them, by step: each with the one-line summary of its object, and
 * MODIFIED events whose summary did not change only counted. Reads the history from where it last stopped, so a
 * replay that streams its timeline pays for each change once.
 */
export class ChangeSummaries {
  private readonly summaries = new Map<string, string>();
  private readonly byStep = new Map<number, ChangeBucket>();
  private cursor = 0;

  constructor(private readonly run: Pick<RunResult, 'history' | 'startTime'>) {
    for (const [key, { resource, object }] of run.history.initial)
      this.summaries.set(key, summarize(resource.kind, object));
  }

  /** The changes of step `index` (0: start-up), reading whatever the history gained since the last call. */
  of(index: number): ChangeBucket {
    const events = this.run.history.ordered();
    for (; this.cursor < events.length; this.cursor++) this.add(events[this.cursor]!);
    return this.byStep.get(index) ?? { changes: [], other: 0 };
  }

  private add(e: HistoryEvent): void {
    const key = objectKey(e.resource, e.object);
    const summary = e.type === 'DELETED' ? '' : summarize(e.resource.kind, e.object);
    const previous = this.summaries.get(key);
    if (e.type === 'DELETED') this.summaries.delete(key);
    else this.summaries.set(key, summary);
    const bucket = this.byStep.get(e.step) ?? { changes: [], other: 0 };
    this.byStep.set(e.step, bucket);
    if (e.type === 'MODIFIED' && previous === summary) {
      bucket.other++;
      return;
    }
    const change: ChangeReport = {
      at: offset(e.time, this.run.startTime),
      time: isoTime(e.time),
      resourceVersion: e.rv,
      type: e.type,
      kind: e.resource.kind,
      name: e.object.metadata.name ?? '',
      summary,
    };
    if (e.object.metadata.namespace) change.namespace = e.object.metadata.namespace;
    bucket.changes.push(change);
  }
}

/** One step of the report, with its changes. */
export function stepReport(s: StepResult, bucket: ChangeBucket, start: number): StepReport {
  const step: StepReport = {
    index: s.index,
    name: s.title,
    action: s.action,
    status: s.status,
    at: s.status === 'skipped' ? '' : offset(s.start, start),
    start: s.status === 'skipped' ? '' : isoTime(s.start),
    end: s.status === 'skipped' ? '' : isoTime(s.end),
    notes: s.notes,
    expectations: s.expectations.map((e) => ({ ok: e.ok, description: e.description, found: e.found })),
    changes: bucket.changes,
    otherChanges: bucket.other,
  };
  if (s.message !== undefined) step.message = s.message;
  if (s.kubectl) step.kubectl = s.kubectl;
  if (s.interrupted) step.interrupted = true;
  return step;
}

/** Each node's Ready state, taints and cordon, a segment per change of any of them. */
function nodeTimelines(run: RunResult, end: number): NodeTimeline[] {
  const nodes = new Map<string, NodeTimeline & { last?: NodeSegment }>();
  const touch = (obj: KubeObject, time: number, step: number, type: HistoryEvent['type'] | 'INITIAL'): void => {
    const name = obj.metadata.name ?? '';
    let node = nodes.get(name);
    if (!node || node.deleted !== undefined) {
      node = { name, segments: [] };
      nodes.set(name, node);
    }
    const t = time - run.startTime;
    if (node.last) {
      node.last.to = t;
      node.last.toStep = step;
    }
    if (type === 'DELETED') {
      node.deleted = t;
      node.last = undefined;
      return;
    }
    const ready = conditionStatus(obj, 'Ready');
    const state = ready === 'True' ? 'Ready' : ready === 'False' ? 'NotReady' : 'Unknown';
    const taintList = field(obj, 'spec', 'taints');
    const taints = Array.isArray(taintList)
      ? taintList.flatMap((x) => (isPlainObject(x) ? [`${x.key}:${x.effect}`] : []))
      : [];
    const unschedulable = field(obj, 'spec', 'unschedulable') === true;
    const last = node.last;
    if (last && last.state === state && last.unschedulable === unschedulable && last.taints.join() === taints.join())
      return;
    const segment: NodeSegment = { from: t, fromStep: step, to: t, toStep: step, state, taints, unschedulable };
    node.segments.push(segment);
    node.last = segment;
  };
  for (const { resource, object } of run.history.initial.values())
    if (resource.kind === 'Node' && resource.gvr.group === '') touch(object, run.startTime, 0, 'INITIAL');
  for (const e of run.history.ordered())
    if (e.resource.kind === 'Node' && e.resource.gvr.group === '') touch(e.object, e.time, e.step, e.type);
  return [...nodes.values()]
    .map(({ last, ...node }) => {
      if (last) {
        last.to = end - run.startTime;
        last.toStep = run.steps.length + 1;
      }
      return node;
    })
    .sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }));
}

/**
 * maxSurge/maxUnavailable as the Deployment controller resolves them (deployment/util ResolveFenceposts): a
 * percentage of desired, surge rounded up and unavailable down; both 0 means maxUnavailable 1.
 */
function fenceposts(obj: KubeObject, desired: number): { maxSurge: number; maxUnavailable: number } {
  const strategy = field(obj, 'spec', 'strategy');
  const rolling = isPlainObject(strategy) && strategy.type !== 'Recreate' ? strategy.rollingUpdate : undefined;
  if (isPlainObject(strategy) && strategy.type === 'Recreate') return { maxSurge: 0, maxUnavailable: desired };
  const value = (v: unknown, fallback: string, roundUp: boolean): number => {
    const given = v ?? fallback;
    if (typeof given === 'number') return given;
    const m = /^(\d+)%$/.exec(String(given));
    if (!m) return Number(given) || 0;
    const exact = (Number(m[1]) * desired) / 100;
    return roundUp ? Math.ceil(exact) : Math.floor(exact);
  };
  const r = isPlainObject(rolling) ? rolling : {};
  const maxSurge = value(r.maxSurge, '25%', true);
  let maxUnavailable = value(r.maxUnavailable, '25%', false);
  if (maxSurge === 0 && maxUnavailable === 0) maxUnavailable = 1;
  return { maxSurge, maxUnavailable };
}

/** Every Deployment's status after each change, as points for the rollout chart. */
function rolloutTimelines(run: RunResult): RolloutTimeline[] {
  const byName = new Map<string, RolloutPoint[]>();
  const add = (obj: KubeObject, time: number, step: number): void => {
    const key = `${obj.metadata.namespace}/${obj.metadata.name}`;
    const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
    const desired = n(field(obj, 'spec', 'replicas') ?? 1);
    const point: RolloutPoint = {
      at: time - run.startTime,
      step,
      desired,
      pods: n(field(obj, 'status', 'replicas')),
      updated: n(field(obj, 'status', 'updatedReplicas')),
      ready: n(field(obj, 'status', 'readyReplicas')),
      available: n(field(obj, 'status', 'availableReplicas')),
      ...fenceposts(obj, desired),
    };
    const list = byName.get(key) ?? [];
    const prev = list[list.length - 1];
    const same =
      prev &&
      (['desired', 'pods', 'updated', 'ready', 'available', 'maxSurge', 'maxUnavailable'] as const).every(
        (k) => prev[k] === point[k],
      );
    if (!same) list.push(point);
    byName.set(key, list);
  };
  for (const { resource, object } of run.history.initial.values())
    if (resource.kind === 'Deployment') add(object, run.startTime, 0);
  for (const e of run.history.ordered())
    if (e.resource.kind === 'Deployment' && e.type !== 'DELETED') add(e.object, e.time, e.step);
  return [...byName.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([deployment, points]) => ({ deployment: `Deployment ${deployment}`, points }));
}

export function scenarioReport(run: RunResult): ScenarioReport {
  const start = run.startTime;
  const changes = new ChangeSummaries(run);
  const steps: StepReport[] = run.steps.map((s) => stepReport(s, changes.of(s.index), start));
  const expectations = run.steps.flatMap((s) => s.expectations);
  const failures: string[] = [];
  for (const s of run.steps) {
    if (s.status !== 'failed') continue;
    const where = `step ${s.index} "${s.title}" (${s.action})`;
    const failed = s.expectations.filter((e) => !e.ok);
    if (failed.length > 0)
      for (const e of failed) failures.push(`${where}: expected ${e.description}; found ${e.found}`);
    else failures.push(`${where}: ${s.message ?? 'failed'}`);
  }
  for (const p of run.problems) failures.push(p);
  if (run.interruptedAt !== undefined)
    failures.push(`interrupted at step ${run.interruptedAt}: the steps after it did not run`);
  const report: ScenarioReport = {
    name: run.loaded.scenario.name,
    file: run.loaded.file,
    mode: run.mode,
    seed: run.seed,
    start: isoTime(start),
    end: isoTime(run.endTime),
    durationMs: run.endTime - start,
    result: run.passed ? 'passed' : 'failed',
    summary: {
      steps: run.steps.length,
      passed: run.steps.filter((s) => s.status === 'passed').length,
      failed: run.steps.filter((s) => s.status === 'failed').length,
      skipped: run.steps.filter((s) => s.status === 'skipped').length,
      expectations: {
        passed: expectations.filter((e) => e.ok).length,
        failed: expectations.filter((e) => !e.ok).length,
      },
    },
    failures,
    problems: run.problems,
    steps,
    pods: podTimelines(run, run.endTime),
    nodes: nodeTimelines(run, run.endTime),
    rollouts: rolloutTimelines(run),
  };
  if (run.loaded.scenario.description !== undefined) report.description = run.loaded.scenario.description;
  if (run.interruptedAt !== undefined) report.interruptedAt = run.interruptedAt;
  return report;
}

export function replayReport(scenarios: ScenarioReport[]): ReplayReport {
  return {
    apiVersion: 'kube-sim.dev/v1alpha1',
    kind: 'ReplayReport',
    result: scenarios.every((s) => s.result === 'passed') ? 'passed' : 'failed',
    scenarios,
  };
}

// ---- the text timeline -----------------------------------------------------------------------------------

const SIGN: Record<ChangeReport['type'], string> = { ADDED: '+', MODIFIED: '~', DELETED: '-' };

function indent(text: string, prefix: string): string {
  return text
    .split('\n')
    .map((l) => prefix + l)
    .join('\n');
}

/** The readable timeline `sim replay` prints: time, step, what it changed, and a pass/fail summary. */
export function textTimeline(report: ScenarioReport, options: TimelineOptions = {}): string {
  return [timelineHeader(report), ...report.steps.map((s) => timelineStep(s, options)), timelineFooter(report)].join(
    '',
  );
}

export interface TimelineOptions {
  changes?: boolean;
}

/** The timeline's first line: which scenario, from where, on what. */
export function timelineHeader(run: Pick<ScenarioReport, 'name' | 'file' | 'seed' | 'mode' | 'start'>): string {
  return `${run.name}  (${run.file}, seed ${run.seed}, ${run.mode}, starts ${run.start})\n`;
}

/** The header of a run that has only started (sim replay prints it before the first step). */
export function progressHeader(run: RunProgress): string {
  return timelineHeader({
    name: run.loaded.scenario.name,
    file: run.loaded.file,
    seed: run.seed,
    mode: run.mode,
    start: isoTime(run.startTime),
  });
}

/** A step's lines of the timeline: its line, notes, expectations, kubectl output and the changes it caused. */
export function timelineStep(s: StepReport, options: TimelineOptions = {}): string {
  const out: string[] = [];
  const status = s.interrupted
    ? 'INTERRUPTED'
    : s.status === 'passed'
      ? 'ok'
      : s.status === 'failed'
        ? 'FAILED'
        : 'skipped';
  out.push(`  ${(s.at || '').padEnd(12)}${String(s.index).padStart(3)}  ${s.name}  ${status}`);
  const pad = ' '.repeat(19);
  for (const note of s.notes) out.push(`${pad}${note}`);
  for (const e of s.expectations)
    out.push(`${pad}${e.ok ? 'ok  ' : 'FAIL'} ${e.description}${e.ok ? '' : `\n${pad}     found: ${e.found}`}`);
  if (s.message && s.expectations.length === 0) out.push(indent(s.message, `${pad}! `));
  if (s.kubectl) {
    const text = (s.kubectl.stdout + s.kubectl.stderr).trimEnd();
    if (text) out.push(indent(text, `${pad}| `));
  }
  if (options.changes !== false) {
    for (const c of s.changes) {
      const name = `${c.kind} ${c.namespace ? `${c.namespace}/` : ''}${c.name}`;
      out.push(`${pad}${c.at.padEnd(10)} ${SIGN[c.type]} ${name}${c.summary ? `  ${c.summary}` : ''}`);
    }
  }
  return `${out.join('\n')}\n`;
}

/** The timeline's summary: pass or fail, counts, and one line per failure. */
export function timelineFooter(report: ScenarioReport): string {
  const out: string[] = [];
  const sum = report.summary;
  const took = offset(report.durationMs, 0).slice(2);
  out.push(
    `${report.result === 'passed' ? 'PASS' : 'FAIL'} ${report.name}: ${sum.steps} steps (${sum.passed} passed, ${sum.failed} failed, ${sum.skipped} skipped), ` +
      `${sum.expectations.passed + sum.expectations.failed} expectations (${sum.expectations.passed} passed, ${sum.expectations.failed} failed), ${took} of cluster time`,
  );
  for (const f of report.failures) {
    const [first, ...rest] = f.split('\n');
    out.push(`  ✗ ${first}`);
    if (rest.length > 0) out.push(indent(rest.join('\n'), '    '));
  }
  return `${out.join('\n')}\n`;
}
