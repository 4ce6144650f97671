/**
 * Density (issue 8, figure 4): `sim serve --nodes N` registers N Nodes (and their kubelets' Leases) through
 * the API, then the benchmark creates P pods over HTTP, each naming its node (`spec.nodeName`, spread evenly,
 * as a density test that measures the API server rather than the scheduler does), so that every pod is also run
 * by its kubelet: status ContainerCreating → Running → Ready and the kubelet's events. It measures:
 *
 * - the wall time to register the nodes (server start to listening) and to create the pods, and until the
 *   server is idle again (kubelets done: its CPU back to what it was with the nodes only);
 * - the server process's RSS after a full GC, with everything in place (steady state);
 * - `list pods -A`: the full JSON list, and what `kubectl get pods -A` asks (Table, limit=500 pages), plus the
 *   real kubectl when installed; a label-selected list returning 100 pods;
 * - every Lease renewal seen on a watch of kube-node-lease during the run: the period between a Lease's
 *   consecutive renewTimes (target: 10 s however busy the server is).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { Client, Pool } from 'undici';
import { spawnServer, type EventLoopStall, type ServerUsage } from './server-process.js';
import { fmt, mib, summarize, table, type Summary } from './stats.js';
import { onLines } from '../src/client/watch-lines.js';

export interface DensityOptions {
  nodes: number;
  pods: number;
  quick: boolean;
  kubectl?: string;
}

export interface DensityFigures {
  nodes: number;
  pods: number;
  namespaces: number;
  /** `sim serve --nodes N` from spawn until it listens (every Node and Lease registered). */
  nodesRegisteredMs: number;
  createMs: number;
  createPerSec: number;
  createLatencyMs: Summary;
  createErrors: number;
  firstCreateError?: string;
  /** From the first pod create until the server's CPU went back to the nodes-only share (kubelets have run every pod). */
  settledMs: number;
  /** False when the wait for that ran to its timeout instead. */
  settled: boolean;
  /** The server's CPU with the nodes only (Lease renewals, node status), in cores. */
  idleCpu: number;
  serverCpuSeconds: number;
  memoryNodesOnly: ServerUsage;
  memorySteady: ServerUsage;
  memoryAfterLists: ServerUsage;
  fullListJson: { items: number; bytes: number; ms: Summary };
  kubectlTableWalk: { pages: number; rows: number; ms: Summary; pageMs: Summary };
  kubectlGetPodsMs?: number;
  labelList: { selector: string; items: number; ms: Summary };
  /**
   * The server's longest event-loop delay from the moment it listens to the end of the lists (its own idle
   * compaction included, the benchmark's full collections for the RSS figures left out; 0: none over 100 ms), and
   * the longest in each phase.
   */
  longestEventLoopDelayMs: number;
  /** The most main-thread CPU within one of those delays (on a loaded machine, the server's own part of it). */
  longestEventLoopBusyMs: number;
  eventLoopDelayByPhase: Record<'startup' | 'nodesOnly' | 'creating' | 'settling' | 'lists', number>;
  /** Delays over 100 ms, with the phase they ended in, ms from the server's spawn. */
  eventLoopStalls: Array<EventLoopStall & { phase: string; atS: number }>;
  /** Lease renew periods over the whole run, and split by phase: while pods are created and run, and during the lists. */
  leases: LeasePeriods & {
    renewals: number;
    leases: number;
    windowS: number;
    whileCreating: LeasePeriods;
    duringLists: LeasePeriods;
  };
}

export interface LeasePeriods {
  periodS: Summary;
  over11s: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
/** CPU is compared over windows of one Lease period, which every node's renewal falls into once. */
const IDLE_WINDOW_MS = 10_000;
/** Idle: within this share of a core of the nodes-only CPU. */
const IDLE_MARGIN = 0.03;
/** A Lease period and a half: long enough for the Leases whose renewal slot comes first to renew twice. */
const MIN_LEASE_WATCH_MS = 15_000;
const TABLE_ACCEPT =
  'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';

function podBody(i: number, nodes: number, groups: number): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `pod-${i}`, labels: { app: 'density', group: `g${i % groups}` } },
    spec: {
      nodeName: `node-${(i % nodes) + 1}`,
      containers: [
        { name: 'app', image: 'registry.k8s.io/pause:3.9', resources: { requests: { cpu: '10m', memory: '16Mi' } } },
      ],
    },
  });
}

/** Follows kube-node-lease and keeps every Lease's renewTimes (parsed from the event text, not JSON.parse). */
class LeaseWatch {
  private readonly renewals = new Map<string, number[]>();
  private req?: http.ClientRequest;
  private readonly started = performance.now();
  count = 0;

  constructor(url: string, resourceVersion: string) {
    const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=true&resourceVersion=${resourceVersion}`;
    this.req = http.get(url + path, { agent: false }, (res) => {
      onLines(res, (line) => this.line(line));
      res.on('error', () => {});
    });
    this.req.on('error', () => {});
  }

  private line(text: string): void {
    const name = /"name":"([^"]+)"/.exec(text)?.[1];
    const renew = /"renewTime":"([^"]+)"/.exec(text)?.[1];
    if (!name || !renew) return;
    const at = Date.parse(renew);
    const list = this.renewals.get(name) ?? [];
    if (list[list.length - 1] !== at) list.push(at);
    this.renewals.set(name, list);
    this.count++;
  }

  /** Periods that end inside [from, to) (wall-clock ms; renewTime is the server's clock, on this machine). */
  private periods(from: number, to: number): LeasePeriods {
    const periods: number[] = [];
    for (const times of this.renewals.values()) {
      for (let k = 1; k < times.length; k++)
        if (times[k]! >= from && times[k]! < to) periods.push((times[k]! - times[k - 1]!) / 1000);
    }
    return { periodS: summarize(periods), over11s: periods.filter((p) => p > 11).length };
  }

  close(phases: { creating: number; lists: number }): DensityFigures['leases'] {
    this.req?.destroy();
    return {
      renewals: this.count,
      leases: this.renewals.size,
      ...this.periods(0, Infinity),
      whileCreating: this.periods(phases.creating, phases.lists),
      duringLists: this.periods(phases.lists, Infinity),
      windowS: (performance.now() - this.started) / 1000,
    };
  }
}

async function timedGet(
  client: Client,
  path: string,
  accept: string,
  keep: boolean,
): Promise<{ ms: number; bytes: number; text?: string }> {
  const t0 = performance.now();
  const res = await client.request({ method: 'GET', path, headers: { accept } });
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (keep || res.statusCode !== 200) chunks.push(chunk);
  }
  const ms = performance.now() - t0;
  const text = chunks.length ? Buffer.concat(chunks).toString('utf8') : undefined;
  if (res.statusCode !== 200) throw new Error(`GET ${path}: ${res.statusCode} ${text?.slice(0, 300)}`);
  return text === undefined ? { ms, bytes } : { ms, bytes, text };
}

/** The server's CPU use over `ms`, in cores. */
async function cpuShare(usage: () => Promise<ServerUsage>, ms: number): Promise<number> {
  const before = (await usage()).cpuMs;
  await sleep(ms);
  return ((await usage()).cpuMs - before) / ms;
}

/**
 * The server's CPU with the nodes only, in cores: what it spends on the kubelets' Lease renewals and node
 * status with nothing else to do (5,000 nodes keep it at ~10 % of a core), so that "idle" can mean "back to
 * that" rather than a fixed share it never gets under. Windows of one Lease period, until two agree (the
 * registration's own work is over), at most a minute.
 */
async function nodesOnlyCpu(usage: () => Promise<ServerUsage>): Promise<number> {
  const end = performance.now() + 60_000;
  let last = await cpuShare(usage, IDLE_WINDOW_MS);
  while (performance.now() < end) {
    const share = await cpuShare(usage, IDLE_WINDOW_MS);
    if (Math.abs(share - last) <= IDLE_MARGIN / 2) return Math.min(share, last);
    last = share;
  }
  return last;
}

/**
 * Waits until the server's CPU is back within `baseline` plus IDLE_MARGIN over two consecutive windows; resolves
 * with the time (performance.now()) the quiet began, or undefined at the timeout.
 */
async function waitIdle(
  usage: () => Promise<ServerUsage>,
  baseline: number,
  timeoutMs: number,
): Promise<number | undefined> {
  const end = performance.now() + timeoutMs;
  let quietFrom: number | undefined;
  while (performance.now() < end) {
    const from = performance.now();
    const quiet = (await cpuShare(usage, IDLE_WINDOW_MS)) <= baseline + IDLE_MARGIN;
    if (!quiet) quietFrom = undefined;
    else if (quietFrom === undefined) quietFrom = from;
    else return quietFrom;
  }
  return undefined;
}

function runKubectl(kubectl: string, url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    execFile(kubectl, ['--server', url, 'get', 'pods', '-A'], { maxBuffer: 1 << 30 }, (err, stdout) => {
      if (err) return reject(err);
      const rows = stdout.split('\n').length - 2;
      if (rows < 1) return reject(new Error('kubectl get pods -A printed no rows'));
      resolve(performance.now() - t0);
    });
  });
}

export async function measureDensity(o: DensityOptions): Promise<DensityFigures> {
  // A /8 gives every node a /24; kubelets then hand out pod IPs from their node's range.
  const t0 = performance.now();
  const spawnedAt = Date.now();
  const capacity = `pods=${Math.max(110, Math.ceil((o.pods / o.nodes) * 2))}`;
  const server = await spawnServer([
    '--nodes',
    String(o.nodes),
    '--cluster-cidr',
    '10.0.0.0/8',
    '--node-capacity',
    capacity,
  ]);
  const nodesRegisteredMs = performance.now() - t0;
  process.stderr.write(`  ${o.nodes} nodes registered in ${fmt(nodesRegisteredMs / 1000, 1)} s\n`);
  const pool = new Pool(server.url, { connections: 32, pipelining: 1, keepAliveTimeout: 60_000 });
  const client = new Client(server.url, { keepAliveTimeout: 60_000, bodyTimeout: 600_000, headersTimeout: 600_000 });
  try {
    const namespaces = 10;
    for (let n = 0; n < namespaces; n++) {
      const res = await pool.request({
        method: 'POST',
        path: '/api/v1/namespaces',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ metadata: { name: `density-${n}` } }),
      });
      await res.body.text();
    }
    const leaseList = await timedGet(
      client,
      '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?limit=1',
      'application/json',
      true,
    );
    const leases = new LeaseWatch(
      server.url,
      (JSON.parse(leaseList.text!) as { metadata: { resourceVersion: string } }).metadata.resourceVersion,
    );
    const leasesFrom = performance.now();
    const idleCpu = await nodesOnlyCpu(() => server.usage(false));
    process.stderr.write(`  server CPU with the nodes only: ${fmt(idleCpu * 100, 1)} % of a core\n`);
    const memoryNodesOnly = await server.usage(true);

    // Pods: 32 connections, one create in flight each.
    const groups = Math.max(1, Math.floor(o.pods / 100));
    const latencies: number[] = [];
    let next = 0;
    let errors = 0;
    let firstError: string | undefined;
    const cpu0 = (await server.usage(false)).cpuMs;
    const creatingFrom = Date.now();
    const c0 = performance.now();
    let lastReport = c0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        for (let i = next++; i < o.pods; i = next++) {
          const s = performance.now();
          const res = await pool.request({
            method: 'POST',
            path: `/api/v1/namespaces/density-${i % namespaces}/pods`,
            headers: { 'content-type': 'application/json' },
            body: podBody(i, o.nodes, groups),
          });
          const text = await res.body.text();
          latencies.push(performance.now() - s);
          if (res.statusCode !== 201) {
            errors++;
            firstError ??= `${res.statusCode} ${text.slice(0, 300)}`;
          }
          if (performance.now() - lastReport > 10_000) {
            lastReport = performance.now();
            process.stderr.write(`  ${i.toLocaleString('en-US')} pods created…\n`);
          }
        }
      }),
    );
    const createMs = performance.now() - c0;
    process.stderr.write(`  ${o.pods} pods created in ${fmt(createMs / 1000, 1)} s; waiting for the kubelets…\n`);
    const quietFrom = await waitIdle(() => server.usage(false), idleCpu, 600_000);
    const settlingTo = Date.now();
    const settled = quietFrom !== undefined;
    const settledMs = (quietFrom ?? performance.now()) - c0;
    const serverCpuSeconds = ((await server.usage(false)).cpuMs - cpu0) / 1000;
    const memorySteady = await server.usage(true);
    process.stderr.write(
      `  ${settled ? 'settled' : 'not settled (timeout)'} after ${fmt(settledMs / 1000, 1)} s; RSS ${mib(memorySteady.rss)}\n`,
    );

    // Lists.
    const listsFrom = Date.now();
    const reps = o.quick ? { full: 2, walks: 1, label: 100 } : { full: 5, walks: 3, label: 300 };
    const full: number[] = [];
    let fullBytes = 0;
    let fullItems = 0;
    for (let r = 0; r < reps.full; r++) {
      const g = await timedGet(client, '/api/v1/pods', 'application/json', r === 0);
      full.push(g.ms);
      fullBytes = g.bytes;
      if (g.text) fullItems = (JSON.parse(g.text) as { items: unknown[] }).items.length;
    }
    const walks: number[] = [];
    const pageMs: number[] = [];
    let pages = 0;
    let rows = 0;
    for (let w = 0; w < reps.walks; w++) {
      let token: string | undefined;
      let walk = 0;
      pages = 0;
      rows = 0;
      do {
        const page = await timedGet(
          client,
          `/api/v1/pods?limit=500${token ? `&continue=${encodeURIComponent(token)}` : ''}`,
          TABLE_ACCEPT,
          true,
        );
        const body = JSON.parse(page.text!) as { kind: string; rows: unknown[]; metadata: { continue?: string } };
        if (body.kind !== 'Table') throw new Error(`expected a Table, got ${body.kind}`);
        pages++;
        rows += body.rows.length;
        walk += page.ms;
        pageMs.push(page.ms);
        token = body.metadata.continue || undefined;
      } while (token);
      walks.push(walk);
    }
    let kubectlGetPodsMs: number | undefined;
    if (o.kubectl && existsSync(o.kubectl)) kubectlGetPodsMs = await runKubectl(o.kubectl, server.url);
    const selector = `group=g${Math.min(42, groups - 1)}`;
    const label: number[] = [];
    let labelItems = 0;
    for (let r = 0; r < reps.label; r++) {
      const g = await timedGet(
        client,
        `/api/v1/pods?labelSelector=${encodeURIComponent(selector)}`,
        'application/json',
        r === 0,
      );
      label.push(g.ms);
      if (g.text) labelItems = (JSON.parse(g.text) as { items: unknown[] }).items.length;
    }
    const memoryAfterLists = await server.usage(true);
    const listsTo = Date.now();
    // Before it listens (registering the nodes) the server serves no one: that phase is shown apart.
    const listeningAt = spawnedAt + nodesRegisteredMs;
    const phaseOf = (at: number): keyof DensityFigures['eventLoopDelayByPhase'] =>
      at <= listeningAt
        ? 'startup'
        : at < creatingFrom
          ? 'nodesOnly'
          : at < settlingTo
            ? at < creatingFrom + createMs
              ? 'creating'
              : 'settling'
            : 'lists';
    const byPhase = { startup: 0, nodesOnly: 0, creating: 0, settling: 0, lists: 0 };
    const stalls = memoryAfterLists.stalls
      .filter((st) => st.endedAt <= listsTo)
      .map((st) => ({ ...st, phase: phaseOf(st.endedAt), atS: (st.endedAt - spawnedAt) / 1000 }));
    for (const st of stalls) byPhase[st.phase] = Math.max(byPhase[st.phase], st.ms);
    const serving = stalls.filter((st) => st.phase !== 'startup');
    // A short run (--quick) is over before any Lease renews twice, which would leave no renew period to report.
    const leaseWatchMs = performance.now() - leasesFrom;
    if (leaseWatchMs < MIN_LEASE_WATCH_MS) await sleep(MIN_LEASE_WATCH_MS - leaseWatchMs);
    const leaseFigures = leases.close({ creating: creatingFrom, lists: listsFrom });
    const figures: DensityFigures = {
      nodes: o.nodes,
      pods: o.pods,
      namespaces,
      nodesRegisteredMs,
      createMs,
      createPerSec: o.pods / (createMs / 1000),
      createLatencyMs: summarize(latencies),
      createErrors: errors,
      settledMs,
      settled,
      idleCpu,
      serverCpuSeconds,
      memoryNodesOnly,
      memorySteady,
      memoryAfterLists,
      fullListJson: { items: fullItems, bytes: fullBytes, ms: summarize(full) },
      kubectlTableWalk: { pages, rows, ms: summarize(walks), pageMs: summarize(pageMs) },
      labelList: { selector, items: labelItems, ms: summarize(label) },
      leases: leaseFigures,
      longestEventLoopDelayMs: Math.max(0, ...serving.map((st) => st.ms)),
      longestEventLoopBusyMs: Math.max(0, ...serving.map((st) => st.cpuMs)),
      eventLoopDelayByPhase: byPhase,
      eventLoopStalls: stalls,
    };
    if (firstError !== undefined) figures.firstCreateError = firstError;
    if (kubectlGetPodsMs !== undefined) figures.kubectlGetPodsMs = kubectlGetPodsMs;
    return figures;
  } finally {
    await client.close();
    await pool.close();
    await server.stop();
  }
}

export function printDensity(d: DensityFigures): void {
  console.log(
    `\nDensity: ${d.nodes.toLocaleString('en-US')} nodes (sim serve --nodes), ${d.pods.toLocaleString('en-US')} pods created over HTTP with spec.nodeName in ${d.namespaces} namespaces`,
  );
  console.log(
    table([
      ['figure', 'value'],
      [`${d.nodes} nodes registered (start to listening)`, `${fmt(d.nodesRegisteredMs / 1000, 2)} s`],
      [
        `create ${d.pods} pods (32 connections)`,
        `${fmt(d.createMs / 1000, 1)} s, ${fmt(d.createPerSec, 0)}/s, p99 ${fmt(d.createLatencyMs.p99, 1)} ms${d.createErrors ? `, ${d.createErrors} errors` : ''}`,
      ],
      ['server CPU with the nodes only (Lease renewals, node status)', `${fmt(d.idleCpu * 100, 1)} % of a core`],
      [
        `until the server is idle (kubelets done: within ${fmt(IDLE_MARGIN * 100, 0)} % of a core of that over ${IDLE_WINDOW_MS / 1000} s twice)`,
        `${d.settled ? '' : 'not idle at the timeout: '}${fmt(d.settledMs / 1000, 1)} s, server CPU ${fmt(d.serverCpuSeconds, 1)} s`,
      ],
      ['RSS after GC: nodes only', `${mib(d.memoryNodesOnly.rss)} (heap ${mib(d.memoryNodesOnly.heapUsed)})`],
      [
        'RSS after GC: with the pods (target ≤ 1.5 GiB)',
        `${mib(d.memorySteady.rss)} (heap ${mib(d.memorySteady.heapUsed)}, external ${mib(d.memorySteady.external)})`,
      ],
      ['RSS after GC: after the lists', `${mib(d.memoryAfterLists.rss)} (heap ${mib(d.memoryAfterLists.heapUsed)})`],
      [
        `list pods -A, JSON (${d.fullListJson.items} items, ${mib(d.fullListJson.bytes)})`,
        `p50 ${fmt(d.fullListJson.ms.p50, 0)} ms, max ${fmt(d.fullListJson.ms.max, 0)} ms (n=${d.fullListJson.ms.n})`,
      ],
      [
        `list pods -A as kubectl asks (Table, limit=500: ${d.kubectlTableWalk.pages} pages, ${d.kubectlTableWalk.rows} rows)`,
        `walk p50 ${fmt(d.kubectlTableWalk.ms.p50, 0)} ms; page p50 ${fmt(d.kubectlTableWalk.pageMs.p50, 1)} ms, p99 ${fmt(d.kubectlTableWalk.pageMs.p99, 1)} ms`,
      ],
      [
        'kubectl get pods -A (real kubectl, wall time)',
        d.kubectlGetPodsMs === undefined ? '(kubectl not found)' : `${fmt(d.kubectlGetPodsMs, 0)} ms`,
      ],
      [
        `label-selected list ${d.labelList.selector} (${d.labelList.items} pods; target ≤ 20 ms)`,
        `p50 ${fmt(d.labelList.ms.p50, 2)} ms, p99 ${fmt(d.labelList.ms.p99, 2)} ms`,
      ],
      ...(
        [
          ['all', d.leases],
          ['while pods are created and run', d.leases.whileCreating],
          ['during the lists', d.leases.duringLists],
        ] as const
      ).map(([phase, p]) => [
        `Lease renew period, ${phase}${phase === 'all' ? ` (${d.leases.leases} leases, ${d.leases.renewals} renewals in ${fmt(d.leases.windowS, 0)} s)` : ''}`,
        `min ${fmt(p.periodS.min, 2)} s, p50 ${fmt(p.periodS.p50, 2)} s, p99 ${fmt(p.periodS.p99, 2)} s, max ${fmt(p.periodS.max, 2)} s; ${p.over11s} of ${p.periodS.n} periods > 11 s`,
      ]),
      [
        'longest event-loop delay once listening (target ≤ 500 ms); by phase: nodes only / creating / settling / lists; before listening',
        `${d.longestEventLoopDelayMs === 0 ? 'none over 100 ms' : `${fmt(d.longestEventLoopDelayMs, 0)} ms (main thread busy ${fmt(d.longestEventLoopBusyMs, 0)} ms in a delay at most)`}; ${(['nodesOnly', 'creating', 'settling', 'lists', 'startup'] as const).map((k) => fmt(d.eventLoopDelayByPhase[k], 0)).join(' / ')} ms`,
      ],
    ]),
  );
  const worst = [...d.eventLoopStalls].sort((a, b) => b.ms - a.ms).slice(0, 8);
  if (worst.length > 0)
    console.log(
      `event-loop delays over 100 ms: ${d.eventLoopStalls.length}; the longest: ${worst.map((st) => `${fmt(st.ms, 0)} ms at ${fmt(st.atS, 0)} s (${st.phase}, main thread CPU ${fmt(st.cpuMs, 0)} ms)`).join(', ')}`,
    );
}
