import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { track } from './processes.js';
import { ROOT } from './server.js';

/**
 * Real clients other than kubectl and client-node, run as a user runs them: a script of theirs (test/clients/)
 * against a kubeconfig that `sim kubeconfig` wrote.
 */
export const CLIENT_SCRIPTS = join(ROOT, 'test/clients');

/**
 * Debian's python3 (python3-kubernetes is installed for it), not a pyenv python3 that may come first on PATH, and
 * Debian's ruby; KUBE_SIM_PYTHON and KUBE_SIM_RUBY point elsewhere (e.g. a missing path, to see the skips).
 */
export const PYTHON = process.env.KUBE_SIM_PYTHON ?? '/usr/bin/python3';
export const RUBY = process.env.KUBE_SIM_RUBY ?? '/usr/bin/ruby';

/** Why `binary` cannot load `library` here (its own words), or undefined when it can. */
function unusable(binary: string, args: string[], what: string): string | undefined {
  const probe = spawnSync(binary, args, { encoding: 'utf8', timeout: 30_000 });
  if (probe.status === 0) return undefined;
  const why = probe.error?.message ?? (probe.stderr.trim().split('\n').pop() || `exit ${probe.status}`);
  return `${what} is not usable here (${why}), so its end-to-end checks cannot run`;
}

let pythonProbe: string | undefined | null = null;
/** Why the official Python client cannot run, or undefined. */
export function pythonClientMissing(): string | undefined {
  if (pythonProbe === null)
    pythonProbe = unusable(
      PYTHON,
      ['-c', 'import kubernetes'],
      `the official Python client (Debian python3-kubernetes for ${PYTHON})`,
    );
  return pythonProbe;
}

let rubyProbe: string | undefined | null = null;
/** Why Ruby's kubeclient cannot run, or undefined. */
export function rubyClientMissing(): string | undefined {
  if (rubyProbe === null)
    rubyProbe = unusable(
      RUBY,
      ['-e', 'require "kubeclient"'],
      `Ruby's kubeclient (Debian ruby-kubeclient for ${RUBY})`,
    );
  return rubyProbe;
}

/** A kubeconfig for `serverUrl` as `sim kubeconfig` prints it, in a directory removed when the process exits. */
export function writeKubeconfig(serverUrl: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-client-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'kubeconfig');
  writeFileSync(
    file,
    execFileSync(process.execPath, [join(ROOT, 'bin/sim.js'), 'kubeconfig', '--server', serverUrl], {
      encoding: 'utf8',
    }),
  );
  return file;
}

/**
 * Runs a client script to completion and resolves with the JSON document it printed last; rejects with its
 * stderr (the client's traceback) when it fails or outlives `timeoutMs`.
 */
export function runClientScript<T>(binary: string, args: string[], timeoutMs = 60_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = track(
      spawn(binary, args, {
        // No bytecode caches written into the repository; no host kubeconfig or proxy in the way.
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          PYTHONDONTWRITEBYTECODE: '1',
          HOME: tmpdir(),
          LANG: 'C.UTF-8',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const what = `${binary} ${args.join(' ')}`;
      if (code !== 0) {
        reject(new Error(`${what} exited ${code ?? signal}${signal ? ' (timed out?)' : ''}:\n${stderr}\n${stdout}`));
        return;
      }
      const last = stdout.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(last) as T);
      } catch {
        reject(new Error(`${what} printed no JSON document:\n${stdout}\n${stderr}`));
      }
    });
  });
}
