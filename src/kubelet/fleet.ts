import { rfc3339, rfc3339Micro, type TimerHandle } from '../clock/clock.js';
import { ApiError, ignoreNotFound } from '../api/errors.js';
import { applyMergePatch } from '../api/patch.js';
import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { cacheKey, type Informer } from '../client/informer.js';
import { isTerminal, podNodeName as podNode } from '../api/pod-util.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';
import { EventRecorder } from '../runtime/events.js';
import {
  envAnnotation,
  runAction,
  type ActionContext,
  type ActionEvent,
  type ActionLog,
  type ActionName,
  type ActionResult,
} from './actions.js';
import type { ExecTarget, KubeletConnector, LogSource } from '../api/kubelet-connector.js';
import { runInContainer } from './exec-shell.js';
import { ContainerDisks } from './filesystem.js';
import { LogStore } from './logs.js';
import { nodeIP, nodeLabels, nodeManifest, nodeStatus, PodCidrs, PodIps, type NodeProfile } from './node.js';
import { resolveEnv, type EnvSources } from './pod-env.js';
import { nextStage, stageDelayMs, type Stage, type StageDecision } from './stages.js';
import { containerFs, volumeError } from './volumes.js';

type Obj = Record<string, unknown>;

/** How often a kubelet renews its Lease (kubelet: 0.25 × leaseDurationSeconds 40). */
export const LEASE_RENEW_MS = 10_000;

/**
 * When a kubelet's next heartbeat is due. The first one after registration comes a fraction of the period
 * later, the fraction fixed by the node's name: nodes registered together (sim serve --nodes 5000) then renew
 * spread over the period instead of 5,000 Lease updates in one burst every 10 s. After that, every period
 * from the last due time (not from when the beat ran), so a busy server delays single beats but never the
 * cadence; a beat more than a period late skips to the next due time.
 */
export function nextBeatDue(name: string, previous: number | undefined, now: number): number {
  if (previous === undefined) return now + Math.max(1, Math.ceil(LEASE_RENEW_MS * (1 - spreadOf(name))));
  let due = previous + LEASE_RENEW_MS;
  while (due <= now) due += LEASE_RENEW_MS;
  return due;
}

/** A fraction in [0, 1) from a name (FNV-1a): stable across restarts, no draw from the seeded RNG. */
function spreadOf(name: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 0x01000193);
  return (hash >>> 0) / 2 ** 32;
}
export const LEASE_DURATION_SECONDS = 40;
/** How often a kubelet posts an unchanged node status (nodeStatusReportFrequency). */
export const STATUS_REPORT_MS = 5 * 60_000;
const NODE_LEASE_NAMESPACE = 'kube-node-lease';

/** The Lease a kubelet creates for its Node (owned by it, so that it goes with the Node). */
function leaseManifest(name: string, node: KubeObject, renewTime: string): KubeObject {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      namespace: NODE_LEASE_NAMESPACE,
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: node.metadata.uid! }],
    },
    spec: { holderIdentity: name, leaseDurationSeconds: LEASE_DURATION_SECONDS, renewTime },
  };
}

/** The last Lease seen, renewed now (kubelet's lease controller: a copy of its latest Lease with a new renewTime). */
function renewed(lease: KubeObject, holder: string, renewTime: string): KubeObject {
  return {
    ...lease,
    spec: { ...(lease.spec as Obj), holderIdentity: holder, leaseDurationSeconds: LEASE_DURATION_SECONDS, renewTime },
  };
}

export interface KubeletOptions {
  /** node-1 … node-N are registered at start (existing Nodes are adopted as they are). */
  nodes: number;
  profile: NodeProfile;
  stages: readonly Stage[];
  /** Server-wide values of the kube-sim.dev/* settings (startup-delay, ready-delay, duration, exit-code). */
  settings: Readonly<Record<string, string>>;
  /** Pod CIDRs per node are /24s of this range. */
  clusterCidr: string;
}

/** One simulated node's kubelet. */
interface NodeAgent {
  name: string;
  ip: string;
  ips: PodIps;
  recorder: EventRecorder;
  failed: boolean;
  stopped: boolean;
  timer?: TimerHandle;
  /** The timer's callback, made once: a heartbeat is armed 26,000 times a virtual day (3 nodes). */
  beat: () => void;
  /** Cluster time the next heartbeat is due: beats keep a fixed rate, so one that ran late does not delay the rest. */
  nextBeat?: number;
  lease?: KubeObject;
  lastReport: number;
  /** The Node object (and address) whose computed status was found unchanged: no need to compute it again. */
  statusCheckedFor?: { node: KubeObject; ip: string };
  schedulable?: boolean;
  /** Settles once the node is registered (labels, pod CIDR) and, when the fleet runs, has posted its status. */
  registered: Promise<void>;
}

/** Actions a pass stops before, so the status ahead of them is written first: a start, a restart, a back-off that refuses one (see KubeletFleet.followsAtOnce). */
const PASS_STOPS_BEFORE: ReadonlySet<ActionName> = new Set<ActionName>(['Start', 'Restart', 'BackOff']);
/** A bound on the stages one pass applies (each stage runs once a pass at most). */
const MAX_STAGES_A_PASS = 8;

/** One stage worked out on a pod before anything is written. */
interface StageStep {
  stage: Stage;
  /** The pod after the stage: the same object when the stage changed nothing. */
  pod: KubeObject;
  events: ActionEvent[];
  logs: ActionLog[];
  /** The annotations the stage changed on the pod it was given (null: removed). */
  annotations: Record<string, string | null>;
}

function containerSpecs(pod: KubeObject): Obj[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return ['initContainers', 'containers', 'ephemeralContainers'].flatMap((l) =>
    Array.isArray(spec[l]) ? (spec[l] as unknown[]).filter(isPlainObject) : [],
  ) as Obj[];
}

function containerStatus(pod: KubeObject, name: string): Obj | undefined {
  const status = isPlainObject(pod.status) ? pod.status : {};
  for (const list of ['containerStatuses', 'initContainerStatuses', 'ephemeralContainerStatuses']) {
    const found = (Array.isArray(status[list]) ? (status[list] as Obj[]) : []).find((cs) => cs.name === name);
    if (found) return found;
  }
  return undefined;
}

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
 * and nearly every pod update is a status write whose stored object shares the spec of the one before (a pod
 * went through this walk ~14 times, for ~7 status writes).
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

/** Replaces ${now}, ${podIP}, ${hostIP}, ${nodeName}, ${name} and ${namespace} in every string of a value. */
function substitute(value: unknown, vars: Record<string, string>): unknown {
  if (typeof value === 'string') return value.replace(/\$\{(\w+)\}/g, (m, k: string) => vars[k] ?? m);
  if (Array.isArray(value)) return value.map((v) => substitute(v, vars));
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, vars)]));
  return value;
}

function kubeletError(message: string): ApiError {
  return new ApiError(400, 'BadRequest', message);
}

/**
 * Every simulated node's kubelet, in one component (as kwok simulates a cluster's nodes from one process):
 * - registers node-1 … node-N and adopts any other Node (a manifest applied later gets a kubelet just the same),
 *   renews each node's Lease every 10 s and keeps its status Ready; a deleted Node's kubelet stops;
 * - runs each bound pod through the lifecycle stages (one reconcile per pod key, timers on the clock),
 *   writing status through the status subresource;
 * - answers pods/log and pods/exec for its pods, and takes node faults (/sim/v1/nodes/NAME/fail|recover).
 * It talks to the API only through the client and informers, as a real kubelet would.
 */
export class KubeletFleet implements Controller, KubeletConnector {
  readonly name = 'kubelet';
  private readonly agents = new Map<string, NodeAgent>();
  private readonly nodes: Informer;
  private readonly pods: Informer;
  private readonly configmaps: Informer;
  private readonly secrets: Informer;
  private readonly services: Informer;
  private readonly loop: ReconcileLoop;
  private readonly logStore = new LogStore();
  /** What containers wrote (exec, kubectl cp) and their pods' emptyDirs. */
  private readonly disks = new ContainerDisks();
  private readonly cidrs: PodCidrs;
  /** The resourceVersion this kubelet last wrote per pod: the cache is stale until it catches up. */
  private readonly written = new Map<string, number>();
  /** When each stage without a `since` anchor first matched, per pod. */
  private readonly firstSeen = new Map<string, Map<string, number>>();
  /**
   * Stages applied without a write (Kill), per pod, with the pod as they left it, so they are not applied twice:
   * not while the pod is that version, nor while others' writes leave its status and deletion as they were (a
   * label, a finalizer removed: the kubelet sent its SIGTERM for that deletion already).
   */
  private readonly done = new Map<string, { pod: KubeObject; stages: Set<string> }>();
  /** Pod IPs handed out (also before the status carrying them is written), per pod key. */
  private readonly podIPs = new Map<string, { node: string; ip: string }>();
  private nextIndex: number;
  private running = false;

  constructor(
    private readonly ctx: ControllerContext,
    private readonly options: KubeletOptions,
  ) {
    this.nodes = ctx.informers.for(Resources.nodes);
    this.pods = ctx.informers.for(Resources.pods);
    this.configmaps = ctx.informers.for(Resources.configmaps);
    this.secrets = ctx.informers.for(Resources.secrets);
    this.services = ctx.informers.for(Resources.services);
    this.cidrs = new PodCidrs(options.clusterCidr);
    this.nextIndex = options.nodes;
    this.loop = new ReconcileLoop('kubelet', ctx, (key) => this.reconcile(key), 4);

    this.pods.addIndex('kubelet-node', (p) => (podNode(p) ? [podNode(p)] : []));
    this.pods.addIndex('kubelet-configmaps', (p) => references(p, 'configMap'));
    this.pods.addIndex('kubelet-secrets', (p) => references(p, 'secret'));
    this.services.addIndex('kubelet-namespace', (s) => [s.metadata.namespace ?? '']);

    this.pods.addEventHandler({
      add: (pod) => this.podChanged(pod),
      update: (_old, pod) => this.podChanged(pod),
      delete: (pod) => this.podGone(pod),
    });
    this.nodes.addEventHandler({
      add: (node) => this.adopt(node),
      update: (_old, node) => this.nodeUpdated(node),
      delete: (node) => this.release(node),
    });
    const wake = (index: string) => (obj: KubeObject) => {
      for (const pod of this.pods.byIndex(index, cacheKey(obj))) {
        const key = cacheKey(pod);
        this.done.delete(key);
        this.loop.queue.add(key);
      }
    };
    for (const [informer, index] of [
      [this.configmaps, 'kubelet-configmaps'],
      [this.secrets, 'kubelet-secrets'],
    ] as const) {
      informer.addEventHandler({ add: wake(index), update: (_o, n) => wake(index)(n), delete: wake(index) });
    }
  }

  async start(): Promise<void> {
    await Promise.all(
      [this.nodes, this.pods, this.configmaps, this.secrets, this.services].map((i) => i.waitForSync()),
    );
    // Nodes adopted while the informers synced have registered but not beaten yet.
    const early = [...this.agents.values()];
    this.running = true;
    for (let i = 1; i <= this.options.nodes; i++) {
      const name = `node-${i}`;
      let node = this.nodes.get(undefined, name);
      if (!node) {
        try {
          node = await this.ctx.client.create(
            Resources.nodes,
            undefined,
            nodeManifest(name, i - 1, this.options.profile),
          );
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 409)) throw err;
          node = await this.ctx.client.get(Resources.nodes, undefined, name);
        }
      }
      this.adopt(node);
    }
    // Registration (status, lease) finishes before the server answers its first request.
    await Promise.all(
      early.map(async (a) => {
        await a.registered;
        await this.heartbeat(a);
      }),
    );
    await Promise.all([...this.agents.values()].map((a) => a.registered));
    this.loop.start();
  }

  stop(): void {
    this.running = false;
    this.loop.stop();
    for (const agent of this.agents.values()) {
      agent.stopped = true;
      agent.timer?.cancel();
    }
  }

  // ---------------------------------------------------------------------------------------------------
  // nodes

  private indexOf(name: string): number {
    const m = /^node-(\d+)$/.exec(name);
    if (m && Number(m[1]) >= 1 && Number(m[1]) <= this.options.nodes) return Number(m[1]) - 1;
    return this.nextIndex++;
  }

  /** A kubelet takes charge of a Node: default labels, a pod CIDR, then its first heartbeat. */
  private adopt(node: KubeObject): void {
    const name = node.metadata.name!;
    if (this.agents.has(name) || node.metadata.deletionTimestamp) return;
    const index = this.indexOf(name);
    const status = isPlainObject(node.status) ? node.status : {};
    const addresses = Array.isArray(status.addresses) ? (status.addresses as Obj[]) : [];
    const ip = String(addresses.find((a) => a.type === 'InternalIP')?.address ?? nodeIP(index));
    const spec = isPlainObject(node.spec) ? node.spec : {};
    let cidr = typeof spec.podCIDR === 'string' ? spec.podCIDR : undefined;
    if (cidr) this.cidrs.reserve(cidr);
    const agent: NodeAgent = {
      name,
      ip,
      ips: new PodIps(cidr),
      recorder: new EventRecorder(this.ctx.client, this.ctx.clock, 'kubelet', name),
      failed: false,
      stopped: false,
      lastReport: 0,
      beat: () => void this.heartbeat(agent),
      schedulable: spec.unschedulable !== true,
      registered: Promise.resolve(),
    };
    this.agents.set(name, agent);
    const patch: Obj = {};
    const labels = nodeLabels(name, index, this.options.profile);
    const missing = Object.fromEntries(Object.entries(labels).filter(([k]) => node.metadata.labels?.[k] === undefined));
    if (Object.keys(missing).length > 0) patch.metadata = { labels: missing };
    if (!cidr) {
      cidr = this.cidrs.allocate();
      if (cidr) patch.spec = { podCIDR: cidr, podCIDRs: [cidr] };
      else
        this.ctx.log(
          'warn',
          `kubelet ${name}: the cluster CIDR ${this.options.clusterCidr} has no /24 left; its pods get no IP (use --cluster-cidr with a larger range)`,
        );
      agent.ips = new PodIps(cidr);
    }
    for (const pod of this.pods.byIndex('kubelet-node', name)) {
      const ip = isPlainObject(pod.status) ? pod.status.podIP : undefined;
      if (typeof ip === 'string' && ip !== '' && !isTerminal(pod)) {
        agent.ips.reserve(ip);
        this.podIPs.set(cacheKey(pod), { node: name, ip });
      }
    }
    const running = this.running;
    agent.registered = (async () => {
      try {
        if (Object.keys(patch).length > 0)
          await this.ctx.client.patch(Resources.nodes, undefined, name, 'merge', patch);
      } catch (err) {
        this.ctx.log('warn', `kubelet ${name}: cannot register: ${(err as Error).message}`);
      }
      agent.recorder.event(node, 'Normal', 'Starting', 'Starting kubelet.');
      if (running) await this.heartbeat(agent);
      for (const pod of this.pods.byIndex('kubelet-node', name)) this.loop.queue.add(cacheKey(pod));
    })();
  }

  /** A kubelet reports its node turning (un)schedulable, as kubelet does on cordon and uncordon. */
  private nodeUpdated(node: KubeObject): void {
    const agent = this.agents.get(node.metadata.name!);
    if (!agent) return this.adopt(node);
    const schedulable = (node.spec as Obj | undefined)?.unschedulable !== true;
    if (schedulable !== agent.schedulable && !agent.failed) {
      agent.schedulable = schedulable;
      const condition = schedulable ? 'NodeSchedulable' : 'NodeNotSchedulable';
      agent.recorder.event(node, 'Normal', condition, `Node ${agent.name} status is now: ${condition}`);
    }
  }

  private release(node: KubeObject): void {
    const agent = this.agents.get(node.metadata.name!);
    if (!agent) return;
    agent.stopped = true;
    agent.timer?.cancel();
    this.agents.delete(agent.name);
    const cidr = (node.spec as Obj | undefined)?.podCIDR;
    if (typeof cidr === 'string') this.cidrs.release(cidr);
  }

  /** Renews the Lease, posts the node status when it changed (or every 5 min), and schedules the next beat. */
  private async heartbeat(agent: NodeAgent): Promise<void> {
    agent.timer?.cancel();
    if (agent.failed || agent.stopped) return;
    try {
      await this.renewLease(agent);
      // Most beats only renew: the status check is made here, without a call that awaits.
      if (this.statusDue(agent)) await this.postStatus(agent);
    } catch (err) {
      if (!(err instanceof ApiError && (err.code === 404 || err.code === 409)))
        this.ctx.log('warn', `kubelet ${agent.name}: heartbeat: ${(err as Error).message}`);
    }
    if (agent.failed || agent.stopped || !this.running) return;
    const now = this.ctx.clock.now();
    agent.nextBeat = nextBeatDue(agent.name, agent.nextBeat, now);
    agent.timer = this.ctx.clock.setTimer(agent.nextBeat - now, agent.beat);
  }

  private async renewLease(agent: NodeAgent): Promise<void> {
    const node = this.nodes.get(undefined, agent.name);
    if (!node) return;
    const renewTime = rfc3339Micro(this.ctx.clock.now());
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        if (!agent.lease) {
          try {
            agent.lease = await this.ctx.client.get(Resources.leases, NODE_LEASE_NAMESPACE, agent.name);
          } catch (err) {
            if (!(err instanceof ApiError && err.code === 404)) throw err;
            agent.lease = await this.ctx.client.create(
              Resources.leases,
              NODE_LEASE_NAMESPACE,
              leaseManifest(agent.name, node, renewTime),
            );
            return;
          }
        }
        agent.lease = await this.ctx.client.update(Resources.leases, renewed(agent.lease, agent.name, renewTime));
        return;
      } catch (err) {
        agent.lease = undefined;
        if (!(err instanceof ApiError && (err.code === 409 || err.code === 404))) throw err;
      }
    }
  }

  /**
   * Whether the node status may need a write: the status is a function of the stored Node and the address
   * (heartbeat times aside), so while neither moved since it was last found or written unchanged, only the
   * periodic report is (time travel beats 26,000 times a virtual day).
   */
  private statusDue(agent: NodeAgent): boolean {
    const checked = agent.statusCheckedFor;
    if (checked === undefined || checked.ip !== agent.ip || this.ctx.clock.now() - agent.lastReport >= STATUS_REPORT_MS)
      return true;
    return checked.node !== this.nodes.get(undefined, agent.name);
  }

  private async postStatus(agent: NodeAgent): Promise<void> {
    const node = this.nodes.get(undefined, agent.name);
    if (!node) return;
    const now = this.ctx.clock.now();
    const status = nodeStatus(node, agent.ip, this.options.profile, now, this.ctx.random);
    const strip = (s: unknown): unknown => {
      if (!isPlainObject(s)) return s;
      const conditions = Array.isArray(s.conditions)
        ? (s.conditions as Obj[]).map(({ lastHeartbeatTime: _h, ...c }) => c)
        : s.conditions;
      return { ...s, conditions };
    };
    const changed = !deepEqual(strip(status), strip(node.status));
    if (!changed && now - agent.lastReport < STATUS_REPORT_MS) {
      agent.statusCheckedFor = { node, ip: agent.ip };
      return;
    }
    const wasReady = (
      Array.isArray((node.status as Obj | undefined)?.conditions) ? ((node.status as Obj).conditions as Obj[]) : []
    ).some((c) => c.type === 'Ready' && c.status === 'True');
    const written = await this.ctx.client.updateStatus(Resources.nodes, { ...node, status });
    agent.lastReport = now;
    // The Node as written is this status: the informer delivers this same object, so the next beats need not
    // compute the status again to find it unchanged (864 reports a virtual day of three nodes).
    agent.statusCheckedFor = { node: written, ip: agent.ip };
    if (!wasReady) {
      for (const reason of ['NodeHasSufficientMemory', 'NodeHasNoDiskPressure', 'NodeHasSufficientPID', 'NodeReady']) {
        agent.recorder.event(node, 'Normal', reason, `Node ${agent.name} status is now: ${reason}`);
      }
    }
  }

  failNode(name: string): boolean {
    const agent = this.agents.get(name);
    if (!agent) return false;
    agent.failed = true;
    agent.timer?.cancel();
    return true;
  }

  recoverNode(name: string): boolean {
    const agent = this.agents.get(name);
    if (!agent) return false;
    if (!agent.failed) return true;
    agent.failed = false;
    agent.lastReport = 0;
    const node = this.nodes.get(undefined, name);
    if (node) agent.recorder.event(node, 'Normal', 'Starting', 'Starting kubelet.');
    void this.heartbeat(agent);
    for (const pod of this.pods.byIndex('kubelet-node', name)) this.loop.queue.add(cacheKey(pod));
    return true;
  }

  // ---------------------------------------------------------------------------------------------------
  // pods

  private podChanged(pod: KubeObject): void {
    const node = podNode(pod);
    if (node === '') return;
    const key = cacheKey(pod);
    // A pod already running (after a restart with --data) keeps its IP: nobody else may get it.
    const ip = isPlainObject(pod.status) ? pod.status.podIP : undefined;
    if (typeof ip === 'string' && ip !== '' && !this.podIPs.has(key) && !isTerminal(pod)) {
      const agent = this.agents.get(node);
      if (agent) {
        agent.ips.reserve(ip);
        this.podIPs.set(key, { node, ip });
      }
    }
    this.loop.queue.add(key);
  }

  private podGone(pod: KubeObject): void {
    const key = cacheKey(pod);
    this.releaseIP(key);
    this.logStore.remove(pod.metadata.uid ?? '');
    this.disks.remove(pod.metadata.uid ?? '');
    this.written.delete(key);
    this.firstSeen.delete(key);
    this.done.delete(key);
  }

  private releaseIP(key: string): void {
    const held = this.podIPs.get(key);
    if (!held) return;
    this.agents.get(held.node)?.ips.release(held.ip);
    this.podIPs.delete(key);
  }

  private setting(pod: KubeObject, key: string): string | undefined {
    return (
      pod.metadata.annotations?.[key] ??
      this.nodes.get(undefined, podNode(pod))?.metadata.annotations?.[key] ??
      this.options.settings[key]
    );
  }

  private async reconcile(key: string): Promise<ReconcileResult | void> {
    const slash = key.indexOf('/');
    const pod = this.pods.get(key.slice(0, slash), key.slice(slash + 1));
    if (!pod) return;
    const agent = this.agents.get(podNode(pod));
    if (!agent || agent.failed || agent.stopped) return;
    const rv = Number(pod.metadata.resourceVersion);
    const written = this.written.get(key);
    if (written !== undefined) {
      if (rv < written) return; // our own write has not reached the cache yet: its event will bring us back
      this.written.delete(key);
    }
    const now = this.ctx.clock.now();
    const done = this.done.get(key);
    // Stages applied to the pod as it now stands without changing it (Kill, a FailedMount): not applied again.
    const sameState =
      done !== undefined &&
      (done.pod.metadata.resourceVersion === pod.metadata.resourceVersion ||
        (done.pod.metadata.deletionTimestamp === pod.metadata.deletionTimestamp &&
          deepEqual(done.pod.status, pod.status)));
    let unchanged = new Set(sameState ? done.stages : []);
    const decide = (p: KubeObject, firstSeen: (stage: string) => number): StageDecision | undefined =>
      nextStage(this.options.stages, p, {
        now,
        setting: (k) => this.setting(p, k),
        firstSeen,
        done: (stage) => unchanged.has(stage),
      });
    let seen = this.firstSeen.get(key);
    let decision = decide(pod, (stage) => {
      if (!seen) this.firstSeen.set(key, (seen = new Map()));
      let at = seen.get(stage);
      if (at === undefined) seen.set(stage, (at = now));
      return at;
    });
    if (!decision) return;
    if (decision.dueAt > now) return { requeueAfterMs: decision.dueAt - now };

    // As kubelet's status manager keeps only the newest status of a pod and syncs that one (status_manager.go:
    // updateStatusInternal replaces podStatuses[uid], syncBatch skips versions already sent), the stages due at
    // once run on in this pass, each on the pod as the one before left it, and the pod is written once.
    let state = pod;
    const steps: StageStep[] = [];
    for (;;) {
      const step = this.work(decision.stage, state, agent, key, now);
      steps.push(step);
      if (step.pod === state) unchanged.add(decision.stage.name);
      else {
        state = step.pod;
        unchanged = new Set();
      }
      if (decision.stage.next.delete || steps.length >= MAX_STAGES_A_PASS) break;
      // The states after the first are not written yet: their stages were all first seen now, and the stored
      // anchors stay as they are until the write succeeds (a retried pass finds the stop delay already run).
      const next = decide(state, () => now);
      if (!next || !this.followsAtOnce(next, state, now) || steps.some((s) => s.stage === next.stage)) break;
      decision = next;
    }

    let current: KubeObject;
    try {
      current = await this.publish(pod, state, steps);
    } catch (err) {
      if (err instanceof ApiError && err.code === 404) return; // deleted meanwhile: its DELETED event cleans up
      throw err;
    }
    const wrote = current !== pod;
    if (wrote) this.written.set(key, Number(current.metadata.resourceVersion));
    // The last stages changed nothing: remembered against the version they saw (the one written, if any).
    if (unchanged.size > 0) this.done.set(key, { pod: current, stages: unchanged });
    else this.done.delete(key);
    // A written pod is in a new state, whose stages are first seen from now. A pass that wrote nothing (Kill: a
    // SIGTERM, with no status of its own) leaves the state as it was, and its delays (the stop delay) running:
    // clearing them made any write to the pod meanwhile, even another writer's label, restart the stop delay.
    if (wrote) this.firstSeen.delete(key);

    // Every stage's events and log lines, in the order the stages ran.
    const uid = pod.metadata.uid ?? '';
    for (const step of steps) {
      for (const e of step.events) agent.recorder.event(current, e.type, e.reason, e.message, e.fieldPath);
      this.writeLogs(uid, step.logs, now);
    }
    const phase = isPlainObject(current.status) ? current.status.phase : undefined;
    if (phase === 'Succeeded' || phase === 'Failed') this.releaseIP(key);
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

  /**
   * Whether a stage runs on in the same pass as the one before it: due now with no delay of its own, and not
   * one that starts containers. The kubelet publishes the status it has before it asks the runtime to start
   * containers (syncPod's statusManager.SetPodStatus comes before containerRuntime.SyncPod), so ContainerCreating
   * and a container's exit are written before the start or back-off that follows them (kubectl get -w shows
   * Pending → ContainerCreating → Running, and Error before CrashLoopBackOff); a start and the readiness that
   * comes with it (no probe), or a SIGTERM and the stop, are one status.
   */
  private followsAtOnce(next: StageDecision, pod: KubeObject, now: number): boolean {
    const action = next.stage.next.action;
    if (next.dueAt > now || (action !== undefined && PASS_STOPS_BEFORE.has(action))) return false;
    return stageDelayMs(next.stage, pod, { setting: (k) => this.setting(pod, k) }) === 0;
  }

  private actionContext(pod: KubeObject, agent: NodeAgent, key: string, now: number): ActionContext {
    const sources = this.envSources(podNode(pod));
    return {
      now,
      hostIP: agent.ip,
      podIP: (p) => {
        const current = isPlainObject(p.status) ? p.status.podIP : undefined;
        if (typeof current === 'string' && current !== '') return current;
        const held = this.podIPs.get(key);
        if (held) return held.ip;
        const ip = agent.ips.allocate() ?? '';
        if (ip) this.podIPs.set(key, { node: agent.name, ip });
        return ip;
      },
      setting: (k) => this.setting(pod, k),
      resolveEnv: (p, c) => resolveEnv(p, c, sources),
      volumeError: (p) => volumeError(p, sources),
      containerID: () => {
        // One flat string (join), not a rope of nine pieces: every container status keeps it.
        const parts = ['containerd://'];
        for (let i = 0; i < 8; i++) parts.push(this.ctx.random.nextUint32().toString(16).padStart(8, '0'));
        return parts.join('');
      },
    };
  }

  private envSources(node: string): EnvSources {
    const allocatable = this.nodes.get(undefined, node)?.status;
    return {
      configMap: (ns, name) => this.configmaps.get(ns, name),
      secret: (ns, name) => this.secrets.get(ns, name),
      services: (ns) => this.services.byIndex('kubelet-namespace', ns),
      allocatable: isPlainObject(allocatable) && isPlainObject(allocatable.allocatable) ? allocatable.allocatable : {},
    };
  }

  /** Works out one stage on the pod as it stands, writing nothing: the pod after it, its events and log lines. */
  private work(stage: Stage, pod: KubeObject, agent: NodeAgent, key: string, now: number): StageStep {
    const next = stage.next;
    const actx = this.actionContext(pod, agent, key, now);
    const result: ActionResult = next.action
      ? runAction(next.action, pod, actx, next.params)
      : { events: [], logs: [] };
    let status = result.status;
    const vars: Record<string, string> = {
      now: rfc3339(now),
      hostIP: agent.ip,
      nodeName: agent.name,
      name: pod.metadata.name ?? '',
      namespace: pod.metadata.namespace ?? '',
      get podIP() {
        return actx.podIP({ ...pod, status: status ?? pod.status });
      },
    };
    if (next.statusPatch)
      status = applyMergePatch(status ?? pod.status ?? {}, substitute(next.statusPatch, vars)) as Obj;
    for (const e of next.events ?? [])
      result.events.push({ type: e.type, reason: e.reason, message: String(substitute(e.message, vars)) });
    if (next.log?.length) {
      // The stage's lines go into each container's log: after a start, before an exit.
      const lines = next.log.map((l) => String(substitute(l, vars)));
      for (const c of containerSpecs(pod)) {
        const entry = result.logs.find((l) => l.container === c.name);
        if (!entry) result.logs.push({ container: String(c.name), lines });
        else
          entry.lines =
            entry.end && entry.start === undefined ? [...lines, ...entry.lines] : [...entry.lines, ...lines];
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
    return { stage, pod: after, events: result.events, logs: result.logs, annotations };
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
    // The steps' changes, the later winning; one a later step undid is left out.
    const changed: Record<string, string | null> = {};
    for (const step of steps) Object.assign(changed, step.annotations);
    for (const [k, v] of Object.entries(changed)) if ((pod.metadata.annotations?.[k] ?? null) === v) delete changed[k];
    if (Object.keys(changed).length === 0) return pod;
    return this.ctx.client.patch(Resources.pods, pod.metadata.namespace, pod.metadata.name!, 'merge', {
      metadata: { annotations: changed, resourceVersion: pod.metadata.resourceVersion },
    });
  }

  private writeLogs(uid: string, logs: ActionLog[], at: number): void {
    for (const log of logs) {
      if (log.start !== undefined) this.logStore.start(uid, log.container, log.start);
      for (const line of log.lines) this.logStore.write(uid, log.container, at, line);
      if (log.end) this.logStore.end(uid, log.container);
    }
  }

  // ---------------------------------------------------------------------------------------------------
  // the kubelet's API: logs, exec

  private reachable(pod: KubeObject, path: string): NodeAgent {
    const agent = this.agents.get(podNode(pod));
    if (!agent || agent.failed || agent.stopped) {
      const host = agent?.ip ?? podNode(pod);
      throw new ApiError(
        500,
        'InternalError',
        `Get "https://${host}:10250/${path}": dial tcp ${host}:10250: connect: connection refused`,
      );
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
    if (previous) {
      if (!isPlainObject(last.terminated))
        throw kubeletError(`previous terminated container "${container}" in pod "${name}" not found`);
      return this.logStore.source(uid, container, waiting ? restarts : restarts - 1);
    }
    if (isPlainObject(state.running) || isPlainObject(state.terminated) || isPlainObject(last.terminated))
      return this.logStore.source(uid, container, restarts);
    const reason = waiting && typeof waiting.reason === 'string' ? waiting.reason : 'ContainerCreating';
    if (reason === 'ErrImagePull')
      throw kubeletError(`container "${container}" in pod "${name}" is waiting to start: image can't be pulled`);
    if (reason === 'ImagePullBackOff')
      throw kubeletError(
        `container "${container}" in pod "${name}" is waiting to start: trying and failing to pull image`,
      );
    throw kubeletError(`container "${container}" in pod "${name}" is waiting to start: ${reason}`);
  }

  exec(pod: KubeObject, container: string): ExecTarget {
    this.reachable(pod, `exec/${pod.metadata.namespace}/${pod.metadata.name}/${container}`);
    const cs = containerStatus(pod, container);
    if (!cs || !isPlainObject(cs.state) || !isPlainObject(cs.state.running)) {
      throw new ApiError(500, 'InternalError', `container not found ("${container}")`);
    }
    const spec = containerSpecs(pod).find((c) => c.name === container) ?? { name: container };
    const sources = this.envSources(podNode(pod));
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
    const clock = this.ctx.clock;
    const instance = typeof cs.restartCount === 'number' ? cs.restartCount : 0;
    return {
      run: (command, io) =>
        runInContainer(command, {
          env,
          fs: containerFs(pod, spec, sources, () => clock.now(), { disks: this.disks, instance }),
          clock,
          io,
        }),
    };
  }
}
