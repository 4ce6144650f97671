import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { wallClock } from '../clock/clock.js';
import { kubeconfigYaml, type Connection } from '../client/kubeconfig.js';

/** The kubectl to run: $KUBE_SIM_KUBECTL (as the tests use), else the first `kubectl` on PATH. */
export function findKubectl(): string | undefined {
  const explicit = process.env.KUBE_SIM_KUBECTL;
  if (explicit) return existsSync(explicit) ? explicit : undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'kubectl');
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** Splits a command line into words: whitespace separates, single and double quotes group, backslash escapes. */
export function splitArgs(line: string): string[] {
  const out: string[] = [];
  let current = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote) {
      if (ch === quote) quote = undefined;
      else if (ch === '\\' && quote === '"' && i + 1 < line.length) current += line[++i];
      else current += ch;
      continue;
    }
    if (ch === '"' || ch === "'") {
      quote = ch;
      inWord = true;
    } else if (ch === '\\' && i + 1 < line.length) {
      current += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) out.push(current);
      current = '';
      inWord = false;
    } else {
      current += ch;
      inWord = true;
    }
  }
  if (quote) throw new Error(`unbalanced ${quote} in: ${line}`);
  if (inWord) out.push(current);
  return out;
}

export interface KubectlRun {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/**
 * Runs kubectl against the server with none of the user's kubeconfig (nothing of their cluster config leaks in)
 * and a throwaway discovery cache, in `cwd` so relative `-f` paths resolve next to the scenario file. A token or
 * CA goes in a kubeconfig of its own in the throwaway home (mode 0600), not on the command line, where `ps` shows it.
 */
export function runKubectl(
  binary: string,
  connection: Connection,
  args: string[],
  options: { stdin?: string; cwd: string; timeoutMs: number },
): Promise<KubectlRun> {
  const home = mkdtempSync(join(tmpdir(), 'kube-sim-replay-'));
  const server = connection.server;
  let kubeconfig = '/dev/null';
  let serverArgs = ['--server', server];
  if (connection.token !== undefined || connection.caCert !== undefined || connection.insecureSkipTlsVerify) {
    kubeconfig = join(home, 'kubeconfig');
    writeFileSync(kubeconfig, kubeconfigYaml(connection), { mode: 0o600 });
    serverArgs = [];
  }
  return new Promise((resolve, reject) => {
    const child = spawn(binary, [...serverArgs, ...args], {
      cwd: options.cwd,
      env: { ...process.env, KUBECONFIG: kubeconfig, HOME: home, KUBECACHEDIR: join(home, 'cache') },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = wallClock.setTimer(options.timeoutMs, () => {
      timedOut = true;
      child.kill('SIGKILL');
    });
    const cleanup = (): void => {
      timer.cancel();
      rmSync(home, { recursive: true, force: true });
    };
    child.on('error', (err) => {
      cleanup();
      reject(err);
    });
    child.on('close', (code) => {
      cleanup();
      // The server's address changes from run to run; reports show a placeholder so they stay comparable.
      const hostPort = server.replace(/^https?:\/\//, '');
      const scrub = (text: string): string => text.split(server).join('$SERVER').split(hostPort).join('$SERVER');
      resolve({ exitCode: code, stdout: scrub(stdout), stderr: scrub(stderr), timedOut });
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.stdin ?? '');
  });
}
