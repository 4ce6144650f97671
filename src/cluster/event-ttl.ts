import type { Clock, TimerHandle } from '../clock/clock.js';
import type { KubeObject } from '../api/types.js';
import type { MemoryStore } from '../storage/memory-store.js';

/** kube-apiserver's default --event-ttl: events are dropped an hour after they were last written. */
export const DEFAULT_EVENT_TTL_MS = 60 * 60 * 1000;

/**
 * Expires Events (core/v1 storage, which events.k8s.io/v1 shares) like the etcd lease kube-apiserver attaches to them, so long
 * simulations do not grow without bound. Writes arrive in time order, so a FIFO of (expiry, key) plus one
 * timer at its head is enough; an entry whose event was written again since is skipped when it comes due.
 */
export class EventExpiry {
  private readonly fifo: Array<{ at: number; resource: string; namespace: string; name: string; rv: string }> = [];
  private head = 0;
  private timer?: TimerHandle;
  private timerAt = Infinity;

  constructor(
    private readonly store: MemoryStore,
    private readonly clock: Clock,
    private readonly ttlMs = DEFAULT_EVENT_TTL_MS,
    private readonly resources: readonly string[] = ['/events'],
  ) {
    store.onChange((resource, event) => {
      if (event.type === 'DELETED' || !this.resources.includes(resource)) return;
      this.track(resource, event.object);
    });
  }

  private track(resource: string, obj: KubeObject): void {
    const at = this.clock.now() + this.ttlMs;
    this.fifo.push({ at, resource, namespace: obj.metadata.namespace ?? '', name: obj.metadata.name!, rv: obj.metadata.resourceVersion! });
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
    while (this.head < this.fifo.length && this.fifo[this.head]!.at <= now) {
      const entry = this.fifo[this.head++]!;
      const current = this.store.get(entry.resource, entry.namespace, entry.name);
      // Only the entry of the latest write expires the event; earlier entries of a rewritten event are stale.
      if (current && current.metadata.resourceVersion === entry.rv) this.store.delete(entry.resource, entry.namespace, entry.name);
    }
    if (this.head > 4096 && this.head * 2 > this.fifo.length) {
      this.fifo.splice(0, this.head);
      this.head = 0;
    }
    const next = this.fifo[this.head];
    if (next) this.arm(next.at);
  }

  stop(): void {
    this.timer?.cancel();
  }
}
