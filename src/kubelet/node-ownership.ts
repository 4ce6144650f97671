import { rfc3339Micro, type TimerHandle } from '../clock/clock.js';
import { ApiError } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import type { Informer } from '../client/informer.js';
import type { ControllerContext } from '../runtime/controller.js';
import { LEASE_DURATION_MS, RENEW_DEADLINE_MS, RETRY_PERIOD_MS } from '../runtime/leader-election.js';

/**
 * Which simulated nodes this process's kubelets run when several processes run kubelets over one etcd.
 *
 * kwok's way: a node's Lease in kube-node-lease is held (holderIdentity) by the process that runs its kubelet, and a
 * process runs a node only while it holds that Lease, renewing it with optimistic locking. Each process announces
 * itself with a Lease of its own in kube-system (labelled as below, as kube-apiserver's identity Leases are), renewed
 * with kube-controller-manager's leader-election timings. Each node belongs to one of the live processes by
 * rendezvous hashing: nodes spread evenly, and when a process comes or goes only the nodes it gains or loses move.
 *
 * Two kubelets never run one node: a node held by another process is taken only once that process has released it
 * (it saw the node is no longer its own) or once its Lease has stood still for the lease duration, as this process
 * observed it on its own clock; and a process that could not renew its Lease within the renew deadline (shorter than
 * the duration) stops its kubelets first, as a leader that cannot renew stops leading. Taking a node's Lease is an
 * update at the resourceVersion seen, so of two processes that both think a node theirs, one wins.
 */

export const KUBELETS_LABEL = 'kube-sim.dev/identity';
export const KUBELETS_LABEL_VALUE = 'kubelets';
const PROCESS_LEASE_NAMESPACE = 'kube-system';
export const NODE_LEASE_NAMESPACE = 'kube-node-lease';

type Obj = Record<string, unknown>;

/** A 32-bit hash of a string (FNV-1a, then murmur3's finaliser so that near names land far apart). */
export function stableHash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Rendezvous (highest random weight) hashing: the member whose hash with the node is highest. With members a, b, c
 * each gets about a third of the nodes; when c goes, only c's nodes move, each to whichever of a and b ranks next.
 */
export function rendezvousOwner(node: string, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const member of members) {
    const score = stableHash(`${member}\n${node}`);
    if (score > bestScore || (score === bestScore && best !== undefined && member < best)) {
      best = member;
      bestScore = score;
    }
  }
  return best;
}

function spec(lease: KubeObject | undefined): Obj {
  return (lease?.spec ?? {}) as Obj;
}

/** Whether `lease` is an older version than `written` (resourceVersions are etcd revisions here). */
function olderThan(lease: KubeObject, written: KubeObject | undefined): boolean {
  const seen = Number(lease.metadata.resourceVersion);
  const ours = Number(written?.metadata.resourceVersion);
  return Number.isFinite(seen) && Number.isFinite(ours) && seen < ours;
}

function holderOf(lease: KubeObject | undefined): string {
  const holder = spec(lease).holderIdentity;
  return typeof holder === 'string' ? holder : '';
}

/** What the ownership needs of the kubelets: which nodes run here, and to start or stop one. */
export interface OwnedNodes {
  runs(node: string): boolean;
  /** The node's Lease as its kubelet here last wrote it. */
  leaseOf(node: string): KubeObject | undefined;
  /** Starts the node's kubelet, its Lease being `lease` (held by this process now). */
  take(node: KubeObject, lease: KubeObject): void;
  /** Stops the node's kubelet (another process runs it, or this one may no longer). */
  drop(node: string): void;
  names(): Iterable<string>;
}

/** The process Lease of each other kubelets process as this process last saw it change, on its own clock. */
interface Observed {
  holder: string;
  resourceVersion: string;
  at: number;
}

export class NodeOwnership {
  private readonly leases: Informer;
  private readonly observed = new Map<string, Observed>();
  private own: KubeObject | undefined;
  private lastRenewal = Number.NEGATIVE_INFINITY;
  private healthy = false;
  private members: string[] = [];
  private timer: TimerHandle | undefined;
  private deadline: TimerHandle | undefined;
  private stopped = false;
  /** Nodes whose Lease this process is writing to take them: one claim at a time each. */
  private readonly claiming = new Set<string>();
  private readonly inFlight = new Set<Promise<void>>();
  private nodes!: Informer;
  private kubelets!: OwnedNodes;

  constructor(
    private readonly ctx: ControllerContext,
    /** holderIdentity: unique per process, as client-go's `<hostname>_<uuid>`. */
    readonly identity: string,
    /** This process's Lease in kube-system. */
    private readonly leaseName: string,
  ) {
    this.leases = ctx.informers.for(Resources.leases);
    this.leases.addEventHandler({
      add: (lease) => this.leaseChanged(lease),
      update: (_old, lease) => this.leaseChanged(lease),
      delete: (lease) => {
        if (this.isProcessLease(lease)) {
          this.observed.delete(lease.metadata.name!);
          this.recompute();
        } else if (lease.metadata.namespace === NODE_LEASE_NAMESPACE) this.sync(lease.metadata.name!);
      },
    });
  }

  /** Wires the nodes informer and the kubelets; called once, before start. */
  attach(nodes: Informer, kubelets: OwnedNodes): void {
    this.nodes = nodes;
    this.kubelets = kubelets;
  }

  get informer(): Informer {
    return this.leases;
  }

  /** Takes this process's Lease; the nodes it owns follow as their events come. */
  async start(): Promise<void> {
    await this.renew();
    this.recompute();
    this.schedule();
  }

  /** Resolves once the nodes being taken now are taken (or found taken by others). */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** Whether this process may run `node` now: it owns it among the live processes. */
  owns(node: string): boolean {
    return this.healthy && rendezvousOwner(node, this.members) === this.identity;
  }

  /** The live kubelets processes (this one included while it renews its Lease), sorted. */
  liveMembers(): readonly string[] {
    return this.members;
  }

  private isProcessLease(lease: KubeObject): boolean {
    return (
      lease.metadata.namespace === PROCESS_LEASE_NAMESPACE &&
      lease.metadata.labels?.[KUBELETS_LABEL] === KUBELETS_LABEL_VALUE
    );
  }

  private leaseChanged(lease: KubeObject): void {
    if (this.isProcessLease(lease)) {
      const name = lease.metadata.name!;
      const now = this.ctx.clock.now();
      const before = this.observed.get(name);
      if (before?.resourceVersion === lease.metadata.resourceVersion) return;
      // First sight of a Lease last renewed longer ago than its duration (a process of an earlier run): gone already.
      const renewed = Date.parse(String(spec(lease).renewTime ?? ''));
      const stale = before === undefined && !Number.isNaN(renewed) && renewed + this.durationOf(lease) < now;
      this.observed.set(name, {
        holder: holderOf(lease),
        resourceVersion: lease.metadata.resourceVersion ?? '',
        at: stale ? Number.NEGATIVE_INFINITY : now,
      });
      if (!before || before.holder !== holderOf(lease)) this.recompute();
      return;
    }
    if (lease.metadata.namespace === NODE_LEASE_NAMESPACE) this.sync(lease.metadata.name!);
  }

  private durationOf(lease: KubeObject): number {
    const seconds = spec(lease).leaseDurationSeconds;
    return typeof seconds === 'number' ? seconds * 1000 : LEASE_DURATION_MS;
  }

  /** Whether another process's Lease has changed within its duration, as this process saw it. */
  private alive(holder: string): boolean {
    if (holder === this.identity) return this.healthy;
    const now = this.ctx.clock.now();
    for (const [name, seen] of this.observed) {
      if (seen.holder !== holder) continue;
      const lease = this.leases.get(PROCESS_LEASE_NAMESPACE, name);
      return lease !== undefined && seen.at + this.durationOf(lease) > now;
    }
    return false;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.ctx.clock.setTimer(RETRY_PERIOD_MS, () => void this.tick());
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    await this.renew();
    if (this.stopped) return;
    this.recompute();
    await this.collectGone();
    this.schedule();
  }

  /**
   * Deletes the Leases of processes gone for ten lease durations (kube-apiserver collects its identity Leases so),
   * at their resourceVersion: one that renewed meanwhile stays.
   */
  private async collectGone(): Promise<void> {
    const now = this.ctx.clock.now();
    for (const [name, seen] of this.observed) {
      const lease = this.leases.get(PROCESS_LEASE_NAMESPACE, name);
      if (!lease || name === this.leaseName || seen.at + 10 * this.durationOf(lease) > now) continue;
      try {
        await this.ctx.client.delete(Resources.leases, PROCESS_LEASE_NAMESPACE, name, {
          preconditions: { resourceVersion: seen.resourceVersion },
        });
      } catch {
        // renewed, or deleted by another process first
      }
    }
  }

  /** Renews this process's Lease (creating it the first time); past the renew deadline without one, stops every kubelet. */
  private async renew(): Promise<void> {
    const now = this.ctx.clock.now();
    const leaseSpec = (previous: Obj | undefined): Obj => ({
      holderIdentity: this.identity,
      leaseDurationSeconds: LEASE_DURATION_MS / 1000,
      acquireTime: typeof previous?.acquireTime === 'string' ? previous.acquireTime : rfc3339Micro(now),
      renewTime: rfc3339Micro(now),
    });
    try {
      if (this.own) {
        this.own = await this.ctx.client.update(Resources.leases, { ...this.own, spec: leaseSpec(spec(this.own)) });
      } else {
        this.own = await this.ctx.client.create(Resources.leases, PROCESS_LEASE_NAMESPACE, {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: {
            name: this.leaseName,
            namespace: PROCESS_LEASE_NAMESPACE,
            labels: { [KUBELETS_LABEL]: KUBELETS_LABEL_VALUE },
          },
          spec: leaseSpec(undefined),
        });
      }
      this.lastRenewal = now;
      this.healthy = true;
      // The renew deadline runs on a timer of its own: a renewal that hangs (etcd without quorum answers in 20 s)
      // must not keep the kubelets running past it, as others may take the nodes 15 s after the last renewal.
      this.deadline?.cancel();
      this.deadline = this.ctx.clock.setTimer(RENEW_DEADLINE_MS, () => this.expire());
    } catch (err) {
      // Our own Lease changed under us (or went): read it afresh next time.
      if (err instanceof ApiError && (err.code === 409 || err.code === 404)) {
        this.own = err.code === 409 ? this.leases.get(PROCESS_LEASE_NAMESPACE, this.leaseName) : undefined;
      } else this.ctx.log('warn', `kubelets ${this.identity}: cannot renew Lease ${this.leaseName}: ${String(err)}`);
      if (this.ctx.clock.now() - this.lastRenewal >= RENEW_DEADLINE_MS) this.expire();
    }
  }

  /** The renew deadline passed without a renewal: every kubelet here stops, before another process may take its node. */
  private expire(): void {
    if (!this.healthy || this.stopped) return;
    this.healthy = false;
    this.ctx.log('warn', `kubelets ${this.identity}: Lease not renewed for 10 s: stopping this process's kubelets`);
    this.recompute();
  }

  /** The live members from the Leases seen; when they changed, every node is looked at again. */
  private recompute(): void {
    const live = new Set<string>();
    if (this.healthy) live.add(this.identity);
    for (const seen of this.observed.values()) if (seen.holder !== '' && this.alive(seen.holder)) live.add(seen.holder);
    const members = [...live].sort();
    if (members.join('\n') === this.members.join('\n')) return;
    this.members = members;
    this.ctx.log('info', `kubelets ${this.identity}: live kubelets processes: ${members.join(', ') || '(none)'}`);
    if (!this.nodes) return;
    for (const name of this.kubelets.names()) this.sync(name);
    for (const node of this.nodes.list()) this.sync(node.metadata.name!);
  }

  /**
   * Looks at one node: a kubelet here that another process took, or that belongs elsewhere now, stops (handing the
   * Lease over); a node that is ours and free (no Lease, released, or its holder gone) is taken. `known`: the Node,
   * when the caller has it before the informer does.
   */
  sync(name: string, known?: KubeObject): void {
    if (this.stopped || !this.nodes) return;
    const lease = this.leases.get(NODE_LEASE_NAMESPACE, name);
    const holder = holderOf(lease);
    const ours = this.owns(name);
    if (this.kubelets.runs(name)) {
      // The cache still has the Lease from before this process took or renewed it: its event comes next.
      if (lease && olderThan(lease, this.kubelets.leaseOf(name))) return;
      if (holder !== '' && holder !== this.identity) {
        this.ctx.log('info', `kubelet ${name}: Lease taken by ${holder}: stopping here`);
        this.kubelets.drop(name);
      } else if (!ours) {
        this.kubelets.drop(name);
        if (lease && holder === this.identity) void this.release(lease);
      }
      return;
    }
    // Still ours on paper after the kubelet stopped here (a release that lost to a beat in flight): give it up.
    if (!ours && lease && holder === this.identity) return void this.release(lease);
    // A Node just created here may not have reached the informer yet.
    const node = this.nodes.get(undefined, name) ?? known;
    if (!ours || !node || node.metadata.deletionTimestamp || this.claiming.has(name)) return;
    if (holder !== '' && holder !== this.identity && !this.holderGone(holder, lease!)) return;
    this.claiming.add(name);
    const claim = this.claim(node, lease).finally(() => {
      this.claiming.delete(name);
      this.inFlight.delete(claim);
    });
    this.inFlight.add(claim);
  }

  /**
   * A holder that is no live kubelets process: one whose process Lease stood still for its duration, or, without
   * one (a kubelet of another kind, a process whose Lease was removed), a node Lease not renewed within its own.
   */
  private holderGone(holder: string, lease: KubeObject): boolean {
    if ([...this.observed.values()].some((seen) => seen.holder === holder)) return !this.alive(holder);
    const renewed = Date.parse(String(spec(lease).renewTime ?? ''));
    return Number.isNaN(renewed) || renewed + this.durationOf(lease) < this.ctx.clock.now();
  }

  private async claim(node: KubeObject, lease: KubeObject | undefined): Promise<void> {
    const name = node.metadata.name!;
    const now = rfc3339Micro(this.ctx.clock.now());
    const previous = spec(lease);
    const transitions = typeof previous.leaseTransitions === 'number' ? previous.leaseTransitions : 0;
    const ours = holderOf(lease) === this.identity;
    try {
      const taken = lease
        ? await this.ctx.client.update(Resources.leases, {
            ...lease,
            spec: {
              ...previous,
              holderIdentity: this.identity,
              acquireTime: ours && typeof previous.acquireTime === 'string' ? previous.acquireTime : now,
              renewTime: now,
              leaseTransitions: ours ? transitions : transitions + 1,
            },
          })
        : await this.ctx.client.create(Resources.leases, NODE_LEASE_NAMESPACE, nodeLease(node, this.identity, now));
      // Between the read and the write this process may have stopped owning the node: the next sync hands it on.
      if (this.stopped || this.kubelets.runs(name)) return;
      if (!ours && lease) this.ctx.log('info', `kubelet ${name}: taken over from ${holderOf(lease) || '(released)'}`);
      this.kubelets.take(this.nodes.get(undefined, name) ?? node, taken);
      if (!this.owns(name)) this.sync(name);
    } catch (err) {
      // Another process wrote the Lease first (or the node went): its event brings the node back here.
      if (!(err instanceof ApiError && (err.code === 409 || err.code === 404 || err.code === 422)))
        this.ctx.log('warn', `kubelet ${name}: cannot take its Lease: ${String(err)}`);
    }
  }

  /** Gives a node's Lease up (holderIdentity cleared), so that its next owner need not wait for it to expire. */
  private async release(lease: KubeObject): Promise<void> {
    const { holderIdentity: _holder, ...rest } = spec(lease);
    try {
      await this.ctx.client.update(Resources.leases, { ...lease, spec: rest });
    } catch {
      // renewed meanwhile by a beat in flight, taken, or gone: the holder check on the next beat settles it
    }
  }

  /** A clean stop: every node's Lease released and this process's Lease deleted, so others take over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.deadline?.cancel();
    const held = [...this.kubelets.names()];
    for (const name of held) this.kubelets.drop(name);
    await Promise.all(
      held.map(async (name) => {
        try {
          const lease = await this.ctx.client.get(Resources.leases, NODE_LEASE_NAMESPACE, name);
          if (holderOf(lease) === this.identity) await this.release(lease);
        } catch {
          // gone
        }
      }),
    );
    try {
      await this.ctx.client.delete(Resources.leases, PROCESS_LEASE_NAMESPACE, this.leaseName);
    } catch {
      // gone already
    }
  }
}

/** A node's Lease as its kubelet creates it, held by this process (owned by the Node, so that it goes with it). */
export function nodeLease(node: KubeObject, holder: string, renewTime: string, durationSeconds = 40): KubeObject {
  const name = node.metadata.name!;
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      namespace: NODE_LEASE_NAMESPACE,
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: node.metadata.uid! }],
    },
    spec: { holderIdentity: holder, leaseDurationSeconds: durationSeconds, renewTime },
  };
}
