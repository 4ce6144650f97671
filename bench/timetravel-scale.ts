/**
 * `npm run bench -- --only timetravel-scale [--quick]`, or by itself
 * `node --expose-gc dist/bench/timetravel-scale.js [--nodes 1000] [--pods 30000] [--hours 24]`
 *
 * Time travel at scale (issue 23): the whole simulator in one process on a virtual clock (`sim serve --clock
 * virtual`: controllers, scheduler, `--nodes` kubelets with the default stages), `--pods` steady pods (Deployments
 * of 1,000 replicas, scheduled and started, then left alone), and the clock advanced `--hours` hours of cluster time
 * one hour at a time. Steady pods write nothing; what a virtual day costs is the nodes' heartbeats, as kubelet makes
 * them (a Lease renewal every 10 s, node status every 5 minutes) and the node lifecycle controller's reading of them.
 * Reports the wall and CPU time of the advance (target ≤ 60 s for a day of 1,000 nodes and 30,000 pods), the set-up
 * time, the writes by resource (counted from the store's change feed over the advance), heap and RSS.
 *
 * KUBE_SIM_BENCH_PROFILE=FILE writes a CPU profile of the advance alone (not the set-up) to FILE.
 *
 * `npm run bench` runs it as a child process of its own (so the runner's heap and GCs stay out of it).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { startSimulator } from '../src/cluster/simulator.js';
import { DEFAULT_VIRTUAL_START } from '../src/cluster/cluster.js';
import { Resources } from '../src/client/client.js';
import { InProcessClient } from '../src/cluster/in-process-client.js';
import type { KubeObject } from '../src/api/types.js';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { reportToBench } from './report.js';
import { fmt, mib, table } from './stats.js';

export interface TimetravelScaleOptions {
  nodes: number;
  pods: number;
  hours: number;
}

export interface TimetravelScaleFigures extends TimetravelScaleOptions {
  /** Nodes registered, pods created, scheduled and running (wall time, not part of the figure). */
  setupMs: number;
  podsRunning: number;
  /** The advance of `hours` hours of cluster time. */
  wallMs: number;
  cpuMs: number;
  perHourMs: number[];
  /** Writes over the advance by "resource TYPE". */
  writes: Record<string, number>;
  /** Expected Lease renewals over the advance: one per node every 10 s. */
  expectedRenewals: number;
  heapUsedAfterGc: number;
  rssAfterGc: number;
  peakRss: number;
  /** The target for a full virtual day, scaled to the hours run. */
  targetMs: number;
}

const HOUR_MS = 3600 * 1000;
const REPLICAS_PER_DEPLOYMENT = 1000;
/** 60 s for a virtual day of 1,000 nodes and 30,000 pods. */
const TARGET_DAY_MS = 60_000;

function deployment(name: string, replicas: number): KubeObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [{ name: 'app', image: 'nginx', resources: { requests: { cpu: '10m', memory: '16Mi' } } }],
        },
      },
    },
  } as KubeObject;
}

/** V8's full GC: the global `gc` with --expose-gc, else the one a new context gets once the flag is set. */
function fullGc(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
const gc = fullGc();

/** In this process: the measurement itself. */
export async function runTimetravelScale(o: TimetravelScaleOptions): Promise<TimetravelScaleFigures> {
  const t0 = performance.now();
  const sim = await startSimulator({ clock: 'virtual', seed: 23, startTime: DEFAULT_VIRTUAL_START, nodes: o.nodes });
  const clock = sim.cluster.virtualClock!;
  const client = new InProcessClient(sim.cluster);
  let running = 0;
  const writes = new Map<string, number>();
  let counting = false;
  sim.cluster.store.onChange((key, event) => {
    if (counting) writes.set(`${key} ${event.type}`, (writes.get(`${key} ${event.type}`) ?? 0) + 1);
  });
  for (let i = 0, left = o.pods; left > 0; i++, left -= REPLICAS_PER_DEPLOYMENT)
    await client.create(
      Resources.deployments,
      'default',
      deployment(`steady-${i}`, Math.min(left, REPLICAS_PER_DEPLOYMENT)),
    );
  // Until every pod runs: each minute of cluster time, count the Running pods.
  for (let minute = 0; minute < 120; minute++) {
    await clock.advance(60_000);
    const pods = (await client.list(Resources.pods, 'default')).items;
    running = pods.filter((p) => (p.status as { phase?: string } | undefined)?.phase === 'Running').length;
    if (running >= o.pods) break;
  }
  // A few minutes more, so that what starting the pods left to do (events, status reports) is done.
  await clock.advance(10 * 60_000);
  const setupMs = performance.now() - t0;

  gc();
  const profile = process.env.KUBE_SIM_BENCH_PROFILE ? new Session() : undefined;
  if (profile) {
    profile.connect();
    await profile.post('Profiler.enable');
    await profile.post('Profiler.start');
  }
  counting = true;
  const cpu0 = process.cpuUsage();
  const w0 = performance.now();
  const perHourMs: number[] = [];
  for (let hour = 0; hour < o.hours; hour++) {
    const h0 = performance.now();
    await clock.advance(HOUR_MS);
    perHourMs.push(performance.now() - h0);
    if (process.env.TIMETRAVEL_DEBUG)
      process.stderr.write(`hour ${hour + 1}: ${(perHourMs.at(-1)! / 1000).toFixed(2)} s\n`);
  }
  const wallMs = performance.now() - w0;
  const cpu = process.cpuUsage(cpu0);
  counting = false;
  if (profile) {
    const { profile: taken } = await profile.post('Profiler.stop');
    writeFileSync(process.env.KUBE_SIM_BENCH_PROFILE!, JSON.stringify(taken));
    profile.disconnect();
  }
  gc();
  const memory = process.memoryUsage();
  const figures: TimetravelScaleFigures = {
    ...o,
    setupMs,
    podsRunning: running,
    wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    perHourMs,
    writes: Object.fromEntries([...writes].sort((a, b) => b[1] - a[1])),
    expectedRenewals: (o.nodes * o.hours * HOUR_MS) / 10_000,
    heapUsedAfterGc: memory.heapUsed,
    rssAfterGc: memory.rss,
    peakRss: process.resourceUsage().maxRSS * 1024,
    targetMs: (TARGET_DAY_MS * o.hours) / 24,
  };
  await sim.close();
  return figures;
}

export function printTimetravelScale(f: TimetravelScaleFigures): void {
  const renewals = f.writes['coordination.k8s.io/leases MODIFIED'] ?? 0;
  const hours = [...f.perHourMs].sort((a, b) => a - b);
  console.log(
    `\n### Time travel at scale: ${f.nodes} nodes, ${f.podsRunning} of ${f.pods} pods running, ${f.hours} virtual hours\n`,
  );
  console.log(
    table([
      ['', 'value', 'target', 'met?'],
      [
        `advance of ${f.hours} h: wall`,
        `${fmt(f.wallMs / 1000, 1)} s`,
        `≤ ${fmt(f.targetMs / 1000, 1)} s`,
        f.wallMs <= f.targetMs ? 'yes' : 'no',
      ],
      ['advance: CPU (with V8 GC threads)', `${fmt(f.cpuMs / 1000, 1)} s`, '', ''],
      [
        'a virtual hour (median, max)',
        `${fmt(hours[hours.length >> 1]! / 1000, 2)} s, ${fmt(hours.at(-1)! / 1000, 2)} s`,
        '',
        '',
      ],
      ['Lease renewals (expected)', `${renewals} (${f.expectedRenewals})`, '', ''],
      ['set-up (nodes, pods scheduled and running)', `${fmt(f.setupMs / 1000, 1)} s`, '', ''],
      [
        'heap used / RSS after GC, peak RSS',
        `${mib(f.heapUsedAfterGc)} / ${mib(f.rssAfterGc)}, ${mib(f.peakRss)}`,
        '',
        '',
      ],
    ]),
  );
  console.log(`\n| writes over the advance | count |\n|---|---:|`);
  for (const [what, n] of Object.entries(f.writes)) console.log(`| ${what} | ${n} |`);
}

function parseArgs(argv: string[]): TimetravelScaleOptions {
  const value = (flag: string, fallback: number): number => {
    const i = argv.indexOf(flag);
    const n = i >= 0 ? Number(argv[i + 1]) : fallback;
    if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be a positive integer`);
    return n;
  };
  return {
    nodes: value('--nodes', 1000),
    pods: value('--pods', 30_000),
    hours: value('--hours', 24),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const figures = await runTimetravelScale(parseArgs(process.argv.slice(2)));
  printTimetravelScale(figures);
  reportToBench(figures);
}
