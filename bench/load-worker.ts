/**
 * The load generator, on its own thread so that it does not share an event loop with the servers under test
 * (which run on the main thread). undici keeps the keep-alive connections.
 */
import { parentPort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { Client, Pool } from 'undici';
import type {
  Job,
  JobResult,
  LatencyJob,
  LatencyResult,
  PaginateJob,
  PaginateResult,
  ThroughputJob,
  ThroughputResult,
  WorkerMessage,
} from './protocol.js';

const port = parentPort;
if (!port) throw new Error('load-worker must run as a worker thread');

const post = (message: WorkerMessage): void => port.postMessage(message);

async function drain(body: AsyncIterable<Buffer>, keep: boolean): Promise<{ bytes: number; text?: string }> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body) {
    bytes += chunk.length;
    if (keep) chunks.push(chunk);
  }
  return keep ? { bytes, text: Buffer.concat(chunks, bytes).toString('utf8') } : { bytes };
}

async function throughput(job: ThroughputJob): Promise<ThroughputResult> {
  const pool = new Pool(job.origin, { connections: job.connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const headers = { 'content-type': 'application/json', accept: 'application/json' };
  const start = performance.now();
  const measureFrom = start + job.warmupMs;
  const end = measureFrom + job.durationMs;
  let measuring = false;
  let requests = 0;
  let errors = 0;
  let firstError: string | undefined;
  const latencyMs: number[] = [];
  let elu = performance.eventLoopUtilization();
  const loop = async (): Promise<void> => {
    for (;;) {
      const t0 = performance.now();
      if (t0 >= end) return;
      if (!measuring && t0 >= measureFrom) {
        measuring = true;
        elu = performance.eventLoopUtilization();
        post({ type: 'measuring' });
      }
      const res = await pool.request({ method: 'POST', path: job.path, headers, body: job.body });
      const ok = res.statusCode === job.expectStatus;
      const { text } = await drain(res.body, !ok && firstError === undefined);
      const t1 = performance.now();
      if (t0 < measureFrom || t1 > end) continue;
      if (ok) {
        requests++;
        latencyMs.push(t1 - t0);
      } else {
        errors++;
        firstError ??= `${res.statusCode}: ${(text ?? '').slice(0, 500)}`;
      }
    }
  };
  await Promise.all(Array.from({ length: job.connections }, loop));
  const clientElu = performance.eventLoopUtilization(elu).utilization;
  post({ type: 'stopped' });
  await pool.close();
  const result: ThroughputResult = { requests, errors, elapsedMs: job.durationMs, latencyMs, clientElu };
  if (firstError !== undefined) result.firstError = firstError;
  return result;
}

async function get(client: Client, path: string, keep: boolean): Promise<{ ms: number; bytes: number; text?: string }> {
  const t0 = performance.now();
  const res = await client.request({ method: 'GET', path, headers: { accept: 'application/json' } });
  const body = await drain(res.body, keep || res.statusCode !== 200);
  const ms = performance.now() - t0;
  if (res.statusCode !== 200) throw new Error(`GET ${path}: ${res.statusCode} ${(body.text ?? '').slice(0, 500)}`);
  return { ms, ...body };
}

interface ListBody {
  items: unknown[];
  metadata: { continue?: string };
}

async function latency(job: LatencyJob): Promise<LatencyResult> {
  const client = new Client(job.origin, { keepAliveTimeout: 60_000, bodyTimeout: 600_000, headersTimeout: 600_000 });
  const first = await get(client, job.path, true);
  const items = (JSON.parse(first.text!) as ListBody).items.length;
  for (let i = 1; i < job.warmup; i++) await get(client, job.path, false);
  const latencyMs: number[] = [];
  for (let i = 0; i < job.reps; i++) latencyMs.push((await get(client, job.path, false)).ms);
  await client.close();
  return { firstMs: first.ms, items, bytes: first.bytes, latencyMs };
}

async function paginate(job: PaginateJob): Promise<PaginateResult> {
  const client = new Client(job.origin, { keepAliveTimeout: 60_000 });
  const pageLatencyMs: number[] = [];
  const walkMs: number[] = [];
  let pages = 0;
  let itemsPerWalk = 0;
  for (let w = 0; w < job.warmupWalks + job.walks; w++) {
    const timed = w >= job.warmupWalks;
    let token: string | undefined;
    let walk = 0;
    pages = 0;
    itemsPerWalk = 0;
    do {
      const sep = job.path.includes('?') ? '&' : '?';
      const path = `${job.path}${sep}limit=${job.limit}${token ? `&continue=${encodeURIComponent(token)}` : ''}`;
      const page = await get(client, path, true);
      const list = JSON.parse(page.text!) as ListBody;
      pages++;
      itemsPerWalk += list.items.length;
      walk += page.ms;
      if (timed) pageLatencyMs.push(page.ms);
      token = list.metadata.continue || undefined;
    } while (token);
    if (timed) walkMs.push(walk);
  }
  await client.close();
  return { pages, itemsPerWalk, pageLatencyMs, walkMs };
}

async function run(job: Job): Promise<JobResult> {
  switch (job.op) {
    case 'throughput':
      return throughput(job);
    case 'latency':
      return latency(job);
    case 'paginate':
      return paginate(job);
  }
}

port.on('message', (job: Job) => {
  run(job).then(
    (result) => post({ type: 'done', result }),
    (err: unknown) =>
      post({ type: 'failed', message: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
  );
});
