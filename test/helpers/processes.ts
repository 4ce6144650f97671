import type { ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';

/**
 * Safety net for child processes (servers, `kubectl -w`): tests stop them in after-hooks, but if a hook never
 * runs (an earlier one threw), a live child and its pipes would keep the test file's process from ever exiting.
 * Tracked children do not hold the event loop open, and any still running when the process exits are killed.
 */
const live = new Set<ChildProcess>();

export function track(child: ChildProcess): ChildProcess {
  if (live.size === 0) process.once('exit', reap);
  live.add(child);
  child.once('exit', () => live.delete(child));
  child.unref();
  for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as Socket | null)?.unref?.();
  return child;
}

function reap(): void {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  live.clear();
}
