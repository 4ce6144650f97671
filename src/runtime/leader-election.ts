import { rfc3339Micro, type Clock, type TimerHandle } from '../clock/clock.js';
import { ApiError } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import type { Gvr, KubeClient } from '../client/client.js';

const LEASES: Gvr = { group: 'coordination.k8s.io', version: 'v1', resource: 'leases' };

/**
 * kube-controller-manager's and kube-scheduler's leader election defaults (--leader-elect-lease-duration,
 * --leader-elect-renew-deadline, --leader-elect-retry-period).
 */
export const LEASE_DURATION_MS = 15_000;
export const RENEW_DEADLINE_MS = 10_000;
export const RETRY_PERIOD_MS = 2_000;

export interface LeaderElectionOptions {
  /** The Lease's name in kube-system: kube-controller-manager, kube-scheduler. */
  name: string;
  /** holderIdentity: unique per process, as client-go's `<hostname>_<uuid>`. */
  identity: string;
  client: KubeClient;
  clock: Clock;
  onStartedLeading: () => void | Promise<void>;
  onStoppedLeading: () => void;
  log?: (level: 'error' | 'warn' | 'info' | 'debug', message: string) => void;
}

/**
 * client-go's leaderelection over a coordination.k8s.io Lease: try to take or renew the Lease every retry period; a
 * Lease held by another is taken only once it has not changed for a whole lease duration, as this process observed
 * it (its own clock, never the holder's renewTime, so clocks need not agree); a leader that could not renew within
 * the renew deadline stops leading. A clean stop releases the Lease, so the next leader need not wait it out.
 */
export class LeaderElector {
  private timer: TimerHandle | undefined;
  private leading = false;
  private stopped = false;
  /** The Lease as last read, and when (on this clock) it last changed: the basis of "has its holder gone?". */
  private observed: { record: string; at: number } | undefined;
  private lastRenewal = 0;

  constructor(private readonly options: LeaderElectionOptions) {}

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    void this.tick();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.options.clock.setTimer(RETRY_PERIOD_MS, () => void this.tick());
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    let renewed = false;
    try {
      renewed = await this.tryAcquireOrRenew();
    } catch (err) {
      if (!(err instanceof ApiError && (err.code === 409 || err.code === 404)))
        this.options.log?.(
          'warn',
          `leader election ${this.options.name}: ${err instanceof Error ? err.message : String(err)}`,
        );
    }
    if (this.stopped) return;
    const now = this.options.clock.now();
    if (renewed) {
      this.lastRenewal = now;
      if (!this.leading) {
        this.leading = true;
        this.options.log?.('info', `leader election: ${this.options.identity} leads ${this.options.name}`);
        await this.options.onStartedLeading();
      }
    } else if (this.leading && now - this.lastRenewal >= RENEW_DEADLINE_MS) {
      this.leading = false;
      this.options.log?.('warn', `leader election: ${this.options.identity} lost ${this.options.name}`);
      this.options.onStoppedLeading();
    }
    this.schedule();
  }

  /** One round: true when this process holds the Lease afterwards. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { client, clock, name, identity } = this.options;
    const now = clock.now();
    const spec = (previous?: Record<string, unknown>): Record<string, unknown> => {
      const ours = previous?.holderIdentity === identity;
      return {
        holderIdentity: identity,
        leaseDurationSeconds: LEASE_DURATION_MS / 1000,
        acquireTime: ours && typeof previous?.acquireTime === 'string' ? previous.acquireTime : rfc3339Micro(now),
        renewTime: rfc3339Micro(now),
        leaseTransitions:
          typeof previous?.leaseTransitions === 'number' ? previous.leaseTransitions + (ours ? 0 : 1) : 0,
      };
    };
    let lease: KubeObject;
    try {
      lease = await client.get(LEASES, 'kube-system', name);
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 404)) throw err;
      await client.create(LEASES, 'kube-system', {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name, namespace: 'kube-system' },
        spec: spec(),
      });
      this.observed = undefined;
      return true;
    }
    const current = (lease.spec ?? {}) as Record<string, unknown>;
    const record = JSON.stringify(current);
    if (this.observed?.record !== record) this.observed = { record, at: now };
    const holder = current.holderIdentity;
    const duration =
      typeof current.leaseDurationSeconds === 'number' ? current.leaseDurationSeconds * 1000 : LEASE_DURATION_MS;
    const held = typeof holder === 'string' && holder !== '' && holder !== identity;
    if (held && this.observed.at + duration > now) return false;
    const updated = await client.update(LEASES, { ...lease, spec: spec(current) });
    this.observed = { record: JSON.stringify(updated.spec ?? {}), at: now };
    return true;
  }

  /** Stops trying; a leader gives the Lease up (holderIdentity cleared), as client-go's ReleaseOnCancel. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    if (!this.leading) return;
    this.leading = false;
    try {
      const lease = await this.options.client.get(LEASES, 'kube-system', this.options.name);
      const spec = (lease.spec ?? {}) as Record<string, unknown>;
      if (spec.holderIdentity === this.options.identity)
        await this.options.client.update(LEASES, {
          ...lease,
          spec: {
            ...spec,
            holderIdentity: '',
            leaseDurationSeconds: 1,
            renewTime: rfc3339Micro(this.options.clock.now()),
          },
        });
    } catch {
      // gone, or taken meanwhile: nothing to give up
    }
  }
}
