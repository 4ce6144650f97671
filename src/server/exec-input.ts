import type { ExecInput } from '../api/kubelet-connector.js';

/**
 * An exec's stdin between the connection and the container: the transport pushes what the client sends (a
 * WebSocket frame on channel 0, an SPDY stdin stream's data) and ends it on the client's close signal or when
 * the connection goes; the container reads chunks as they arrive. Past `highWater` unread bytes the transport
 * is asked to stop reading (`pause`), and to go on (`resume`) once the container has caught up, so a large
 * `kubectl cp` is not held in memory twice.
 */
export class ExecInputQueue implements ExecInput {
  private chunks: Uint8Array[] = [];
  private size = 0;
  private ended = false;
  private paused = false;
  private waiting?: () => void;

  constructor(
    private readonly flow: { pause(): void; resume(): void } = { pause: () => undefined, resume: () => undefined },
    private readonly highWater = 1024 * 1024,
  ) {}

  push(chunk: Uint8Array): void {
    if (this.ended || chunk.length === 0) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size > this.highWater && !this.paused) {
      this.paused = true;
      this.flow.pause();
    }
    this.wake();
  }

  /** No more input (the client closed stdin, or went away). */
  end(): void {
    this.ended = true;
    this.wake();
  }

  async read(): Promise<Uint8Array | undefined> {
    while (this.chunks.length === 0) {
      if (this.ended) return undefined;
      await new Promise<void>((resolve) => (this.waiting = resolve));
    }
    const chunk = this.chunks.shift()!;
    this.size -= chunk.length;
    if (this.paused && this.size <= this.highWater / 2) {
      this.paused = false;
      this.flow.resume();
    }
    return chunk;
  }

  private wake(): void {
    const w = this.waiting;
    this.waiting = undefined;
    w?.();
  }
}
