import type { Duplex } from 'node:stream';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import type { Informer } from '../client/informer.js';
import type { Controller, ControllerContext } from '../runtime/controller.js';
import type {
  AttachTarget,
  ExecTarget,
  KubeletConnector,
  KubeletEndpoint,
  LogSource,
  PortForwardTarget,
} from '../api/kubelet-connector.js';
import { ContainerDisks } from './filesystem.js';
import { HttpApps } from './http-app.js';
import { Images, type ImageCatalog } from './images.js';
import { KubeletApi } from './kubelet-api.js';
import { LogStore } from './logs.js';
import { NodeAgents, type NodeAgentOwnership } from './node-agent.js';
import { NodeOwnership } from './node-ownership.js';
import type { NodeProfile } from './node.js';
import type { EnvSources } from './pod-env.js';
import { PodWorker } from './pod-worker.js';
import type { Stage } from './stages.js';

export interface KubeletOptions {
  /** node-1 … node-N are registered at start (existing Nodes are adopted as they are). */
  nodes: number;
  profile: NodeProfile;
  stages: readonly Stage[];
  /** Server-wide values of the kube-sim.dev/* settings (startup-delay, ready-delay, duration, exit-code). */
  settings: Readonly<Record<string, string>>;
  /** Pod CIDRs per node are /24s of this range. */
  clusterCidr: string;
  /** What images do (fixtures/images.yaml, or `sim serve --images`). */
  images: ImageCatalog;
  /** References no registry has besides the catalog's (`sim serve --missing-images`). */
  missingImages: readonly string[];
  /** Which Nodes get a kubelet here (unset: every Node; node-agent.ts). */
  manages?: (node: KubeObject) => boolean;
  /**
   * The Nodes of a snapshot the cluster booted from, with whether each was Ready: their kubelets adopt them as they
   * are (no labels added), and one that was not Ready starts failed, so that it stays NotReady.
   */
  restoredNodes?: ReadonlyMap<string, { ready: boolean }>;
  /**
   * Several processes run kubelets over one etcd (node-ownership.ts): this process's identity, its Lease in
   * kube-system, and where it serves its kubelets' API to API servers in other processes.
   */
  shared?: { identity: string; leaseName: string; endpoint: () => KubeletEndpoint | undefined };
}

/**
 * Every simulated node's kubelet, in one component (as kwok simulates a cluster's nodes from one process), made of
 * the parts kwok splits it into:
 * - the node agents (node-agent.ts): registration, Lease, node status, node faults;
 * - the pod worker (pod-worker.ts): the stage engine's reconcile of each bound pod, with one record per pod of what
 *   it remembers (pod-record.ts) and the pods' IPs (pod-ips.ts);
 * - the kubelet's API (kubelet-api.ts): pods/log, pods/exec, pods/attach and pods/portforward, answered from the log store, the containers' disks
  and the pod.
 * It talks to the API only through the client and informers, as a real kubelet would.
 */
export class KubeletFleet implements Controller, KubeletConnector {
  readonly name = 'kubelet';
  private readonly nodes: Informer;
  private readonly configmaps: Informer;
  private readonly secrets: Informer;
  private readonly services: Informer;
  private readonly agents: NodeAgents;
  private readonly pods: PodWorker;
  private readonly api: KubeletApi;
  /** Which nodes this process runs, when it shares them with other processes. */
  private readonly ownership: NodeOwnership | undefined;

  constructor(ctx: ControllerContext, options: KubeletOptions) {
    this.nodes = ctx.informers.for(Resources.nodes);
    this.configmaps = ctx.informers.for(Resources.configmaps);
    this.secrets = ctx.informers.for(Resources.secrets);
    this.services = ctx.informers.for(Resources.services);
    this.services.addIndex('kubelet-namespace', (s) => [s.metadata.namespace ?? '']);
    const logs = new LogStore();
    /** What containers wrote (exec, kubectl cp) and their pods' emptyDirs. */
    const disks = new ContainerDisks();
    const env = (node: string): EnvSources => this.envSources(node);
    const agent = (node: string) => this.agents.get(node);
    const images = new Images(options.images);
    const podOptions = {
      stages: options.stages,
      settings: options.settings,
      images,
      missingImages: options.missingImages,
    };
    this.pods = new PodWorker(ctx, podOptions, {
      agent,
      nodes: this.nodes,
      configmaps: this.configmaps,
      secrets: this.secrets,
      env,
      logs,
      disks,
    });
    const shared = options.shared;
    const ownership = shared && new NodeOwnership(ctx, shared.identity, shared.leaseName);
    this.ownership = ownership;
    const owned: NodeAgentOwnership | undefined = ownership && {
      identity: ownership.identity,
      sync: (node, known) => ownership.sync(node, known),
      lost: (node) => this.agents.drop(node),
      settled: () => ownership.settled(),
      endpoint: shared.endpoint,
    };
    this.agents = new NodeAgents(
      ctx,
      this.nodes,
      { ...options, ownership: owned },
      {
        adopted: (a) => this.pods.nodeAdopted(a),
        ready: (node) => this.pods.nodeReady(node),
        released: (node) => this.pods.nodeReleased(node),
      },
    );
    ownership?.attach(this.nodes, this.agents);
    this.api = new KubeletApi({
      agent,
      logs,
      disks,
      env,
      clock: ctx.clock,
      apps: new HttpApps(images, ctx.clock),
      session: (pod, container, instance) => this.pods.session(pod, container, instance),
    });
  }

  async start(): Promise<void> {
    const informers = [this.nodes, this.pods.informer, this.configmaps, this.secrets, this.services];
    if (this.ownership) informers.push(this.ownership.informer);
    await Promise.all(informers.map((i) => i.waitForSync()));
    await this.ownership?.start();
    await this.agents.start();
    this.pods.loop.start();
  }

  stop(): void {
    this.pods.loop.stop();
    this.agents.stop();
  }

  /** A clean stop when nodes are shared: their Leases given up, so that other processes take them over at once. */
  async release(): Promise<void> {
    await this.ownership?.stop();
  }

  runs(node: string): boolean {
    return this.agents.runs(node);
  }

  logs(pod: KubeObject, container: string, previous: boolean): LogSource {
    return this.api.logs(pod, container, previous);
  }

  exec(pod: KubeObject, container: string): ExecTarget {
    return this.api.exec(pod, container);
  }

  attach(pod: KubeObject, container: string): AttachTarget {
    return this.api.attach(pod, container);
  }

  portForward(pod: KubeObject): PortForwardTarget {
    return this.api.portForward(pod);
  }

  dial(pod: KubeObject, port: number): Promise<Duplex> {
    return this.api.dial(pod, port);
  }

  kubelets(): Array<{ node: string; failed: boolean }> {
    return this.agents.kubelets();
  }

  failNode(name: string): boolean {
    return this.agents.failNode(name);
  }

  recoverNode(name: string): boolean {
    return this.agents.recoverNode(name);
  }

  /** What a container's environment and volumes read: the informers' ConfigMaps, Secrets, Services, the node. */
  private envSources(node: string): EnvSources {
    const status = this.nodes.get(undefined, node)?.status;
    return {
      configMap: (ns, name) => this.configmaps.get(ns, name),
      secret: (ns, name) => this.secrets.get(ns, name),
      services: (ns) => this.services.byIndex('kubelet-namespace', ns),
      allocatable: isPlainObject(status) && isPlainObject(status.allocatable) ? status.allocatable : {},
    };
  }
}
