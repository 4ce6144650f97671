import { posix } from 'node:path';
import { isPlainObject, type KubeObject } from '../api/types.js';
import type { Images } from './images.js';
import { SHELL_NAMES } from './shell/names.js';

/**
 * What a container runs, as the kubelet reads it from the spec and the image catalog: the pod's `command` (else the
 * image's ENTRYPOINT) and `args` (else, without a command, the image's CMD), as the container runtime puts them
 * together. kube-sim runs no real processes: a command goes to the exec shell (which runs it when it has every
 * program it names), an image that serves runs until it is stopped, and a container with neither runs until it is
 * stopped too.
 */
type Obj = Record<string, unknown>;

export type ContainerProgram =
  /** The image's own program serves until stopped (nginx, redis, pause, …). */
  | { kind: 'serves' }
  /** A command line for the exec shell, before `$(VAR)` expansion. */
  | { kind: 'command'; argv: readonly string[] }
  /** No command, and an image the catalog does not know. */
  | { kind: 'unknown' };

/** kube-sim.dev/duration: the container exits that long after it starts, whatever it runs. */
export const DURATION_SETTING = 'kube-sim.dev/duration';

function strings(value: unknown): string[] | undefined {
  return Array.isArray(value) ? value.map((v) => String(v)) : undefined;
}

/** Per container spec: the pods of a template share theirs (the store keeps one copy of identical parts). */
const programs = new WeakMap<Images, WeakMap<object, ContainerProgram>>();

/** What the container runs, from its spec and the catalog (the same for every pod of a template). */
export function programOf(c: Obj, images: Images): ContainerProgram {
  let bySpec = programs.get(images);
  if (!bySpec) programs.set(images, (bySpec = new WeakMap()));
  let program = bySpec.get(c);
  if (program) return program;
  const info = images.lookup(String(c.image));
  const command = strings(c.command);
  const args = strings(c.args);
  const argv = [...(command ?? info?.entrypoint ?? []), ...(args ?? (command ? [] : (info?.cmd ?? [])))];
  if (info?.serves && command === undefined && args === undefined) program = { kind: 'serves' };
  else if (argv.length > 0) program = { kind: 'command', argv };
  else program = info?.serves ? { kind: 'serves' } : { kind: 'unknown' };
  bySpec.set(c, program);
  return program;
}

/** Whether a command line's program is a shell: as PID 1 it ignores SIGTERM unless it traps it. */
export function isShell(argv: readonly string[]): boolean {
  return argv[0] !== undefined && SHELL_NAMES.has(posix.basename(argv[0]));
}

function containerSpecsOf(pod: KubeObject): Obj[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return Array.isArray(spec.containers) ? (spec.containers.filter(isPlainObject) as Obj[]) : [];
}

function isRunning(cs: unknown): boolean {
  return isPlainObject(cs) && isPlainObject(cs.state) && isPlainObject(cs.state.running);
}

/** What the kubelet knows of a container's command that the exec shell runs (its record of the pod holds it). */
export type CommandState =
  /** The shell runs it: as PID 1 it ignores SIGTERM, so it runs until it exits or the grace period ends. */
  | { phase: 'running' }
  /** It reached a program kube-sim does not have (its own server, python, curl): that program runs until stopped. */
  | { phase: 'waiting'; program: string }
  /** It exited with this code at this time (cluster time). */
  | { phase: 'exited'; exitCode: number; at: number };

/** The command of a running container instance, if the exec shell runs it (undefined: nothing is known of one). */
export type CommandLookup = (container: string, instance: number) => CommandState | undefined;

function restartCountOf(cs: Obj): number {
  return typeof cs.restartCount === 'number' ? cs.restartCount : 0;
}

/** The pod's running container statuses by name. */
function runningStatuses(pod: KubeObject): Map<string, Obj> {
  const status = isPlainObject(pod.status) ? pod.status : {};
  const running = new Map<string, Obj>();
  for (const cs of Array.isArray(status.containerStatuses) ? status.containerStatuses : [])
    if (isRunning(cs)) running.set(String((cs as Obj).name), cs as Obj);
  return running;
}

/** When the first of the pod's running containers (init, app or ephemeral) whose command exited did (undefined: none has). */
export function commandExitAt(pod: KubeObject, command: CommandLookup): number | undefined {
  let first: number | undefined;
  const status = isPlainObject(pod.status) ? pod.status : {};
  for (const list of [status.initContainerStatuses, status.containerStatuses, status.ephemeralContainerStatuses]) {
    for (const cs of Array.isArray(list) ? (list as unknown[]) : []) {
      if (!isRunning(cs)) continue;
      const state = command(String((cs as Obj).name), restartCountOf(cs as Obj));
      if (state?.phase === 'exited' && (first === undefined || state.at < first)) first = state.at;
    }
  }
  return first;
}

/**
 * How long the pod's running containers take to exit after SIGTERM, sent `since` (cluster time): the longest of
 * theirs. A container whose command the exec shell runs exits when the command does (a shell as PID 1 ignores
 * SIGTERM); one that serves, runs a program kube-sim does not have, or runs until stopped, after the image's stop
 * delay (the catalog's, for images it does not know); a shell as PID 1 of which nothing is known ignores SIGTERM.
 * Undefined while one of them will not exit by itself: the grace period ends it.
 */
export function stopDelayMs(
  pod: KubeObject,
  images: Images,
  since: number,
  annotated: boolean,
  command: CommandLookup,
): number | undefined {
  const running = runningStatuses(pod);
  let longest = 0;
  for (const c of containerSpecsOf(pod)) {
    const cs = running.get(String(c.name));
    if (!cs) continue;
    const image = String(c.image);
    const program = programOf(c, images);
    const runs = program.kind === 'command' && !annotated;
    const state = runs ? command(String(c.name), restartCountOf(cs)) : undefined;
    let delay: number | undefined;
    if (state?.phase === 'exited') delay = Math.max(0, state.at - since);
    else if (state?.phase === 'running') delay = undefined;
    else if (state === undefined && runs && isShell(program.argv)) delay = undefined;
    else delay = images.stopDelayMs(image);
    if (delay === undefined) return undefined;
    longest = Math.max(longest, delay);
  }
  return longest;
}

/** The kubelet's event for a container kube-sim cannot tell what runs in: no command, an image the catalog does not know. */
export function runsUntilStoppedMessage(c: Obj): string {
  return `kube-sim runs no real processes, and its image catalog does not say what "${String(c.image)}" runs: container ${String(c.name)} runs until it is stopped (kube-sim.dev/duration and kube-sim.dev/exit-code end it)`;
}

/** The kubelet's event for a command that reached a program the exec shell does not have. */
export function waitsInProgramMessage(c: Obj, program: string): string {
  return `kube-sim runs no real processes, and its shell has no "${program}": container ${String(c.name)} runs it until it is stopped (kube-sim.dev/duration and kube-sim.dev/exit-code end it)`;
}

/** The kubelet's event for a command that loops without ever waiting on the clock. */
export function spinsMessage(c: Obj): string {
  return `kube-sim runs no real processes: the command of container ${String(c.name)} loops without waiting on the clock, so kube-sim stops running it there, and the container runs until it is stopped`;
}
