/**
 * The cluster clock as /sim/v1/clock tells it, read again every second and after every action (the server has no
 * watch for it); between reads the display moves on at the clock's own pace (the wall's, a running virtual
 * clock's rate, or not at all). Also the simulator's word on which kubelets are failed (/sim/v1/nodes).
 */
import { request } from './api.js';

export interface ClockState {
  now: string;
  mode: 'real' | 'virtual';
  running?: boolean;
  rate?: number;
  nextTimerAt?: string;
}

interface KubeletList {
  items: Array<{ node: string; kubelet: 'running' | 'stopped' }>;
}

const POLL_MS = 1000;

class ClockFeed {
  state: ClockState | undefined;
  error: string | undefined;
  /** Node name → 'stopped' for the failed kubelets. */
  stopped = new Set<string>();
  private readAt = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly listeners = new Set<() => void>();
  private readonly kubeletListeners = new Set<() => void>();

  /** Told only when the set of failed kubelets changes. */
  onKubelets(listener: () => void): () => void {
    this.kubeletListeners.add(listener);
    return () => this.kubeletListeners.delete(listener);
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  start(): void {
    void this.refresh();
  }

  /** Cluster time now, in ms: the last reading moved on at the clock's pace. */
  now(): number | undefined {
    if (!this.state) return undefined;
    const at = Date.parse(this.state.now);
    const pace = this.state.mode === 'real' ? 1 : this.state.running ? (this.state.rate ?? 1) : 0;
    return at + (performance.now() - this.readAt) * pace;
  }

  /** Takes an answer of /sim/v1/clock (every clock action answers with the new state). */
  take(state: ClockState): void {
    this.state = state;
    this.readAt = performance.now();
    this.error = undefined;
    this.tell();
  }

  async refresh(): Promise<void> {
    clearTimeout(this.timer);
    try {
      const [state, kubelets] = await Promise.all([
        request<ClockState>('/sim/v1/clock'),
        request<KubeletList>('/sim/v1/nodes').catch(() => undefined),
      ]);
      if (kubelets) {
        const stopped = kubelets.items.filter((k) => k.kubelet === 'stopped').map((k) => k.node);
        if (stopped.join('\n') !== [...this.stopped].join('\n')) {
          this.stopped = new Set(stopped);
          for (const listener of this.kubeletListeners) listener();
        }
      }
      this.take(state);
    } catch (err) {
      this.error = err instanceof Error ? err.message : String(err);
      this.tell();
    }
    this.timer = setTimeout(() => void this.refresh(), POLL_MS);
  }

  private tell(): void {
    for (const listener of this.listeners) listener();
  }
}

export const clock = new ClockFeed();
