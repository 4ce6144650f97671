/**
 * `npm run bench [-- --quick] [-- --only SECTION[,SECTION…]] [-- --objects N] [-- --nodes N --pods N] [-- --out FILE]`
 * (sections: create, list, fanout, density, startup, snapshot, rollout, timetravel, durable, replay, timetravel-scale)
 *
 * 1. Create throughput over HTTP: 32 keep-alive connections POSTing ~1.5 KB ConfigMaps and Pods
 *    (metadata.generateName) to a kube-sim server in this process, next to an empty fastify route in the same
 *    process that parses the same body and echoes it. The load generator runs on a worker thread.
 * 2. List latency over 100,000 ConfigMaps (100 namespaces): full list, one namespace, a label selector
 *    matching 100 objects, and a limit=500 paginated walk; plus memory after loading.
 * 3. Watch fan-out over HTTP and WebSocket (bench/fanout.ts): 100 watchers that all match at 500 writes/s, 1,000
 *    watchers that each match a slice at 1,000 writes/s; delays, events lost, deliveries/s against a raw loop.
 * 4. Density (bench/density.ts): 5,000 nodes and 150,000 pods (--quick: 100 and 2,000): creation time, RSS,
 *    list pods -A, a label-selected list, Lease renew periods.
 * 5. Start-up (bench/startup.ts): sim serve to listening and to the first kubectl get nodes.
 * 6. Snapshots (bench/snapshot.ts): a 5,000-node cluster (--nodes; --quick: 100) exported (YAML,
 *    JSON), booted with sim serve --snapshot, and a what-if replayed on it (5,000 pods; --quick: 100 nodes, 200 pods).
 * 7. The benchmarks that are scripts of their own (bench/targets.ts's SCRIPT_SECTIONS: the rolling update, time
 *    travel, durable writes next to etcd, sim replay (bench/replay.ts), time travel at scale
 *    (bench/timetravel-scale.ts)), each run as a child process that hands its figures back.
 *
 * At the end, every figure issue 23 sets a target for (bench/targets.ts) with its target and whether it is met,
 * also written as bench-results.md (a Markdown table for BENCHMARKS.md) beside the JSON.
 *
 * Every measurement waits for the rest of the machine to be quiet and is repeated when other processes used
 * CPU during it (the figures say how many runs were undisturbed; --quick neither waits nor repeats). Prints tables and writes bench-results.json
 * at the repository root.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Worker } from 'node:worker_threads';
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { Cluster } from '../src/cluster/cluster.js';
import { buildServer } from '../src/server/server.js';
import { configMapBody, LIST_NAMESPACES, listNamespace, listObject, podBody } from './payloads.js';
import type {
  LatencyJob,
  LatencyResult,
  PaginateJob,
  PaginateResult,
  ThroughputJob,
  ThroughputResult,
  WorkerMessage,
  Job,
  JobResult,
} from './protocol.js';
import { fmt, median, mib, round, summarize, table, type Summary } from './stats.js';
import { measureDensity, printDensity } from './density.js';
import { measureFanout, printFanout } from './fanout.js';
import { measureStartup, printStartup } from './startup.js';
import { measureSnapshot, printSnapshot } from './snapshot.js';
import { childrenCpuMs } from './server-process.js';
import {
  SCRIPT_SECTIONS,
  verdictMarkdown,
  verdictRows,
  verdicts,
  type ScriptSection,
  type SectionName,
} from './targets.js';

type Section = SectionName;
const SECTIONS: readonly Section[] = [
  'create',
  'list',
  'fanout',
  'density',
  'startup',
  'snapshot',
  ...SCRIPT_SECTIONS.map((s) => s.section),
];
const KUBECTL = process.env.KUBE_SIM_KUBECTL ?? '/usr/bin/kubectl';

// ---------------------------------------------------------------------------------------------------------
// options

interface Options {
  quick: boolean;
  only?: Section[];
  objects: number;
  /** Density: simulated nodes and pods. */
  densityNodes: number;
  densityPods: number;
  connections: number;
  warmupMs: number;
  durationMs: number;
  rounds: number;
  /** Tries per run: a run during which other processes used more than maxOtherCpu cores is repeated. */
  attempts: number;
  maxOtherCpu: number;
  /** How long to wait for the machine to go quiet before each measurement. */
  quietWaitMs: number;
  out: string;
}

function parseArgs(argv: string[]): Options {
  const quick = argv.includes('--quick');
  const value = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const only = value('--only')?.split(',');
  for (const name of only ?? [])
    if (!(SECTIONS as readonly string[]).includes(name))
      throw new Error(`--only takes sections among ${SECTIONS.join(', ')}, not ${name}`);
  const objects = Number(value('--objects') ?? (quick ? 20_000 : 100_000));
  if (!Number.isInteger(objects) || objects < LIST_NAMESPACES)
    throw new Error(`--objects must be an integer ≥ ${LIST_NAMESPACES}`);
  return {
    quick,
    only: only as Section[] | undefined,
    objects,
    densityNodes: Number(value('--nodes') ?? (quick ? 100 : 5000)),
    densityPods: Number(value('--pods') ?? (quick ? 2000 : 150_000)),
    connections: 32,
    warmupMs: quick ? 500 : 1000,
    durationMs: quick ? 1500 : 5000,
    rounds: quick ? 1 : 5,
    // --quick is a one-minute look, not a measurement: one try, and no waiting for the machine to go quiet.
    attempts: quick ? 1 : 6,
    maxOtherCpu: 0.1,
    quietWaitMs: quick ? 0 : 180_000,
    out: value('--out') ?? fileURLToPath(new URL('../../bench-results.json', import.meta.url)),
  };
}

// ---------------------------------------------------------------------------------------------------------
// process helpers

function resolveGc(): () => void {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') return exposed as () => void;
  v8.setFlagsFromString('--expose-gc');
  const fn: unknown = vm.runInNewContext('gc');
  return typeof fn === 'function' ? (fn as () => void) : () => {};
}
const gc = resolveGc();
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Memory {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

/** Memory after a full collection; waits first, since closed servers release their sockets (and what those hold) a moment later. */
async function memory(): Promise<Memory> {
  await sleep(250);
  gc();
  gc();
  const m = process.memoryUsage();
  return {
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
  };
}

/** The commit measured, and whether src/ had uncommitted changes (the benchmark runs the working tree). */
function revision(): { commit: string; srcChanges: number } {
  try {
    const cwd = fileURLToPath(new URL('../..', import.meta.url));
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd, encoding: 'utf8' }).trim();
    const status = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd, encoding: 'utf8' });
    return { commit, srcChanges: status.split('\n').filter((l) => l.trim() !== '').length };
  } catch {
    return { commit: 'unknown', srcChanges: 0 };
  }
}

function machine(): Record<string, string | number> {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    totalMemory: os.totalmem(),
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
  };
}

/** CPU busy time of the whole machine so far (ms, summed over cores), from os.cpus(). */
function machineBusyMs(): number {
  let busy = 0;
  for (const cpu of os.cpus()) busy += cpu.times.user + cpu.times.nice + cpu.times.sys + cpu.times.irq;
  return busy;
}

/** CPU time the hypervisor took from this (virtual) machine so far, in ms (Linux /proc/stat "steal"; 0 elsewhere). */
function stolenMs(): number {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/);
    return Number(fields[8] ?? 0) * 10; // USER_HZ is 100
  } catch {
    return 0;
  }
}

/**
 * Measures, over a window, the CPU this process used and the CPU everything else took (other processes on the
 * machine, and the hypervisor's steal on a VM), both in cores, so that a run disturbed by other work shows it.
 */
class CpuWindow {
  private readonly wall = performance.now();
  private readonly own = process.cpuUsage();
  private readonly children = childrenCpuMs();
  private readonly machine = machineBusyMs();
  private readonly stolen = stolenMs();

  /** processCpu: this process and the servers it spawned (bench/server-process.ts), in cores. */
  stop(): { processCpu: number; otherCpu: number } {
    const wallMs = performance.now() - this.wall;
    const used = process.cpuUsage(this.own);
    const ownMs = (used.user + used.system) / 1000 + (childrenCpuMs() - this.children);
    const machineMs = machineBusyMs() - this.machine;
    const stolen = stolenMs() - this.stolen;
    return { processCpu: ownMs / wallMs, otherCpu: (Math.max(0, machineMs - ownMs) + stolen) / wallMs };
  }
}

/**
 * Waits until the rest of the machine is quiet: other processes under maxOtherCpu cores over a 1 s window (this
 * process being idle meanwhile), or quietWaitMs elapsed. Other work on a small machine halves the figures.
 */
async function waitForQuiet(options: Options): Promise<void> {
  const start = performance.now();
  let said = false;
  for (;;) {
    const window = new CpuWindow();
    await sleep(1000);
    const { otherCpu } = window.stop();
    if (otherCpu <= options.maxOtherCpu) break;
    if (performance.now() - start > options.quietWaitMs) {
      process.stderr.write(
        `  other processes still use ${fmt(otherCpu, 2)} cores after ${fmt(options.quietWaitMs / 1000, 0)} s; measuring anyway\n`,
      );
      break;
    }
    if (!said) process.stderr.write(`  waiting for other processes to go quiet (${fmt(otherCpu, 2)} cores)…\n`);
    said = true;
  }
}

/** The load generator thread. One job at a time. */
class LoadGenerator {
  private readonly worker = new Worker(new URL('./load-worker.js', import.meta.url));

  throughput(job: ThroughputJob, bracket: { onStart(): void; onStop(): void }): Promise<ThroughputResult> {
    return this.run(job, bracket) as Promise<ThroughputResult>;
  }

  latency(job: LatencyJob): Promise<LatencyResult> {
    return this.run(job) as Promise<LatencyResult>;
  }

  paginate(job: PaginateJob): Promise<PaginateResult> {
    return this.run(job) as Promise<PaginateResult>;
  }

  private run(job: Job, bracket?: { onStart(): void; onStop(): void }): Promise<JobResult> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => {
        this.worker.off('message', onMessage);
        reject(err);
      };
      const onMessage = (m: WorkerMessage): void => {
        if (m.type === 'measuring') return bracket?.onStart();
        if (m.type === 'stopped') return bracket?.onStop();
        this.worker.off('message', onMessage);
        this.worker.off('error', onError);
        if (m.type === 'done') resolve(m.result);
        else reject(new Error(`load generator: ${m.message}`));
      };
      this.worker.on('message', onMessage);
      this.worker.once('error', onError);
      this.worker.postMessage(job);
    });
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}

interface Served {
  origin: string;
  close(): Promise<void>;
}

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

async function serveKubeSim(cluster: Cluster): Promise<Served> {
  let address = '127.0.0.1:0';
  const app = buildServer(cluster, {
    advertiseAddress: () => address,
    logger: (line) => process.stderr.write(`${line}\n`),
  });
  const origin = await listen(app);
  address = origin.slice('http://'.length);
  return { origin, close: () => app.close() };
}

/** The floor: fastify with the same raw-body parser kube-sim installs, JSON.parse, and the object echoed back. */
async function serveEmptyRoute(): Promise<Served> {
  const app = Fastify({ logger: false });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.post('/api/v1/namespaces/:namespace/:resource', (request, reply) => {
    const obj: unknown = JSON.parse((request.body as Buffer).toString('utf8'));
    void reply.code(201).header('content-type', 'application/json').send(JSON.stringify(obj));
  });
  const origin = await listen(app);
  return { origin, close: () => app.close() };
}

// ---------------------------------------------------------------------------------------------------------
// 1. create throughput

const CREATE_NAMESPACE = 'bench';

interface CreateTarget {
  name: string;
  server: 'kube-sim' | 'empty fastify route';
  kind: 'ConfigMap' | 'Pod';
  path: string;
  body: string;
}

interface CreateRun {
  reqPerSec: number;
  requests: number;
  errors: number;
  firstError?: string;
  latency: Summary;
  /** Event-loop utilisation of the server thread over the measured phase. */
  serverElu: number;
  clientElu: number;
  /** CPU time of the whole process (server + client threads) per second of wall time. */
  processCpu: number;
  /** CPU used by other processes on the machine (plus hypervisor steal) during the run, in cores (should be ~0). */
  otherCpu: number;
  /** Runs disturbed by other processes are repeated; this is the attempt kept. */
  attempt: number;
}

interface CreateFigure {
  target: string;
  server: CreateTarget['server'];
  kind: CreateTarget['kind'];
  bodyBytes: number;
  reqPerSec: number;
  latencyMs: Summary;
  serverElu: number;
  /** Server thread busy time per request (its event-loop utilisation / req/s). */
  serverMicrosPerRequest: number;
  clientElu: number;
  processCpu: number;
  otherCpu: number;
  /** Runs during which other processes stayed under maxOtherCpu; the figures are the median of these (of all runs when none). */
  cleanRuns: number;
  runs: CreateRun[];
}

/** One measured run against a fresh server (and cluster), so that no run inherits the objects or garbage of another. */
async function createRun(
  options: Options,
  load: LoadGenerator,
  target: CreateTarget,
  round: number,
): Promise<{ run: CreateRun; latencyMs: number[] }> {
  let cluster: Cluster | undefined;
  let served: Served;
  if (target.server === 'kube-sim') {
    cluster = await Cluster.start({ seed: round, clock: 'real' });
    cluster.api.create(cluster.kind('', 'v1', 'namespaces'), undefined, { metadata: { name: CREATE_NAMESPACE } });
    served = await serveKubeSim(cluster);
  } else {
    served = await serveEmptyRoute();
  }
  gc();
  let elu: EventLoopUtilization | undefined;
  let serverElu = NaN;
  let cpu: CpuWindow | undefined;
  let processCpu = NaN;
  let otherCpu = NaN;
  const result = await load.throughput(
    {
      op: 'throughput',
      origin: served.origin,
      path: target.path,
      body: target.body,
      connections: options.connections,
      warmupMs: options.warmupMs,
      durationMs: options.durationMs,
      expectStatus: 201,
    },
    {
      onStart: () => {
        elu = performance.eventLoopUtilization();
        cpu = new CpuWindow();
      },
      onStop: () => {
        if (elu) serverElu = performance.eventLoopUtilization(elu).utilization;
        if (cpu) ({ processCpu, otherCpu } = cpu.stop());
      },
    },
  );
  await served.close();
  await cluster?.close();
  const run: CreateRun = {
    reqPerSec: result.requests / (result.elapsedMs / 1000),
    requests: result.requests,
    errors: result.errors,
    latency: summarize(result.latencyMs),
    serverElu,
    clientElu: result.clientElu,
    processCpu,
    otherCpu,
    attempt: 1,
  };
  if (result.firstError !== undefined) run.firstError = result.firstError;
  return { run, latencyMs: result.latencyMs };
}

async function measureCreates(
  options: Options,
  load: LoadGenerator,
): Promise<{ figures: CreateFigure[]; ratios: Record<string, number> }> {
  const ns = CREATE_NAMESPACE;
  const cm = configMapBody();
  const pod = podBody();
  const targets: CreateTarget[] = [
    {
      name: 'empty route, ConfigMap body',
      server: 'empty fastify route',
      kind: 'ConfigMap',
      path: `/api/v1/namespaces/${ns}/configmaps`,
      body: cm,
    },
    {
      name: 'kube-sim, create ConfigMap',
      server: 'kube-sim',
      kind: 'ConfigMap',
      path: `/api/v1/namespaces/${ns}/configmaps`,
      body: cm,
    },
    {
      name: 'empty route, Pod body',
      server: 'empty fastify route',
      kind: 'Pod',
      path: `/api/v1/namespaces/${ns}/pods`,
      body: pod,
    },
    { name: 'kube-sim, create Pod', server: 'kube-sim', kind: 'Pod', path: `/api/v1/namespaces/${ns}/pods`, body: pod },
  ];
  const runs = new Map<string, CreateRun[]>(targets.map((t) => [t.name, []]));
  /** Per-request latencies of each kept run, parallel to `runs`. */
  const latencies = new Map<string, number[][]>(targets.map((t) => [t.name, []]));

  for (let round = 1; round <= options.rounds; round++) {
    for (const target of targets) {
      let best: { run: CreateRun; latencyMs: number[] } | undefined;
      for (let attempt = 1; attempt <= options.attempts; attempt++) {
        await waitForQuiet(options);
        const r = await createRun(options, load, target, round);
        r.run.attempt = attempt;
        const disturbed = r.run.otherCpu > options.maxOtherCpu;
        process.stderr.write(
          `  round ${round}/${options.rounds}  ${target.name.padEnd(28)} ${fmt(r.run.reqPerSec, 0).padStart(8)} req/s` +
            `  server ELU ${fmt(r.run.serverElu, 2)}  client ELU ${fmt(r.run.clientElu, 2)}  other processes ${fmt(r.run.otherCpu, 2)} cores` +
            `${r.run.errors ? `  ${r.run.errors} errors` : ''}${disturbed ? `  (disturbed${attempt < options.attempts ? ', again' : ''})` : ''}\n`,
        );
        if (!best || r.run.otherCpu < best.run.otherCpu) best = r;
        if (!disturbed) break;
      }
      runs.get(target.name)!.push(best!.run);
      latencies.get(target.name)!.push(best!.latencyMs);
    }
  }

  const figures: CreateFigure[] = targets.map((t) => {
    const all = runs.get(t.name)!;
    // Figures come from the runs that other processes left alone, when there are any.
    const clean = all.map((r, i) => ({ r, i })).filter(({ r }) => r.otherCpu <= options.maxOtherCpu);
    const kept = clean.length > 0 ? clean : all.map((r, i) => ({ r, i }));
    const rs = kept.map(({ r }) => r);
    const pooled: number[] = [];
    for (const { i } of kept) for (const ms of latencies.get(t.name)![i]!) pooled.push(ms);
    return {
      target: t.name,
      server: t.server,
      kind: t.kind,
      bodyBytes: Buffer.byteLength(t.body),
      reqPerSec: median(rs.map((r) => r.reqPerSec)),
      latencyMs: summarize(pooled),
      serverElu: median(rs.map((r) => r.serverElu)),
      serverMicrosPerRequest: median(rs.map((r) => (r.serverElu * 1e6) / r.reqPerSec)),
      clientElu: median(rs.map((r) => r.clientElu)),
      processCpu: median(rs.map((r) => r.processCpu)),
      otherCpu: Math.max(...rs.map((r) => r.otherCpu)),
      cleanRuns: clean.length,
      runs: all,
    };
  });
  const byName = new Map(figures.map((f) => [f.target, f]));
  const ratios = {
    ConfigMap:
      byName.get('kube-sim, create ConfigMap')!.reqPerSec / byName.get('empty route, ConfigMap body')!.reqPerSec,
    Pod: byName.get('kube-sim, create Pod')!.reqPerSec / byName.get('empty route, Pod body')!.reqPerSec,
  };
  return { figures, ratios };
}

// ---------------------------------------------------------------------------------------------------------
// 2. list latency

interface ListFigure {
  name: string;
  path: string;
  items: number;
  responseBytes: number;
  /** The very first request of this list (for the full list: every object's JSON serialised for the first time). */
  firstMs: number;
  latencyMs: Summary;
  /** CPU used by other processes during the measurement, in cores, and which attempt was kept. */
  otherCpu: number;
  attempt: number;
}

interface PaginateFigure {
  name: string;
  path: string;
  limit: number;
  pages: number;
  itemsPerWalk: number;
  pageLatencyMs: Summary;
  walkMs: Summary;
  otherCpu: number;
  attempt: number;
}

interface ListFigures {
  objects: number;
  namespaces: number;
  loadMs: number;
  loadPerSec: number;
  memoryBefore: Memory;
  memoryAfterLoad: Memory;
  memoryAfterLists: Memory;
  lists: ListFigure[];
  paginated: PaginateFigure;
}

async function measureLists(options: Options, load: LoadGenerator): Promise<ListFigures> {
  const cluster = await Cluster.start({ seed: 1, clock: 'real' });
  const namespaces = cluster.kind('', 'v1', 'namespaces');
  const configmaps = cluster.kind('', 'v1', 'configmaps');
  const memoryBefore = await memory();

  await waitForQuiet(options);
  process.stderr.write(
    `  loading ${options.objects.toLocaleString('en-US')} ConfigMaps in-process (cluster.api.create)…\n`,
  );
  const t0 = performance.now();
  for (let n = 0; n < LIST_NAMESPACES; n++)
    cluster.api.create(namespaces, undefined, { metadata: { name: listNamespace(n) } });
  for (let i = 0; i < options.objects; i++) {
    const { namespace, json } = listObject(i, options.objects);
    cluster.api.create(configmaps, namespace, JSON.parse(json));
  }
  const loadMs = performance.now() - t0;
  const memoryAfterLoad = await memory();

  const served = await serveKubeSim(cluster);
  const shard = 42;
  const namespace = listNamespace(42);
  const reps = options.quick
    ? { full: 3, namespaced: 50, label: 100, walks: 1 }
    : { full: 20, namespaced: 300, label: 1000, walks: 5 };
  const cases = [
    { name: 'all ConfigMaps', path: '/api/v1/configmaps', reps: reps.full },
    { name: `one namespace (${namespace})`, path: `/api/v1/namespaces/${namespace}/configmaps`, reps: reps.namespaced },
    {
      name: `label selector shard=s${shard}`,
      path: `/api/v1/configmaps?labelSelector=${encodeURIComponent(`shard=s${shard}`)}`,
      reps: reps.label,
    },
  ];
  /** Runs `fn` until other processes stay under maxOtherCpu cores during it (or attempts run out); keeps the least disturbed. */
  const undisturbed = async <T>(
    label: string,
    fn: () => Promise<T>,
  ): Promise<{ value: T; otherCpu: number; attempt: number }> => {
    let best: { value: T; otherCpu: number; attempt: number } | undefined;
    for (let attempt = 1; attempt <= options.attempts; attempt++) {
      await waitForQuiet(options);
      const cpu = new CpuWindow();
      const value = await fn();
      const { otherCpu } = cpu.stop();
      const disturbed = otherCpu > options.maxOtherCpu;
      process.stderr.write(
        `  ${label}: other processes ${fmt(otherCpu, 2)} cores${disturbed ? `  (disturbed${attempt < options.attempts ? ', again' : ''})` : ''}\n`,
      );
      if (!best || otherCpu < best.otherCpu) best = { value, otherCpu, attempt };
      if (!disturbed) break;
    }
    return best!;
  };
  const lists: ListFigure[] = [];
  // The full list goes first so that its first request finds the per-object JSON cache cold (only the first
  // attempt's first request is cold; its time is kept even if that attempt is repeated).
  let coldMs: number | undefined;
  for (const c of cases) {
    const {
      value: r,
      otherCpu,
      attempt,
    } = await undisturbed(`GET ${c.path} ×${c.reps}`, async () => {
      const result = await load.latency({
        op: 'latency',
        origin: served.origin,
        path: c.path,
        warmup: 2,
        reps: c.reps,
      });
      coldMs ??= result.firstMs;
      return result;
    });
    lists.push({
      name: c.name,
      path: c.path,
      items: r.items,
      responseBytes: r.bytes,
      firstMs: lists.length === 0 ? coldMs! : r.firstMs,
      latencyMs: summarize(r.latencyMs),
      otherCpu,
      attempt,
    });
  }
  const limit = 500;
  const {
    value: p,
    otherCpu,
    attempt,
  } = await undisturbed(`paginated walk limit=${limit} ×${reps.walks}`, () =>
    load.paginate({
      op: 'paginate',
      origin: served.origin,
      path: '/api/v1/configmaps',
      limit,
      warmupWalks: 1,
      walks: reps.walks,
    }),
  );
  const paginated: PaginateFigure = {
    name: `all ConfigMaps, limit=${limit}, every page`,
    path: `/api/v1/configmaps?limit=${limit}&continue=…`,
    limit,
    pages: p.pages,
    itemsPerWalk: p.itemsPerWalk,
    pageLatencyMs: summarize(p.pageLatencyMs),
    walkMs: summarize(p.walkMs),
    otherCpu,
    attempt,
  };
  const memoryAfterLists = await memory();
  await served.close();
  await cluster.close();
  return {
    objects: options.objects,
    namespaces: LIST_NAMESPACES,
    loadMs,
    loadPerSec: options.objects / (loadMs / 1000),
    memoryBefore,
    memoryAfterLoad,
    memoryAfterLists,
    lists,
    paginated,
  };
}

// ---------------------------------------------------------------------------------------------------------
// 7. the benchmarks that are scripts of their own

/** CPU time of this process's children that have exited and been waited for (their own children included), ms. */
function exitedChildrenCpuMs(): number {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) * 10; // cutime and cstime, USER_HZ 100
  } catch {
    return 0;
  }
}

/**
 * Runs dist/bench/<script> with its output shown as it comes and returns the report it wrote (bench/report.ts), or
 * undefined when it is not built or failed. Says what other processes used meanwhile, its own children not counted.
 */
async function runScriptSection(s: ScriptSection, options: Options): Promise<unknown> {
  const file = fileURLToPath(new URL(`./${s.script}`, import.meta.url));
  if (!existsSync(file)) {
    process.stderr.write(`  ${file} is not built: not measured\n`);
    return undefined;
  }
  const dir = mkdtempSync(join(os.tmpdir(), 'kube-sim-bench-'));
  const reportFile = join(dir, 'report.json');
  try {
    const wall = performance.now();
    const machine0 = machineBusyMs();
    const stolen0 = stolenMs();
    const own0 = process.cpuUsage();
    const children0 = exitedChildrenCpuMs();
    const child = spawn(process.execPath, [file, ...s.args(options.quick)], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, KUBE_SIM_BENCH_JSON: reportFile },
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    const own = process.cpuUsage(own0);
    const ownMs = (own.user + own.system) / 1000 + exitedChildrenCpuMs() - children0;
    const wallMs = performance.now() - wall;
    const otherCpu = (Math.max(0, machineBusyMs() - machine0 - ownMs) + stolenMs() - stolen0) / wallMs;
    console.log(`other processes used ${fmt(otherCpu, 2)} cores on average during ${s.script}`);
    if (code !== 0) process.stderr.write(`  ${s.script} exited with ${code}\n`);
    if (!existsSync(reportFile)) return undefined;
    return { ...(JSON.parse(readFileSync(reportFile, 'utf8')) as object), exitCode: code, otherCpu };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------
// output

function roundDeep(value: unknown): unknown {
  if (typeof value === 'number') return Number.isFinite(value) ? round(value) : null;
  if (Array.isArray(value)) return value.map(roundDeep);
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, roundDeep(v)]));
  return value;
}

function printCreates(c: { figures: CreateFigure[]; ratios: Record<string, number> }, options: Options): void {
  console.log(
    `\nCreate throughput over HTTP: ${options.connections} keep-alive connections, ${options.durationMs / 1000} s per run after ${options.warmupMs / 1000} s warm-up, median of the undisturbed runs among ${options.rounds} round(s)`,
  );
  console.log(
    table([
      [
        'target',
        'body',
        'req/s',
        'p50 ms',
        'p99 ms',
        'server ELU',
        'server µs/req',
        'client ELU',
        'process CPU',
        'others CPU',
        'runs',
        'errors',
      ],
      ...c.figures.map((f) => [
        f.target,
        `${f.bodyBytes} B`,
        fmt(f.reqPerSec, 0),
        fmt(f.latencyMs.p50, 2),
        fmt(f.latencyMs.p99, 2),
        fmt(f.serverElu, 2),
        fmt(f.serverMicrosPerRequest, 0),
        fmt(f.clientElu, 2),
        `${fmt(f.processCpu, 2)} cores`,
        `${fmt(f.otherCpu, 2)} cores`,
        `${f.cleanRuns}/${f.runs.length}${f.cleanRuns === 0 ? ' (all disturbed)' : ''}`,
        String(f.runs.reduce((n, r) => n + r.errors, 0)),
      ]),
    ]),
  );
  console.log(
    `kube-sim / empty route: ConfigMap ${fmt(c.ratios.ConfigMap!, 2)}, Pod ${fmt(c.ratios.Pod!, 2)}   (targets ≥ 0.4 and ≥ 0.3)`,
  );
  console.log("server µs/req = server event-loop utilisation / req/s: the main thread's busy time per request.");
  console.log(
    `others CPU = CPU used by other processes (and hypervisor steal) during the measured phase, worst kept run; runs = undisturbed runs (others ≤ ${options.maxOtherCpu} core) / rounds.`,
  );
  for (const f of c.figures) {
    const failed = f.runs.find((r) => r.firstError !== undefined);
    if (failed)
      console.log(`errors in "${f.target}" (not counted in req/s); first: ${failed.firstError!.slice(0, 160)}`);
  }
}

function printLists(l: ListFigures): void {
  console.log(
    `\nList latency over HTTP, ${l.objects.toLocaleString('en-US')} ConfigMaps in ${l.namespaces} namespaces (one connection, sequential requests)`,
  );
  console.log(
    table([
      ['list', 'items', 'response', 'first ms', 'p50 ms', 'p99 ms', 'max ms', 'n'],
      ...l.lists.map((f) => [
        f.name,
        String(f.items),
        mib(f.responseBytes),
        fmt(f.firstMs, 1),
        fmt(f.latencyMs.p50, 2),
        fmt(f.latencyMs.p99, 2),
        fmt(f.latencyMs.max, 2),
        String(f.latencyMs.n),
      ]),
      [
        l.paginated.name,
        `${l.paginated.itemsPerWalk}/${l.paginated.pages} pages`,
        '',
        '',
        fmt(l.paginated.pageLatencyMs.p50, 2),
        fmt(l.paginated.pageLatencyMs.p99, 2),
        fmt(l.paginated.pageLatencyMs.max, 2),
        String(l.paginated.pageLatencyMs.n),
      ],
    ]),
  );
  console.log(`whole paginated walk: p50 ${fmt(l.paginated.walkMs.p50, 0)} ms over ${l.paginated.walkMs.n} walk(s)`);
  const worst = Math.max(...l.lists.map((f) => f.otherCpu), l.paginated.otherCpu);
  console.log(`other processes used at most ${fmt(worst, 2)} cores on average during a kept list measurement`);
  console.log(
    `\nLoading: ${fmt(l.loadMs / 1000, 2)} s in-process (${fmt(l.loadPerSec, 0)} creates/s through cluster.api.create)`,
  );
  const row = (name: string, m: Memory): string[] => [
    name,
    mib(m.rss),
    mib(m.heapUsed),
    mib(m.heapTotal),
    mib(m.external),
  ];
  console.log(
    table([
      ['memory (after gc)', 'RSS', 'heap used', 'heap total', 'external'],
      row('empty cluster', l.memoryBefore),
      row(`after loading ${l.objects.toLocaleString('en-US')}`, l.memoryAfterLoad),
      row('after the lists (a list caches no JSON)', l.memoryAfterLists),
    ]),
  );
  const per = (a: Memory, b: Memory): string => `${fmt((b.heapUsed - a.heapUsed) / l.objects, 0)} B`;
  console.log(
    `heap per object: ${per(l.memoryBefore, l.memoryAfterLoad)} stored, ${per(l.memoryBefore, l.memoryAfterLists)} after the lists`,
  );
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const loadAtStart = os.loadavg();
  const m = machine();
  console.log(`kube-sim benchmark${options.quick ? ' (--quick)' : ''}, ${new Date().toISOString()}`);
  const rev = revision();
  console.log(
    `code: commit ${rev.commit}${rev.srcChanges > 0 ? ` plus ${rev.srcChanges} uncommitted file(s) under src/` : ''}`,
  );
  console.log(`machine: ${m.cpu}, ${m.cores} cores, ${mib(Number(m.totalMemory))} RAM, ${m.os}, node ${m.node}`);
  const load = new LoadGenerator();
  const results: Record<string, unknown> = {
    date: new Date().toISOString(),
    command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    revision: rev,
    machine: m,
    options: { ...options, out: undefined },
  };
  const runs = (section: Section): boolean => options.only === undefined || options.only.includes(section);
  try {
    if (runs('create')) {
      process.stderr.write('create throughput…\n');
      const creates = await measureCreates(options, load);
      results.create = creates;
      printCreates(creates, options);
    }
    if (runs('list')) {
      process.stderr.write('list latency…\n');
      const lists = await measureLists(options, load);
      results.list = lists;
      printLists(lists);
    }
    if (runs('fanout')) {
      process.stderr.write('watch fan-out…\n');
      await waitForQuiet(options);
      const cpu = new CpuWindow();
      const fanoutOptions = { quick: options.quick, durationMs: options.quick ? 1000 : 10_000 };
      const fanout = await measureFanout(fanoutOptions);
      const { otherCpu } = cpu.stop();
      results.fanout = { ...fanout, otherCpu };
      printFanout(fanout, fanoutOptions);
      console.log(`other processes used ${fmt(otherCpu, 2)} cores on average during the fan-out measurements`);
    }
    if (runs('density')) {
      process.stderr.write(`density, ${options.densityNodes} nodes and ${options.densityPods} pods…\n`);
      await waitForQuiet(options);
      const cpu = new CpuWindow();
      const density = await measureDensity({
        nodes: options.densityNodes,
        pods: options.densityPods,
        quick: options.quick,
        kubectl: KUBECTL,
      });
      const { otherCpu } = cpu.stop();
      results.density = { ...density, otherCpu };
      printDensity(density);
      console.log(`other processes used ${fmt(otherCpu, 2)} cores on average during the density run`);
    }
    if (runs('startup')) {
      process.stderr.write('start-up…\n');
      await waitForQuiet(options);
      const startupOptions = { reps: options.quick ? 2 : 10, nodeCounts: [3, 100], kubectl: KUBECTL };
      const startup = await measureStartup(startupOptions);
      results.startup = startup;
      printStartup(startup, startupOptions);
    }
    if (runs('snapshot')) {
      const nodes = options.quick ? 100 : options.densityNodes;
      const snapshotOptions = { nodes, deployments: options.quick ? 4 : 10, replicas: options.quick ? 50 : 500 };
      process.stderr.write(`snapshot export, boot and replay, ${nodes} nodes…\n`);
      await waitForQuiet(options);
      const cpu = new CpuWindow();
      const snapshot = await measureSnapshot(snapshotOptions);
      const { otherCpu } = cpu.stop();
      results.snapshot = { ...snapshot, otherCpu };
      printSnapshot(snapshot);
      console.log(`other processes used ${fmt(otherCpu, 2)} cores on average during the snapshot run`);
    }
    for (const script of SCRIPT_SECTIONS) {
      if (!runs(script.section)) continue;
      process.stderr.write(`${script.title(options.quick)}\n`);
      await waitForQuiet(options);
      const report = await runScriptSection(script, options);
      if (report !== undefined) results[script.section] = report;
    }
  } finally {
    await load.close();
  }
  const figures = verdicts(results, (section) => runs(section as Section));
  results.figures = figures;
  console.log(`\nIssue 23's figures${options.quick ? ' (--quick: smaller sizes get no verdict)' : ''}`);
  console.log(table(verdictRows(figures)));
  results.loadAverage = { atStart: loadAtStart, atEnd: os.loadavg() };
  console.log(
    `\nload average (1, 5, 15 min) at start ${loadAtStart.map((v) => fmt(v, 2)).join(', ')}, at end ${os
      .loadavg()
      .map((v) => fmt(v, 2))
      .join(', ')}`,
  );
  writeFileSync(options.out, `${JSON.stringify(roundDeep(results), null, 2)}\n`);
  const markdown = options.out.replace(/(\.json)?$/, '.md');
  writeFileSync(
    markdown,
    `${results.command as string}, ${results.date as string}, commit ${rev.commit}; load average at start ${loadAtStart.map((v) => fmt(v, 2)).join(', ')}\n\n${verdictMarkdown(figures)}`,
  );
  console.log(`\nresults written to ${options.out} and ${markdown}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
