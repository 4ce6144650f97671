/**
 * `node dist/bench/replay.js [--runs 3] [--quick]` (and `npm run bench -- --only replay`)
 *
 * Time travel as users meet it (issue 23): `node bin/sim.js replay bench/scenarios/timetravel.yaml` — 20 hourly
 * CronJobs on 3 nodes, pods of a minute, three virtual days — timed as a whole process from the command to its
 * result, start-up included (target ≤ 1.5 s), and the same for bench/scenarios/trivial.yaml (one second of
 * cluster time and one check: what any replay costs). Each is run `--runs` times, in turn; the medians are
 * reported, with each run's CPU time (read by the process itself at exit, all its threads). The replay must pass.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { reportToBench } from './report.js';
import { fmt, median, table } from './stats.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SCENARIOS = { timetravel: 'bench/scenarios/timetravel.yaml', trivial: 'bench/scenarios/trivial.yaml' } as const;
type Scenario = keyof typeof SCENARIOS;

export interface ReplayRun {
  wallMs: number;
  cpuMs: number;
  exitCode: number | null;
}

export interface ReplayFigures {
  runs: Record<Scenario, ReplayRun[]>;
  wallMs: Record<Scenario, number>;
  cpuMs: Record<Scenario, number>;
}

async function timeReplay(file: string, dir: string): Promise<ReplayRun> {
  const cpuFile = join(dir, 'cpu');
  const started = performance.now();
  const child = spawn(
    process.execPath,
    ['--require', fileURLToPath(new URL('../../bench/cpu-at-exit.cjs', import.meta.url)), 'bin/sim.js', 'replay', file],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, KUBE_SIM_BENCH_CPU_FILE: cpuFile } },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exitCode = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const wallMs = performance.now() - started;
  if (exitCode !== 0) throw new Error(`sim replay ${file} exited with ${exitCode}: ${stderr.slice(-1000)}`);
  return { wallMs, cpuMs: Number(readFileSync(cpuFile, 'utf8')), exitCode };
}

export async function measureReplay(runs: number): Promise<ReplayFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-bench-replay-'));
  try {
    const all: Record<Scenario, ReplayRun[]> = { timetravel: [], trivial: [] };
    // A warm-up of each (the file cache), then the two in turn.
    for (const s of Object.keys(SCENARIOS) as Scenario[]) await timeReplay(SCENARIOS[s], dir);
    for (let r = 0; r < runs; r++)
      for (const s of Object.keys(SCENARIOS) as Scenario[]) all[s].push(await timeReplay(SCENARIOS[s], dir));
    const of = (s: Scenario, k: 'wallMs' | 'cpuMs'): number => median(all[s].map((r) => r[k]));
    return {
      runs: all,
      wallMs: { timetravel: of('timetravel', 'wallMs'), trivial: of('trivial', 'wallMs') },
      cpuMs: { timetravel: of('timetravel', 'cpuMs'), trivial: of('trivial', 'cpuMs') },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printReplay(f: ReplayFigures): void {
  const row = (s: Scenario, what: string, target: string): string[] => [
    what,
    `${fmt(f.wallMs[s] / 1000, 2)} s (${f.runs[s].map((r) => fmt(r.wallMs / 1000, 2)).join(', ')})`,
    `${fmt(f.cpuMs[s] / 1000, 2)} s`,
    target,
  ];
  console.log(`\n### sim replay, command to result (${f.runs.timetravel.length} runs each, median)\n`);
  console.log(
    table([
      ['scenario', 'wall (runs)', 'CPU', 'target'],
      row('timetravel', `${SCENARIOS.timetravel}: 20 hourly CronJobs, 3 nodes, 3 virtual days`, '≤ 1.5 s'),
      row('trivial', `${SCENARIOS.trivial}: one second, one check`, ''),
    ]),
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2);
  const i = argv.indexOf('--runs');
  const runs = i >= 0 ? Number(argv[i + 1]) : argv.includes('--quick') ? 1 : 3;
  const figures = await measureReplay(runs);
  printReplay(figures);
  reportToBench(figures);
}
