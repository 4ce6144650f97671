import { processSeconds, type Clock, type TimerHandle } from '../clock/clock.js';
import type { WorkQueueMetrics } from '../metrics/metrics.js';

export interface WorkQueueOptions {
  /** The first retry's delay after a failure (doubled each further failure); default 5 ms. */
  baseDelayMs?: number;
  /** The longest retry delay; default 1000 s. */
  maxDelayMs?: number;
  /**
   * Keys added are queued this many event-loop turns after the first of them came, not at once (default 0: at
   * once). In-process watch deliveries are microtasks, so a parked worker would otherwise reconcile after every
   * single event: a ReplicaSet whose pods turn ready one by one would sync, write its status and scale its
   * Deployment one pod at a time. A kube-controller-manager sync takes API round trips and sees the events that
   * came meanwhile; a few turns do the same here without a timer, so a quiet loop still turns in microseconds.
   * Reconciles stay level-based: only how many events one covers changes. (BENCHMARKS.md, "Deployment rollouts",
   * has the counts that chose 4.)
   */
  batchTurns?: number;
  /** client-go's work queue metrics (depth, adds, retries, time queued, time worked), shared by queues of one name. */
  metrics?: WorkQueueMetrics;
}

/**
 * A keyed work queue with client-go's guarantees: a key waiting is queued once however often it is added;
 * a key being processed is never handed to a second worker, and if it was added meanwhile it comes back
 * after `done`; failures back off per key exponentially (5 ms doubling to 1000 s) on the injected clock.
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  private head = 0;
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; timer: TimerHandle }>();
  private waiters: Array<(key: string | undefined) => void> = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly batchTurns: number;
  /** Keys added while a batch is open (batchTurns), queued together when it closes. */
  private readonly batch = new Set<string>();
  private turnsLeft = 0;
  private readonly metrics: WorkQueueMetrics | undefined;
  /** With metrics: when each queued key was added, and when each key in a worker's hands was handed out. */
  private readonly addedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    options: WorkQueueOptions = {},
  ) {
    this.baseDelayMs = options.baseDelayMs ?? 5;
    this.maxDelayMs = options.maxDelayMs ?? 1_000_000;
    this.batchTurns = options.batchTurns ?? 0;
    this.metrics = options.metrics;
  }

  get length(): number {
    return this.queue.length - this.head;
  }

  /**
   * Nothing waiting (queued or in an open batch) and nothing in a worker's hands (delayed keys do not count: they
   * are timers).
   */
  get idle(): boolean {
    return this.length === 0 && this.processing.size === 0 && this.batch.size === 0;
  }

  add(key: string): void {
    if (this.batchTurns === 0) return this.enqueue(key);
    if (this.shuttingDown) return;
    const opening = this.batch.size === 0;
    this.batch.add(key);
    if (!opening) return;
    this.turnsLeft = this.batchTurns;
    setImmediate(this.turn);
  }

  private readonly turn = (): void => {
    if (--this.turnsLeft > 0) {
      setImmediate(this.turn);
      return;
    }
    for (const key of this.batch) this.enqueue(key);
    this.batch.clear();
  };

  /** Queues a key now (a batch closing, a delay over, a key added while it was processed). */
  private enqueue(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.metrics) this.added(this.metrics, key);
    if (!this.processing.has(key)) this.dispatch(key);
  }

  /** A dirty key no worker holds: to a waiting worker, else to the back of the queue. */
  private dispatch(key: string): void {
    const waiter = this.waiters.shift();
    if (waiter) {
      this.dirty.delete(key);
      this.handOut(key);
      waiter(key);
    } else this.queue.push(key);
  }

  private added(metrics: WorkQueueMetrics, key: string): void {
    metrics.adds.value++;
    metrics.depth.value++;
    if (!this.addedAt.has(key)) this.addedAt.set(key, processSeconds());
  }

  /** A key goes to a worker. */
  private handOut(key: string): void {
    this.processing.add(key);
    const metrics = this.metrics;
    if (!metrics) return;
    const now = processSeconds();
    metrics.depth.value--;
    const at = this.addedAt.get(key);
    if (at !== undefined) metrics.queueDuration.observe(now - at);
    this.addedAt.delete(key);
    this.startedAt.set(key, now);
  }

  /** Adds the key after a delay; an earlier pending delay for the same key wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) return this.enqueue(key);
    const at = this.clock.now() + delayMs;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    existing?.timer.cancel();
    const timer = this.clock.setTimer(delayMs, () => {
      this.delayed.delete(key);
      this.enqueue(key);
    });
    this.delayed.set(key, { at, timer });
  }

  addRateLimited(key: string): void {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    if (this.metrics) this.metrics.retries.value++;
    this.addAfter(key, Math.min(this.baseDelayMs * 2 ** n, this.maxDelayMs));
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** The next key to work on; resolves undefined once the queue shuts down. */
  get(): Promise<string | undefined> {
    if (this.length > 0) {
      const key = this.queue[this.head++]!;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      this.dirty.delete(key);
      this.handOut(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    const started = this.metrics ? this.startedAt.get(key) : undefined;
    if (started !== undefined) {
      this.metrics!.workDuration.observe(processSeconds() - started);
      this.startedAt.delete(key);
    }
    // Added while it was worked on: it was counted then, and is queued now.
    if (this.dirty.has(key) && !this.shuttingDown) this.dispatch(key);
  }

  shutDown(): void {
    this.shuttingDown = true;
    this.batch.clear();
    // What was waiting is dropped: it no longer counts in the depth (a queue of the same name may take over).
    if (this.metrics) this.metrics.depth.value -= this.dirty.size;
    this.addedAt.clear();
    for (const { timer } of this.delayed.values()) timer.cancel();
    this.delayed.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
  }
}
