/**
 * How a benchmark that is a script of its own hands its figures to `npm run bench` (bench/targets.ts's
 * SCRIPT_SECTIONS): the run names a file in KUBE_SIM_BENCH_JSON, and the script writes its report there. Run by
 * hand, the script only prints.
 */
import { writeFileSync } from 'node:fs';

export function reportToBench(report: object): void {
  const file = process.env.KUBE_SIM_BENCH_JSON;
  if (file) writeFileSync(file, `${JSON.stringify(report)}\n`);
}

/** bench/rollout.ts: one entry a run. */
export interface RolloutReport {
  runs: Array<{ replicas: number; nodes: number; podWatch: boolean; availableMs: number; rolledOutMs: number }>;
}

/** bench/timetravel.ts. */
export interface TimetravelReport {
  days: number;
  cronjobs: number;
  nodes: number;
  wallMs: number;
  perDayMedianMs: number;
  cpuMs: number;
}

/** bench/etcd.ts: median writes/s of each target over the rounds. */
export interface DurableReport {
  rounds: number;
  etcdPerSecond: number;
  dataPerSecond: number;
  memoryPerSecond: number;
  overEtcdPerSecond: number[];
}
