import { performance } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { wallClock, type TimerHandle } from '../clock/clock.js';

/**
 * Gives the old generation's free space back to the system once the server has gone quiet.
 *
 * A burst of work (150,000 pods created, each written four times by its kubelet, with its events) leaves the
 * old generation fragmented: V8's full GCs free the dead objects but move only a few MB of live ones, so most
 * pages stay half empty and mapped, a good part of the RSS of a dense cluster (BENCHMARKS.md, density). V8's
 * memory reducer would compact once allocation slows down, but the kubelets' Lease renewals (500 a second)
 * keep it from ever seeing a quiet heap. So: when the event loop has been mostly idle for two checks and the
 * old space has grown by a quarter (and 64 MiB) since the last time, one full GC that compacts every page, then
 * compaction goes back to V8's own choice. How much of the old space is garbage or holes is only known after a
 * GC, hence growth as the sign. It pauses the server once after each burst that grew the heap (a steady load
 * does not), for about twice a plain full GC (README's `--no-idle-compaction` gives the pauses measured).
 *
 * Real time, not the cluster's Clock: this is about the process, which is as busy under a virtual clock.
 */
const CHECK_MS = 5_000;
/** Event-loop utilisation under which the server counts as quiet (thousands of nodes' Leases and status stay below). */
const QUIET_UTILIZATION = 0.25;
const MIN_GROWTH_BYTES = 64 * 1024 * 1024;
const MIN_GROWTH_SHARE = 0.25;

function oldSpaceSize(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')?.space_size ?? 0;
}

export function compactWhenQuiet(log: (message: string) => void): () => void {
  const gc = fullGc();
  let last = performance.eventLoopUtilization();
  let quiet = 0;
  /** The old space's size after the last compaction (at first, at start). */
  let since = oldSpaceSize();
  const check = (): void => {
    const now = performance.eventLoopUtilization();
    quiet = performance.eventLoopUtilization(now, last).utilization < QUIET_UTILIZATION ? quiet + 1 : 0;
    last = now;
    if (quiet < 2) return;
    const before = oldSpaceSize();
    if (before - since < MIN_GROWTH_BYTES || before < since * (1 + MIN_GROWTH_SHARE)) return;
    const t0 = performance.now();
    setFlagsFromString('--compact-on-every-full-gc');
    try {
      gc();
    } finally {
      setFlagsFromString('--no-compact-on-every-full-gc');
    }
    since = oldSpaceSize();
    const mib = (bytes: number): string => `${Math.round(bytes / 1048576)} MiB`;
    log(
      `quiet: compacted the heap in ${Math.round(performance.now() - t0)} ms, old space ${mib(before)} -> ${mib(since)}`,
    );
    quiet = 0;
    // The fresh window starts after the pause, which the utilisation would otherwise count as busy.
    last = performance.eventLoopUtilization();
  };
  // Wall-clock checks (wallClock's timers do not keep the process alive), each armed once the one before has run.
  let timer: TimerHandle | undefined;
  const arm = (): void => {
    timer = wallClock.setTimer(CHECK_MS, () => {
      check();
      if (timer) arm();
    });
  };
  arm();
  return () => {
    timer?.cancel();
    timer = undefined;
  };
}

/** V8's full GC: the global `gc` when node runs with --expose-gc, else the one V8 gives a new context once the flag is set. */
function fullGc(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
