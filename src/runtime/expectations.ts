import type { Clock } from '../clock/clock.js';

/** How long an expectation may stay unmet before the controller stops waiting (kube-controller-manager: 5 min). */
const EXPECTATION_TTL_MS = 5 * 60 * 1000;

/**
 * Controller expectations: after asking for N creations or deletions, a controller waits for its informer
 * to observe them before computing again, so it never creates twice what is merely not in the cache yet.
 */
export class Expectations {
  private readonly pending = new Map<string, { adds: number; dels: Set<string>; at: number }>();

  constructor(private readonly clock: Clock) {}

  /** True when nothing is outstanding (or the wait timed out): the controller may act. */
  satisfied(key: string): boolean {
    const e = this.pending.get(key);
    if (!e) return true;
    if ((e.adds <= 0 && e.dels.size === 0) || this.clock.now() - e.at > EXPECTATION_TTL_MS) {
      this.pending.delete(key);
      return true;
    }
    return false;
  }

  expectCreations(key: string, count: number): void {
    this.pending.set(key, { adds: count, dels: new Set(), at: this.clock.now() });
  }

  expectDeletions(key: string, uids: readonly string[]): void {
    this.pending.set(key, { adds: 0, dels: new Set(uids), at: this.clock.now() });
  }

  creationObserved(key: string): void {
    const e = this.pending.get(key);
    if (e) e.adds--;
  }

  deletionObserved(key: string, uid: string): void {
    this.pending.get(key)?.dels.delete(uid);
  }

  forget(key: string): void {
    this.pending.delete(key);
  }
}
