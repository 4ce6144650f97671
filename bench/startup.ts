/**
 * Start-up (issue 8, figure 6): `sim serve --port 0` spawned as a user would (`node bin/sim.js`), timed from
 * the spawn to the "serving on" line (listening, every node registered) and to the first `kubectl get nodes`
 * that succeeds and lists every node (kubectl is started again every 10 ms until then). For scale: node's own
 * start (`node -e ''`) and kubectl's own (`kubectl version --client`), which the figures include.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { procCpuMs, urlPrinted } from './server-process.js';
import { fmt, median, summarize, table, type Summary } from './stats.js';

export interface StartupOptions {
  reps: number;
  nodeCounts: number[];
  kubectl: string;
}

/** How the server is started: `node bin/sim.js`, or `npx sim` as README's set-up line shows it (npx's own start included). */
export type Launcher = 'node' | 'npx';

export interface StartupFigure {
  nodes: number;
  launcher: Launcher;
  listeningMs: Summary;
  firstGetNodesMs?: Summary;
  /** CPU time the server process had used when it printed its URL (less disturbed by a busy machine than wall time). */
  cpuAtListeningMs: Summary;
  runs: Array<{ listeningMs: number; cpuMs?: number; firstGetNodesMs?: number; kubectlTries?: number }>;
}

export interface StartupFigures {
  nodeAloneMs: number;
  kubectlAloneMs?: number;
  figures: StartupFigure[];
}

const SIM = fileURLToPath(new URL('../../bin/sim.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function run(file: string, args: string[]): Promise<{ ok: boolean; stdout: string }> {
  return new Promise((resolve) => execFile(file, args, (err, stdout) => resolve({ ok: !err, stdout })));
}

async function timeIt(file: string, args: string[]): Promise<number> {
  const t0 = performance.now();
  await run(file, args);
  return performance.now() - t0;
}

async function once(
  nodes: number,
  kubectl: string | undefined,
  launcher: Launcher,
): Promise<StartupFigure['runs'][number]> {
  const t0 = performance.now();
  const [program, ...pre] = launcher === 'npx' ? ['npx', 'sim'] : [process.execPath, SIM];
  // Its own process group: npx runs the server as its child, and both are stopped together.
  const child = spawn(program!, [...pre, 'serve', '--port', '0', '--nodes', String(nodes), '--log-level', 'warn'], {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const signal = (name: NodeJS.Signals): void => {
    try {
      process.kill(-child.pid!, name);
    } catch {
      // already gone
    }
  };
  try {
    const url = await urlPrinted(child, /serving on (http:\/\/\S+)/);
    const listeningMs = performance.now() - t0;
    // With npx the child is npx, not the server: no CPU figure.
    const cpuMs = launcher === 'node' ? procCpuMs(child.pid!) : undefined;
    if (!kubectl) return { listeningMs, cpuMs };
    for (let tries = 1; tries <= 500; tries++) {
      const r = await run(kubectl, ['--server', url, 'get', 'nodes', '--no-headers']);
      if (r.ok && r.stdout.trim().split('\n').length === nodes)
        return { listeningMs, cpuMs, firstGetNodesMs: performance.now() - t0, kubectlTries: tries };
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`kubectl get nodes did not list ${nodes} nodes`);
  } finally {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    signal('SIGTERM');
    const timer = setTimeout(() => signal('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}

export async function measureStartup(o: StartupOptions): Promise<StartupFigures> {
  const kubectl = existsSync(o.kubectl) ? o.kubectl : undefined;
  if (!kubectl) process.stderr.write(`  ${o.kubectl} not found: start-up is measured to listening only\n`);
  const nodeAlone: number[] = [];
  const kubectlAlone: number[] = [];
  for (let i = 0; i < o.reps; i++) {
    nodeAlone.push(await timeIt(process.execPath, ['-e', '']));
    if (kubectl) kubectlAlone.push(await timeIt(kubectl, ['version', '--client']));
  }
  const figures: StartupFigure[] = [];
  const cases: Array<{ nodes: number; launcher: Launcher }> = [
    ...o.nodeCounts.map((nodes) => ({ nodes, launcher: 'node' as const })),
    { nodes: 3, launcher: 'npx' },
  ];
  for (const { nodes, launcher } of cases) {
    const runs: StartupFigure['runs'] = [];
    for (let i = 0; i < o.reps; i++) runs.push(await once(nodes, kubectl, launcher));
    const figure: StartupFigure = {
      nodes,
      launcher,
      listeningMs: summarize(runs.map((r) => r.listeningMs)),
      cpuAtListeningMs: summarize(runs.flatMap((r) => (r.cpuMs === undefined ? [] : [r.cpuMs]))),
      runs,
    };
    if (kubectl) figure.firstGetNodesMs = summarize(runs.map((r) => r.firstGetNodesMs!));
    figures.push(figure);
    process.stderr.write(
      `  ${launcher === 'npx' ? 'npx sim serve' : 'node bin/sim.js serve'} --nodes ${nodes}: listening p50 ${fmt(figure.listeningMs.p50, 0)} ms${figure.firstGetNodesMs ? `, first kubectl get nodes p50 ${fmt(figure.firstGetNodesMs.p50, 0)} ms` : ''}\n`,
    );
  }
  const result: StartupFigures = { nodeAloneMs: median(nodeAlone), figures };
  if (kubectl) result.kubectlAloneMs = median(kubectlAlone);
  return result;
}

export function printStartup(s: StartupFigures, o: StartupOptions): void {
  console.log(
    `\nStart-up: sim serve --port 0 spawned to listening, and to the first successful kubectl get nodes (${o.reps} runs each; targets ≤ 250 ms and ≤ 450 ms)`,
  );
  console.log(
    table([
      [
        'sim serve',
        'listening p50 ms',
        'min',
        'max',
        'CPU used by then p50 ms',
        'first kubectl get nodes p50 ms',
        'min',
        'max',
      ],
      ...s.figures.map((f) => [
        `${f.launcher === 'npx' ? 'npx sim serve' : 'node bin/sim.js serve'} --nodes ${f.nodes}`,
        fmt(f.listeningMs.p50, 0),
        fmt(f.listeningMs.min, 0),
        fmt(f.listeningMs.max, 0),
        fmt(f.cpuAtListeningMs.p50, 0),
        f.firstGetNodesMs ? fmt(f.firstGetNodesMs.p50, 0) : '-',
        f.firstGetNodesMs ? fmt(f.firstGetNodesMs.min, 0) : '-',
        f.firstGetNodesMs ? fmt(f.firstGetNodesMs.max, 0) : '-',
      ]),
    ]),
  );
  console.log(
    `for scale: node -e '' takes ${fmt(s.nodeAloneMs, 0)} ms${s.kubectlAloneMs !== undefined ? `, kubectl version --client ${fmt(s.kubectlAloneMs, 0)} ms` : ''} (medians)`,
  );
}
