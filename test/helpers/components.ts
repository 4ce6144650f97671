import { spawn } from 'node:child_process';
import { track } from './processes.js';
import { ROOT } from './server.js';
import { SIM_BIN } from './sim.js';

export interface ComponentsProcess {
  stop(): Promise<void>;
  /** SIGKILL, as a crash. */
  kill(): Promise<void>;
  stderr(): string;
  stdout(): string;
}

/** A `sim serve` without the API server: resolves once it says its components are running. */
export function startComponents(args: string[]): Promise<ComponentsProcess> {
  const child = track(
    spawn(process.execPath, [SIM_BIN, 'serve', '--log-level', 'warn', ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exit = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no "components running" line in 20 s:\n${err}`)), 20_000);
    child.stdout!.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      if (!out.includes('kube-sim components running:')) return;
      clearTimeout(timer);
      const end = async (signal: NodeJS.Signals): Promise<void> => {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal);
        await exit;
      };
      resolve({ stderr: () => err, stdout: () => out, stop: () => end('SIGTERM'), kill: () => end('SIGKILL') });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sim serve exited (${code}) before running its components:\n${err}`));
    });
  });
}
