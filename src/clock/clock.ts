/**
 * The one way time enters kube-sim. Everything that stamps a timestamp, waits, backs off or ticks a
 * cron schedule takes a Clock; `RealClock` follows the wall, `VirtualClock` moves only when told, which
 * is what makes scenario replays deterministic and lets a day of cluster time pass in milliseconds.
 */
export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  readonly mode: 'real' | 'virtual';
  /** Milliseconds since the Unix epoch, in cluster time. */
  now(): number;
  /** Runs fn once, delayMs of this clock's time from now. */
  setTimer(delayMs: number, fn: () => void): TimerHandle;
  /**
   * A virtual clock's: time does not move on while `isIdle` says work is still due (see VirtualClock). A real
   * clock has none, since its time moves on anyway. Returns a function that removes the check.
   */
  addIdleCheck?(isIdle: () => boolean): () => void;
}

export class RealClock implements Clock {
  readonly mode = 'real' as const;

  now(): number {
    return Date.now();
  }

  setTimer(delayMs: number, fn: () => void): TimerHandle {
    // Node caps timers at 2^31-1 ms; longer waits re-arm themselves.
    const max = 0x7fffffff;
    let handle: NodeJS.Timeout;
    const arm = (remaining: number): void => {
      handle = setTimeout(() => (remaining > max ? arm(remaining - max) : fn()), Math.min(Math.max(0, remaining), max));
      handle.unref();
    };
    arm(delayMs);
    return { cancel: () => clearTimeout(handle) };
  }
}

/** Wall-clock time for network deadlines (watch timeouts, slow clients), which are not cluster time. */
export const wallClock: Clock = new RealClock();

/**
 * The process's own monotonic time in seconds, for measuring the simulator itself (the durations `/metrics`
 * reports: how long a request or a reconcile took to serve). Never cluster time: a virtual clock stands still
 * while a request is served, so it would report every one as instant.
 */
export function processSeconds(): number {
  return performance.now() / 1000;
}

/** A pending timer is its own handle: one object a timer (a virtual day of a few nodes fires tens of thousands). */
class VirtualTimer implements TimerHandle {
  cancelled = false;

  constructor(
    readonly at: number,
    readonly seq: number,
    readonly fn: () => void,
  ) {}

  cancel(): void {
    this.cancelled = true;
  }
}

/** Turns after which work that never settles no longer holds time up. */
const MAX_SETTLE_TURNS = 100_000;

/** Yields to the event loop so that promise chains and I/O callbacks started by a timer can finish. */
function turnEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Resolves once the microtasks have run out: a nextTick queued from a microtask runs only after Node has run
 * every microtask, those queued meanwhile included, at a fraction of the cost of an event-loop turn.
 */
function drainMicrotasks(): Promise<void> {
  return new Promise((resolve) => queueMicrotask(() => process.nextTick(resolve)));
}

/** Timers between whole event-loop turns, so that I/O (HTTP clients) is served during a long advance. */
const TURN_EVERY = 64;

export class VirtualClock implements Clock {
  readonly mode = 'virtual' as const;
  private current: number;
  private seq = 0;
  private readonly timers: VirtualTimer[] = []; // binary min-heap on (at, seq)
  private inFlight = 0;
  private advancing: Promise<void> = Promise.resolve();
  private readonly idleChecks: Array<() => boolean> = [];

  constructor(startMs: number) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  setTimer(delayMs: number, fn: () => void): TimerHandle {
    const timer = new VirtualTimer(this.current + Math.max(0, delayMs), this.seq++, fn);
    this.push(timer);
    return timer;
  }

  /**
   * Work queues and watch deliveries register a check here: advance() does not move time past a moment
   * while any of them still has work due at it.
   */
  addIdleCheck(isIdle: () => boolean): () => void {
    this.idleChecks.push(isIdle);
    return () => {
      const i = this.idleChecks.indexOf(isIdle);
      if (i >= 0) this.idleChecks.splice(i, 1);
    };
  }

  private idle(): boolean {
    if (this.inFlight !== 0) return false;
    for (const check of this.idleChecks) if (!check()) return false;
    return true;
  }

  /** Work that a timer started asynchronously (a reconcile, a write) marks itself busy so advance waits for it. */
  track<T>(work: Promise<T>): Promise<T> {
    this.inFlight++;
    return work.finally(() => this.inFlight--);
  }

  /** Time of the next pending timer, or undefined when nothing is scheduled. */
  nextTimerAt(): number | undefined {
    this.dropCancelled();
    return this.timers[0]?.at;
  }

  /**
   * Moves time forward by byMs, firing every timer due on the way in order, and returns once the work
   * they started has settled. Concurrent calls queue behind each other.
   */
  advance(byMs: number): Promise<void> {
    return this.queueAdvance(() => this.current + Math.max(0, byMs));
  }

  /**
   * Moves time to the next pending timer (as it is once the advances queued before this one are done), fires what
   * is due then and waits for it to settle; with nothing scheduled, only settles.
   */
  advanceToNextTimer(): Promise<void> {
    return this.queueAdvance(() => this.nextTimerAt() ?? this.current);
  }

  /** Moves time forward to `atMs` (once the advances queued before this one are done; never backwards). */
  advanceTo(atMs: number): Promise<void> {
    return this.queueAdvance(() => Math.max(this.current, atMs));
  }

  private queueAdvance(target: () => number): Promise<void> {
    const run = this.advancing.then(() => this.advanceNow(target()));
    this.advancing = run.catch(() => undefined);
    return run;
  }

  /** Lets work that is due now run to completion without moving time. */
  settle(): Promise<void> {
    return this.advance(0);
  }

  /**
   * Fires the timers due up to `target` in order, each once the work of the one before has settled. Work settles
   * when no tracked work runs and no timer is due at the current time. A timer's work is mostly promise chains
   * (in-process writes, watch deliveries, reconciles), so the microtasks are run out first; work that waits on I/O
   * (the write-ahead log) or yields to the loop (a work queue with keys left) keeps its idle check false meanwhile,
   * and then whole event-loop turns follow until it is idle. A virtual day fires tens of thousands of timers:
   * one loop, no settling call of its own (a promise and a frame each), and a turn only when work needs one.
   */
  private async advanceNow(target: number): Promise<void> {
    let spins = 0;
    let final = false;
    let settled = 0;
    for (;;) {
      // Whole turns at the start and the end of an advance (pending I/O runs, as before), after every
      // TURN_EVERY-th timer, and while work is not idle; between, a timer's microtasks alone.
      if (spins === 0 && !final && settled++ % TURN_EVERY !== 0) await drainMicrotasks();
      else await turnEventLoop();
      this.dropCancelled();
      spins++;
      const due = this.timers[0];
      if (due !== undefined && due.at <= this.current) {
        this.pop();
        due.fn();
        if (spins < MAX_SETTLE_TURNS) continue;
      } else if (spins < MAX_SETTLE_TURNS && !this.idle()) continue;
      // Settled at this moment: on to the next timer up to the target, then the target itself (settled once more).
      if (final) return;
      spins = 0;
      this.dropCancelled();
      const next = this.timers[0];
      if (next !== undefined && next.at <= target) {
        this.pop();
        this.current = Math.max(this.current, next.at);
        next.fn();
      } else {
        final = true;
        this.current = Math.max(this.current, target);
      }
    }
  }

  private dropCancelled(): void {
    while (this.timers.length > 0 && this.timers[0]!.cancelled) this.pop();
  }

  private less(a: VirtualTimer, b: VirtualTimer): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  private push(timer: VirtualTimer): void {
    const heap = this.timers;
    heap.push(timer);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  private pop(): VirtualTimer | undefined {
    const heap = this.timers;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let smallest = i;
        if (l < heap.length && this.less(heap[l]!, heap[smallest]!)) smallest = l;
        if (r < heap.length && this.less(heap[r]!, heap[smallest]!)) smallest = r;
        if (smallest === i) break;
        [heap[i], heap[smallest]] = [heap[smallest]!, heap[i]!];
        i = smallest;
      }
    }
    return top;
  }
}

/*
 * Timestamps and uids are kept in every stored object, so they are built with join(), which makes one flat
 * string: `replace` and `+` make V8 rope strings that keep their pieces (a uid from slices took several times
 * its flat size, and a dense cluster's pods and events hold over a million such strings).
 */

/*
 * Timestamps are made arithmetically from a remembered day ("2026-11-30T") and tables of two- and three-digit
 * texts: Date's toISOString is slow for what a time-travel day asks of it, tens of thousands of Lease renewals,
 * each at a different millisecond. The last text is remembered too: a reconcile stamps conditions, events and managed
 * fields with one clock reading, and stored objects then share one string.
 */
const DAY_MS = 86_400_000;
const TWO_DIGITS = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'));
const MICRO_TAILS = Array.from({ length: 1000 }, (_, i) => ['.', String(i).padStart(3, '0'), '000Z'].join(''));
let dayStart = NaN;
let dayPrefix = '';
let lastSecond = NaN;
let lastSecondText = '';
let lastMilli = NaN;
let lastMilliText = '';

/** "HH:MM:SS" of a whole millisecond, after "YYYY-MM-DDT" of its (UTC) day. */
function dayAndTime(milli: number): [string, string, number] {
  if (!(milli >= dayStart && milli < dayStart + DAY_MS)) {
    dayStart = Math.floor(milli / DAY_MS) * DAY_MS;
    const iso = new Date(dayStart).toISOString();
    dayPrefix = iso.slice(0, iso.indexOf('T') + 1);
  }
  const inDay = milli - dayStart;
  const second = Math.floor(inDay / 1000);
  const time = [
    TWO_DIGITS[Math.floor(second / 3600)],
    TWO_DIGITS[Math.floor(second / 60) % 60],
    TWO_DIGITS[second % 60],
  ].join(':');
  return [dayPrefix, time, inDay % 1000];
}

/** Kubernetes timestamps are RFC 3339 with second precision. */
export function rfc3339(ms: number): string {
  // Math.trunc, as Date does with a fractional time.
  const second = Math.floor(Math.trunc(ms) / 1000);
  if (second !== lastSecond) {
    const [day, time] = dayAndTime(second * 1000);
    lastSecondText = [day, time, 'Z'].join('');
    lastSecond = second;
  }
  return lastSecondText;
}

/** MicroTime (events.k8s.io eventTime, lease renewTime) keeps microseconds. */
export function rfc3339Micro(ms: number): string {
  const milli = Math.trunc(ms);
  if (milli !== lastMilli) {
    const [day, time, millis] = dayAndTime(milli);
    lastMilliText = [day, time, MICRO_TAILS[millis]].join('');
    lastMilli = milli;
  }
  return lastMilliText;
}

/** Parses Kubernetes-style durations: "90s", "1h30m", "250ms", "2d" (days for convenience). */
export function parseDuration(text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  const trimmed = text.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  let total = 0;
  let rest = trimmed;
  const part = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)/;
  if (rest.length === 0) throw new Error(`invalid duration "${text}"`);
  while (rest.length > 0) {
    const match = part.exec(rest);
    if (!match) throw new Error(`invalid duration "${text}"`);
    total += Number(match[1]) * units[match[2]!]!;
    rest = rest.slice(match[0].length);
  }
  return total;
}
