import { rfc3339 } from '../clock/clock.js';
import { applyMergePatch } from '../api/patch.js';
import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import {
  runAction,
  type ActionContext,
  type ActionEvent,
  type ActionLog,
  type ActionName,
  type ActionResult,
  type ContainerCommand,
  type ImagePullOutcome,
} from './actions.js';
import type { PodRecord } from './pod-record.js';
import { nextStage, stageDelayMs, type Stage, type StageDecision } from './stages.js';

/**
 * One pass of the stage engine over a pod, worked out before anything is written: the stage due now, and the
 * stages due at once after it, each on the pod as the one before left it. Pure but for the pod's record, whose
 * anchors the first decision reads (and sets); the pod worker writes the result once.
 */
type Obj = Record<string, unknown>;

/** Actions a pass stops before, so the status ahead of them is written first: a start, a restart, a back-off that refuses one or a pull (see followsAtOnce). */
const PASS_STOPS_BEFORE: ReadonlySet<ActionName> = new Set<ActionName>(['Start', 'Restart', 'BackOff', 'PullBackOff']);
/** A bound on the stages one pass applies (each stage runs once a pass at most). */
const MAX_STAGES_A_PASS = 8;

/** What a pass reads besides the pod and the stages: the clock, the settings, the node, the runtime. */
export interface PassEnv {
  now: number;
  /** The pod's annotation, else its node's, else the server-wide default. */
  setting(pod: KubeObject, key: string): string | undefined;
  nodeName: string;
  hostIP: string;
  /** The container runtime and the node's lookups, for the actions (set up for the pod it is given). */
  actions(pod: KubeObject): ActionContext;
  /** How long the pod's running containers take to exit after a SIGTERM sent at `since` (undefined: one never does). */
  stopDelayMs?(pod: KubeObject, since: number): number | undefined;
  /** When the first of the pod's running containers whose command the exec shell runs exited (undefined: none has). */
  commandExitAt?(pod: KubeObject): number | undefined;
}

/** One stage worked out on a pod. */
export interface StageStep {
  stage: Stage;
  /** The pod after the stage: the same object when the stage changed nothing. */
  pod: KubeObject;
  events: ActionEvent[];
  logs: ActionLog[];
  /** The annotations the stage changed on the pod it was given (null: removed). */
  annotations: Record<string, string | null>;
  /** Image pulls the stage made (for the record's image back-offs). */
  pulls: ImagePullOutcome[];
  /** Commands the stage's started containers run in the exec shell. */
  commands: ContainerCommand[];
}

export type PassPlan =
  /** No stage applies. */
  | { kind: 'idle' }
  /** The next stage is due later. */
  | { kind: 'wait'; stage: Stage; waitMs: number }
  /**
   * Stages applied now: `pod` is the state to write (the pod given when they changed nothing), `unchanged` the last
   * stages, which left it as they found it.
   */
  | { kind: 'apply'; steps: StageStep[]; pod: KubeObject; unchanged: Set<string> };

/** Replaces ${now}, ${podIP}, ${hostIP}, ${nodeName}, ${name} and ${namespace} in every string of a value. */
function substitute(value: unknown, vars: Record<string, string>): unknown {
  if (typeof value === 'string') return value.replace(/\$\{(\w+)\}/g, (m, k: string) => vars[k] ?? m);
  if (Array.isArray(value)) return value.map((v) => substitute(v, vars));
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, vars)]));
  return value;
}

export function containerSpecs(pod: KubeObject): Obj[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return ['initContainers', 'containers', 'ephemeralContainers'].flatMap((l) =>
    Array.isArray(spec[l]) ? (spec[l] as unknown[]).filter(isPlainObject) : [],
  ) as Obj[];
}

/**
 * The pass due on the pod now. As kubelet's status manager keeps only the newest status of a pod and syncs that one
 * (status_manager.go: updateStatusInternal replaces podStatuses[uid], syncBatch skips versions already sent), the
 * stages due at once run on, each on the pod as the one before left it, and the pod is written once.
 */
export function planPass(stages: readonly Stage[], pod: KubeObject, record: PodRecord, env: PassEnv): PassPlan {
  const now = env.now;
  let unchanged = new Set(record.appliedWithoutChange(pod));
  const decide = (p: KubeObject, firstSeen: (stage: string) => number): StageDecision | undefined =>
    nextStage(stages, p, {
      now,
      setting: (k) => env.setting(p, k),
      firstSeen,
      done: (stage) => unchanged.has(stage),
      pullRetryAt: (image) => record.pullRetryAt(image),
      ...(env.stopDelayMs ? { stopDelayMs: env.stopDelayMs } : {}),
      ...(env.commandExitAt ? { commandExitAt: env.commandExitAt } : {}),
    });
  let decision = decide(pod, (stage) => record.firstMatched(stage, now));
  if (!decision) return { kind: 'idle' };
  if (decision.dueAt > now) return { kind: 'wait', stage: decision.stage, waitMs: decision.dueAt - now };

  let state = pod;
  const steps: StageStep[] = [];
  for (;;) {
    const step = playStage(decision.stage, state, env);
    steps.push(step);
    if (step.pod === state) unchanged.add(decision.stage.name);
    else {
      state = step.pod;
      unchanged = new Set();
    }
    if (decision.stage.next.delete || steps.length >= MAX_STAGES_A_PASS) break;
    // The states after the first are not written yet: their stages were all first seen now, and the record's
    // anchors stay as they are until the write succeeds (a retried pass finds the stop delay already run).
    const next = decide(state, () => now);
    if (!next || !followsAtOnce(next, state, env) || steps.some((s) => s.stage === next.stage)) break;
    decision = next;
  }
  return { kind: 'apply', steps, pod: state, unchanged };
}

/**
 * Whether a stage runs on in the same pass as the one before it: due now with no delay of its own, and not
 * one that starts containers. The kubelet publishes the status it has before it asks the runtime to start
 * containers (syncPod's statusManager.SetPodStatus comes before containerRuntime.SyncPod), so ContainerCreating
 * and a container's exit are written before the start or back-off that follows them (kubectl get -w shows
 * Pending → ContainerCreating → Running, and Error before CrashLoopBackOff); a start and the readiness that
 * comes with it (no probe), or a SIGTERM and the stop, are one status.
 */
function followsAtOnce(next: StageDecision, pod: KubeObject, env: PassEnv): boolean {
  const action = next.stage.next.action;
  if (next.dueAt > env.now || (action !== undefined && PASS_STOPS_BEFORE.has(action))) return false;
  return stageDelayMs(next.stage, pod, { setting: (k) => env.setting(pod, k) }) === 0;
}

/** Works out one stage on the pod as it stands, writing nothing: the pod after it, its events and log lines. */
export function playStage(stage: Stage, pod: KubeObject, env: PassEnv): StageStep {
  const next = stage.next;
  const actx = env.actions(pod);
  const result: ActionResult = next.action ? runAction(next.action, pod, actx, next.params) : { events: [], logs: [] };
  let status = result.status;
  const vars: Record<string, string> = {
    now: rfc3339(env.now),
    hostIP: env.hostIP,
    nodeName: env.nodeName,
    name: pod.metadata.name ?? '',
    namespace: pod.metadata.namespace ?? '',
    get podIP() {
      return actx.podIP({ ...pod, status: status ?? pod.status });
    },
  };
  if (next.statusPatch) status = applyMergePatch(status ?? pod.status ?? {}, substitute(next.statusPatch, vars)) as Obj;
  for (const e of next.events ?? [])
    result.events.push({ type: e.type, reason: e.reason, message: String(substitute(e.message, vars)) });
  if (next.log?.length) {
    // The stage's lines go into each container's log: after a start, before an exit.
    const lines = next.log.map((l) => String(substitute(l, vars)));
    for (const c of containerSpecs(pod)) {
      const entry = result.logs.find((l) => l.container === c.name);
      if (!entry) result.logs.push({ container: String(c.name), lines });
      else
        entry.lines = entry.end && entry.start === undefined ? [...lines, ...entry.lines] : [...entry.lines, ...lines];
    }
  }

  let metadata = pod.metadata;
  const annotations: Record<string, string | null> = {};
  let merged: Record<string, string> | undefined;
  for (const [k, v] of Object.entries(result.annotations ?? {})) {
    if ((pod.metadata.annotations?.[k] ?? null) === (v ?? null)) continue;
    annotations[k] = v ?? null;
    merged ??= { ...(pod.metadata.annotations ?? {}) };
    if (v === null || v === undefined) delete merged[k];
    else merged[k] = v;
  }
  if (merged) metadata = { ...pod.metadata, annotations: merged };
  const statusChanged = status !== undefined && !deepEqual(status, pod.status);
  const after =
    statusChanged || metadata !== pod.metadata
      ? { ...pod, metadata, status: statusChanged ? status : pod.status }
      : pod;
  return {
    stage,
    pod: after,
    events: result.events,
    logs: result.logs,
    annotations,
    pulls: result.pulls ?? [],
    commands: result.commands ?? [],
  };
}

/**
 * The annotations a pass changed, for a write that changes no status (a merge patch of them alone): the steps'
 * changes, the later winning; one a later step undid is left out.
 */
export function annotationChanges(pod: KubeObject, steps: readonly StageStep[]): Record<string, string | null> {
  const changed: Record<string, string | null> = {};
  for (const step of steps) Object.assign(changed, step.annotations);
  for (const [k, v] of Object.entries(changed)) if ((pod.metadata.annotations?.[k] ?? null) === v) delete changed[k];
  return changed;
}
