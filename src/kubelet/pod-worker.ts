import { ApiError, ignoreNotFound } from '../api/errors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { cacheKey, type Informer } from '../client/informer.js';
import { podNodeName as podNode } from '../api/pod-util.js';
import { ReconcileLoop, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';
import { SIMULATED_REASON, type ActionContext, type ActionLog, type ContainerCommand } from './actions.js';
import { loadShell, startCommand } from './exec-shell.js';
import type { ContainerDisks } from './filesystem.js';
import type { LogStore } from './logs.js';
import type { NodeAgent } from './node-agent.js';
import { resolveEnv, type EnvSources } from './pod-env.js';
import { keepPodIP, podIPFor, releasePodIP } from './pod-ips.js';
import { PodRecord } from './pod-record.js';
import { annotationChanges, containerSpecs, planPass, type PassEnv, type StageStep } from './stage-pass.js';
import { parseImageList, type Images } from './images.js';
import {
  commandExitAt,
  DURATION_SETTING,
  programOf,
  spinsMessage,
  stopDelayMs,
  waitsInProgramMessage,
} from './programs.js';
import type { Stage } from './stages.js';
import { containerFs, volumeError } from './volumes.js';

/**
 * The pod side of every simulated kubelet (kwok's pod controller): each bound pod of a node with a kubelet goes
 * through the lifecycle stages, one reconcile per pod key with its delays on the clock, its status written through
 * the status subresource. What it remembers of a pod between reconciles is the pod's PodRecord, nothing else.
 */
type Obj = Record<string, unknown>;

/** ConfigMaps and Secrets a pod reads (env, envFrom, volumes): what must wake it when they change. */
function referencesOf(pod: KubeObject, kind: 'configMap' | 'secret'): string[] {
  const ns = pod.metadata.namespace ?? '';
  const names = new Set<string>();
  for (const c of containerSpecs(pod)) {
    for (const e of Array.isArray(c.env) ? (c.env as unknown[]) : []) {
      const from = isPlainObject(e) && isPlainObject(e.valueFrom) ? e.valueFrom : undefined;
      const ref = from?.[kind === 'configMap' ? 'configMapKeyRef' : 'secretKeyRef'];
      if (isPlainObject(ref) && typeof ref.name === 'string') names.add(ref.name);
    }
    for (const e of Array.isArray(c.envFrom) ? (c.envFrom as unknown[]) : []) {
      const ref = isPlainObject(e) ? e[kind === 'configMap' ? 'configMapRef' : 'secretRef'] : undefined;
      if (isPlainObject(ref) && typeof ref.name === 'string') names.add(ref.name);
    }
  }
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  for (const v of Array.isArray(spec.volumes) ? (spec.volumes as unknown[]) : []) {
    if (!isPlainObject(v)) continue;
    const direct = v[kind];
    if (isPlainObject(direct)) names.add(String(kind === 'secret' ? direct.secretName : direct.name));
    const projected =
      isPlainObject(v.projected) && Array.isArray(v.projected.sources) ? (v.projected.sources as unknown[]) : [];
    for (const s of projected) if (isPlainObject(s) && isPlainObject(s[kind])) names.add(String((s[kind] as Obj).name));
  }
  return [...names].map((n) => `${ns}/${n}`);
}

/**
 * The references of a pod spec, kept per spec object: the informer indexes a pod before and after every update,
 * and nearly every pod update is a status write whose stored object shares the spec of the one before.
 */
const referencesBySpec = new WeakMap<object, { ns: string; configMap: string[]; secret: string[] }>();

function references(pod: KubeObject, kind: 'configMap' | 'secret'): string[] {
  const spec = pod.spec;
  if (!isPlainObject(spec)) return referencesOf(pod, kind);
  const ns = pod.metadata.namespace ?? '';
  let refs = referencesBySpec.get(spec);
  if (!refs || refs.ns !== ns)
    referencesBySpec.set(
      spec,
      (refs = { ns, configMap: referencesOf(pod, 'configMap'), secret: referencesOf(pod, 'secret') }),
    );
  return refs[kind];
}

/** The restart count of the container's instance that is running in the pod (an app or ephemeral container), if one is. */
function runningInstance(pod: KubeObject, container: string): number | undefined {
  const status = isPlainObject(pod.status) ? pod.status : {};
  for (const list of [status.initContainerStatuses, status.containerStatuses, status.ephemeralContainerStatuses]) {
    for (const cs of Array.isArray(list) ? (list as unknown[]) : []) {
      if (!isPlainObject(cs) || cs.name !== container) continue;
      if (!isPlainObject(cs.state) || !isPlainObject(cs.state.running)) return undefined;
      return typeof cs.restartCount === 'number' ? cs.restartCount : 0;
    }
  }
  return undefined;
}

/** The list a container's spec sits in, for an event's field path. */
function listOf(pod: KubeObject, container: string): string {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const ephemeral = Array.isArray(spec.ephemeralContainers) ? (spec.ephemeralContainers as unknown[]) : [];
  return ephemeral.some((c) => isPlainObject(c) && c.name === container) ? 'ephemeralContainers' : 'containers';
}

/** An interactive container instance's command, waiting for the attach that runs it, and what reports its exit. */
export interface AttachSession {
  command: ContainerCommand;
  exited(code: number): void;
}

export interface PodWorkerOptions {
  stages: readonly Stage[];
  /** Server-wide values of the kube-sim.dev/* settings (startup-delay, ready-delay, duration, exit-code). */
  settings: Readonly<Record<string, string>>;
  /** What images do (fixtures/images.yaml). */
  images: Images;
  /** References missing from every registry besides the catalog's (`sim serve --missing-images`). */
  missingImages: readonly string[];
}

/** Where a pod or a node names images no registry has, besides the catalog and the flag. */
export const MISSING_IMAGES_ANNOTATION = 'kube-sim.dev/missing-images';

/** What the pod worker reads besides the pods: the node agents, the nodes, a pod's environment; the runtime's logs and disks. */
export interface PodWorkerSources {
  agent(node: string): NodeAgent | undefined;
  nodes: Informer;
  configmaps: Informer;
  secrets: Informer;
  env(node: string): EnvSources;
  logs: LogStore;
  disks: ContainerDisks;
}

export class PodWorker {
  readonly loop: ReconcileLoop;
  private readonly pods: Informer;
  /** Per pod key: what the kubelet remembers of the pod (made on first need, dropped when it holds nothing). */
  private readonly records = new Map<string, PodRecord>();

  constructor(
    private readonly ctx: ControllerContext,
    private readonly options: PodWorkerOptions,
    private readonly sources: PodWorkerSources,
  ) {
    this.pods = ctx.informers.for(Resources.pods);
    this.loop = new ReconcileLoop('kubelet', ctx, (key) => this.reconcile(key), 4);
    this.pods.addIndex('kubelet-node', (p) => (podNode(p) ? [podNode(p)] : []));
    this.pods.addIndex('kubelet-configmaps', (p) => references(p, 'configMap'));
    this.pods.addIndex('kubelet-secrets', (p) => references(p, 'secret'));
    this.pods.addEventHandler({
      add: (pod) => this.podChanged(pod),
      update: (_old, pod) => this.podChanged(pod),
      delete: (pod) => this.podGone(pod),
    });
    const wake = (index: string) => (obj: KubeObject) => {
      for (const pod of this.pods.byIndex(index, cacheKey(obj))) {
        const key = cacheKey(pod);
        this.records.get(key)?.inputsChanged();
        this.loop.queue.add(key);
      }
    };
    for (const [informer, index] of [
      [sources.configmaps, 'kubelet-configmaps'],
      [sources.secrets, 'kubelet-secrets'],
    ] as const) {
      informer.addEventHandler({ add: wake(index), update: (_o, n) => wake(index)(n), delete: wake(index) });
    }
  }

  get informer(): Informer {
    return this.pods;
  }

  /** A node's kubelet took charge: the pods already running there with an IP keep it. */
  nodeAdopted(agent: NodeAgent): void {
    for (const pod of this.pods.byIndex('kubelet-node', agent.name)) {
      const key = cacheKey(pod);
      const record = this.record(key);
      keepPodIP(pod, record, agent.ips);
      this.settle(key, record);
    }
  }

  /**
   * A node's kubelet stopped here for good (another process runs it now): what it remembered of the node's pods
   * (their commands, logs, files) goes; the next kubelet starts from the pods as they are.
   */
  nodeReleased(node: string): void {
    for (const pod of this.pods.byIndex('kubelet-node', node)) {
      const key = cacheKey(pod);
      this.records.get(key)?.endCommands();
      this.records.delete(key);
      this.sources.logs.remove(pod.metadata.uid ?? '');
      this.sources.disks.remove(pod.metadata.uid ?? '');
    }
  }

  /** A node's kubelet registered or recovered: its pods are looked at again. */
  nodeReady(node: string): void {
    for (const pod of this.pods.byIndex('kubelet-node', node)) this.loop.queue.add(cacheKey(pod));
  }

  private record(key: string): PodRecord {
    let record = this.records.get(key);
    if (!record) this.records.set(key, (record = new PodRecord()));
    return record;
  }

  /**
   * Drops a record that holds nothing (most pods in steady state hold only their IP), unless the key has another by
   * now: the pod went while its pass ran, and a pod of the same name came (a StatefulSet's).
   */
  private settle(key: string, record: PodRecord): void {
    if (record.empty && this.records.get(key) === record) this.records.delete(key);
  }

  /**
   * The interactive command of a running container instance (`kubectl debug -i`), for the attach that runs it on its
   * streams, and what reports its exit: the pod comes back for the stage that ends the container.
   */
  session(pod: KubeObject, container: string, instance: number): AttachSession | undefined {
    const key = cacheKey(pod);
    const record = this.records.get(key);
    const command = record?.session(container, instance);
    if (!record || !command) return undefined;
    return {
      command,
      exited: (code) => {
        if (record.commandExited(container, instance, code, this.ctx.clock.now())) this.loop.queue.add(key);
      },
    };
  }

  private podChanged(pod: KubeObject): void {
    const node = podNode(pod);
    if (node === '') return;
    const key = cacheKey(pod);
    // A pod already running (after a restart with --data) keeps its IP: nobody else may get it.
    const ip = isPlainObject(pod.status) ? pod.status.podIP : undefined;
    if (typeof ip === 'string' && ip !== '' && this.records.get(key)?.ip === undefined) {
      const agent = this.sources.agent(node);
      if (agent) {
        const record = this.record(key);
        keepPodIP(pod, record, agent.ips);
        this.settle(key, record);
      }
    }
    this.loop.queue.add(key);
  }

  private podGone(pod: KubeObject): void {
    const key = cacheKey(pod);
    const record = this.records.get(key);
    if (record) {
      releasePodIP(record, this.sources.agent(podNode(pod))?.ips);
      record.endCommands();
    }
    this.records.delete(key);
    this.sources.logs.remove(pod.metadata.uid ?? '');
    this.sources.disks.remove(pod.metadata.uid ?? '');
  }

  private setting(pod: KubeObject, key: string): string | undefined {
    return (
      pod.metadata.annotations?.[key] ??
      this.sources.nodes.get(undefined, podNode(pod))?.metadata.annotations?.[key] ??
      this.options.settings[key]
    );
  }

  /** Whether no registry has the image: the catalog's list, the flag's, the node's annotation and the pod's. */
  private imageMissing(pod: KubeObject, image: string): boolean {
    const extra = [...this.options.missingImages];
    const node = this.sources.nodes.get(undefined, podNode(pod))?.metadata.annotations?.[MISSING_IMAGES_ANNOTATION];
    if (node) extra.push(...parseImageList(node));
    const own = pod.metadata.annotations?.[MISSING_IMAGES_ANNOTATION];
    if (own) extra.push(...parseImageList(own));
    return this.options.images.missing(image, extra);
  }

  private async reconcile(key: string): Promise<ReconcileResult | void> {
    const slash = key.indexOf('/');
    const pod = this.pods.get(key.slice(0, slash), key.slice(slash + 1));
    if (!pod) return;
    const agent = this.sources.agent(podNode(pod));
    if (!agent?.up) return;
    const record = this.record(key);
    try {
      return await this.pass(pod, agent, record);
    } finally {
      this.settle(key, record);
    }
  }

  private async pass(pod: KubeObject, agent: NodeAgent, record: PodRecord): Promise<ReconcileResult | void> {
    // Our own write has not reached the cache yet: its event will bring us back.
    if (!record.caughtUp(pod)) return;
    const now = this.ctx.clock.now();
    const plan = planPass(this.options.stages, pod, record, this.passEnv(agent, record, now));
    if (plan.kind === 'idle') return;
    if (plan.kind === 'wait') return { requeueAfterMs: plan.waitMs };
    const { steps, unchanged } = plan;

    let current: KubeObject;
    try {
      current = await this.publish(pod, plan.pod, steps);
    } catch (err) {
      if (err instanceof ApiError && err.code === 404) return; // deleted meanwhile: its DELETED event cleans up
      throw err;
    }
    const wrote = current !== pod;
    if (wrote) record.wrote(current, unchanged);
    else record.wroteNothing(pod, unchanged);

    // Every stage's events and log lines, in the order the stages ran; the pulls they made.
    const uid = pod.metadata.uid ?? '';
    for (const step of steps) {
      for (const e of step.events) agent.recorder.event(current, e.type, e.reason, e.message, e.fieldPath);
      this.writeLogs(uid, step.logs, now);
      for (const pull of step.pulls) {
        if (pull.failed) record.pullFailed(pull.image, now);
        else record.pulled(pull.image);
      }
    }
    // The commands of container instances that ended are stopped; those of the instances just started begin.
    record.endCommands((container, instance) => runningInstance(current, container) === instance);
    const commands = steps
      .flatMap((s) => s.commands)
      .filter((command) => runningInstance(current, command.container) === command.instance);
    // One that reads stdin waits for the attach that runs it: it is there before anything else can run (kubectl run
    // -i attaches as soon as it sees the pod Running, maybe before the shell below has loaded).
    for (const command of commands) if (command.interactive) this.awaitAttach(command, record);
    if (commands.some((command) => !command.interactive)) {
      const shell = await loadShell();
      for (const command of commands)
        if (!command.interactive) this.launch(shell, cacheKey(pod), current, command, agent, record, now);
    }
    const phase = isPlainObject(current.status) ? current.status.phase : undefined;
    if (phase === 'Succeeded' || phase === 'Failed') releasePodIP(record, agent.ips);
    if (steps[steps.length - 1]!.stage.next.delete) {
      await ignoreNotFound(
        this.ctx.client.delete(Resources.pods, pod.metadata.namespace, pod.metadata.name!, {
          gracePeriodSeconds: 0,
          preconditions: { uid: pod.metadata.uid! },
        }),
      );
      return;
    }
    // A pass that wrote nothing (Kill) brings no event back: look for the next stage now.
    if (!wrote) return { requeueAfterMs: 0 };
  }

  private passEnv(agent: NodeAgent, record: PodRecord, now: number): PassEnv {
    return {
      now,
      setting: (pod, key) => this.setting(pod, key),
      nodeName: agent.name,
      hostIP: agent.ip,
      actions: (pod) => this.actionContext(pod, agent, record, now),
      stopDelayMs: (pod, since) =>
        stopDelayMs(
          pod,
          this.options.images,
          since,
          this.setting(pod, DURATION_SETTING) !== undefined,
          (container, instance) => record.command(container, instance),
        ),
      commandExitAt: (pod) => commandExitAt(pod, (container, instance) => record.command(container, instance)),
    };
  }

  /** A command that reads stdin: it runs when an attach brings its streams (session), and waits for input until then. */
  private awaitAttach(command: ContainerCommand, record: PodRecord): void {
    record.commandStarted(command.container, command.instance, () => {}, command);
  }

  /**
   * Starts a container instance's command in the exec shell, in the container's environment and files: its output is
   * the instance's log, its exit (kept in the pod's record) brings the pod back for the stage that ends the container.
   */
  private launch(
    shell: Awaited<ReturnType<typeof loadShell>>,
    key: string,
    pod: KubeObject,
    command: ContainerCommand,
    agent: NodeAgent,
    record: PodRecord,
    now: number,
  ): void {
    const { container, instance } = command;
    const uid = pod.metadata.uid ?? '';
    const spec = containerSpecs(pod).find((c) => c.name === container) ?? { name: container };
    const path = `spec.${listOf(pod, container)}{${container}}`;
    const clock = this.ctx.clock;
    const fs = containerFs(pod, spec, this.sources.env(agent.name), () => clock.now(), {
      disks: this.sources.disks,
      instance,
    });
    let stop = (): void => {};
    record.commandStarted(container, instance, () => stop());
    stop = startCommand(
      shell,
      command.argv,
      { env: command.env, fs, clock, startedAt: now },
      {
        line: (text) => this.sources.logs.write(uid, container, clock.now(), text),
        waiting: (program) => {
          if (!record.commandWaiting(container, instance, program)) return;
          // Said once, and not of an image's own server (nginx with its command written out).
          if (instance === 0 && !this.options.images.lookup(String(spec.image))?.serves)
            agent.recorder.event(pod, 'Normal', SIMULATED_REASON, waitsInProgramMessage(spec, program), path);
          // A program of its own exits on SIGTERM after the image's stop delay: a stop already waiting is due sooner.
          this.loop.queue.add(key);
        },
        spinning: () => {
          if (record.command(container, instance)?.phase === 'running')
            agent.recorder.event(pod, 'Normal', SIMULATED_REASON, spinsMessage(spec), path);
        },
        exited: (code) => {
          if (record.commandExited(container, instance, code, clock.now())) this.loop.queue.add(key);
        },
      },
    );
  }

  private actionContext(pod: KubeObject, agent: NodeAgent, record: PodRecord, now: number): ActionContext {
    const sources = this.sources.env(agent.name);
    return {
      now,
      hostIP: agent.ip,
      podIP: (p) => podIPFor(p, record, agent.ips),
      setting: (k) => this.setting(pod, k),
      resolveEnv: (p, c) => resolveEnv(p, c, sources),
      volumeError: (p) => volumeError(p, sources),
      imageMissing: (image) => this.imageMissing(pod, image),
      pullRetryAt: (image) => record.pullRetryAt(image),
      program: (c) => programOf(c, this.options.images),
      command: (container, instance) => record.command(container, instance),
      containerID: () => {
        // One flat string (join), not a rope of nine pieces: every container status keeps it.
        const parts = ['containerd://'];
        for (let i = 0; i < 8; i++) parts.push(this.ctx.random.nextUint32().toString(16).padStart(8, '0'));
        return parts.join('');
      },
    };
  }

  /**
   * Writes what a pass made of the pod: its status, with the annotations riding on the status write
   * (pods/status keeps them, as podStatusStrategy), or the annotations alone as a merge patch. The pod as
   * it was when nothing changed.
   */
  private async publish(pod: KubeObject, state: KubeObject, steps: readonly StageStep[]): Promise<KubeObject> {
    if (state === pod) return pod;
    if (!deepEqual(state.status, pod.status))
      return this.ctx.client.updateStatus(Resources.pods, { ...pod, metadata: state.metadata, status: state.status });
    const changed = annotationChanges(pod, steps);
    if (Object.keys(changed).length === 0) return pod;
    return this.ctx.client.patch(Resources.pods, pod.metadata.namespace, pod.metadata.name!, 'merge', {
      metadata: { annotations: changed, resourceVersion: pod.metadata.resourceVersion },
    });
  }

  private writeLogs(uid: string, logs: ActionLog[], at: number): void {
    const store = this.sources.logs;
    for (const log of logs) {
      if (log.start !== undefined) store.start(uid, log.container, log.start);
      for (const line of log.lines) store.write(uid, log.container, at, line);
      if (log.end) store.end(uid, log.container);
    }
  }
}
