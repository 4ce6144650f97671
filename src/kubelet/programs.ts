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

/** What the kubelet knows of a running container's command, when the exec shell runs it. */
export type CommandState =
  /** It has not exited: it ignores SIGTERM (PID 1) or has not finished handling it. */
  | { exited: false }
  /** It exited at this time (cluster time). */
  | { exited: true; at: number };

/**
 * How long the pod's running containers take to exit after SIGTERM, sent `since` (cluster time): the longest of
 * theirs. A container whose command runs in the exec shell exits when it does; one that serves, or runs until
 * stopped, after the image's stop delay (the catalog's, for images it does not know); a shell as PID 1 that the shell
 * does not run ignores SIGTERM. Undefined while one of them will not exit by itself: the grace period ends it.
 */
export function stopDelayMs(
  pod: KubeObject,
  images: Images,
  since: number,
  annotated: boolean,
  command: (container: string, instance: number) => CommandState | undefined,
): number | undefined {
  const status = isPlainObject(pod.status) ? pod.status : {};
  const running = new Map<string, Obj>();
  for (const cs of Array.isArray(status.containerStatuses) ? status.containerStatuses : [])
    if (isRunning(cs)) running.set(String((cs as Obj).name), cs as Obj);
  let longest = 0;
  for (const c of containerSpecsOf(pod)) {
    const cs = running.get(String(c.name));
    if (!cs) continue;
    const image = String(c.image);
    let delay: number | undefined;
    const program = programOf(c, images);
    const state =
      program.kind === 'command' && !annotated ? command(String(c.name), Number(cs.restartCount ?? 0)) : undefined;
    if (state) delay = state.exited ? Math.max(0, state.at - since) : undefined;
    else if (program.kind === 'command' && !annotated && isShell(program.argv)) delay = undefined;
    else delay = images.stopDelayMs(image);
    if (delay === undefined) return undefined;
    longest = Math.max(longest, delay);
  }
  return longest;
}
