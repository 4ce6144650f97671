import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { track } from './processes.js';
import { ROOT } from './server.js';

const OPERATOR = join(ROOT, 'dist/fixtures/operator/main.js');

/** One replica of the Operator: a child process whose log (stdout) can be awaited. */
export class Replica {
  log = '';
  private waiters: Array<() => void> = [];
  readonly child: ChildProcess;

  constructor(
    readonly id: string,
    kubeconfig: string,
    args: readonly string[] = [],
  ) {
    this.child = track(
      spawn(process.execPath, [OPERATOR, '--id', id, ...args], {
        env: { ...process.env, KUBECONFIG: kubeconfig },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    const append = (chunk: string): void => {
      this.log += chunk;
      for (const wake of this.waiters.splice(0)) wake();
    };
    this.child.stdout!.setEncoding('utf8').on('data', append);
    this.child.stderr!.setEncoding('utf8').on('data', append);
    this.child.on('exit', () => append(''));
  }

  /** Resolves once the log matches; fails after 30 s, or at once if the process has exited. */
  until(pattern: RegExp): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`operator ${this.id}: no log line matching ${pattern} within 30 s; log:\n${this.log}`)),
        30_000,
      );
      const check = (): void => {
        if (pattern.test(this.log)) {
          clearTimeout(timer);
          resolve();
        } else if (this.child.exitCode !== null || this.child.signalCode !== null) {
          clearTimeout(timer);
          reject(
            new Error(
              `operator ${this.id} exited (${this.child.exitCode ?? this.child.signalCode}) before logging ${pattern}; log:\n${this.log}`,
            ),
          );
        } else this.waiters.push(check);
      };
      check();
    });
  }

  async kill(signal: NodeJS.Signals): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill(signal);
    await exited;
  }
}
