/**
 * A `sim serve` process for benchmarks that measure the server on its own: the same CLI (argv after this file
 * is passed to it), plus an IPC channel on which the benchmark asks for the process's memory after a full
 * collection and its CPU time, which only the process itself can measure. Spawn it with `spawnServer`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

export interface ServerUsage {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  /** User + system CPU time of the process so far, ms. */
  cpuMs: number;
  /** The longest event-loop delay since the server started, ms, the benchmark's own full collections left out. */
  longestEventLoopDelayMs: number;
  /** The most main-thread CPU time within one delayed tick: the server's own part of its longest delay. */
  longestEventLoopBusyMs: number;
  /** Every delay over STALL_MS since the start: when it ended (epoch ms), how long, and the process's CPU meanwhile. */
  stalls: EventLoopStall[];
}

export interface EventLoopStall {
  endedAt: number;
  ms: number;
  /**
   * CPU time of the main thread during the delay (10 ms resolution): about `ms` when the server itself was busy,
   * far less when the machine's other work kept it off the cores.
   */
  cpuMs: number;
}

/** The event loop's delay is sampled this often (a timer that measures how late it fires). */
const LAG_TICK_MS = 10;
/** Delays above this are listed one by one. */
const STALL_MS = 100;

type Request = { op: 'usage'; gc: boolean; id: number };

const isChild = process.argv[1] === fileURLToPath(import.meta.url) && typeof process.send === 'function';

if (isChild) {
  // How late a 10 ms timer fires is the event loop's delay; the benchmark's own full GCs (below) are taken out.
  let lastTick = performance.now();
  let lastCpu = mainThreadCpuMs();
  let excludedMs = 0;
  let longest = 0;
  let longestBusy = 0;
  const stalls: EventLoopStall[] = [];
  setInterval(() => {
    const now = performance.now();
    const delay = now - lastTick - LAG_TICK_MS - excludedMs;
    const cpu = mainThreadCpuMs();
    const busy = cpu - lastCpu - excludedMs;
    lastTick = now;
    lastCpu = cpu;
    excludedMs = 0;
    longest = Math.max(longest, delay);
    longestBusy = Math.max(longestBusy, Math.min(busy, delay + LAG_TICK_MS));
    if (delay > STALL_MS) stalls.push({ endedAt: Date.now(), ms: delay, cpuMs: busy });
  }, LAG_TICK_MS).unref();
  process.on('message', (m: Request) => {
    if (m.op !== 'usage') return;
    const gc = (globalThis as { gc?: () => void }).gc;
    if (m.gc && gc) {
      const g0 = performance.now();
      gc();
      gc();
      excludedMs += performance.now() - g0;
    }
    const mem = process.memoryUsage();
    const cpu = process.cpuUsage();
    const usage: ServerUsage = {
      rss: mem.rss,
      heapUsed: mem.heapUsed,
      external: mem.external,
      arrayBuffers: mem.arrayBuffers,
      cpuMs: (cpu.user + cpu.system) / 1000,
      longestEventLoopDelayMs: longest,
      longestEventLoopBusyMs: longestBusy,
      stalls,
    };
    process.send!({ id: m.id, usage });
  });
  // The IPC channel must not keep a server that was told to stop alive.
  process.channel?.unref();
  await import('../src/cli/main.js');
}

/** CPU time (user + system, ms) of this process's main thread, from /proc (10 ms resolution; 0 off Linux). */
function mainThreadCpuMs(): number {
  return procCpuMs(process.pid, `/proc/self/task/${process.pid}/stat`) ?? 0;
}

export interface SpawnedServer {
  url: string;
  child: ChildProcess;
  /** Memory (after two full collections when `gc`) and CPU time of the server process. */
  usage(gc?: boolean): Promise<ServerUsage>;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** CPU time (user + system, ms) of a live process from /proc, or undefined once it is gone (or off Linux). */
export function procCpuMs(pid: number, file = `/proc/${pid}/stat`): number | undefined {
  try {
    // Fields after the command name (which may hold spaces, hence the last ')'): utime and stime are 14 and 15.
    const stat = readFileSync(file, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10; // USER_HZ is 100
  } catch {
    return undefined;
  }
}

/** The benchmark's own child processes, with their CPU time last seen (kept once they exit). */
const children = new Map<number, number>();

/** Counts a child process as the benchmark's own, so that its CPU is not taken for other work on the machine. */
export function trackChild(child: ChildProcess): void {
  if (child.pid === undefined) return;
  const pid = child.pid;
  children.set(pid, 0);
  const timer = setInterval(() => sampleChild(pid), 200);
  timer.unref();
  child.once('exit', () => clearInterval(timer));
}

function sampleChild(pid: number): void {
  const ms = procCpuMs(pid);
  if (ms !== undefined) children.set(pid, ms);
}

/** CPU time used so far by the benchmark's child processes (sampled every 200 ms, so a little is missed at exit). */
export function childrenCpuMs(): number {
  let total = 0;
  for (const pid of children.keys()) {
    sampleChild(pid);
    total += children.get(pid)!;
  }
  return total;
}

/** Resolves with the URL a child prints on stdout (the pattern's first group); rejects if it exits first. */
export function urlPrinted(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = '';
    const onExit = (code: number | null): void =>
      reject(new Error(`${child.spawnfile} exited with ${code} before printing its URL`));
    child.stdout!.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      const m = pattern.exec(out);
      if (!m) return;
      child.off('exit', onExit);
      resolve(m[1]!);
    });
    child.once('exit', onExit);
  });
}

/** Starts `sim serve --port 0 <args>` in its own process and resolves once it prints its URL. */
export async function spawnServer(args: readonly string[], nodeFlags: readonly string[] = []): Promise<SpawnedServer> {
  const entry = fileURLToPath(import.meta.url);
  // KUBE_SIM_BENCH_PROFILE=DIR writes a CPU profile of each server process into DIR (when it stops).
  const profile = process.env.KUBE_SIM_BENCH_PROFILE
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.KUBE_SIM_BENCH_PROFILE}`]
    : [];
  const child = spawn(
    process.execPath,
    ['--expose-gc', ...profile, ...nodeFlags, entry, 'serve', '--port', '0', '--log-level', 'warn', ...args],
    {
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    },
  );
  running.add(child);
  trackChild(child);
  child.once('exit', () => running.delete(child));
  const url = await urlPrinted(child, /serving on (http:\/\/\S+)/);
  let nextId = 1;
  const usage = (gc = true): Promise<ServerUsage> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const onMessage = (m: { id: number; usage: ServerUsage }): void => {
        if (m.id !== id) return;
        child.off('message', onMessage);
        resolve(m.usage);
      };
      child.on('message', onMessage);
      if (!child.send({ op: 'usage', gc, id } satisfies Request)) reject(new Error('server process is gone'));
    });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    sampleChild(child.pid!);
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  return { url, child, usage, stop };
}
