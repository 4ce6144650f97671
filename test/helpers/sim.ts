import { spawn, type SpawnOptions } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { track } from './processes.js';

export const SIM_BIN = fileURLToPath(new URL('../../../bin/sim.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface SimRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface SimRunOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  stdin?: string;
  timeoutMs?: number;
  /** Run this program instead of `node bin/sim.js` (e.g. an installed `sim`). */
  command?: string[];
}

/** Runs `sim ARGS…` to completion (killed after timeoutMs) and collects what it printed. */
export function runSim(args: string[], options: SimRunOptions = {}): Promise<SimRun> {
  const [program, ...pre] = options.command ?? [process.execPath, SIM_BIN];
  const spawnOptions: SpawnOptions = {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env, ...options.env },
    stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  };
  return new Promise((resolve, reject) => {
    const child = track(spawn(program!, [...pre, ...args], spawnOptions));
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    if (options.stdin !== undefined) child.stdin!.end(options.stdin);
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
