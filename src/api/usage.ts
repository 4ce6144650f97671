import { isTerminating, podCondition, podPhase } from './pod-util.js';
import { parseQuantity } from './quantity.js';
import { isPlainObject, type KubeObject } from './types.js';

/**
 * Simulated resource usage: what a container uses over cluster time, as its pod's annotations say, and what
 * metrics-server would report of it. A value is a quantity (`250m`, `64Mi`) or a profile over time since the
 * container started, pieces `from-to: quantity` with an open end allowed:
 *
 *   kube-sim.dev/cpu-usage: "0-5m: 50m, 5m-20m: 900m, 20m-: 50m"
 *
 * 50 millicores for the first five minutes, 900 until minute 20, then 50 again. Times are Go durations (`90s`,
 * `1h30m`, `0`). A time no piece covers, and a value that does not parse, is the idle usage.
 *
 * `kube-sim.dev/cpu-usage` and `kube-sim.dev/memory-usage` apply to every container of the pod;
 * `kube-sim.dev/cpu-usage.NAME` (memory likewise) to container NAME alone and win over the pod-wide one. A Service's
 * `kube-sim.dev/cpu-load` is the CPU its clients cost in all, shared evenly by its ready endpoints (added to each
 * one's first container), with profile times counted from the Service's creation: scaling out lowers each pod's
 * share, as a real load would. A container never uses more CPU than its `resources.limits.cpu` (it is throttled).
 */
export const CPU_USAGE = 'kube-sim.dev/cpu-usage';
export const MEMORY_USAGE = 'kube-sim.dev/memory-usage';
export const CPU_LOAD = 'kube-sim.dev/cpu-load';

/** What an idle container uses: 1 millicore, 8 MiB of working set. */
export const IDLE_CPU_MILLI = 1;
export const IDLE_MEMORY_BYTES = 8 * 1024 * 1024;

/** One piece of a profile: from `fromMs` (inclusive) to `toMs` (exclusive; Infinity when open), a constant value. */
export interface UsagePiece {
  fromMs: number;
  toMs: number;
  value: number;
}

/** A usage over time: pieces in time order, not overlapping; time none covers uses `idle`. */
export type UsageProfile = readonly UsagePiece[];

const DURATION_UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** time.ParseDuration's syntax (`1h30m`, `90s`, `0`), in ms; undefined when it does not parse. */
export function parseGoDuration(text: string): number | undefined {
  const t = text.trim();
  if (t === '0') return 0;
  if (t === '' || !/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(t)) return undefined;
  let total = 0;
  for (const [, n, , unit] of t.matchAll(/(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)/g))
    total += Number(n) * DURATION_UNITS[unit!]!;
  return total;
}

/**
 * A usage annotation's value, in the unit `scale` gives (1000 per CPU core for millicores, 1 per byte): a constant
 * is a one-piece profile. Undefined when it does not parse (pieces out of order or overlapping count as unparsable).
 */
export function parseUsage(text: string, perUnit: number): UsageProfile | undefined {
  const constant = amount(text, perUnit);
  if (constant !== undefined) return [{ fromMs: 0, toMs: Infinity, value: constant }];
  const pieces: UsagePiece[] = [];
  for (const part of text.split(',')) {
    const match = /^\s*([^-:\s]+)\s*-\s*([^:\s]*)\s*:\s*(\S+)\s*$/.exec(part);
    if (!match) return undefined;
    const fromMs = parseGoDuration(match[1]!);
    const toMs = match[2] === '' ? Infinity : parseGoDuration(match[2]!);
    const value = amount(match[3]!, perUnit);
    if (fromMs === undefined || toMs === undefined || value === undefined || toMs <= fromMs) return undefined;
    const previous = pieces[pieces.length - 1];
    if (previous && fromMs < previous.toMs) return undefined;
    pieces.push({ fromMs, toMs, value });
  }
  return pieces;
}

function amount(text: string, perUnit: number): number | undefined {
  const q = parseQuantity(text.trim());
  if (!q || q.nanos < 0n) return undefined;
  return (Number(q.nanos) / 1e9) * perUnit;
}

/** The profile's value at `atMs` after its start. */
export function valueAt(profile: UsageProfile, idle: number, atMs: number): number {
  for (const p of profile) if (atMs >= p.fromMs && atMs < p.toMs) return p.value;
  return idle;
}

/**
 * The profile's mean over [fromMs, toMs) after its start: a rate metrics-server computes from two cumulative
 * samples. E.g. 50m until 5m, then 900m: over 4m50s–5m05s, (10 s × 50 + 5 s × 900) / 15 s = 333.3m.
 */
export function meanOver(profile: UsageProfile, idle: number, fromMs: number, toMs: number): number {
  if (toMs <= fromMs) return valueAt(profile, idle, fromMs);
  let covered = 0;
  let sum = 0;
  for (const p of profile) {
    const overlap = Math.min(toMs, p.toMs) - Math.max(fromMs, p.fromMs);
    if (overlap > 0) {
      covered += overlap;
      sum += overlap * p.value;
    }
  }
  return (sum + (toMs - fromMs - covered) * idle) / (toMs - fromMs);
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

/** The usage profiles of one container from its pod's annotations (the container's own, else the pod-wide one). */
export function containerProfiles(pod: KubeObject, container: string): { cpu?: UsageProfile; memory?: UsageProfile } {
  const annotations = pod.metadata.annotations ?? {};
  const pick = (key: string, perUnit: number): UsageProfile | undefined => {
    const text = annotations[`${key}.${container}`] ?? annotations[key];
    return typeof text === 'string' ? parseUsage(text, perUnit) : undefined;
  };
  return { cpu: pick(CPU_USAGE, 1000), memory: pick(MEMORY_USAGE, 1) };
}

/** A running container as metrics see it: its name and when it (last) started, in ms. */
export interface RunningContainer {
  name: string;
  startedAt: number;
}

/** The containers of a pod that run now (state.running), in spec order. */
export function runningContainers(pod: KubeObject): RunningContainer[] {
  const statuses = obj(pod.status).containerStatuses;
  if (!Array.isArray(statuses)) return [];
  const byName = new Map<string, number>();
  for (const s of statuses.map(obj)) {
    const started = obj(obj(s.state).running).startedAt;
    const at = typeof started === 'string' ? Date.parse(started) : Number.NaN;
    if (typeof s.name === 'string' && Number.isFinite(at)) byName.set(s.name, at);
  }
  const spec = obj(pod.spec).containers;
  const names = Array.isArray(spec) ? spec.map((c) => obj(c).name).filter((n) => typeof n === 'string') : [];
  return (names as string[]).flatMap((name) => {
    const startedAt = byName.get(name);
    return startedAt === undefined ? [] : [{ name, startedAt }];
  });
}

/** A pod that is one of a Service's ready endpoints: Running, Ready, not terminating. */
export function servesTraffic(pod: KubeObject): boolean {
  return podPhase(pod) === 'Running' && podCondition(pod, 'Ready')?.status === 'True' && !isTerminating(pod);
}

/** A Service's load profile (CPU in millicores, times from its creation), or undefined when it has none. */
export function serviceLoad(service: KubeObject): UsageProfile | undefined {
  const text = service.metadata.annotations?.[CPU_LOAD];
  return typeof text === 'string' ? parseUsage(text, 1000) : undefined;
}
