/**
 * Watch fan-out (issue 8, figure 2), over HTTP chunked watches and over WebSocket:
 *
 * (a) 100 watchers of one namespace's ConfigMaps, all matching every write; 500 creates/s for a while. Per event
 *     and watcher: the delay from the write's HTTP response (and from its request) to the event's arrival, and
 *     events lost. Then the same watchers under writes as fast as 16 connections go: deliveries/s, as a ratio to
 *     a plain http server writing one chunk to 100 open responses in a loop, measured in the same run.
 * (b) 1,000 watchers, each matching its own slice of the writes (500 watch one namespace each, 500 watch every
 *     namespace through a label selector), 1,000 creates/s spread over them: each write matches one watcher.
 *
 * The server runs in its own process (`sim serve --nodes 0`), the watchers on a worker thread, the writers on
 * the main thread (undici). Times are absolute, so they compare across threads.
 */
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { Pool } from 'undici';
import type { FanoutCommand, FanoutReply } from './fanout-worker.js';
import { spawnRawFanout } from './raw-fanout-server.js';
import { spawnServer, type SpawnedServer } from './server-process.js';
import { fmt, summarize, table, type Summary } from './stats.js';

export interface FanoutOptions {
  quick: boolean;
  /** Length of each measured phase. */
  durationMs: number;
  /** Only these transports (default both). */
  transports?: Array<'http' | 'ws'>;
}

export interface FanoutCase {
  case: string;
  transport: 'http' | 'ws';
  watchers: number;
  targetWritesPerSec: number;
  writes: number;
  achievedWritesPerSec: number;
  /** Write acknowledged (HTTP response) → event received, per delivery. Negative: the event came first. */
  ackToEventMs: Summary;
  /** Write sent → event received, per delivery. */
  sendToEventMs: Summary;
  writeLatencyMs: Summary;
  expectedDeliveries: number;
  delivered: number;
  lost: number;
  duplicates: number;
  /** ERROR events received (a watch the server ended). */
  errors: number;
  /** Server process CPU time per write (its dispatch, encoding and socket writes included), µs. */
  serverCpuMicrosPerWrite: number;
}

export interface FanoutSaturation {
  transport: 'http' | 'ws';
  watchers: number;
  writesPerSec: number;
  deliveriesPerSec: number;
  ratioToRaw: number;
}

export interface FanoutFigures {
  raw: { watchers: number; eventBytes: number; eventsPerSec: number; deliveriesPerSec: number };
  cases: FanoutCase[];
  saturation: FanoutSaturation[];
}

const now = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

class WatchClients {
  private readonly worker = new Worker(new URL('./fanout-worker.js', import.meta.url));

  call<T extends FanoutReply['type']>(cmd: FanoutCommand, expect: T): Promise<Extract<FanoutReply, { type: T }>> {
    return new Promise((resolve, reject) => {
      this.worker.once('message', (reply: FanoutReply) => {
        if (reply.type === expect) resolve(reply as Extract<FanoutReply, { type: T }>);
        else reject(new Error(`fan-out watchers: ${reply.type === 'failed' ? reply.message : reply.type}`));
      });
      this.worker.postMessage(cmd);
    });
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}

interface Write {
  sent: number;
  acked: number;
  rv: number;
  /** Index of the one watcher it is meant for, or -1 for all. */
  target: number;
}

function configMap(name: string, labels: Record<string, string>): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, labels: { app: 'fanout', ...labels } },
    data: { 'config.yaml': 'x'.repeat(700), index: name },
  });
}

async function call(
  pool: Pool,
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; text: string }> {
  const res = await pool.request({
    method,
    path,
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body,
  });
  return { status: res.statusCode, text: await res.body.text() };
}

async function currentRevision(pool: Pool, path: string): Promise<string> {
  const r = await call(pool, 'GET', `${path}?limit=1`);
  return (JSON.parse(r.text) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
}

async function createNamespaces(pool: Pool, names: string[]): Promise<void> {
  for (let i = 0; i < names.length; i += 32) {
    await Promise.all(
      names.slice(i, i + 32).map(async (name) => {
        const r = await call(
          pool,
          'POST',
          '/api/v1/namespaces',
          JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }),
        );
        if (r.status !== 201 && r.status !== 409) throw new Error(`creating namespace ${name}: ${r.status} ${r.text}`);
      }),
    );
  }
}

/**
 * Creates at a fixed rate (open loop: a write is sent when due, whether or not earlier ones were answered; at
 * most 256 in flight), each described by `plan(i)`.
 */
async function writeAtRate(
  pool: Pool | readonly Pool[],
  rate: number,
  durationMs: number,
  plan: (i: number) => { path: string; body: string; target: number },
): Promise<Write[]> {
  const writes: Write[] = [];
  const total = Math.round((rate * durationMs) / 1000);
  const start = now();
  let inFlight = 0;
  const pending: Promise<void>[] = [];
  let i = 0;
  while (i < total) {
    const due = start + (i * 1000) / rate;
    const wait = due - now();
    if (wait > 1) await sleep(wait);
    while (i < total && start + (i * 1000) / rate <= now() && inFlight < 256) {
      const { path, body, target } = plan(i);
      i++;
      inFlight++;
      const sent = now();
      pending.push(
        call(Array.isArray(pool) ? pool[(i - 1) % pool.length]! : (pool as Pool), 'POST', path, body).then((r) => {
          inFlight--;
          const acked = now();
          if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${r.text.slice(0, 300)}`);
          const rv = Number((JSON.parse(r.text) as { metadata: { resourceVersion: string } }).metadata.resourceVersion);
          writes.push({ sent, acked, rv, target });
        }),
      );
    }
    if (inFlight >= 256) await sleep(1);
  }
  await Promise.all(pending);
  return writes;
}

/** Creates as fast as `concurrency` connections go, for `durationMs`; returns the number of writes. */
async function writeFlat(
  pool: Pool,
  concurrency: number,
  durationMs: number,
  plan: (i: number) => { path: string; body: string },
): Promise<number> {
  const end = now() + durationMs;
  let i = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (now() < end) {
        const { path, body } = plan(i++);
        const r = await call(pool, 'POST', path, body);
        if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${r.text.slice(0, 300)}`);
        done++;
      }
    }),
  );
  return done;
}

function analyse(
  name: string,
  transport: 'http' | 'ws',
  rate: number,
  writes: Write[],
  arrivals: Array<{ rvs: Float64Array; times: Float64Array; errors: number }>,
  cpuMs: number,
): FanoutCase {
  const byRv = new Map<number, Write>();
  for (const w of writes) byRv.set(w.rv, w);
  const ackDelays: number[] = [];
  const sendDelays: number[] = [];
  let expected = 0;
  let delivered = 0;
  let duplicates = 0;
  let errors = 0;
  arrivals.forEach((a, watcher) => {
    errors += a.errors;
    const seen = new Set<number>();
    for (let k = 0; k < a.rvs.length; k++) {
      const rv = a.rvs[k]!;
      const w = byRv.get(rv);
      if (!w || (w.target !== -1 && w.target !== watcher)) continue;
      if (seen.has(rv)) {
        duplicates++;
        continue;
      }
      seen.add(rv);
      delivered++;
      ackDelays.push(a.times[k]! - w.acked);
      sendDelays.push(a.times[k]! - w.sent);
    }
    for (const w of writes) if (w.target === -1 || w.target === watcher) expected++;
  });
  const first = Math.min(...writes.map((w) => w.sent));
  const last = Math.max(...writes.map((w) => w.sent));
  return {
    case: name,
    transport,
    watchers: arrivals.length,
    targetWritesPerSec: rate,
    writes: writes.length,
    achievedWritesPerSec: writes.length > 1 ? ((writes.length - 1) * 1000) / (last - first) : NaN,
    ackToEventMs: summarize(ackDelays),
    sendToEventMs: summarize(sendDelays),
    writeLatencyMs: summarize(writes.map((w) => w.acked - w.sent)),
    expectedDeliveries: expected,
    delivered,
    lost: expected - delivered,
    duplicates,
    errors,
    serverCpuMicrosPerWrite: (cpuMs * 1000) / writes.length,
  };
}

async function caseA(
  server: SpawnedServer,
  pool: Pool,
  clients: WatchClients,
  transport: 'http' | 'ws',
  o: FanoutOptions,
  raw: number,
): Promise<{ fixed: FanoutCase; saturation: FanoutSaturation }> {
  const watchers = 100;
  const rate = 500;
  const ns = `fanout-a-${transport}`;
  await createNamespaces(pool, [ns]);
  const path = `/api/v1/namespaces/${ns}/configmaps`;
  const rv = await currentRevision(pool, path);
  await clients.call(
    {
      op: 'open',
      transport,
      mode: 'rv',
      urls: Array.from({ length: watchers }, () => `${server.url}${path}?watch=true&resourceVersion=${rv}`),
    },
    'opened',
  );
  const cpu0 = (await server.usage(false)).cpuMs;
  const writes = await writeAtRate(pool, rate, o.durationMs, (i) => ({
    path,
    body: configMap(`a-${i}`, {}),
    target: -1,
  }));
  const cpuMs = (await server.usage(false)).cpuMs - cpu0;
  await sleep(2000);
  const { watchers: arrivals } = await clients.call({ op: 'collect' }, 'collected');
  const fixed = analyse(
    `(a) ${watchers} watchers, all match, ${rate} writes/s`,
    transport,
    rate,
    writes,
    arrivals,
    cpuMs,
  );

  // The same watchers, writes as fast as they go: deliveries/s against the raw loop.
  await clients.call({ op: 'count-start' }, 'counted');
  const n = await writeFlat(pool, 16, o.durationMs, (i) => ({ path, body: configMap(`s-${i}`, {}) }));
  await sleep(500);
  const counted = await clients.call({ op: 'count-stop' }, 'counted');
  await clients.call({ op: 'close' }, 'closed');
  const deliveriesPerSec = (counted.deliveries * 1000) / counted.ms;
  return {
    fixed,
    saturation: {
      transport,
      watchers,
      writesPerSec: (n * 1000) / o.durationMs,
      deliveriesPerSec,
      ratioToRaw: deliveriesPerSec / raw,
    },
  };
}

async function caseB(
  server: SpawnedServer,
  pool: Pool,
  clients: WatchClients,
  transport: 'http' | 'ws',
  o: FanoutOptions,
): Promise<FanoutCase> {
  const perKind = 500;
  const rate = 1000;
  const own = Array.from({ length: perKind }, (_, k) => `fanout-b-${transport}-${k}`);
  const shared = `fanout-b-${transport}-shared`;
  await createNamespaces(pool, [...own, shared]);
  const rv = await currentRevision(pool, '/api/v1/configmaps');
  const urls = [
    ...own.map((ns) => `${server.url}/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${rv}`),
    ...Array.from(
      { length: perKind },
      (_, k) =>
        `${server.url}/api/v1/configmaps?watch=true&resourceVersion=${rv}&labelSelector=${encodeURIComponent(`bucket=${transport}-${k}`)}`,
    ),
  ];
  await clients.call({ op: 'open', transport, mode: 'rv', urls }, 'opened');
  const cpu0 = (await server.usage(false)).cpuMs;
  // Even writes go to one watcher's namespace, odd ones to the shared namespace with one watcher's label.
  const writes = await writeAtRate(pool, rate, o.durationMs, (i) => {
    const k = (i >> 1) % perKind;
    return i % 2 === 0
      ? { path: `/api/v1/namespaces/${own[k]}/configmaps`, body: configMap(`b-${i}`, { bucket: 'none' }), target: k }
      : {
          path: `/api/v1/namespaces/${shared}/configmaps`,
          body: configMap(`b-${i}`, { bucket: `${transport}-${k}` }),
          target: perKind + k,
        };
  });
  const cpuMs = (await server.usage(false)).cpuMs - cpu0;
  await sleep(2000);
  const { watchers: arrivals } = await clients.call({ op: 'collect' }, 'collected');
  await clients.call({ op: 'close' }, 'closed');
  return analyse(
    `(b) ${urls.length} watchers, 1 match per write, ${rate} writes/s`,
    transport,
    rate,
    writes,
    arrivals,
    cpuMs,
  );
}

/**
 * Case (a)'s shape across API servers (bench:etcd): `watchers` HTTP watches of one namespace's ConfigMaps spread
 * round-robin over the servers, `rate` creates/s sent round-robin to them too, every watcher matching every write.
 * Over etcd the servers share resourceVersions, so a watcher on one server is matched with a write through another.
 */
export async function fanoutAcross(
  urls: readonly string[],
  serverCpuMs: () => number,
  o: { watchers: number; rate: number; durationMs: number; namespace: string },
): Promise<FanoutCase> {
  const pools = urls.map((url) => new Pool(url, { connections: 16, pipelining: 1, keepAliveTimeout: 60_000 }));
  const clients = new WatchClients();
  try {
    await createNamespaces(pools[0]!, [o.namespace]);
    const path = `/api/v1/namespaces/${o.namespace}/configmaps`;
    const rv = await currentRevision(pools[0]!, path);
    await clients.call(
      {
        op: 'open',
        transport: 'http',
        mode: 'rv',
        urls: Array.from(
          { length: o.watchers },
          (_, i) => `${urls[i % urls.length]}${path}?watch=true&resourceVersion=${rv}`,
        ),
      },
      'opened',
    );
    const cpu0 = serverCpuMs();
    const writes = await writeAtRate(pools, o.rate, o.durationMs, (i) => ({
      path,
      body: configMap(`f-${i}`, {}),
      target: -1,
    }));
    const cpuMs = serverCpuMs() - cpu0;
    await sleep(2000);
    const { watchers: arrivals } = await clients.call({ op: 'collect' }, 'collected');
    await clients.call({ op: 'close' }, 'closed');
    return analyse(
      `${o.watchers} watchers on ${urls.length} server(s), ${o.rate} writes/s`,
      'http',
      o.rate,
      writes,
      arrivals,
      cpuMs,
    );
  } finally {
    await clients.close();
    for (const pool of pools) await pool.close();
  }
}

export async function measureFanout(o: FanoutOptions): Promise<FanoutFigures> {
  const server = await spawnServer(['--nodes', '0', '--watch-history', '100000']);
  const pool = new Pool(server.url, { connections: 16, pipelining: 1, keepAliveTimeout: 60_000 });
  const clients = new WatchClients();
  const rawServer = await spawnRawFanout();
  try {
    // The raw loop writes the text of a real event of this benchmark.
    await createNamespaces(pool, ['fanout-sample']);
    const sample = await call(pool, 'POST', '/api/v1/namespaces/fanout-sample/configmaps', configMap('sample', {}));
    const line = `{"type":"ADDED","object":${sample.text.trim()}}\n`;
    const watchers = 100;
    await clients.call(
      { op: 'open', transport: 'http', mode: 'count', urls: Array.from({ length: watchers }, () => rawServer.url) },
      'opened',
    );
    await clients.call({ op: 'count-start' }, 'counted');
    const events = await rawServer.run(line, o.durationMs);
    await sleep(500);
    const counted = await clients.call({ op: 'count-stop' }, 'counted');
    await clients.call({ op: 'close' }, 'closed');
    const raw = {
      watchers,
      eventBytes: Buffer.byteLength(line),
      eventsPerSec: (events * 1000) / o.durationMs,
      deliveriesPerSec: (counted.deliveries * 1000) / counted.ms,
    };
    process.stderr.write(
      `  raw chunked writes to ${watchers} responses: ${fmt(raw.deliveriesPerSec, 0)} deliveries/s\n`,
    );

    const cases: FanoutCase[] = [];
    const saturation: FanoutSaturation[] = [];
    for (const transport of o.transports ?? (['http', 'ws'] as const)) {
      const a = await caseA(server, pool, clients, transport, o, raw.deliveriesPerSec);
      cases.push(a.fixed);
      saturation.push(a.saturation);
      process.stderr.write(
        `  ${transport} ${a.fixed.case}: ack→event p99 ${fmt(a.fixed.ackToEventMs.p99, 2)} ms, lost ${a.fixed.lost}; flat out ${fmt(a.saturation.deliveriesPerSec, 0)} deliveries/s\n`,
      );
      const b = await caseB(server, pool, clients, transport, o);
      cases.push(b);
      process.stderr.write(
        `  ${transport} ${b.case}: ack→event p99 ${fmt(b.ackToEventMs.p99, 2)} ms, lost ${b.lost}\n`,
      );
    }
    return { raw, cases, saturation };
  } finally {
    rawServer.stop();
    await clients.close();
    await pool.close();
    await server.stop();
  }
}

export function printFanout(f: FanoutFigures, o: FanoutOptions): void {
  console.log(
    `\nWatch fan-out (server in its own process, watchers on a worker thread, ${o.durationMs / 1000} s per phase)`,
  );
  console.log(
    table([
      [
        'case',
        'transport',
        'writes/s',
        'ack→event p50 ms',
        'p99 ms',
        'max ms',
        'send→event p99 ms',
        'write p99 ms',
        'delivered',
        'lost',
        'server µs/write',
      ],
      ...f.cases.map((c) => [
        c.case,
        c.transport,
        fmt(c.achievedWritesPerSec, 0),
        fmt(c.ackToEventMs.p50, 2),
        fmt(c.ackToEventMs.p99, 2),
        fmt(c.ackToEventMs.max, 1),
        fmt(c.sendToEventMs.p99, 2),
        fmt(c.writeLatencyMs.p99, 2),
        `${c.delivered}/${c.expectedDeliveries}`,
        String(c.lost + c.errors),
        fmt(c.serverCpuMicrosPerWrite, 0),
      ]),
    ]),
  );
  console.log(
    "targets: (a) p99 ≤ 20 ms, (b) p99 ≤ 10 ms, lost 0. ack→event: from the write's HTTP response to the event at the watcher (negative when the event came first).",
  );
  console.log(
    table([
      ['flat out, 100 watchers', 'writes/s', 'deliveries/s', 'ratio to raw'],
      [
        `raw chunked-write loop (${f.raw.eventBytes} B events)`,
        fmt(f.raw.eventsPerSec, 0),
        fmt(f.raw.deliveriesPerSec, 0),
        '1.00',
      ],
      ...f.saturation.map((s) => [
        `kube-sim, ${s.transport}`,
        fmt(s.writesPerSec, 0),
        fmt(s.deliveriesPerSec, 0),
        fmt(s.ratioToRaw, 2),
      ]),
    ]),
  );
}
