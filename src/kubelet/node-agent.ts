import { rfc3339Micro, type TimerHandle } from '../clock/clock.js';
import { ApiError } from '../api/errors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import type { Informer } from '../client/informer.js';
import type { ControllerContext } from '../runtime/controller.js';
import { EventRecorder } from '../runtime/events.js';
import { nodeIP, nodeLabels, nodeManifest, nodeStatus, type NodeProfile } from './node.js';
import { PodCidrs, PodIps } from './pod-ips.js';
import { nodeLease } from './node-ownership.js';
import { KUBELET_ADDRESS_ANNOTATION, type KubeletEndpoint } from '../api/kubelet-connector.js';

/**
 * The node side of every simulated kubelet (kwok's node and node-lease controllers): registers node-1 … node-N and
 * adopts any other Node (a manifest applied later gets a kubelet just the same), gives each a pod CIDR, renews its
 * Lease every 10 s and posts its status when it changed (or every 5 min), reports cordons, and takes node faults
 * (/sim/v1/nodes/NAME/fail|recover). A deleted Node's kubelet stops.
 */
type Obj = Record<string, unknown>;

/** How often a kubelet renews its Lease (kubelet: 0.25 × leaseDurationSeconds 40). */
export const LEASE_RENEW_MS = 10_000;
export const LEASE_DURATION_SECONDS = 40;
/** How often a kubelet posts an unchanged node status (nodeStatusReportFrequency). */
export const STATUS_REPORT_MS = 5 * 60_000;
const NODE_LEASE_NAMESPACE = 'kube-node-lease';

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

/** The last Lease seen, renewed now (kubelet's lease controller: a copy of its latest Lease with a new renewTime). */
function renewed(lease: KubeObject, holder: string, renewTime: string): KubeObject {
  return {
    ...lease,
    spec: { ...(lease.spec as Obj), holderIdentity: holder, leaseDurationSeconds: LEASE_DURATION_SECONDS, renewTime },
  };
}

/** One simulated node's kubelet, as the pod worker and the kubelet's API see it. */
export interface NodeAgent {
  readonly name: string;
  /** The node's InternalIP (the pods' hostIP). */
  readonly ip: string;
  /** Pod IPs of the node's /24. */
  readonly ips: PodIps;
  readonly recorder: EventRecorder;
  /** False while the node is failed (/sim/v1/nodes/NAME/fail) or its kubelet stopped: its pods do not progress. */
  readonly up: boolean;
}

/** A kubelet's own state: its node, its heartbeat timer, what it last renewed and reported. */
class Agent implements NodeAgent {
  ips: PodIps;
  failed = false;
  stopped = false;
  timer?: TimerHandle;
  /** The timer's callback, made once: a heartbeat is armed every 10 s of cluster time, for as long as the node lives. */
  readonly beat: () => void;
  /** Cluster time the next heartbeat is due: beats keep a fixed rate, so one that ran late does not delay the rest. */
  nextBeat?: number;
  lease?: KubeObject;
  lastReport = 0;
  /** The Node object (and address) whose computed status was found unchanged: no need to compute it again. */
  statusCheckedFor?: { node: KubeObject; ip: string };
  schedulable: boolean;
  /** Settles once the node is registered (labels, pod CIDR) and, when the kubelets run, has posted its status. */
  registered: Promise<void> = Promise.resolve();

  constructor(
    readonly name: string,
    readonly ip: string,
    cidr: string | undefined,
    readonly recorder: EventRecorder,
    schedulable: boolean,
    heartbeat: (agent: Agent) => Promise<void>,
  ) {
    this.ips = new PodIps(cidr);
    this.schedulable = schedulable;
    this.beat = () => void heartbeat(this);
  }

  get up(): boolean {
    return !this.failed && !this.stopped;
  }
}

/** What the pod worker does when a node comes and goes. */
export interface NodeAgentHooks {
  /** A kubelet took charge of a node, before it registers: pods already there with an IP keep it. */
  adopted(agent: NodeAgent): void;
  /** A kubelet registered, or recovered: its pods are looked at again. */
  ready(node: string): void;
  /** A kubelet stopped for good here (its Node went, or another process runs it now): its pods are forgotten. */
  released(node: string): void;
}

/**
 * When several processes run kubelets (node-ownership.ts): whose the node Leases are, which nodes to run, and
 * where this process serves its kubelets' API.
 */
export interface NodeAgentOwnership {
  /** holderIdentity of the node Leases this process renews (a single process's kubelets hold them as the node). */
  identity: string;
  /** A Node came or changed (`known`: as just written here): start or stop its kubelet as ownership says. */
  sync(node: string, known?: KubeObject): void;
  /** A heartbeat found the node's Lease held by another process: the kubelet stops. */
  lost(node: string): void;
  /** Resolves once the nodes being taken now are taken. */
  settled(): Promise<void>;
  /** Where API servers reach this process's kubelets (the node's address for the API, and its kubelet port). */
  endpoint(): KubeletEndpoint | undefined;
}

export interface NodeAgentOptions {
  /** node-1 … node-N are registered at start (existing Nodes are adopted as they are). */
  nodes: number;
  profile: NodeProfile;
  /** Pod CIDRs per node are /24s of this range. */
  clusterCidr: string;
  /**
   * Which Nodes get a kubelet here (unset: every Node). Attached to a cluster of real nodes, only simulated ones do,
   * as KWOK manages only the Nodes its annotation selector picks.
   */
  manages?: (node: KubeObject) => boolean;
  /** Nodes of a snapshot: adopted as they are, and failed at once when they were not Ready (fleet.ts). */
  restoredNodes?: ReadonlyMap<string, { ready: boolean }>;
  /** Several kubelets processes share the nodes; unset, this process runs every node. */
  ownership?: NodeAgentOwnership;
}

/** Every simulated node's kubelet, node side (as kwok simulates a cluster's nodes from one process). */
export class NodeAgents {
  private readonly agents = new Map<string, Agent>();
  private readonly cidrs: PodCidrs;
  private nextIndex: number;
  private running = false;

  constructor(
    private readonly ctx: ControllerContext,
    private readonly nodes: Informer,
    private readonly options: NodeAgentOptions,
    private readonly hooks: NodeAgentHooks,
  ) {
    this.cidrs = new PodCidrs(options.clusterCidr);
    this.nextIndex = options.nodes;
    nodes.addEventHandler({
      add: (node) => this.nodeAdded(node),
      update: (_old, node) => this.nodeUpdated(node),
      delete: (node) => this.release(node),
    });
  }

  private get holder(): string | undefined {
    return this.options.ownership?.identity;
  }

  /** Every Node's pod CIDR is taken, whoever runs it; its kubelet starts here unless another process runs it. */
  private nodeAdded(node: KubeObject): void {
    const cidr = (node.spec as Obj | undefined)?.podCIDR;
    if (typeof cidr === 'string') this.cidrs.reserve(cidr);
    if (this.options.ownership) this.options.ownership.sync(node.metadata.name!);
    else this.adopt(node);
  }

  /** Whether this process runs the node's kubelet. */
  runs(name: string): boolean {
    return this.agents.has(name);
  }

  names(): Iterable<string> {
    return this.agents.keys();
  }

  leaseOf(name: string): KubeObject | undefined {
    return this.agents.get(name)?.lease;
  }

  /** Starts the kubelet of a node this process took (its Lease now held here). */
  take(node: KubeObject, lease: KubeObject): void {
    this.adopt(node, lease);
  }

  /** Stops a node's kubelet here: another process runs it now (or this one may no longer). */
  drop(name: string): void {
    const agent = this.agents.get(name);
    if (!agent) return;
    agent.stopped = true;
    agent.timer?.cancel();
    this.agents.delete(name);
    this.hooks.released(name);
  }

  /** The node's kubelet, if the node has one. */
  get(name: string): NodeAgent | undefined {
    return this.agents.get(name);
  }

  /**
   * Registers node-1 … node-N and posts the first status of every node adopted so far (the informers have
   * synced): registration finishes before the server answers its first request.
   */
  async start(): Promise<void> {
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
      if (this.options.manages && !this.options.manages(node)) {
        this.ctx.log('warn', `kubelet ${name}: a Node of that name is there and is not a simulated one: left alone`);
        continue;
      }
      if (this.options.ownership) this.options.ownership.sync(name, node);
      else this.adopt(node);
    }
    await this.options.ownership?.settled();
    await Promise.all(
      early.map(async (a) => {
        await a.registered;
        await this.heartbeat(a);
      }),
    );
    await Promise.all([...this.agents.values()].map((a) => a.registered));
  }

  stop(): void {
    this.running = false;
    for (const agent of this.agents.values()) {
      agent.stopped = true;
      agent.timer?.cancel();
    }
  }

  /** The nodes that have a kubelet here, each with whether it is failed (/sim/v1/nodes/NAME/fail). */
  kubelets(): Array<{ node: string; failed: boolean }> {
    return [...this.agents.values()].map((agent) => ({ node: agent.name, failed: agent.failed }));
  }

  /** Stops a node's kubelet (no heartbeats, its pods stop progressing); false when there is no such node. */
  failNode(name: string): boolean {
    const agent = this.agents.get(name);
    if (!agent) return false;
    agent.failed = true;
    agent.timer?.cancel();
    return true;
  }

  /** Restarts a failed kubelet; false when there is no such node. */
  recoverNode(name: string): boolean {
    const agent = this.agents.get(name);
    if (!agent) return false;
    if (!agent.failed) return true;
    agent.failed = false;
    agent.lastReport = 0;
    const node = this.nodes.get(undefined, name);
    if (node) agent.recorder.event(node, 'Normal', 'Starting', 'Starting kubelet.');
    void this.heartbeat(agent);
    this.hooks.ready(name);
    return true;
  }

  private indexOf(name: string): number {
    const m = /^node-(\d+)$/.exec(name);
    if (m && Number(m[1]) >= 1 && Number(m[1]) <= this.options.nodes) return Number(m[1]) - 1;
    return this.nextIndex++;
  }

  /** A kubelet takes charge of a Node: default labels, a pod CIDR, then its first heartbeat. */
  private adopt(node: KubeObject, lease?: KubeObject): void {
    const name = node.metadata.name!;
    if (this.agents.has(name) || node.metadata.deletionTimestamp) return;
    if (this.options.manages && !this.options.manages(node)) return;
    const index = this.indexOf(name);
    const status = isPlainObject(node.status) ? node.status : {};
    const addresses = Array.isArray(status.addresses) ? (status.addresses as Obj[]) : [];
    const ip = String(addresses.find((a) => a.type === 'InternalIP')?.address ?? nodeIP(index));
    const spec = isPlainObject(node.spec) ? node.spec : {};
    let cidr = typeof spec.podCIDR === 'string' ? spec.podCIDR : undefined;
    if (cidr) this.cidrs.reserve(cidr);
    const patch: Obj = {};
    // A snapshot's node keeps the labels it had: zone labels it lacked would change where pods spread.
    const restored = this.options.restoredNodes?.get(name);
    const labels = restored ? {} : nodeLabels(name, index, this.options.profile);
    const missing = Object.fromEntries(Object.entries(labels).filter(([k]) => node.metadata.labels?.[k] === undefined));
    if (Object.keys(missing).length > 0) patch.metadata = { labels: missing };
    // Where API servers reach this node's kubelet: this process's address (the node's InternalIP is simulated).
    const endpoint = this.options.ownership?.endpoint();
    const address = node.metadata.annotations?.[KUBELET_ADDRESS_ANNOTATION];
    if ((endpoint?.host ?? undefined) !== address)
      patch.metadata = {
        ...(patch.metadata as Obj | undefined),
        annotations: { [KUBELET_ADDRESS_ANNOTATION]: endpoint?.host ?? null },
      };
    if (!cidr) {
      cidr = this.cidrs.allocate(/^node-\d+$/.test(name) ? index : undefined);
      if (cidr) patch.spec = { podCIDR: cidr, podCIDRs: [cidr] };
      else
        this.ctx.log(
          'warn',
          `kubelet ${name}: the cluster CIDR ${this.options.clusterCidr} has no /24 left; its pods get no IP (use --cluster-cidr with a larger range)`,
        );
    }
    const agent = new Agent(
      name,
      ip,
      cidr,
      new EventRecorder(this.ctx.client, this.ctx.clock, 'kubelet', name),
      spec.unschedulable !== true,
      (a) => this.heartbeat(a),
    );
    // A node that was not Ready in the snapshot has a kubelet that does not answer, as `sim node fail` leaves it.
    if (restored && !restored.ready) agent.failed = true;
    agent.lease = lease;
    this.agents.set(name, agent);
    this.hooks.adopted(agent);
    const running = this.running;
    agent.registered = (async () => {
      try {
        if (Object.keys(patch).length > 0)
          await this.ctx.client.patch(Resources.nodes, undefined, name, 'merge', patch);
      } catch (err) {
        this.ctx.log('warn', `kubelet ${name}: cannot register: ${(err as Error).message}`);
      }
      if (agent.failed) return;
      agent.recorder.event(node, 'Normal', 'Starting', 'Starting kubelet.');
      if (running) await this.heartbeat(agent);
      this.hooks.ready(name);
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
    const cidr = (node.spec as Obj | undefined)?.podCIDR;
    if (typeof cidr === 'string') this.cidrs.release(cidr);
    const agent = this.agents.get(node.metadata.name!);
    if (!agent) return;
    agent.stopped = true;
    agent.timer?.cancel();
    this.agents.delete(agent.name);
  }

  /** Renews the Lease, posts the node status when it changed (or every 5 min), and schedules the next beat. */
  private async heartbeat(agent: Agent): Promise<void> {
    agent.timer?.cancel();
    if (!agent.up) return;
    try {
      await this.renewLease(agent);
      // The kubelet stopped meanwhile (another process took the node): no status from here any more.
      if (!agent.up) return;
      // Most beats only renew: the status check is made here, without a call that awaits.
      if (this.statusDue(agent)) await this.postStatus(agent);
    } catch (err) {
      if (!(err instanceof ApiError && (err.code === 404 || err.code === 409)))
        this.ctx.log('warn', `kubelet ${agent.name}: heartbeat: ${(err as Error).message}`);
    }
    if (!agent.up || !this.running) return;
    const now = this.ctx.clock.now();
    agent.nextBeat = nextBeatDue(agent.name, agent.nextBeat, now);
    agent.timer = this.ctx.clock.setTimer(agent.nextBeat - now, agent.beat);
  }

  private async renewLease(agent: Agent): Promise<void> {
    const node = this.nodes.get(undefined, agent.name);
    if (!node) return;
    const renewTime = rfc3339Micro(this.ctx.clock.now());
    const holder = this.holder ?? agent.name;
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
              nodeLease(node, holder, renewTime, LEASE_DURATION_SECONDS),
            );
            return;
          }
          // Another process took the node (node-ownership.ts): this kubelet stops, never renewing a Lease not its own.
          const current = (agent.lease.spec as Obj | undefined)?.holderIdentity;
          if (this.holder !== undefined && current !== this.holder) {
            agent.lease = undefined;
            this.options.ownership?.lost(agent.name);
            return;
          }
        }
        agent.lease = await this.ctx.client.update(Resources.leases, renewed(agent.lease, holder, renewTime));
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
   * periodic report is (a beat comes every 10 s of cluster time, and time travel runs through days of it).
   */
  private statusDue(agent: Agent): boolean {
    const checked = agent.statusCheckedFor;
    if (checked === undefined || checked.ip !== agent.ip || this.ctx.clock.now() - agent.lastReport >= STATUS_REPORT_MS)
      return true;
    return checked.node !== this.nodes.get(undefined, agent.name);
  }

  /** Posts the node status; a write that lost to another (the cache behind) is made again on the Node read afresh. */
  private async postStatus(agent: Agent, fresh?: KubeObject): Promise<void> {
    const node = fresh ?? this.nodes.get(undefined, agent.name);
    if (!node) return;
    const now = this.ctx.clock.now();
    const port = this.options.ownership?.endpoint()?.port;
    const status = nodeStatus(node, agent.ip, this.options.profile, now, this.ctx.random, port);
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
    let written: KubeObject;
    try {
      written = await this.ctx.client.updateStatus(Resources.nodes, { ...node, status });
    } catch (err) {
      if (fresh || !agent.up || !(err instanceof ApiError && err.code === 409)) throw err;
      return this.postStatus(agent, await this.ctx.client.get(Resources.nodes, undefined, agent.name));
    }
    agent.lastReport = now;
    // The Node as written is this status: the informer delivers this same object, so the next beats need not
    // compute the status again to find it unchanged.
    agent.statusCheckedFor = { node: written, ip: agent.ip };
    if (!wasReady) {
      for (const reason of ['NodeHasSufficientMemory', 'NodeHasNoDiskPressure', 'NodeHasSufficientPID', 'NodeReady']) {
        agent.recorder.event(node, 'Normal', reason, `Node ${agent.name} status is now: ${reason}`);
      }
    }
  }
}
