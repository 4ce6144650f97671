import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Clock, type TimerHandle, VirtualClock } from '../src/clock/clock.js';
import { ClockRunner } from '../src/clock/runner.js';

const T0 = Date.parse('2025-01-01T00:00:00Z');

/** A wall clock the test moves: `tick(ms)` sets the time and runs the timers due, as late as the test likes. */
class ManualWall implements Clock {
  readonly mode = 'real' as const;
  private time = T0;
  private timers: Array<{ at: number; fn: () => void; cancelled: boolean }> = [];

  now(): number {
    return this.time;
  }

  setTimer(delayMs: number, fn: () => void): TimerHandle {
    const timer = { at: this.time + delayMs, fn, cancelled: false };
    this.timers.push(timer);
    return { cancel: () => void (timer.cancelled = true) } as TimerHandle;
  }

  get pending(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  /** Moves to now + ms and runs the timers due by then; resolves once the work they started has settled. */
  async tick(ms: number): Promise<void> {
    this.time += ms;
    const due = this.timers.filter((t) => t.at <= this.time && !t.cancelled);
    this.timers = this.timers.filter((t) => !due.includes(t) && !t.cancelled);
    for (const t of due) t.fn();
    await settle();
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}

function setUp() {
  const wall = new ManualWall();
  const cluster = new VirtualClock(T0);
  return { wall, cluster, runner: new ClockRunner(cluster, wall) };
}

test('a running virtual clock moves by the wall time times the rate, tick by tick, and stands still once paused', async () => {
  const { wall, cluster, runner } = setUp();
  runner.run(60);
  assert.equal(runner.running, true);
  assert.equal(runner.rate, 60);
  for (let i = 0; i < 10; i++) await wall.tick(100);
  assert.equal(cluster.now() - T0, 60_000, 'one wall second at ×60 is a cluster minute');
  await runner.pause();
  assert.equal(runner.running, false);
  assert.equal(wall.pending, 0, 'no tick is left set');
  await wall.tick(5_000);
  assert.equal(cluster.now() - T0, 60_000);
  runner.run(2);
  runner.run(3); // a second run() changes the rate and keeps the one tick
  assert.equal(wall.pending, 1);
  await wall.tick(100);
  assert.equal(cluster.now() - T0, 60_300);
  await runner.pause();
});

test('a wall tick that comes late is not caught up all at once: at most ten ticks of time per advance', async () => {
  const { wall, cluster, runner } = setUp();
  runner.run(1);
  await wall.tick(10_000);
  assert.equal(cluster.now() - T0, 1_000);
  await wall.tick(100);
  assert.equal(cluster.now() - T0, 1_100, 'and the next tick goes on from there');
  await runner.pause();
});

test('pause() waits for the advance a tick started, so the time it leaves is final', async () => {
  const { wall, cluster, runner } = setUp();
  let finish: () => void = () => undefined;
  // Work a timer starts and the cluster's advance waits for (as a reconcile would be).
  cluster.setTimer(50, () => void cluster.track(new Promise<void>((resolve) => (finish = resolve))));
  runner.run(10);
  await wall.tick(100);
  let paused = false;
  const pausing = runner.pause().then(() => (paused = true));
  await settle();
  assert.equal(paused, false, 'the advance is still running');
  finish();
  await pausing;
  assert.equal(cluster.now() - T0, 1_000);
  await wall.tick(1_000);
  assert.equal(cluster.now() - T0, 1_000, 'no tick after the pause');
  assert.equal(wall.pending, 0);
});
