import type { Clock, TimerHandle } from '../clock/clock.js';
import type { KubeObject } from '../api/types.js';
import { settle } from '../api/maybe-async.js';
import type { MemoryStore, StoreWrites } from '../storage/memory-store.js';

/** kube-apiserver's default --event-ttl: events are dropped an hour after they were last written. */
export const DEFAULT_EVENT_TTL_MS = 60 * 60 * 1000;

/**
 * Expires Events (core/v1 storage, which events.k8s.io/v1 shares) like the etcd lease kube-apiserver attaches to them, so long
 * simulations do not grow without bound. Writes arrive in time order, so a FIFO of (expiry, which write) plus one
 * timer at its head is enough; an entry whose event was written again since is skipped when it comes due.
 */
export class EventExpiry {
  /**
   * The FIFO, as parallel arrays (one entry per write: a dense cluster has hundreds of thousands): the expiry
   * instant and the write's resourceVersion (packed arrays of doubles), and the event's namespace and name (the
   * stored event's own strings, shared by all its versions), plus the resource when more than one is tracked.
   * An object per entry took three times the memory with its boxed number; this holds no version of the event
   * (holding the written object itself kept every rewrite of a repeating event alive for the whole TTL).
   */
  private readonly at: number[] = [];
  private readonly revision: number[] = [];
  private readonly namespace: string[] = [];
  private readonly name: string[] = [];
  private readonly resource: string[] | undefined;
  private head = 0;
  private timer?: TimerHandle;
  private timerAt = Infinity;

  constructor(
    private readonly store: MemoryStore,
    private readonly clock: Clock,
    private readonly ttlMs = DEFAULT_EVENT_TTL_MS,
    private readonly resources: readonly string[] = ['/events'],
    private readonly writes: StoreWrites = store,
  ) {
    if (resources.length > 1) this.resource = [];
    store.onChange((resource, event) => {
      if (event.type === 'DELETED' || !this.resources.includes(resource)) return;
      this.track(resource, event.object);
    });
  }

  private track(resource: string, obj: KubeObject): void {
    const at = this.clock.now() + this.ttlMs;
    this.at.push(at);
    this.revision.push(Number(obj.metadata.resourceVersion));
    this.namespace.push(obj.metadata.namespace ?? '');
    this.name.push(obj.metadata.name!);
    this.resource?.push(resource);
    if (at < this.timerAt) this.arm(at);
  }

  private arm(at: number): void {
    this.timer?.cancel();
    this.timerAt = at;
    this.timer = this.clock.setTimer(at - this.clock.now(), () => this.expire());
  }

  private expire(): void {
    this.timerAt = Infinity;
    const now = this.clock.now();
    while (this.head < this.at.length && this.at[this.head]! <= now) {
      const i = this.head++;
      const resource = this.resource ? this.resource[i]! : this.resources[0]!;
      const current = this.store.get(resource, this.namespace[i]!, this.name[i]!);
      // Only the entry of the latest write expires the event; earlier entries of a rewritten event are stale.
      if (current && Number(current.metadata.resourceVersion) === this.revision[i])
        // With etcd every API server expires it: the first one's delete wins, the others' find it gone.
        settle(
          this.writes.delete(resource, this.namespace[i]!, this.name[i]!, {
            resourceVersion: String(this.revision[i]),
          }),
          () => undefined,
        );
    }
    if (this.head > 4096 && this.head * 2 > this.at.length) {
      for (const column of [this.at, this.revision, this.namespace, this.name, this.resource])
        column?.splice(0, this.head);
      this.head = 0;
    }
    if (this.head < this.at.length) this.arm(this.at[this.head]!);
  }

  stop(): void {
    this.timer?.cancel();
  }
}
