/**
 * `node dist/bench/timetravel.js [--days 30] [--cronjobs 20] [--nodes 3] [--duration 30s] [--quick]` (`--cronjobs 0`: heartbeats only)
 *
 * Time travel (issue 8, figure 5): the whole simulator in this process on a virtual clock (`sim serve --clock
 * virtual`: controllers, scheduler, `--nodes` kubelets with the default stages), `--cronjobs` hourly CronJobs with
 * the default history limits (3 succeeded, 1 failed), whose pods run for `--duration` and succeed; then the clock
 * is advanced `--days` days (and a minute), one virtual day per advance. Reports the wall time, the Jobs and pods created (counted
 * from the store's change feed), the Jobs left at the end (history trimmed: cronjobs × 3, plus any still running),
 * and the process's CPU time and peak RSS. `--quick` is 3 days.
 */
import { performance } from 'node:perf_hooks';
import { startSimulator } from '../src/cluster/simulator.js';
import { DEFAULT_VIRTUAL_START } from '../src/cluster/cluster.js';
import { Resources } from '../src/client/client.js';
import { InProcessClient } from '../src/cluster/in-process-client.js';
import type { KubeObject } from '../src/api/types.js';
import { reportToBench } from './report.js';

interface Options {
  days: number;
  cronjobs: number;
  nodes: number;
  duration: string;
}

function parseArgs(argv: string[]): Options {
  const value = (flag: string, fallback: string): string => {
    const i = argv.indexOf(flag);
    return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : fallback;
  };
  const atLeast =
    (min: number) =>
    (flag: string, fallback: string): number => {
      const n = Number(value(flag, fallback));
      if (!Number.isInteger(n) || n < min) throw new Error(`${flag} must be an integer of at least ${min}`);
      return n;
    };
  const positive = atLeast(1);
  const whole = atLeast(0);
  return {
    days: argv.includes('--quick') ? 3 : positive('--days', '30'),
    // 0: the nodes' heartbeats alone (Lease renewals, node status, node lifecycle), what every virtual day costs.
    cronjobs: whole('--cronjobs', '20'),
    nodes: positive('--nodes', '3'),
    duration: value('--duration', '30s'),
  };
}

const DAY_MS = 24 * 3600 * 1000;

function cronJob(index: number, duration: string): KubeObject {
  // Spread over the hour (minute 0, 3, 6, …) as real schedules are, rather than all at once.
  const minute = (index * 3) % 60;
  return {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name: `hourly-${index}` },
    spec: {
      schedule: `${minute} * * * *`,
      jobTemplate: {
        spec: {
          template: {
            metadata: { annotations: { 'kube-sim.dev/duration': duration } },
            spec: { restartPolicy: 'Never', containers: [{ name: 'work', image: 'busybox' }] },
          },
        },
      },
    },
  } as KubeObject;
}

async function run(o: Options): Promise<void> {
  const sim = await startSimulator({ clock: 'virtual', seed: 8, startTime: DEFAULT_VIRTUAL_START, nodes: o.nodes });
  const clock = sim.cluster.virtualClock!;
  const created = new Map<string, number>();
  // Every write by resource and event type, counted only over the measured days (what a virtual day is made of).
  const writes = new Map<string, number>();
  let counting = false;
  sim.cluster.store.onChange((key, event) => {
    if (event.type === 'ADDED') created.set(key, (created.get(key) ?? 0) + 1);
    if (counting) writes.set(`${key} ${event.type}`, (writes.get(`${key} ${event.type}`) ?? 0) + 1);
  });
  const client = new InProcessClient(sim.cluster);
  for (let i = 0; i < o.cronjobs; i++) await client.create(Resources.cronjobs, 'default', cronJob(i, o.duration));
  await clock.settle();

  counting = true;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const perDay: number[] = [];
  for (let day = 0; day < o.days; day++) {
    const d0 = performance.now();
    // A minute more at the end, so each CronJob's last run (minute 0's is at midnight + 100 ms) is in.
    await clock.advance(DAY_MS + (day === o.days - 1 ? 60_000 : 0));
    perDay.push(performance.now() - d0);
    if (process.env.TIMETRAVEL_DEBUG)
      process.stderr.write(
        `day ${day + 1}: ${(perDay.at(-1)! / 1000).toFixed(2)} s, jobs ${created.get('batch/jobs') ?? 0}\n`,
      );
  }
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);

  const jobsLeft = (await client.list(Resources.jobs, 'default')).items.length;
  const podsLeft = (await client.list(Resources.pods, 'default')).items.length;
  const eventsLeft = (await client.list(Resources.events, 'default')).items.length;
  const jobs = created.get('batch/jobs') ?? 0;
  const pods = created.get('/pods') ?? 0;
  const expectedJobs = o.cronjobs * 24 * o.days;
  const sorted = [...perDay].sort((a, b) => a - b);
  console.log(
    '| virtual days | CronJobs | nodes | wall time | per virtual day (median, max) | Jobs created | pods created | Jobs / pods / Events left | CPU | peak RSS |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  console.log(
    `| ${o.days} | ${o.cronjobs} | ${o.nodes} | ${(wallMs / 1000).toFixed(1)} s | ${(sorted[sorted.length >> 1]! / 1000).toFixed(2)} s, ${(sorted.at(-1)! / 1000).toFixed(2)} s | ${jobs}${jobs === expectedJobs ? '' : ` (expected ${expectedJobs})`} | ${pods} | ${jobsLeft} / ${podsLeft} / ${eventsLeft} | ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s | ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB |`,
  );
  console.log('\n| writes per virtual day | count |\n|---|---:|');
  for (const [what, n] of [...writes].sort((a, b) => b[1] - a[1]))
    console.log(`| ${what} | ${Math.round(n / o.days)} |`);
  reportToBench({
    days: o.days,
    cronjobs: o.cronjobs,
    nodes: o.nodes,
    wallMs,
    perDayMedianMs: sorted[sorted.length >> 1]!,
    cpuMs: (cpu.user + cpu.system) / 1000,
  });
  if (jobs !== expectedJobs) process.exitCode = 1;
  await sim.close();
}

process.on('uncaughtException', (err) => {
  console.error(err);
  process.exit(1);
});
await run(parseArgs(process.argv.slice(2)));
