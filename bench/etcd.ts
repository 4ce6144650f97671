/**
 * `npm run bench:etcd [-- --seconds S] [-- --rounds R] [-- --clients C]`
 *
 * Durable writes side by side: etcd (Debian's etcd-server, one member on 127.0.0.1, a fresh data dir, fsync on)
 * taking 2 KB puts through its HTTP/JSON gateway (POST /v3/kv/put, base64 key and value), against kube-sim with
 * --data (write-ahead log, fsync before each answer, group commit) taking ConfigMap creates holding a 2 KB value,
 * and kube-sim in memory as the ceiling. Each round measures the three in turn with the same load generator: C
 * concurrent keep-alive clients (64) for S seconds after a 1 s warm-up; every write is a new key. Prints writes/s,
 * latency percentiles, CPU per write (server and load generator) and writes per fsync, per round, then the
 * medians and their ratios. Then kube-sim over that etcd (`--etcd-servers`, a prefix of its own): one API server
 * taking the creates, and two taking alternate ones (each watching all of them into its cache). Last, watch fan-out
 * on each kube-sim (in memory, --data, etcd×1, etcd×2): 100 HTTP watchers of one namespace (spread over both servers
 * for etcd×2) and 200 creates/s (`--fanout-rate`), the delay from each create's answer to each watcher's event. Skips (exit 0) when etcd is not installed:
 * `apt-get install -y etcd-server`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { closeSync, existsSync, mkdtempSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { procCpuMs, spawnServer } from './server-process.js';
import { post } from './http-post.js';
import { median, summarize } from './stats.js';
import { reportToBench } from './report.js';
import { fanoutAcross } from './fanout.js';

function option(flag: string, fallback: number): number {
  const i = process.argv.indexOf(flag);
  const value = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${flag} must be a positive number`);
  return value;
}

const SECONDS = option('--seconds', 8);
const ROUNDS = option('--rounds', 3);
const CLIENTS = option('--clients', 64);
const VALUE_BYTES = 2048;
const WARMUP_MS = 1000;
const FANOUT_WATCHERS = 100;
const FANOUT_RATE = option('--fanout-rate', 200);

function etcdBinary(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v etcd'], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

interface Target {
  name: string;
  /** The processes whose CPU counts as the server's (two for two API servers over etcd, etcd itself not included). */
  pids: number[];
  /** fsyncs of the server's log so far: writes/fsync shows how far group commit amortises them. */
  fsyncs(): Promise<number>;
  /** Sends write number i; resolves with the HTTP status. */
  write(agent: http.Agent, i: number): Promise<number>;
  ok: number;
}

async function startEtcd(binary: string, dir: string): Promise<{ child: ChildProcess; port: number }> {
  const [port, peer] = [await freePort(), await freePort()];
  const child = spawn(
    binary,
    [
      '--name',
      'bench',
      '--data-dir',
      join(dir, 'etcd'),
      '--listen-client-urls',
      `http://127.0.0.1:${port}`,
      '--advertise-client-urls',
      `http://127.0.0.1:${port}`,
      '--listen-peer-urls',
      `http://127.0.0.1:${peer}`,
      '--initial-advertise-peer-urls',
      `http://127.0.0.1:${peer}`,
      '--initial-cluster',
      `bench=http://127.0.0.1:${peer}`,
      '--logger',
      'zap',
      '--log-level',
      'error',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  process.on('exit', () => child.kill('SIGKILL'));
  const agent = new http.Agent({ keepAlive: false });
  for (let tries = 0; ; tries++) {
    if (child.exitCode !== null) throw new Error(`etcd exited with ${child.exitCode}`);
    try {
      const status = await post(
        agent,
        port,
        '/v3/kv/range',
        JSON.stringify({ key: Buffer.from('probe').toString('base64') }),
      );
      if (status === 200) return { child, port };
    } catch {
      // not listening yet
    }
    if (tries > 200) throw new Error('etcd did not start within 20 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** etcd's own count of WAL fsyncs, from its Prometheus metrics. */
function etcdWalFsyncs(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/metrics' }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => (text += c));
        res.on('end', () =>
          resolve(Number(/^etcd_disk_wal_fsync_duration_seconds_count (\d+)/m.exec(text)?.[1] ?? NaN)),
        );
      })
      .on('error', reject);
  });
}

interface Result {
  perSecond: number;
  p50: number;
  p99: number;
  cpuMsPerWrite: number;
  /** This process's CPU per write: the load generator's share of the machine. */
  clientCpuMsPerWrite: number;
  writesPerFsync: number;
}

/** CLIENTS workers writing back to back for WARMUP_MS, then counted for SECONDS. */
async function measure(target: Target, round: number): Promise<Result> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  let next = 0;
  let counting = false;
  let stop = false;
  const latencies: number[] = [];
  const worker = async (): Promise<void> => {
    while (!stop) {
      const i = next++;
      const t0 = performance.now();
      const status = await target.write(agent, round * 10_000_000 + i);
      if (status !== target.ok) throw new Error(`${target.name}: write answered ${status}`);
      if (counting) latencies.push(performance.now() - t0);
    }
  };
  const workers = Array.from({ length: CLIENTS }, worker);
  await new Promise((resolve) => setTimeout(resolve, WARMUP_MS));
  counting = true;
  const serverCpu = (): number => target.pids.reduce((sum, pid) => sum + (procCpuMs(pid) ?? 0), 0);
  const cpuBefore = serverCpu();
  const fsyncsBefore = await target.fsyncs();
  const clientBefore = process.cpuUsage();
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
  const seconds = (performance.now() - started) / 1000;
  const cpu = serverCpu() - cpuBefore;
  const client = process.cpuUsage(clientBefore);
  const fsyncs = (await target.fsyncs()) - fsyncsBefore;
  counting = false;
  const counted = latencies.length;
  stop = true;
  await Promise.all(workers);
  agent.destroy();
  const latency = summarize(latencies);
  return {
    perSecond: counted / seconds,
    p50: latency.p50,
    p99: latency.p99,
    cpuMsPerWrite: cpu / Math.max(1, counted),
    clientCpuMsPerWrite: (client.user + client.system) / 1000 / Math.max(1, counted),
    writesPerFsync: fsyncs > 0 ? counted / fsyncs : NaN,
  };
}

/**
 * Counts commit markers in kube-sim's log, reading only what was appended since the last look; a compaction
 * (the log passed 64 MiB) empties the file, after which counting starts again from its beginning.
 */
class CommitCounter {
  private offset = 0;
  private commits = 0;
  private carry = '';
  private timer: NodeJS.Timeout;

  constructor(private readonly file: string) {
    // Sampled often enough that a compaction never hides commits appended before it (64 MiB takes seconds).
    this.timer = setInterval(() => this.count(), 250);
    this.timer.unref();
  }

  count(): number {
    if (!existsSync(this.file)) return this.commits;
    const size = statSync(this.file).size;
    if (size < this.offset) {
      this.offset = 0;
      this.carry = '';
    }
    if (size > this.offset) {
      const fd = openSync(this.file, 'r');
      const chunk = Buffer.alloc(size - this.offset);
      readSync(fd, chunk, 0, chunk.length, this.offset);
      closeSync(fd);
      this.offset = size;
      const text = this.carry + chunk.toString('latin1');
      this.commits += text.split(MARKER).length - 1;
      this.carry = text.slice(-(MARKER.length - 1));
    }
    return this.commits;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
const MARKER = '{"t":"B"';

const binary = etcdBinary();
if (!binary) {
  console.log(
    'bench:etcd skipped: etcd is not installed (Debian: apt-get install -y etcd-server), so there is nothing to compare with',
  );
  process.exit(0);
}
const version = spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0];
const dir = mkdtempSync(join(os.tmpdir(), 'kube-sim-bench-etcd-'));
try {
  const etcd = await startEtcd(binary, dir);
  const sim = await spawnServer(['--nodes', '0', '--data', join(dir, 'sim')]);
  const memory = await spawnServer(['--nodes', '0']);
  // kube-sim over the same etcd member (a prefix of its own, so etcd's raw puts are not in its caches): one API
  // server, then two taking alternate writes, each watching everything both write.
  const overEtcd = ['--nodes', '0', '--etcd-servers', `http://127.0.0.1:${etcd.port}`, '--etcd-prefix', '/bench-sim'];
  const onEtcd = await spawnServer([...overEtcd, '--etcd-compaction-interval', '0']);
  const onEtcd2 = await spawnServer([...overEtcd, '--etcd-compaction-interval', '0', '--controllers=-*']);
  const etcdPorts = [onEtcd, onEtcd2].map((s) => Number(new URL(s.url).port));
  const simPort = Number(new URL(sim.url).port);
  const walCommits = new CommitCounter(join(dir, 'sim', 'wal.log'));
  const memoryPort = Number(new URL(memory.url).port);
  const simAgent = new http.Agent({ keepAlive: false });
  for (const port of [simPort, memoryPort, etcdPorts[0]!])
    await post(
      simAgent,
      port,
      '/api/v1/namespaces',
      JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bench' } }),
    );
  const configMap = (i: number): string =>
    JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}` }, data: { value: simValue } });
  // The same 2 KB of payload for both: random bytes, base64 for etcd's JSON gateway, hex text in the ConfigMap.
  const value = randomBytes(VALUE_BYTES);
  const etcdValue = value.toString('base64');
  const simValue = value.toString('hex').slice(0, VALUE_BYTES);
  const targets: Target[] = [
    {
      name: 'etcd',
      pids: [etcd.child.pid!],
      ok: 200,
      fsyncs: () => etcdWalFsyncs(etcd.port),
      write: (agent, i) =>
        post(
          agent,
          etcd.port,
          '/v3/kv/put',
          JSON.stringify({
            key: Buffer.from(`/registry/configmaps/bench/cm-${i}`).toString('base64'),
            value: etcdValue,
          }),
        ),
    },
    {
      name: 'kube-sim --data',
      pids: [sim.child.pid!],
      ok: 201,
      // Each group commit starts with a marker record ({"t":"B",…}) and ends with one fdatasync.
      fsyncs: async () => walCommits.count(),
      write: (agent, i) => post(agent, simPort, '/api/v1/namespaces/bench/configmaps', configMap(i)),
    },
    {
      name: 'kube-sim etcd×1',
      pids: [onEtcd.child.pid!],
      ok: 201,
      fsyncs: () => etcdWalFsyncs(etcd.port),
      write: (agent, i) => post(agent, etcdPorts[0]!, '/api/v1/namespaces/bench/configmaps', configMap(i)),
    },
    {
      name: 'kube-sim etcd×2',
      pids: [onEtcd.child.pid!, onEtcd2.child.pid!],
      ok: 201,
      fsyncs: () => etcdWalFsyncs(etcd.port),
      // Names of their own: the two etcd targets share the prefix and namespace.
      write: (agent, i) =>
        post(agent, etcdPorts[i % 2]!, '/api/v1/namespaces/bench/configmaps', configMap(i + 5_000_000)),
    },
    {
      name: 'kube-sim memory',
      pids: [memory.child.pid!],
      ok: 201,
      fsyncs: async () => 0,
      write: (agent, i) => post(agent, memoryPort, '/api/v1/namespaces/bench/configmaps', configMap(i)),
    },
  ];
  console.log(
    `${version}, one member, fsync on; kube-sim --data (group commit) — ${CLIENTS} keep-alive clients, ${VALUE_BYTES}-byte values, ${SECONDS} s per run after ${WARMUP_MS / 1000} s warm-up`,
  );
  console.log(
    `machine: ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} at start`,
  );
  console.log(
    'round  target            writes/s   p50 ms   p99 ms   server CPU ms/write   client CPU ms/write   writes/fsync',
  );
  const results = new Map<string, Result[]>(targets.map((t) => [t.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    // Rotate which goes first, so none always runs on the warmer (or busier) part of the round.
    const order = [...targets.slice(round % targets.length), ...targets.slice(0, round % targets.length)];
    for (const target of order) {
      const r = await measure(target, round);
      results.get(target.name)!.push(r);
      console.log(
        `${String(round + 1).padStart(5)}  ${target.name.padEnd(16)} ${r.perSecond.toFixed(0).padStart(9)}  ${r.p50.toFixed(2).padStart(7)}  ${r.p99.toFixed(2).padStart(7)}  ${r.cpuMsPerWrite.toFixed(3).padStart(20)}  ${r.clientCpuMsPerWrite.toFixed(3).padStart(20)}  ${(Number.isNaN(r.writesPerFsync) ? 'n/a' : r.writesPerFsync.toFixed(1)).padStart(13)}`,
      );
    }
  }
  const etcdRate = median(results.get('etcd')!.map((r) => r.perSecond));
  const simRate = median(results.get('kube-sim --data')!.map((r) => r.perSecond));
  const memoryRate = median(results.get('kube-sim memory')!.map((r) => r.perSecond));
  console.log(
    `median writes/s: etcd ${etcdRate.toFixed(0)}, kube-sim --data ${simRate.toFixed(0)}, kube-sim in memory ${memoryRate.toFixed(0)}`,
  );
  console.log(
    `kube-sim --data / etcd: ${(simRate / etcdRate).toFixed(2)}× (target ≥ 1.5×); --data / in memory: ${(simRate / memoryRate).toFixed(2)}×`,
  );
  const overEtcdRates = ['kube-sim etcd×1', 'kube-sim etcd×2'].map((n) =>
    median(results.get(n)!.map((r) => r.perSecond)),
  );
  console.log(
    `median writes/s over etcd (--etcd-servers): one API server ${overEtcdRates[0]!.toFixed(0)}, two ${overEtcdRates[1]!.toFixed(0)}`,
  );
  reportToBench({
    rounds: ROUNDS,
    etcdPerSecond: etcdRate,
    dataPerSecond: simRate,
    memoryPerSecond: memoryRate,
    overEtcdPerSecond: overEtcdRates,
  });
  // Watch fan-out: 100 watchers of one namespace, 200 creates/s, each watcher seeing every write; over etcd×2 the
  // watchers and the writes are spread over both API servers.
  console.log(
    `watch fan-out: ${FANOUT_WATCHERS} HTTP watchers, ${FANOUT_RATE} creates/s for ${SECONDS} s (load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')})`,
  );
  console.log(
    'target            writes/s   ack→event p50 ms   p99 ms   max ms   delivered   lost   server CPU µs/write',
  );
  const fanoutTargets: Array<{ name: string; servers: Array<{ url: string; child: ChildProcess }> }> = [
    { name: 'kube-sim memory', servers: [memory] },
    { name: 'kube-sim --data', servers: [sim] },
    { name: 'kube-sim etcd×1', servers: [onEtcd] },
    { name: 'kube-sim etcd×2', servers: [onEtcd, onEtcd2] },
  ];
  for (const target of fanoutTargets) {
    const f = await fanoutAcross(
      target.servers.map((s) => s.url),
      () => target.servers.reduce((sum, s) => sum + (procCpuMs(s.child.pid!) ?? 0), 0),
      {
        watchers: FANOUT_WATCHERS,
        rate: FANOUT_RATE,
        durationMs: SECONDS * 1000,
        namespace: `fanout-${target.servers.length}-${fanoutTargets.indexOf(target)}`,
      },
    );
    console.log(
      `${target.name.padEnd(16)} ${f.achievedWritesPerSec.toFixed(0).padStart(9)}  ${f.ackToEventMs.p50.toFixed(2).padStart(17)}  ${f.ackToEventMs.p99.toFixed(2).padStart(7)}  ${f.ackToEventMs.max.toFixed(1).padStart(7)}  ${`${f.delivered}/${f.expectedDeliveries}`.padStart(10)}  ${String(f.lost).padStart(5)}  ${f.serverCpuMicrosPerWrite.toFixed(0).padStart(20)}`,
    );
  }
  console.log(
    `load average at end ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  walCommits.stop();
  await sim.stop();
  await memory.stop();
  await onEtcd.stop();
  await onEtcd2.stop();
  etcd.child.kill('SIGTERM');
  await new Promise((resolve) => etcd.child.once('exit', resolve));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
