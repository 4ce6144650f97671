/**
 * Issue 23's targets table as data: every figure `npm run bench` reports a verdict on is one declaration here —
 * its name, the section that measures it, its target and how to read it from that section's results. The
 * summary at the end of a run (and bench-results.md beside bench-results.json) is made from this list alone; a
 * figure whose section did not run, or that nothing measures yet, gets a row that says so.
 *
 * A benchmark that runs as a script of its own is one more entry in SCRIPT_SECTIONS: `npm run bench` spawns it
 * with KUBE_SIM_BENCH_JSON naming a file, and the script hands its figures over with `reportToBench` (bench/report.ts).
 */
import type { DensityFigures } from './density.js';
import type { FanoutCase, FanoutFigures } from './fanout.js';
import type { StartupFigures } from './startup.js';
import type { DurableReport, RolloutReport, TimetravelReport } from './report.js';
import type { ReplayFigures } from './replay.js';
import type { TimetravelScaleFigures } from './timetravel-scale.js';

/** What each section's results look like, as the declarations below read them. */
export interface SectionResults {
  create: { ratios: { ConfigMap: number; Pod: number }; figures: Array<{ target: string; reqPerSec: number }> };
  list: unknown;
  fanout: FanoutFigures;
  density: DensityFigures;
  startup: StartupFigures;
  snapshot: unknown;
  rollout: RolloutReport;
  timetravel: TimetravelReport;
  durable: DurableReport;
  replay: ReplayFigures;
  'timetravel-scale': TimetravelScaleFigures;
}

export type SectionName = keyof SectionResults;

/** A section that is a script of its own (dist/bench/<script>), run as a child process. */
export interface ScriptSection {
  section: SectionName;
  script: string;
  args(quick: boolean): string[];
  /** What stderr says while it runs. */
  title(quick: boolean): string;
}

export const SCRIPT_SECTIONS: readonly ScriptSection[] = [
  {
    section: 'rollout',
    script: 'rollout.js',
    args: (quick) => (quick ? ['--replicas', '1000', '--nodes', '20'] : ['--replicas', '10000', '--nodes', '100']),
    title: (quick) => `rolling update, ${quick ? '1,000 replicas on 20' : '10,000 replicas on 100'} nodes…`,
  },
  {
    section: 'timetravel',
    script: 'timetravel.js',
    args: (quick) => (quick ? ['--quick'] : []),
    title: (quick) => `time travel, 20 hourly CronJobs over ${quick ? 3 : 30} virtual days…`,
  },
  {
    section: 'durable',
    script: 'etcd.js',
    args: (quick) => (quick ? ['--rounds', '1', '--seconds', '2'] : []),
    title: () => 'durable writes next to etcd (bench:etcd)…',
  },
  {
    section: 'replay',
    script: 'replay.js',
    args: (quick) => (quick ? ['--quick'] : []),
    title: () => 'sim replay of bench/scenarios/timetravel.yaml and trivial.yaml, command to result…',
  },
  {
    section: 'timetravel-scale',
    script: 'timetravel-scale.js',
    args: (quick) => (quick ? ['--nodes', '100', '--pods', '3000', '--hours', '2'] : []),
    title: (quick) =>
      quick
        ? 'time travel at scale, 100 nodes, 3,000 pods, 2 virtual hours…'
        : 'time travel at scale, 1,000 nodes, 30,000 pods, one virtual day…',
  },
];

/** A reading of a figure. `atTargetSize: false` (a --quick run's smaller cluster) gets no verdict. */
export interface Measured {
  value: number;
  /** Shown beside the value: the parts it was made of, or the size measured. */
  note?: string;
  atTargetSize?: boolean;
}

export interface Target {
  /** 'most': the figure must be ≤ value; 'least': ≥ value. */
  bound: 'most' | 'least';
  value: number;
}

export interface Figure<S extends SectionName = SectionName> {
  name: string;
  section: S;
  unit: 'ms' | 's' | 'MiB' | '×' | '';
  target: Target;
  read(result: SectionResults[S]): Measured | undefined;
}

const figure = <S extends SectionName>(f: Figure<S>): Figure => f as unknown as Figure;
const most = (value: number): Target => ({ bound: 'most', value });
const least = (value: number): Target => ({ bound: 'least', value });

function fanoutP99(f: FanoutFigures, watchers: number): Measured | undefined {
  const cases = f.cases.filter((c: FanoutCase) => c.watchers === watchers);
  if (cases.length === 0) return undefined;
  const worst = Math.max(...cases.map((c) => c.ackToEventMs.p99));
  const lost = cases.reduce((n, c) => n + c.lost, 0);
  return {
    value: worst,
    note: `${cases.map((c) => `${c.transport === 'ws' ? 'WebSocket' : 'HTTP'} ${c.ackToEventMs.p99.toFixed(2)}`).join(', ')} ms; ${lost} lost`,
  };
}

const startupOf = (s: StartupFigures) => s.figures.find((f) => f.nodes === 3 && f.launcher === 'node');

const densitySize = (d: DensityFigures): Pick<Measured, 'atTargetSize' | 'note'> => {
  const atTargetSize = d.nodes >= 5000 && d.pods >= 150_000;
  return { atTargetSize, note: `${d.nodes.toLocaleString('en-US')} nodes, ${d.pods.toLocaleString('en-US')} pods` };
};

export const FIGURES: readonly Figure[] = [
  figure({
    name: 'start-up: `node bin/sim.js serve` to listening (3 nodes), p50',
    section: 'startup',
    unit: 'ms',
    target: most(250),
    read: (s) => {
      const f = startupOf(s);
      return (
        f && {
          value: f.listeningMs.p50,
          note: `${f.listeningMs.n} runs, CPU by then ${f.cpuAtListeningMs.p50.toFixed(0)} ms`,
        }
      );
    },
  }),
  figure({
    name: 'start-up: to the first `kubectl get nodes`, p50',
    section: 'startup',
    unit: 'ms',
    target: most(450),
    read: (s) => {
      const ms = startupOf(s)?.firstGetNodesMs;
      return ms && { value: ms.p50 };
    },
  }),
  figure({
    name: 'time travel: 20 hourly CronJobs, 30 virtual days, 3 nodes (bench/timetravel)',
    section: 'timetravel',
    unit: 's',
    target: most(10),
    read: (t) => ({
      value: t.wallMs / 1000,
      note: `${t.days} days, ${(t.perDayMedianMs / 1000).toFixed(2)} s a day, CPU ${(t.cpuMs / 1000).toFixed(1)} s`,
      atTargetSize: t.days >= 30 && t.cronjobs >= 20,
    }),
  }),
  figure({
    name: 'time travel through `sim replay`, 3 virtual days, start-up included',
    section: 'replay',
    unit: 's',
    target: most(1.5),
    read: (r) => ({
      value: r.wallMs.timetravel / 1000,
      note: `CPU ${(r.cpuMs.timetravel / 1000).toFixed(2)} s; a trivial scenario ${(r.wallMs.trivial / 1000).toFixed(2)} s (CPU ${(r.cpuMs.trivial / 1000).toFixed(2)} s)`,
    }),
  }),
  figure({
    name: 'time travel at scale: 1,000 nodes, 30,000 pods, one virtual day',
    section: 'timetravel-scale',
    unit: 's',
    target: most(60),
    read: (t) => ({
      value: t.wallMs / 1000,
      note: `${t.nodes.toLocaleString('en-US')} nodes, ${t.podsRunning.toLocaleString('en-US')} pods, ${t.hours} h; CPU ${(t.cpuMs / 1000).toFixed(1)} s`,
      atTargetSize: t.nodes >= 1000 && t.podsRunning >= 30_000 && t.hours >= 24,
    }),
  }),
  figure({
    name: 'rolling update, 10,000 replicas on 100 nodes, with the watch of every pod',
    section: 'rollout',
    unit: 's',
    target: most(10),
    read: (r) => {
      const run = r.runs.find((x) => x.podWatch);
      return (
        run && {
          value: run.rolledOutMs / 1000,
          note: `${run.replicas.toLocaleString('en-US')} on ${run.nodes}; Available after ${(run.availableMs / 1000).toFixed(1)} s`,
          atTargetSize: run.replicas >= 10_000 && run.nodes >= 100,
        }
      );
    },
  }),
  figure({
    name: 'create over HTTP, ConfigMap, ratio to the empty route',
    section: 'create',
    unit: '',
    target: least(0.4),
    read: (c) => ({ value: c.ratios.ConfigMap, note: createNote(c, 'ConfigMap') }),
  }),
  figure({
    name: 'create over HTTP, Pod, ratio to the empty route',
    section: 'create',
    unit: '',
    target: least(0.3),
    read: (c) => ({ value: c.ratios.Pod, note: createNote(c, 'Pod') }),
  }),
  figure({
    name: 'durable (--data) creates, ratio to etcd side by side',
    section: 'durable',
    unit: '×',
    target: least(1.5),
    read: (d) => ({
      value: d.dataPerSecond / d.etcdPerSecond,
      note: `${d.dataPerSecond.toFixed(0)} / ${d.etcdPerSecond.toFixed(0)} writes/s, ${d.rounds} round(s)`,
    }),
  }),
  figure({
    name: '5,000 nodes / 150,000 pods: RSS after GC',
    section: 'density',
    unit: 'MiB',
    target: most(1536),
    read: (d) => ({ value: d.memorySteady.rss / 1024 / 1024, ...densitySize(d) }),
  }),
  figure({
    name: '5,000 nodes / 150,000 pods: longest event-loop delay, throughout',
    section: 'density',
    unit: 'ms',
    target: most(500),
    read: (d) => {
      // Results written before the density bench measured it have no such field: "not measured".
      const ms = d.longestEventLoopDelayMs as number | undefined;
      if (ms === undefined) return undefined;
      const size = densitySize(d);
      return {
        value: ms,
        ...size,
        note: `${size.note}; main thread busy ${d.longestEventLoopBusyMs.toFixed(0)} ms of it`,
      };
    },
  }),
  figure({
    name: 'watch fan-out p99, 100 watchers, 500 writes/s',
    section: 'fanout',
    unit: 'ms',
    target: most(20),
    read: (f) => fanoutP99(f, 100),
  }),
  figure({
    name: 'watch fan-out p99, 1,000 selective watchers, 1,000 writes/s',
    section: 'fanout',
    unit: 'ms',
    target: most(10),
    read: (f) => fanoutP99(f, 1000),
  }),
];

function createNote(c: SectionResults['create'], kind: 'ConfigMap' | 'Pod'): string {
  const rate = (name: string): string => (c.figures.find((f) => f.target === name)?.reqPerSec ?? NaN).toFixed(0);
  return `${rate(`kube-sim, create ${kind}`)} / ${rate(`empty route, ${kind} body`)} req/s`;
}

export interface Verdict {
  figure: string;
  section: string;
  measured?: number;
  unit: string;
  note?: string;
  target: string;
  /** 'met', 'not met', 'not measured' (nothing measures it yet), 'not run' (--only), 'smaller size' (--quick). */
  verdict: 'met' | 'not met' | 'not measured' | 'not run' | 'smaller size';
}

/** A measured value with its unit; `exact` (a target) shows no more digits than it has. */
export function formatValue(value: number, unit: Figure['unit'], exact = false): string {
  const digits = unit === 'ms' || unit === 'MiB' ? 0 : 2;
  const text = value.toLocaleString('en-US', {
    minimumFractionDigits: exact ? 0 : digits,
    maximumFractionDigits: digits,
  });
  if (unit === '') return text;
  return unit === '×' ? `${text}×` : `${text} ${unit}`;
}

/** Every declared figure, read from the results of the sections that ran (`ran`: those asked for). */
export function verdicts(results: Partial<Record<string, unknown>>, ran: (section: string) => boolean): Verdict[] {
  return FIGURES.map((f) => {
    const target = `${f.target.bound === 'most' ? '≤' : '≥'} ${formatValue(f.target.value, f.unit, true)}`;
    const base = { figure: f.name, section: f.section, unit: f.unit, target };
    const result = results[f.section];
    if (result === undefined) return { ...base, verdict: ran(f.section) ? 'not measured' : 'not run' };
    const m = f.read(result as never);
    if (m === undefined || !Number.isFinite(m.value)) return { ...base, verdict: 'not measured' };
    const met = f.target.bound === 'most' ? m.value <= f.target.value : m.value >= f.target.value;
    const verdict = m.atTargetSize === false ? 'smaller size' : met ? 'met' : 'not met';
    return { ...base, measured: m.value, ...(m.note === undefined ? {} : { note: m.note }), verdict };
  });
}

const measuredText = (v: Verdict): string =>
  v.measured === undefined
    ? '–'
    : `${formatValue(v.measured, v.unit as Figure['unit'])}${v.note ? ` (${v.note})` : ''}`;

const verdictText = (v: Verdict): string =>
  ({
    met: 'met',
    'not met': 'NOT MET',
    'not measured': 'not measured',
    'not run': 'not run (--only)',
    'smaller size': 'n/a: smaller size (--quick)',
  })[v.verdict];

/** Rows for bench/stats.ts's table(): header first. */
export function verdictRows(vs: readonly Verdict[]): string[][] {
  return [
    ['figure', 'measured', 'target', 'met?'],
    ...vs.map((v) => [v.figure, measuredText(v), v.target, verdictText(v)]),
  ];
}

/** The same as a Markdown table, to paste into BENCHMARKS.md. */
export function verdictMarkdown(vs: readonly Verdict[]): string {
  const cell = (s: string): string => s.replaceAll('|', '\\|');
  const lines = ['| figure | measured | target | met? |', '|---|---|---|---|'];
  for (const v of vs) lines.push(`| ${cell(v.figure)} | ${cell(measuredText(v))} | ${v.target} | ${verdictText(v)} |`);
  return `${lines.join('\n')}\n`;
}
