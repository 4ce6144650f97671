import type { ChildProcess } from 'node:child_process';
import { after } from 'node:test';

/**
 * Safety net for child processes (servers, `kubectl -w`): tests stop them in after-hooks, but if a hook never
 * runs (an earlier one threw), a live child and its pipes would keep the test file's process from ever exiting.
 * Whatever is still running once every test of the file has finished is killed.
 */
const live = new Set<ChildProcess>();

export function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

function reap(): void {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  live.clear();
}

after(reap);
process.once('exit', reap);
