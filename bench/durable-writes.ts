/**
 * Durable create throughput: `sim serve` in memory against `sim serve --data DIR` (write-ahead log, an fsync
 * before each response, group commit). Creates N ConfigMaps over HTTP at a few concurrency levels and prints
 * creates/s and latency percentiles. Run: `tsc -p . && node dist/bench/durable-writes.js [N]`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { post } from './http-post.js';

const SIM = fileURLToPath(new URL('../../bin/sim.js', import.meta.url));
const N = Number(process.argv[2] ?? 4000);
const CONCURRENCY = [1, 16, 64, 256];

function start(args: string[]): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [SIM, 'serve', '--port', '0', '--nodes', '0', '--log-level', 'error', ...args],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const m = /serving on http:\/\/[^:]+:(\d+)/.exec(out);
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.once('exit', (code) => reject(new Error(`sim serve exited ${code}`)));
  });
}

async function run(
  port: number,
  namespace: string,
  concurrency: number,
): Promise<{ perSecond: number; p50: number; p99: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  await post(agent, port, '/api/v1/namespaces', JSON.stringify({ metadata: { name: namespace } }));
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (next < N) {
      const i = next++;
      const t0 = performance.now();
      const code = await post(
        agent,
        port,
        `/api/v1/namespaces/${namespace}/configmaps`,
        JSON.stringify({
          metadata: { name: `cm-${i}`, labels: { app: 'bench' } },
          data: { key: `value-${i}`, more: 'x'.repeat(200) },
        }),
      );
      if (code !== 201) throw new Error(`create answered ${code}`);
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const pct = (p: number): number => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))]!;
  return { perSecond: N / seconds, p50: pct(0.5), p99: pct(0.99) };
}

const dir = mkdtempSync(join(tmpdir(), 'kube-sim-bench-wal-'));
try {
  console.log(`${N} ConfigMap creates over HTTP per row (server in its own process, --nodes 0)`);
  console.log('mode        concurrency  creates/s   p50 ms   p99 ms   writes/fsync');
  const wal = join(dir, 'data', 'wal.log');
  const commits = (): number => (existsSync(wal) ? readFileSync(wal, 'utf8').split('{"t":"B"').length - 1 : 0);
  for (const [mode, args] of [
    ['in-memory', []],
    ['--data', ['--data', join(dir, 'data')]],
  ] as const) {
    const { child, port } = await start([...args]);
    for (const c of CONCURRENCY) {
      const before = commits();
      const r = await run(port, `bench-${c}`, c);
      const perFsync = mode === '--data' ? (N / Math.max(1, commits() - before)).toFixed(1) : '';
      console.log(
        `${mode.padEnd(11)} ${String(c).padStart(11)}  ${r.perSecond.toFixed(0).padStart(9)}  ${r.p50.toFixed(2).padStart(7)}  ${r.p99.toFixed(2).padStart(7)}  ${perFsync.padStart(13)}`,
      );
    }
    child.kill('SIGKILL');
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
