import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { track } from './processes.js';

/** The real kubectl; KUBE_SIM_KUBECTL points elsewhere (e.g. a missing path, to see the skips). */
export const KUBECTL = process.env.KUBE_SIM_KUBECTL ?? '/usr/bin/kubectl';

/** Why kubectl tests cannot run here, or undefined when they can. */
export function kubectlMissing(): string | undefined {
  return existsSync(KUBECTL)
    ? undefined
    : `kubectl not installed: ${KUBECTL} is absent, so the kubectl end-to-end checks cannot run`;
}

/** The minor version of the kubectl under test (the dispatcher says "32+"), for output that differs by version. */
export function kubectlClientMinor(binary = KUBECTL): number {
  let minor = clientMinors.get(binary);
  if (minor === undefined) {
    const out = spawnSync(binary, ['version', '--client', '-o', 'json'], { encoding: 'utf8' }).stdout;
    minor = Number.parseInt((JSON.parse(out) as { clientVersion: { minor: string } }).clientVersion.minor, 10);
    clientMinors.set(binary, minor);
  }
  return minor;
}
const clientMinors = new Map<string, number>();

/** Skips the test (visibly) when kubectl is absent; returns true when the caller should stop. */
export function skipWithoutKubectl(t: Pick<TestContext, 'skip'>): boolean {
  const missing = kubectlMissing();
  if (missing) t.skip(missing);
  return missing !== undefined;
}

// kubectl runs with no kubeconfig (no credentials of the host leak in) and a discovery cache of its own,
// so a cache written for an earlier server on the same ephemeral port is never read.
let cacheDir: string | undefined;
function env(): NodeJS.ProcessEnv {
  if (!cacheDir) {
    const dir = mkdtempSync(join(tmpdir(), 'kube-sim-kubectl-'));
    cacheDir = dir;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return { ...process.env, KUBECONFIG: '/dev/null', KUBECACHEDIR: cacheDir, HOME: cacheDir };
}

export interface KubectlResult {
  stdout: string;
  stderr: string;
  code: number | null;
}

export interface KubectlOptions {
  /** Fed on stdin (for `-f -`). */
  input?: string;
  timeoutMs?: number;
  /** Another kubectl binary (e.g. a versioned one) instead of the dispatcher. */
  binary?: string;
  /** Extra environment variables (e.g. EDITOR for `kubectl edit`). */
  env?: Record<string, string>;
}

/**
 * Runs `kubectl --server URL ...args` to completion; with no server, kubectl goes where the kubeconfig in
 * `options.env.KUBECONFIG` points, so that a test of a written kubeconfig also tests its `server`.
 */
export function kubectl(
  server: string | undefined,
  args: string[],
  options: KubectlOptions = {},
): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(options.binary ?? KUBECTL, server === undefined ? args : ['--server', server, ...args], {
      env: { ...env(), ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`kubectl ${args.join(' ')} timed out; stdout: ${stdout} stderr: ${stderr}`));
    }, options.timeoutMs ?? 20_000);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code });
    });
    // kubectl may exit before reading its stdin (most commands never do): that EPIPE is not the test's failure.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

/**
 * kubectl bound to one server: `run` resolves with the result; `ok` asserts exit code 0 — failing with kubectl's
 * stderr, the server's log and `context()` (e.g. other processes' logs) — and resolves with stdout.
 */
export function kubectlAgainst(server: { url: string; stderr(): string }, context: () => string = () => '') {
  const run = (args: string[], input?: string, timeoutMs?: number): Promise<KubectlResult> =>
    kubectl(server.url, args, {
      ...(input === undefined ? {} : { input }),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    });
  const ok = async (args: string[], input?: string, timeoutMs?: number): Promise<string> => {
    const r = await run(args, input, timeoutMs);
    assert.equal(r.code, 0, `kubectl ${args.join(' ')} failed: ${r.stderr}\n${server.stderr()}\n${context()}`);
    return r.stdout;
  };
  return { run, ok };
}

/** A long-running kubectl (e.g. `get -w`) whose output can be awaited line by line. */
export class KubectlProcess {
  stdout = '';
  stderr = '';
  private waiters: Array<() => void> = [];
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    child.stdout!.setEncoding('utf8').on('data', (c: string) => {
      this.stdout += c;
      this.wake();
    });
    child.stderr!.setEncoding('utf8').on('data', (c: string) => {
      this.stderr += c;
      this.wake();
    });
    this.exited = new Promise((resolve) =>
      child.on('close', (code) => {
        this.wake();
        resolve(code);
      }),
    );
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  get lines(): string[] {
    return this.stdout.split('\n').filter((l) => l.trim() !== '');
  }

  /** Resolves once stdout satisfies the predicate. */
  until(predicate: (stdout: string) => boolean, what: string, timeoutMs = 10_000): Promise<void> {
    return this.waitFor(() => predicate(this.stdout), what, timeoutMs);
  }

  /** Resolves once stderr (where `-v=6` logs each request) satisfies the predicate. */
  untilStderr(predicate: (stderr: string) => boolean, what: string, timeoutMs = 10_000): Promise<void> {
    return this.waitFor(() => predicate(this.stderr), what, timeoutMs);
  }

  private waitFor(done: () => boolean, what: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(new Error(`kubectl: timed out waiting for ${what}; stdout:\n${this.stdout}\nstderr:\n${this.stderr}`)),
        timeoutMs,
      );
      const check = (): void => {
        if (done()) {
          clearTimeout(timer);
          resolve();
        } else if (this.child.exitCode !== null || this.child.signalCode !== null) {
          clearTimeout(timer);
          reject(
            new Error(
              `kubectl exited (${this.child.exitCode ?? this.child.signalCode}) while waiting for ${what}; stdout:\n${this.stdout}\nstderr:\n${this.stderr}`,
            ),
          );
        } else this.waiters.push(check);
      };
      check();
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    await this.exited;
  }
}

/**
 * Starts `kubectl --server URL ...args` in the background; stop it with `stop()` (do so in t.after). With
 * `stdin`, its standard input is a pipe the test writes to (`child.stdin`).
 */
export function spawnKubectl(server: string, args: string[], binary = KUBECTL, stdin = false): KubectlProcess {
  return new KubectlProcess(
    track(
      spawn(binary, ['--server', server, ...args], { env: env(), stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] }),
    ),
  );
}
