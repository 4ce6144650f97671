import type { Clock } from '../../clock/clock.js';
import type { WorkQueue } from '../../runtime/work-queue.js';

/**
 * How often a Service's endpoints are synced again. A sync costs in proportion to the Service's pods, and a rollout
 * of a Service of thousands changes one pod at a time, so a sync of N pods is followed by the next no sooner than
 * N × 0.5 ms later (at most 5 s) on the cluster clock, each sync covering the changes since the last: a Service of
 * one pod is synced as it changes, one of 200 at most ten times a second, one of 2,000 once a second, one of 10,000
 * every 5 s; a change after a quiet spell is synced at once. kube-controller-manager is held back in a like way by
 * its API client's rate limit (20 requests a second by default, shared by all its controllers: a change to each of
 * a 10,000-pod Service's 100 slices takes it 5 s to write). BENCHMARKS.md ("Endpoints during a rollout") has what
 * chose these.
 */
const MS_PER_POD = 0.5;
const MAX_INTERVAL_MS = 5000;

export class SyncPacer {
  /** When each Service may be synced again (ms on the clock). */
  private readonly next = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly queue: WorkQueue,
  ) {}

  /** Queues the Service now, or when its pace allows. */
  add(key: string): void {
    const wait = (this.next.get(key) ?? 0) - this.clock.now();
    if (wait > 0) this.queue.addAfter(key, wait);
    else this.queue.add(key);
  }

  /** A sync of `pods` pods ran: the next waits in proportion. */
  synced(key: string, pods: number): void {
    const interval = Math.min(MAX_INTERVAL_MS, pods * MS_PER_POD);
    if (interval >= 1) this.next.set(key, this.clock.now() + interval);
    else this.next.delete(key);
  }

  forget(key: string): void {
    this.next.delete(key);
  }
}
