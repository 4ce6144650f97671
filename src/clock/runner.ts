import { wallClock, type Clock, type TimerHandle, type VirtualClock } from './clock.js';

/** How often a running virtual clock catches up with the wall. */
const TICK_MS = 100;
/**
 * At most this many ticks' worth of cluster time per advance: a server too busy to keep up falls behind the wall
 * instead of making ever larger advances that take ever longer.
 */
const MAX_TICKS_PER_ADVANCE = 10;

/**
 * Lets a virtual clock run by itself (`POST /sim/v1/clock/run`): every tick it advances by the wall time since the
 * last one, times `rate`, until paused. Each advance fires its timers and settles before the next tick is set, so a
 * running clock behaves as a series of small `advance` calls, which other advances may interleave with.
 */
export class ClockRunner {
  private timer: TimerHandle | undefined;
  private lastWall = 0;
  private rateValue = 1;
  /** Bumped by pause(): a tick of an earlier run that is still advancing then sets no next tick. */
  private generation = 0;
  /** The advance a tick is waiting for, if any. */
  private advancing: Promise<void> | undefined;

  constructor(
    private readonly clock: VirtualClock,
    private readonly wall: Clock = wallClock,
  ) {}

  get running(): boolean {
    return this.timer !== undefined;
  }

  /** Cluster seconds per wall second. */
  get rate(): number {
    return this.rateValue;
  }

  run(rate: number): void {
    this.rateValue = rate;
    if (this.timer) return;
    this.lastWall = this.wall.now();
    this.schedule(this.generation);
  }

  /** Stops the clock; resolves once the advance a tick had started is done, so the time read then stays put. */
  pause(): Promise<void> {
    this.generation++;
    this.timer?.cancel();
    this.timer = undefined;
    return this.advancing ?? Promise.resolve();
  }

  private schedule(generation: number): void {
    this.timer = this.wall.setTimer(TICK_MS, () => void this.tick(generation));
  }

  private async tick(generation: number): Promise<void> {
    const now = this.wall.now();
    const elapsed = Math.min(now - this.lastWall, TICK_MS * MAX_TICKS_PER_ADVANCE);
    this.lastWall = now;
    // A failed advance (a timer's callback threw) is the clock's to report; the runner goes on ticking.
    const advancing = this.clock.advance(Math.max(0, elapsed) * this.rateValue).catch(() => undefined);
    this.advancing = advancing;
    await advancing;
    if (this.advancing === advancing) this.advancing = undefined;
    // A pause() while this advance ran has already cleared the timer; a later run() has set its own.
    if (generation === this.generation) this.schedule(generation);
  }
}
