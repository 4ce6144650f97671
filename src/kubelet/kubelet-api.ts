import type { Duplex } from 'node:stream';
import { ApiError, Errors } from '../api/errors.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import type { Clock } from '../clock/clock.js';
import { podNodeName as podNode } from '../api/pod-util.js';
import { envAnnotation } from './actions.js';
import type { AttachTarget, ExecTarget, LogSource, PortForwardTarget } from '../api/kubelet-connector.js';
import { LineSplitter, runInContainer } from './exec-shell.js';
import { duplexPair, type HttpApps } from './http-app.js';
import type { ContainerDisks } from './filesystem.js';
import type { LogStore } from './logs.js';
import type { NodeAgent } from './node-agent.js';
import type { AttachSession } from './pod-worker.js';
import { resolveEnv, type EnvSources } from './pod-env.js';
import { containerSpecs } from './stage-pass.js';
import { attachToLog, portForwardInto } from './streaming.js';
import { containerFs } from './volumes.js';

/**
 * The kubelet's own API (port 10250), as kube-apiserver reaches it for pods/log, exec, attach and portforward: a
 * container's log instances from the log store, a process in the container's environment and files, the main
 * process's output, the pod's network namespace. A node that is failed or gone
 * refuses the connection, as a real kubelet's would.
 */
type Obj = Record<string, unknown>;

function kubeletError(message: string): ApiError {
  return new ApiError(400, 'BadRequest', message);
}

function containerStatus(pod: KubeObject, name: string): Obj | undefined {
  const status = isPlainObject(pod.status) ? pod.status : {};
  for (const list of ['containerStatuses', 'initContainerStatuses', 'ephemeralContainerStatuses']) {
    const found = (Array.isArray(status[list]) ? (status[list] as Obj[]) : []).find((cs) => cs.name === name);
    if (found) return found;
  }
  return undefined;
}

/** An app or ephemeral container's spec (init containers never read an attach's stdin). */
function attachableContainer(pod: KubeObject, name: string): Obj | undefined {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  for (const list of [spec.containers, spec.ephemeralContainers]) {
    const found = Array.isArray(list)
      ? (list as unknown[]).filter(isPlainObject).find((c) => c.name === name)
      : undefined;
    if (found) return found;
  }
  return undefined;
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.map(String) : [];
}

/** What the kubelet's API reads: the node agents, the log store, the containers' disks, a pod's environment, the clock. */
export interface KubeletApiSources {
  agent(node: string): NodeAgent | undefined;
  logs: LogStore;
  disks: ContainerDisks;
  env(node: string): EnvSources;
  clock: Clock;
  /** The simulated apps behind the pods' ports. */
  apps: HttpApps;
  /** The interactive command of a running container instance, waiting for an attach to run it (pod-worker.ts). */
  session(pod: KubeObject, container: string, instance: number): AttachSession | undefined;
}

export class KubeletApi {
  constructor(private readonly sources: KubeletApiSources) {}

  private reachable(pod: KubeObject, path: string): NodeAgent {
    const agent = this.sources.agent(podNode(pod));
    if (!agent?.up) {
      throw Errors.kubeletUnreachable(agent?.ip ?? podNode(pod), path);
    }
    return agent;
  }

  /** kubelet's validateContainerLogStatus: which instance's logs, or why there are none. */
  logs(pod: KubeObject, container: string, previous: boolean): LogSource {
    this.reachable(pod, `containerLogs/${pod.metadata.namespace}/${pod.metadata.name}/${container}`);
    const name = pod.metadata.name ?? '';
    const cs = containerStatus(pod, container);
    const state = isPlainObject(cs?.state) ? cs.state : {};
    const last = isPlainObject(cs?.lastState) ? cs.lastState : {};
    const restarts = typeof cs?.restartCount === 'number' ? cs.restartCount : 0;
    const uid = pod.metadata.uid ?? '';
    const waiting = isPlainObject(state.waiting) ? state.waiting : undefined;
    const store = this.sources.logs;
    if (previous) {
      if (!isPlainObject(last.terminated))
        throw kubeletError(`previous terminated container "${container}" in pod "${name}" not found`);
      return store.source(uid, container, waiting ? restarts : restarts - 1);
    }
    if (isPlainObject(state.running) || isPlainObject(state.terminated) || isPlainObject(last.terminated))
      return store.source(uid, container, restarts);
    const reason = waiting && typeof waiting.reason === 'string' ? waiting.reason : 'ContainerCreating';
    if (reason === 'ErrImagePull')
      throw kubeletError(`container "${container}" in pod "${name}" is waiting to start: image can't be pulled`);
    if (reason === 'ImagePullBackOff')
      throw kubeletError(
        `container "${container}" in pod "${name}" is waiting to start: trying and failing to pull image`,
      );
    throw kubeletError(`container "${container}" in pod "${name}" is waiting to start: ${reason}`);
  }

  /** The status of a container that is running now; anything else is kubelet's `container not found`. */
  private running(pod: KubeObject, container: string): Obj {
    const cs = containerStatus(pod, container);
    if (!cs || !isPlainObject(cs.state) || !isPlainObject(cs.state.running)) {
      throw new ApiError(500, 'InternalError', `container not found ("${container}")`);
    }
    return cs;
  }

  /**
   * The running container's main process: what it writes from now on. For a container that reads stdin (`kubectl
   * run -i`, `kubectl debug -i`), its command runs in the container's shell on the client's streams, what it writes
   * is the container's log as well, and when it exits the container has exited with its code (not when the client
   * goes away, unless the container reads stdin once: its stdin stays open).
   */
  attach(pod: KubeObject, container: string): AttachTarget {
    this.reachable(pod, `attach/${pod.metadata.namespace}/${pod.metadata.name}/${container}`);
    const cs = this.running(pod, container);
    const restarts = typeof cs.restartCount === 'number' ? cs.restartCount : 0;
    const interactive = attachableContainer(pod, container);
    if (interactive?.stdin === true) {
      const session = this.sources.session(pod, container, restarts);
      // Without a session (the server restarted since the container started), its spec's command, busybox's `sh`.
      const spec = [...strings(interactive.command), ...strings(interactive.args)];
      const argv = session?.command.argv ?? (spec.length > 0 ? spec : ['sh']);
      const shell = this.exec(pod, container);
      const uid = pod.metadata.uid ?? '';
      const { logs, clock } = this.sources;
      return {
        run: async (io) => {
          let detached = false;
          void io.closed.then(() => {
            detached = true;
          });
          // A terminal's CR LF ends a log line as LF does.
          const log = new LineSplitter((line) => logs.write(uid, container, clock.now(), line.replace(/\r$/, '')));
          const code = await shell.run([...argv], {
            ...io,
            stdout: (d) => {
              log.write(d);
              return io.stdout(d);
            },
            stderr: (d) => {
              log.write(d);
              return io.stderr(d);
            },
          });
          log.flush();
          // A client that goes away leaves stdin open, unless the container reads it once (stdinOnce, as
          // `kubectl run -i` makes it): then its end is the end of the input, and the shell's exit the container's.
          if (!detached || interactive.stdinOnce === true) session?.exited(code);
        },
      };
    }
    return attachToLog(this.sources.logs.source(pod.metadata.uid ?? '', container, restarts));
  }

  /** The pod's network namespace. */
  portForward(pod: KubeObject): PortForwardTarget {
    this.reachable(pod, `portForward/${pod.metadata.namespace}/${pod.metadata.name}`);
    return portForwardInto(pod, this.sources.apps);
  }

  /** A connection to the pod's IP and port from the cluster network (the API server's proxy). */
  dial(pod: KubeObject, port: number): Promise<Duplex> {
    const status = isPlainObject(pod.status) ? pod.status : {};
    const address = `${typeof status.podIP === 'string' ? status.podIP : ''}:${port}`;
    // A pod on a node that is down: nothing routes to its network.
    if (!this.sources.agent(podNode(pod))?.up)
      return Promise.reject(new Error(`dial tcp ${address}: connect: no route to host`));
    const [client, server] = duplexPair();
    if (this.sources.apps.serve(pod, port, server) === undefined)
      return Promise.reject(new Error(`dial tcp ${address}: connect: connection refused`));
    return Promise.resolve(client);
  }

  /** A process in a running container: the environment it started with, its mounted files. */
  exec(pod: KubeObject, container: string): ExecTarget {
    this.reachable(pod, `exec/${pod.metadata.namespace}/${pod.metadata.name}/${container}`);
    const cs = this.running(pod, container);
    const spec = containerSpecs(pod).find((c) => c.name === container) ?? { name: container };
    const sources = this.sources.env(podNode(pod));
    let env: Map<string, string>;
    try {
      env = new Map(
        Object.entries(
          JSON.parse(pod.metadata.annotations?.[envAnnotation(container)] ?? 'null') as Record<string, string>,
        ),
      );
    } catch {
      env = new Map();
    }
    if (env.size === 0) {
      const resolved = resolveEnv(pod, spec, sources);
      if ('env' in resolved) env = new Map(resolved.env);
    }
    const clock = this.sources.clock;
    const instance = typeof cs.restartCount === 'number' ? cs.restartCount : 0;
    const storage = { disks: this.sources.disks, instance };
    const running = (cs.state as { running: Obj }).running;
    const started = Date.parse(String(running.startedAt));
    return {
      run: (command, io) =>
        runInContainer(command, {
          env,
          fs: containerFs(pod, spec, sources, () => clock.now(), storage),
          clock,
          io,
          ...(Number.isNaN(started) ? {} : { startedAt: started }),
        }),
    };
  }
}
