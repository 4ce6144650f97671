import { VirtualClock, type Clock } from '../clock/clock.js';
import type { WorkQueue } from '../runtime/work-queue.js';

/**
 * Event handlers' keys, handed to the work queue at the end of the event-loop turn they came in rather than at
 * once. In-process watch deliveries are microtasks, so a parked worker would otherwise reconcile after every
 * single event: in a 10,000-pod rolling update each pod turning ready made its own ReplicaSet sync, ReplicaSet
 * status write, Deployment sync and one-pod scale step (57,000 Deployment syncs). Keys that come in the same
 * turn are queued once, so a sync sees every event of the turn, as a busy kube-controller-manager's sync sees
 * every event that came while it worked. Reconciles stay level-based: only how many events one covers changes.
 */
export class TurnBatch {
  private readonly keys = new Set<string>();
  private scheduled = false;

  constructor(
    private readonly queue: WorkQueue,
    clock: Clock,
  ) {
    // A virtual clock must not move on while keys wait for the end of the turn.
    if (clock instanceof VirtualClock) clock.addIdleCheck(() => this.keys.size === 0);
  }

  add(key: string): void {
    this.keys.add(key);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    for (const key of this.keys) this.queue.add(key);
    this.keys.clear();
  };
}
