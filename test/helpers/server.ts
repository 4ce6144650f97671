import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { track } from './processes.js';

/** The repository root, from dist/test/helpers/. */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SIM = fileURLToPath(new URL('../../../bin/sim.js', import.meta.url));

export interface SimServer {
  url: string;
  port: number;
  pid: number;
  /** SIGKILL, as a crash: no shutdown, no flush; resolves once the process is gone. */
  kill(): Promise<StopResult>;
  /** What the server wrote on stderr so far (its log), for failure messages. */
  stderr(): string;
  /** What the server printed on stdout up to its URL line and after (e.g. the --auth admin token). */
  stdout(): string;
  /** SIGTERM (a clean shutdown that flushes --data), SIGKILL if it hangs; resolves once the process is gone. */
  stop(): Promise<StopResult>;
}

export interface StopResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** It ignored SIGTERM for STOP_TIMEOUT_MS and had to be killed. */
  forced: boolean;
  /** When forced: what kept it alive, from a Node diagnostic report taken before the SIGKILL (open handles, JS stack). */
  hang?: string;
}

const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Asks a hung server for a Node diagnostic report and sums up what keeps it alive: ref'd handles and the JS stack. */
async function diagnose(child: ChildProcess, dir: string): Promise<string> {
  child.kill('SIGUSR2');
  for (let waited = 0; waited < 3_000; waited += 100) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const file = readdirSync(dir).find((f) => f.endsWith('.json'));
    if (!file) continue;
    try {
      const report = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
        javascriptStack?: { message?: string; stack?: string[] };
        libuv?: Array<{ type: string; is_active?: boolean; is_referenced?: boolean; [k: string]: unknown }>;
      };
      const handles = (report.libuv ?? []).filter((h) => h.is_active && h.is_referenced).map((h) => JSON.stringify(h));
      return [`ref'd handles:`, ...handles, 'JS stack:', ...(report.javascriptStack?.stack ?? [])].join('\n');
    } catch {
      // Still being written.
    }
  }
  return 'no diagnostic report within 3 s';
}

/** Starts `sim serve --port 0 ...args` as a child process and resolves with the URL it prints. */
export function startServer(args: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<SimServer> {
  // A server that hangs in shutdown is asked for a diagnostic report (SIGUSR2) before it is killed.
  const reports = mkdtempSync(join(tmpdir(), 'kube-sim-report-'));
  const child = track(
    spawn(
      process.execPath,
      [
        '--report-on-signal',
        '--report-signal=SIGUSR2',
        '--report-compact',
        `--report-directory=${reports}`,
        SIM,
        'serve',
        '--port',
        '0',
        '--log-level',
        'warn',
        ...args,
      ],
      {
        cwd: ROOT,
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  let out = '';
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      rmSync(reports, { recursive: true, force: true });
      resolve();
    }),
  );
  let forced = false;
  let hang: string | undefined;
  const result = (): StopResult => ({
    code: child.exitCode,
    signal: child.signalCode,
    forced,
    ...(hang === undefined ? {} : { hang }),
  });

  const stop = async (): Promise<StopResult> => {
    if (exited(child)) return result();
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), STOP_TIMEOUT_MS)));
    if ((await Promise.race([exit, hung])) === 'hung' && !exited(child)) {
      forced = true;
      hang = await diagnose(child, reports);
      child.kill('SIGKILL');
      await exit;
    }
    clearTimeout(timer);
    return result();
  };

  return new Promise<SimServer>((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`sim serve did not print its URL within ${START_TIMEOUT_MS} ms; stderr:\n${err}`));
    }, START_TIMEOUT_MS);
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const match = /kube-sim serving on (https?:\/\/\S+)/.exec(out);
      if (!match) return;
      clearTimeout(timer);
      child.stdout!.removeAllListeners('data');
      child.stdout!.on('data', (more: string) => (out += more)); // keep draining so the child never blocks on a full pipe
      const url = match[1]!;
      const kill = async (): Promise<StopResult> => {
        if (!exited(child)) {
          child.kill('SIGKILL');
          await exit;
        }
        return result();
      };
      resolve({
        url,
        port: Number(new URL(url).port),
        pid: child.pid!,
        stderr: () => err,
        stdout: () => out,
        stop,
        kill,
      });
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`sim serve exited (${code ?? signal}) before serving; stderr:\n${err}`));
    });
  });
}

/** Starts a server that is stopped when the test (or suite) `t` ends. */
export async function serverFor(
  t: Pick<TestContext, 'after'>,
  args: string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<SimServer> {
  const server = await startServer(args, env);
  t.after(async () => {
    await server.stop();
  });
  return server;
}
