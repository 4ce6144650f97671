import { ApiError } from '../api/errors.js';
import type { Clock } from '../clock/clock.js';
import type { SeededRandom } from '../clock/random.js';
import type { Gvr, KubeClient } from '../client/client.js';
import type { InformerFactory } from '../client/informer.js';
import type { Metrics } from '../metrics/metrics.js';
import type { EventRecorder } from './events.js';
import { WorkQueue, type WorkQueueOptions } from './work-queue.js';

/** What a reconcile asks for: look again after a while; nothing means done (until what it reads changes). */
export interface ReconcileResult {
  requeueAfterMs?: number;
}

/** What the API serves, as discovery would tell an out-of-process controller. */
export interface ResourceInfo {
  gvr: Gvr;
  apiVersion: string;
  kind: string;
  namespaced: boolean;
}

export interface ApiResources {
  all(): ResourceInfo[];
  byKind(apiVersion: string, kind: string): ResourceInfo | undefined;
  onChange(fn: () => void): void;
}

/**
 * The cluster's certificate authority as kube-controller-manager is given it (--root-ca-file for the
 * root-ca-cert-publisher, --cluster-signing-cert-file/--cluster-signing-key-file for the CSR signers).
 */
export interface CertificateAuthority {
  /** The CA certificate, PEM: what every namespace's kube-root-ca.crt holds. */
  certificate(): Promise<string>;
  /**
   * A certificate for a request's subject, key and names with these usages, signed by the CA, PEM (authority.Sign
   * with the signers' PermissiveSigningPolicy): valid from five minutes ago for `ttlMs` (less the five minutes when
   * that is 8 hours or more), and never past the CA's own end. Validity is wall-clock time, which clients check.
   * Absent where only the certificate is known (kube-controller-manager with --root-ca-file and no signing key).
   */
  sign?(request: SigningRequest): Promise<string>;
}

export interface SigningRequest {
  /** The subject Name and SubjectPublicKeyInfo, DER, and the subject alternative names as GeneralName DER. */
  subject: Buffer;
  publicKey: Buffer;
  altNames: readonly Buffer[];
  /** Key usage bits (RFC 5280 4.2.1.3) and extended key usage OIDs. */
  keyUsages: readonly number[];
  extKeyUsages: readonly string[];
  ttlMs: number;
}

export interface ControllerContext {
  resources: ApiResources;
  /** Absent for a manager given no CA (then the controllers that need one do nothing). */
  certificates?: CertificateAuthority;
  client: KubeClient;
  /** The component's informers (shared with the process's other components unless they run apart). */
  informers: InformerFactory;
  clock: Clock;
  random: SeededRandom;
  recorder(component: string): EventRecorder;
  /** The component's metrics registry (work queues, the scheduler's); absent, nothing is counted. */
  metrics?: Metrics;
  log(level: 'error' | 'warn' | 'info' | 'debug', message: string): void;
}

export interface Controller {
  readonly name: string;
  start(): Promise<void>;
  stop(): void;
}

/**
 * Runs a reconcile function over a work queue: handlers only enqueue keys, the reconcile re-reads the
 * cache and is safe to run any number of times. One switch decides what happens next: an error retries
 * with backoff (conflicts included, as real controllers do) unless it is terminal (the API refused the
 * request itself: the key waits for the next change instead), requeueAfter schedules a look on the clock,
 * anything else forgets the key's failures.
 */
export class ReconcileLoop {
  readonly queue: WorkQueue;
  private running = false;
  private active = 0;

  constructor(
    readonly name: string,
    private readonly ctx: ControllerContext,
    private readonly reconcile: (key: string) => Promise<ReconcileResult | void>,
    private readonly workers = 1,
    queueOptions: WorkQueueOptions = {},
  ) {
    this.queue = new WorkQueue(ctx.clock, { metrics: ctx.metrics?.workQueue(name), ...queueOptions });
    ctx.clock.addIdleCheck?.(() => !this.running || this.idle);
  }

  /** True while keys wait or a reconcile runs (a virtual clock waits for this before moving on). */
  get idle(): boolean {
    return this.queue.idle && this.active === 0;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    for (let i = 0; i < this.workers; i++) void this.work();
  }

  stop(): void {
    this.running = false;
    this.queue.shutDown();
  }

  private async work(): Promise<void> {
    while (this.running) {
      const key = await this.queue.get();
      if (key === undefined) return;
      this.active++;
      try {
        const result = await this.reconcile(key);
        this.queue.forget(key);
        if (result?.requeueAfterMs !== undefined) this.queue.addAfter(key, result.requeueAfterMs);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        if (err instanceof ApiError && err.terminal) {
          this.ctx.log('warn', `${this.name}: reconcile ${key}: ${message} (not retried until it changes)`);
          this.queue.forget(key);
        } else {
          if (!(err instanceof ApiError && err.code === 409))
            this.ctx.log('warn', `${this.name}: reconcile ${key}: ${message}`);
          this.queue.addRateLimited(key);
        }
      } finally {
        this.active--;
        this.queue.done(key);
      }
      // In-process writes and watch deliveries resolve as microtasks, so without this a cascade (a ReplicaSet
      // creating 500 pods, each scheduled and started) would run for seconds without the event loop turning:
      // no HTTP request served, no watch stream drained (and cut as a slow reader). Yield between reconciles
      // while keys wait; with none waiting, the worker parks in get() and holds nothing up (a virtual day is
      // tens of thousands of single-key reconciles: one event-loop turn saved each).
      if (this.queue.length > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
}
