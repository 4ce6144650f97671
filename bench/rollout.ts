/**
 * `node dist/bench/rollout.js [--replicas 1000] [--nodes 20] [--surge 25%] [--unavailable 25%] [--runs 1] [--watch-history N] [--stop-delay D] [--cpu-prof DIR] [--no-pod-watch] [--service] [--informers shared|separate]`
 *
 * A Deployment of `replicas` pods on `nodes` simulated nodes (`sim serve --nodes`, real clock, the default
 * kubelet stages): how long until it is Available, then how long a full rolling update (a new image) takes —
 * until the Deployment reports every replica updated and available, and until the last old pod is gone (old
 * pods terminate with their 30 s grace period). Every pod watch event is replayed to check maxSurge and
 * maxUnavailable at each instant: pods not terminating ≤ replicas + maxSurge, of them ready ≥ replicas −
 * maxUnavailable. Also reports the server's CPU time and peak RSS. Prints a Markdown table row per run.
 * The pod watch resumes from its last resourceVersion if the server ends it; `--watch-history` (passed to the
 * server) makes sure that is possible at very large sizes, at the cost of memory. `--stop-delay` is passed to the
 * server (`0s`: deleted pods go at once, as with kwok's default stages). `--cpu-prof DIR` writes the server's V8 CPU
 * profile there (NODE_OPTIONS may not carry --cpu-prof). `--no-pod-watch` leaves the pod watch out (the bounds are
 * then not checked, nor when the old pods are gone): serving it took 3-5 of the server's ~25 CPU seconds in a
 * 10,000-pod update, which a rollout followed only by `kubectl rollout status` does not pay. `--service` puts a
 * Service (a named target port) in front of the pods, so the endpoints and EndpointSlice controllers follow the
 * rollout too; the last column then says whether the Endpoints and slices ended as the new pods. `--informers` is
 * passed to the server (`separate`: the controllers, scheduler and kubelets each list and watch for themselves).
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { resolveFenceposts } from '../src/controllers/deployment/fenceposts.js';
import { onLines } from '../src/client/watch-lines.js';
import { procCpuMs, spawnServer, type SpawnedServer } from './server-process.js';
import { reportToBench, type RolloutReport } from './report.js';

interface Options {
  replicas: number;
  nodes: number;
  surge: number | string;
  unavailable: number | string;
  runs: number;
  watchHistory?: string;
  stopDelay?: string;
  cpuProfDir?: string;
  podWatch: boolean;
  service: boolean;
  informers?: string;
}

function parseArgs(argv: string[]): Options {
  const value = (flag: string, fallback: string): string => {
    const i = argv.indexOf(flag);
    return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : fallback;
  };
  const intOrPercent = (v: string): number | string => (v.endsWith('%') ? v : Number(v));
  return {
    replicas: Number(value('--replicas', '1000')),
    nodes: Number(value('--nodes', '20')),
    surge: intOrPercent(value('--surge', '25%')),
    unavailable: intOrPercent(value('--unavailable', '25%')),
    runs: Number(value('--runs', '1')),
    watchHistory: argv.includes('--watch-history') ? value('--watch-history', '') : undefined,
    stopDelay: argv.includes('--stop-delay') ? value('--stop-delay', '') : undefined,
    cpuProfDir: argv.includes('--cpu-prof') ? value('--cpu-prof', '') : undefined,
    podWatch: !argv.includes('--no-pod-watch'),
    service: argv.includes('--service'),
    informers: argv.includes('--informers') ? value('--informers', '') : undefined,
  };
}

interface Obj {
  metadata: { name: string; resourceVersion: string; deletionTimestamp?: string; generation?: number };
  spec?: { containers?: Array<{ image: string }> };
  status?: Record<string, unknown>;
}

/** `sim serve` for this run, in its own process (bench/server-process.ts), with the server's CPU profile if asked. */
function startServer(o: Options): Promise<SpawnedServer> {
  const args = [
    '--nodes',
    String(o.nodes),
    ...(o.watchHistory ? ['--watch-history', o.watchHistory] : []),
    ...(o.stopDelay ? ['--stop-delay', o.stopDelay] : []),
    ...(o.informers ? ['--informers', o.informers] : []),
  ];
  return spawnServer(args, o.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${o.cpuProfDir}`] : []);
}

async function call<T>(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<T> {
  const res = await fetch(url + path, {
    method,
    headers: body ? { 'content-type': contentType } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

/**
 * Follows the pods from a list through a watch, re-watching from the last resourceVersion if the server ends the
 * stream, and keeps the worst instant as it goes: most pods not terminating, fewest of them ready.
 */
class PodTracker {
  readonly pods = new Map<string, { live: boolean; ready: boolean; image?: string }>();
  live = 0;
  ready = 0;
  maxLive = 0;
  minReady = Number.MAX_SAFE_INTEGER;
  events = 0;
  /** How many times the server ended the watch and it was resumed. */
  resumed = 0;
  private req?: http.ClientRequest;
  private stopped = false;

  constructor(
    private readonly url: string,
    items: readonly Obj[],
    private resourceVersion: string,
  ) {
    for (const p of items) this.apply('ADDED', p);
    this.maxLive = this.live;
    this.minReady = this.ready;
    this.watch();
  }

  private watch(): void {
    const path = `/api/v1/namespaces/default/pods?watch=true&resourceVersion=${this.resourceVersion}`;
    this.req = http.get(this.url + path, { agent: false }, (res) => {
      onLines(res, (line) => {
        const e = JSON.parse(line) as { type: string; object: Obj };
        if (e.type === 'ERROR') throw new Error(`watch: ${line}`);
        this.resourceVersion = e.object.metadata.resourceVersion;
        if (e.type !== 'BOOKMARK') this.apply(e.type, e.object);
      });
      // 'close' comes whether the server ended the stream or cut the connection (a reader too far behind).
      res.on('close', () => {
        if (this.stopped) return;
        this.resumed++;
        if (process.env.ROLLOUT_DEBUG)
          process.stderr.write(`watch ended after ${this.events} events; resuming from ${this.resourceVersion}\n`);
        this.watch();
      });
    });
    this.req.on('error', () => undefined);
  }

  private apply(type: string, p: Obj): void {
    this.events++;
    const before = this.pods.get(p.metadata.name);
    if (before) {
      if (before.live) this.live--;
      if (before.live && before.ready) this.ready--;
      this.pods.delete(p.metadata.name);
    }
    if (type !== 'DELETED') {
      const entry = { live: !p.metadata.deletionTimestamp, ready: ready(p), image: p.spec?.containers?.[0]?.image };
      this.pods.set(p.metadata.name, entry);
      if (entry.live) this.live++;
      if (entry.live && entry.ready) this.ready++;
    }
    this.maxLive = Math.max(this.maxLive, this.live);
    this.minReady = Math.min(this.minReady, this.ready);
  }

  only(image: string): boolean {
    for (const p of this.pods.values()) if (p.image !== image) return false;
    return true;
  }

  stop(): void {
    this.stopped = true;
    this.req?.destroy();
  }
}

const ready = (p: Obj): boolean =>
  ((p.status?.conditions as Array<{ type: string; status: string }> | undefined) ?? []).some(
    (c) => c.type === 'Ready' && c.status === 'True',
  );

/** Polls the Deployment until `done` holds. */
async function until(url: string, path: string, done: (d: Obj) => boolean, timeoutMs = 600_000): Promise<Obj> {
  const start = performance.now();
  for (;;) {
    const d = await call<Obj>(url, 'GET', path);
    if (done(d)) return d;
    if (performance.now() - start > timeoutMs) throw new Error(`timed out: ${JSON.stringify(d.status)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const serverCpuSeconds = (pid: number): number => (procCpuMs(pid) ?? NaN) / 1000;

function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

/**
 * Waits (up to a minute) until the Service's Endpoints list `replicas` ready addresses (at most 1000) and its
 * EndpointSlices `replicas` ready endpoints and nothing else, and says how long past the rollout that took.
 */
async function endpointsSettled(url: string, replicas: number): Promise<string> {
  const t0 = performance.now();
  for (;;) {
    const ep = await call<{ subsets?: Array<{ addresses?: unknown[]; notReadyAddresses?: unknown[] }> }>(
      url,
      'GET',
      '/api/v1/namespaces/default/endpoints/web',
    );
    const slices = await call<{ items: Array<{ endpoints?: Array<{ conditions?: { ready?: boolean } }> | null }> }>(
      url,
      'GET',
      '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb',
    );
    const ready = (ep.subsets ?? []).reduce((n, s) => n + (s.addresses?.length ?? 0), 0);
    const notReady = (ep.subsets ?? []).reduce((n, s) => n + (s.notReadyAddresses?.length ?? 0), 0);
    const inSlices = slices.items.flatMap((s) => s.endpoints ?? []);
    // Endpoints hold at most 1000 addresses (the rest are cut); the slices hold every pod.
    if (
      ready === Math.min(replicas, 1000) &&
      notReady === 0 &&
      inSlices.length === replicas &&
      inSlices.every((e) => e.conditions?.ready)
    )
      return `✓ +${((performance.now() - t0) / 1000).toFixed(1)} s, ${slices.items.length} slices`;
    if (performance.now() - t0 > 60_000) {
      process.exitCode = 1;
      const unready = inSlices.filter((e) => !e.conditions?.ready).length;
      return `✗ ${ready} ready, ${notReady} not, ${inSlices.length} in slices (${unready} not ready)`;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

const report: RolloutReport = { runs: [] };

async function run(o: Options): Promise<string> {
  const { surge, unavailable } = resolveFenceposts(o.surge, o.unavailable, o.replicas);
  const server = await startServer(o);
  const { url, child } = server;
  try {
    const ns = '/apis/apps/v1/namespaces/default/deployments';
    const path = `${ns}/web`;
    const template = (image: string): unknown => ({
      metadata: { labels: { app: 'web' } },
      spec: { containers: [{ name: 'app', image, ports: [{ name: 'http', containerPort: 8080 }] }] },
    });
    if (o.service)
      await call(url, 'POST', '/api/v1/namespaces/default/services', {
        metadata: { name: 'web' },
        spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 'http' }] },
      });
    const complete = (d: Obj): boolean => {
      const s = d.status as
        | { observedGeneration?: number; updatedReplicas?: number; replicas?: number; availableReplicas?: number }
        | undefined;
      return (
        (s?.observedGeneration ?? 0) >= (d.metadata.generation ?? 1) &&
        s?.updatedReplicas === o.replicas &&
        s.replicas === o.replicas &&
        s.availableReplicas === o.replicas
      );
    };

    let t0 = performance.now();
    await call(url, 'POST', ns, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: {
        replicas: o.replicas,
        selector: { matchLabels: { app: 'web' } },
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: o.surge, maxUnavailable: o.unavailable } },
        template: template('nginx:1.25'),
      },
    });
    await until(url, path, complete);
    const availableMs = performance.now() - t0;
    const cpuCreate = serverCpuSeconds(child.pid!);

    let tracker: PodTracker | undefined;
    if (o.podWatch) {
      const list = await call<{ metadata: { resourceVersion: string }; items: Obj[] }>(
        url,
        'GET',
        '/api/v1/namespaces/default/pods',
      );
      tracker = new PodTracker(url, list.items, list.metadata.resourceVersion);
    }
    t0 = performance.now();
    await call(url, 'PATCH', path, { spec: { template: template('nginx:1.26') } }, 'application/merge-patch+json');
    await until(url, path, complete);
    const rolledMs = performance.now() - t0;
    let drained = '–';
    let watched = 'not watched';
    if (tracker) {
      while (!tracker.only('nginx:1.26')) await new Promise((r) => setTimeout(r, 100));
      drained = `${((performance.now() - t0) / 1000).toFixed(1)} s`;
      tracker.stop();
      if (tracker.resumed > 0) process.stderr.write(`the pod watch was resumed ${tracker.resumed} time(s)\n`);
      const ok = tracker.maxLive <= o.replicas + surge && tracker.minReady >= o.replicas - unavailable;
      if (!ok) process.exitCode = 1;
      watched = `${tracker.maxLive} ≤ ${o.replicas + surge}, ${tracker.minReady} ≥ ${o.replicas - unavailable} ${ok ? '✓' : '✗'}`;
    }
    const endpoints = o.service ? await endpointsSettled(url, o.replicas) : '–';
    // With the watch: until the old pods are gone; without: until rolled out (no watch to say when they are gone).
    const cpu = serverCpuSeconds(child.pid!);
    report.runs.push({
      replicas: o.replicas,
      nodes: o.nodes,
      podWatch: o.podWatch,
      availableMs,
      rolledOutMs: rolledMs,
    });
    return `| ${o.replicas} | ${o.nodes} | ${o.surge} / ${o.unavailable} (${surge} / ${unavailable}) | ${(availableMs / 1000).toFixed(1)} s | ${(rolledMs / 1000).toFixed(1)} s | ${drained} | ${tracker?.events ?? '–'} | ${watched} | ${cpuCreate.toFixed(1)} + ${(cpu - cpuCreate).toFixed(1)} s | ${peakRssMiB(child.pid!)} MiB | ${endpoints} |`;
  } finally {
    // Waits for the server to exit: a CPU profile is written on a clean exit.
    await server.stop();
  }
}

process.on('uncaughtException', (err) => {
  console.error(err);
  process.exit(1);
});
const options = parseArgs(process.argv.slice(2));
console.log(
  '| replicas | nodes | maxSurge / maxUnavailable | Available after | rolled out after | old pods gone after | pod events | worst instant (pods, ready) | server CPU (create + update) | peak RSS | endpoints after |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
for (let i = 0; i < options.runs; i++) console.log(await run(options));
reportToBench(report);
