import { isPlainObject, type KubeObject } from '../api/types.js';
import { ageOf } from './printers.js';

type Obj = Record<string, unknown>;

/**
 * The pod row of `kubectl get pods`, by kube-apiserver's printPod rules:
 * - STATUS starts as status.reason or the phase; a PodScheduled condition with reason SchedulingGated says
 *   SchedulingGated; the first init container that has not finished says Init:<reason>, Init:ExitCode:N,
 *   Init:Signal:N or Init:i/n; otherwise the last container (walking backwards) with a waiting or terminated
 *   reason names it (ExitCode:N / Signal:N without one); "Completed" with a container still running and ready
 *   reads Running (NotReady without a Ready condition); a deleted pod is Terminating unless its phase is
 *   terminal, or Unknown when its node was lost.
 * - READY counts ready running containers (and started, ready restartable init containers, i.e. sidecars) over
 *   the containers plus sidecars.
 * - RESTARTS sums restartCount (sidecars' always, other init containers' only while initializing) and adds
 *   "(<age> ago)" of the latest lastState.terminated.finishedAt.
 *
 * Worked example: one init container done (exitCode 0), two containers, the second waiting in CrashLoopBackOff
 * with restartCount 3 and last finished 45 s ago → READY 1/2, STATUS CrashLoopBackOff, RESTARTS "3 (45s ago)".
 */
export interface PodRow {
  ready: number;
  total: number;
  reason: string;
  restarts: number;
  lastRestart: number;
}

const list = (v: unknown): Obj[] => (Array.isArray(v) ? (v.filter(isPlainObject) as Obj[]) : []);
const obj = (v: unknown): Obj | undefined => (isPlainObject(v) ? v : undefined);

function finishedAt(c: Obj): number {
  const t = obj(obj(c.lastState)?.terminated)?.finishedAt;
  return typeof t === 'string' ? Date.parse(t) || 0 : 0;
}

export function podRow(pod: KubeObject): PodRow {
  const spec = obj(pod.spec) ?? {};
  const status = obj(pod.status) ?? {};
  const phase = typeof status.phase === 'string' ? status.phase : '';
  let reason = typeof status.reason === 'string' && status.reason !== '' ? status.reason : phase;
  const conditions = list(status.conditions);
  for (const c of conditions)
    if (c.type === 'PodScheduled' && c.reason === 'SchedulingGated') reason = 'SchedulingGated';

  const initSpecs = list(spec.initContainers);
  const sidecar = (name: unknown): boolean => initSpecs.some((c) => c.name === name && c.restartPolicy === 'Always');
  let total = list(spec.containers).length + initSpecs.filter((c) => c.restartPolicy === 'Always').length;
  let ready = 0;
  let restarts = 0;
  let sidecarRestarts = 0;
  let lastRestart = 0;
  let lastSidecarRestart = 0;

  let initializing = false;
  const initStatuses = list(status.initContainerStatuses);
  for (const [i, c] of initStatuses.entries()) {
    const count = typeof c.restartCount === 'number' ? c.restartCount : 0;
    restarts += count;
    lastRestart = Math.max(lastRestart, finishedAt(c));
    if (sidecar(c.name)) {
      sidecarRestarts += count;
      lastSidecarRestart = Math.max(lastSidecarRestart, finishedAt(c));
    }
    const state = obj(c.state) ?? {};
    const terminated = obj(state.terminated);
    const waiting = obj(state.waiting);
    if (terminated && terminated.exitCode === 0) continue;
    if (sidecar(c.name) && c.started === true) {
      if (c.ready === true) ready++;
      continue;
    }
    if (terminated) {
      if (typeof terminated.reason === 'string' && terminated.reason !== '') reason = `Init:${terminated.reason}`;
      else if (typeof terminated.signal === 'number' && terminated.signal !== 0)
        reason = `Init:Signal:${terminated.signal}`;
      else reason = `Init:ExitCode:${String(terminated.exitCode ?? 0)}`;
    } else if (
      waiting &&
      typeof waiting.reason === 'string' &&
      waiting.reason !== '' &&
      waiting.reason !== 'PodInitializing'
    ) {
      reason = `Init:${waiting.reason}`;
    } else {
      reason = `Init:${i}/${initSpecs.length}`;
    }
    initializing = true;
    break;
  }

  const initialized = conditions.some((c) => c.type === 'Initialized' && c.status === 'True');
  if (!initializing || initialized) {
    restarts = sidecarRestarts;
    lastRestart = lastSidecarRestart;
    let hasRunning = false;
    const statuses = list(status.containerStatuses);
    for (let i = statuses.length - 1; i >= 0; i--) {
      const c = statuses[i]!;
      restarts += typeof c.restartCount === 'number' ? c.restartCount : 0;
      lastRestart = Math.max(lastRestart, finishedAt(c));
      const state = obj(c.state) ?? {};
      const waiting = obj(state.waiting);
      const terminated = obj(state.terminated);
      if (waiting && typeof waiting.reason === 'string' && waiting.reason !== '') reason = waiting.reason;
      else if (terminated && typeof terminated.reason === 'string' && terminated.reason !== '')
        reason = terminated.reason;
      else if (terminated)
        reason =
          typeof terminated.signal === 'number' && terminated.signal !== 0
            ? `Signal:${terminated.signal}`
            : `ExitCode:${String(terminated.exitCode ?? 0)}`;
      else if (c.ready === true && obj(state.running)) {
        hasRunning = true;
        ready++;
      }
    }
    if (reason === 'Completed' && hasRunning) {
      reason = conditions.some((c) => c.type === 'Ready' && c.status === 'True') ? 'Running' : 'NotReady';
    }
  }

  if (pod.metadata.deletionTimestamp && status.reason === 'NodeLost') reason = 'Unknown';
  else if (pod.metadata.deletionTimestamp && phase !== 'Succeeded' && phase !== 'Failed') reason = 'Terminating';
  total = Math.max(total, 0);
  return { ready, total, reason, restarts, lastRestart };
}

export function podRestarts(pod: KubeObject, now: number): string {
  const row = podRow(pod);
  if (row.restarts !== 0 && row.lastRestart > 0)
    return `${row.restarts} (${ageOf(new Date(row.lastRestart).toISOString(), now)} ago)`;
  return String(row.restarts);
}

/** The IP column: the first of status.podIPs (status.podIP when only that is set). */
export function podIP(pod: KubeObject): string {
  const status = obj(pod.status) ?? {};
  const ips = list(status.podIPs);
  const ip = typeof ips[0]?.ip === 'string' ? ips[0].ip : typeof status.podIP === 'string' ? status.podIP : '';
  return ip === '' ? '<none>' : ip;
}
