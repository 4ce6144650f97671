import { deepEqual, type KubeObject } from '../api/types.js';
import { crashLoopDelayMs, type ContainerCommand } from './actions.js';
import type { CommandState } from './programs.js';

/**
 * What the kubelet remembers about one of its pods beyond the pod itself: one record per pod, changed only by the
 * transitions below. The stage engine decides from the pod, its settings and the clock (stages.ts); the record
 * holds the five things the pod cannot tell it:
 *
 * - its own last write: until the informer has caught up with it, the cached pod is older than the kubelet knows;
 * - when each stage timed from its first match (a delay without a `since` timestamp: the stop delay) first matched
 *   the pod in its current state;
 * - the stages it applied without changing the pod (Kill's SIGTERM, a FailedMount), with the pod as they left it, so
 *   that they are not applied twice;
 * - the pod IP it handed out, also before the status carrying it is written;
 * - the image pulls that failed, per image (kubelet's image back-off, keyed by pod and image): how many, and when
 *   the last one failed, which says when the next pull may be tried;
 * - the commands the exec shell runs for its containers, per container: which instance, what became of it (running,
 *   waiting in a program kube-sim does not have, exited with a code at a time), and how to stop it.
 *
 * A pass that fails to write (a 409 the work queue retries) is no transition: the record stays as it was, so the
 * retry finds the stop delay already running.
 */
export class PodRecord {
  /** The IP handed out to the pod from its node's range. */
  private heldIP: string | undefined;
  /**
   * What it remembers of the pod's stages, while it remembers any: a pod in steady state holds only its IP, and a
   * record of two members costs no more than the IP alone did (one record a pod of a dense cluster).
   */
  private stages: StageMemory | undefined;
  /** Per image whose pulls failed: how many in a row, and when the last one did. */
  private pulls: Map<string, { failures: number; lastAt: number }> | undefined;
  /** Per container whose command the exec shell runs: its current instance's run. */
  private commands: Map<string, CommandRun> | undefined;

  /**
   * Sees the pod as the cache holds it: false while that is older than the kubelet's own last write (the write's
   * event brings the pod back); the first version as new ends the wait.
   */
  caughtUp(pod: KubeObject): boolean {
    const memory = this.stages;
    if (memory?.ownWrite === undefined) return true;
    if (Number(pod.metadata.resourceVersion) < memory.ownWrite) return false;
    memory.ownWrite = undefined;
    this.forgetIfEmpty();
    return true;
  }

  /** When the stage first matched the pod in its current state: the first ask records `now`. */
  firstMatched(stage: string, now: number): number {
    const anchors = (this.memory().anchors ??= new Map());
    const at = anchors.get(stage);
    if (at !== undefined) return at;
    anchors.set(stage, now);
    return now;
  }

  /**
   * The stages already applied to the pod as it now stands without changing it: while it is the version they left,
   * or others' writes left its spec, status and deletion as they were (a label, a finalizer removed: the kubelet sent
   * its SIGTERM for that deletion already).
   */
  appliedWithoutChange(pod: KubeObject): ReadonlySet<string> {
    const applied = this.stages?.applied;
    if (applied === undefined) return NONE;
    const same =
      applied.pod.metadata.resourceVersion === pod.metadata.resourceVersion ||
      (applied.pod.metadata.deletionTimestamp === pod.metadata.deletionTimestamp &&
        deepEqual(applied.pod.status, pod.status) &&
        // A spec change (an ephemeral container added) is a new state for stages that select on the spec.
        (applied.pod.spec === pod.spec || deepEqual(applied.pod.spec, pod.spec)));
    return same ? applied.stages : NONE;
  }

  /**
   * A pass wrote the pod: it is in a new state, whose stages are first seen from now, and the cache is stale until
   * it holds `written`. `unchanged`: the pass's last stages, which changed nothing on the pod written.
   */
  wrote(written: KubeObject, unchanged: ReadonlySet<string>): void {
    this.stages = { ownWrite: Number(written.metadata.resourceVersion), anchors: undefined, applied: undefined };
    this.remember(written, unchanged);
  }

  /**
   * A pass changed nothing (Kill: a SIGTERM has no status of its own). The pod's state is the one it was, so its
   * delays keep running: another writer's label meanwhile must not start the stop delay over.
   */
  wroteNothing(pod: KubeObject, unchanged: ReadonlySet<string>): void {
    this.remember(pod, unchanged);
  }

  /**
   * A ConfigMap or Secret the pod reads changed: a stage that could not change the pod before (a FailedMount) may
   * now, so none counts as applied.
   */
  inputsChanged(): void {
    if (this.stages) this.stages.applied = undefined;
    this.forgetIfEmpty();
  }

  /** The IP handed out to the pod, if any. */
  get ip(): string | undefined {
    return this.heldIP;
  }

  /** The pod holds this IP (handed out now, or found in its status after a restart of the server). */
  holdIP(ip: string): void {
    this.heldIP = ip;
  }

  /** The pod gives its IP back (it has ended); returns the IP to free, if it held one. */
  releaseIP(): string | undefined {
    const ip = this.heldIP;
    this.heldIP = undefined;
    return ip;
  }

  /** A pull of the image failed at `at`: the back-off before the next one doubles. */
  pullFailed(image: string, at: number): void {
    const pulls = (this.pulls ??= new Map());
    pulls.set(image, { failures: (pulls.get(image)?.failures ?? 0) + 1, lastAt: at });
  }

  /** The image was pulled: its back-off is over. */
  pulled(image: string): void {
    this.pulls?.delete(image);
    if (this.pulls?.size === 0) this.pulls = undefined;
  }

  /**
   * When the image may be pulled again, if pulls of it failed: the kubelet's image back-off (10 s after the first
   * failure, doubling to 5 min) after the last failure; undefined when none failed.
   */
  pullRetryAt(image: string): number | undefined {
    const failed = this.pulls?.get(image);
    return failed === undefined ? undefined : failed.lastAt + crashLoopDelayMs(failed.failures);
  }

  /**
   * The container instance's command started in the exec shell; `stop` ends it (the instance it replaces is stopped).
   * An interactive one (`session`) waits for the attach whose streams it runs on.
   */
  commandStarted(container: string, instance: number, stop: () => void, session?: ContainerCommand): void {
    const commands = (this.commands ??= new Map());
    commands.get(container)?.stop();
    commands.set(container, { instance, state: { phase: 'running' }, stop, ...(session ? { session } : {}) });
  }

  /** The interactive command of the container instance, while it runs: what an attach runs on its streams. */
  session(container: string, instance: number): ContainerCommand | undefined {
    const run = this.run(container, instance);
    return run?.state.phase === 'running' ? run.session : undefined;
  }

  /** The command reached a program kube-sim does not have: it waits in it. False if that run is not the current one. */
  commandWaiting(container: string, instance: number, program: string): boolean {
    const run = this.run(container, instance);
    if (run?.state.phase !== 'running') return false;
    run.state = { phase: 'waiting', program };
    return true;
  }

  /** The command exited with `exitCode` at `at`. False if that run is not the current one (stopped, or replaced). */
  commandExited(container: string, instance: number, exitCode: number, at: number): boolean {
    const run = this.run(container, instance);
    if (run === undefined || run.state.phase === 'exited') return false;
    run.state = { phase: 'exited', exitCode, at };
    return true;
  }

  /** What became of the container instance's command, if the exec shell runs it. */
  command(container: string, instance: number): CommandState | undefined {
    return this.run(container, instance)?.state;
  }

  /** Stops and forgets the commands whose container instance has ended (`runs` false), or all of them. */
  endCommands(runs: (container: string, instance: number) => boolean = () => false): void {
    if (!this.commands) return;
    for (const [container, run] of this.commands) {
      if (runs(container, run.instance)) continue;
      run.stop();
      this.commands.delete(container);
    }
    if (this.commands.size === 0) this.commands = undefined;
  }

  /** Nothing remembered: the record can go (it starts afresh if the pod changes again). */
  get empty(): boolean {
    return (
      this.heldIP === undefined && this.stages === undefined && this.pulls === undefined && this.commands === undefined
    );
  }

  private run(container: string, instance: number): CommandRun | undefined {
    const run = this.commands?.get(container);
    return run?.instance === instance ? run : undefined;
  }

  private memory(): StageMemory {
    return (this.stages ??= { ownWrite: undefined, anchors: undefined, applied: undefined });
  }

  private remember(pod: KubeObject, unchanged: ReadonlySet<string>): void {
    if (unchanged.size > 0) this.memory().applied = { pod, stages: unchanged };
    else if (this.stages) this.stages.applied = undefined;
    this.forgetIfEmpty();
  }

  private forgetIfEmpty(): void {
    const memory = this.stages;
    if (memory && memory.ownWrite === undefined && memory.anchors === undefined && memory.applied === undefined)
      this.stages = undefined;
  }
}

interface StageMemory {
  /** The resourceVersion of the kubelet's last write, until the cache holds a version as new. */
  ownWrite: number | undefined;
  /** Per stage timed from its first match: when it first matched the pod in its current state. */
  anchors: Map<string, number> | undefined;
  /** Stages applied without changing the pod, and the pod as they left it. */
  applied: { pod: KubeObject; stages: ReadonlySet<string> } | undefined;
}

/** A container instance's command in the exec shell. */
interface CommandRun {
  instance: number;
  state: CommandState;
  stop: () => void;
  /** An interactive command (stdin), run by the attach that reaches it. */
  session?: ContainerCommand;
}

const NONE: ReadonlySet<string> = new Set();
