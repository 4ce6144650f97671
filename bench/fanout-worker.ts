/**
 * The watch clients of the fan-out benchmark, on their own thread so that reading events does not delay the
 * writer's clock (which runs on the main thread). Times are absolute (performance.timeOrigin + now), so they
 * compare across threads.
 *
 * Per watcher it records each event's resourceVersion and arrival time ("rv" mode), or only counts lines
 * ("count" mode, for the raw chunked-write ceiling whose events all carry the same text).
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { parentPort } from 'node:worker_threads';
import WebSocket from 'ws';

export type FanoutCommand =
  | { op: 'open'; transport: 'http' | 'ws'; urls: string[]; mode: 'rv' | 'count' }
  | { op: 'count-start' }
  | { op: 'count-stop' }
  | { op: 'collect' }
  | { op: 'close' };

export type FanoutReply =
  | { type: 'opened' }
  | { type: 'counted'; deliveries: number; ms: number }
  | { type: 'collected'; watchers: Array<{ rvs: Float64Array; times: Float64Array; errors: number }> }
  | { type: 'closed' }
  | { type: 'failed'; message: string };

const port = parentPort;
if (!port) throw new Error('fanout-worker must run as a worker thread');

const now = (): number => performance.timeOrigin + performance.now();
const RV = /"resourceVersion":"(\d+)"/;

/** A growable pair of columns (resourceVersion, arrival time). */
class Arrivals {
  rvs = new Float64Array(1024);
  times = new Float64Array(1024);
  length = 0;
  errors = 0;

  push(rv: number, time: number): void {
    if (this.length === this.rvs.length) {
      const grow = (a: Float64Array<ArrayBuffer>): Float64Array<ArrayBuffer> => {
        const b = new Float64Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.rvs = grow(this.rvs);
      this.times = grow(this.times);
    }
    this.rvs[this.length] = rv;
    this.times[this.length] = time;
    this.length++;
  }
}

interface Watcher {
  arrivals: Arrivals;
  close(): void;
}

let watchers: Watcher[] = [];
let mode: 'rv' | 'count' = 'rv';
let counting = false;
let counted = 0;
let countFrom = 0;

function onLine(w: Watcher, line: string, time: number): void {
  if (counting) counted++;
  if (mode === 'count') return;
  if (line.startsWith('{"type":"ERROR"')) {
    w.arrivals.errors++;
    return;
  }
  const m = RV.exec(line);
  if (m) w.arrivals.push(Number(m[1]), time);
}

function openHttp(url: string): Promise<Watcher> {
  return new Promise((resolve, reject) => {
    const arrivals = new Arrivals();
    let res: http.IncomingMessage | undefined;
    const watcher: Watcher = { arrivals, close: () => req.destroy() };
    const req = http.get(url, { agent: false }, (response) => {
      res = response;
      if (response.statusCode !== 200) {
        reject(new Error(`GET ${url}: ${response.statusCode}`));
        response.resume();
        return;
      }
      response.setEncoding('utf8');
      let buffer = '';
      response.on('data', (chunk: string) => {
        const time = now();
        buffer += chunk;
        let start = 0;
        let nl: number;
        while ((nl = buffer.indexOf('\n', start)) >= 0) {
          onLine(watcher, buffer.slice(start, nl), time);
          start = nl + 1;
        }
        buffer = buffer.slice(start);
      });
      response.on('error', () => {});
      resolve(watcher);
    });
    req.on('error', (err) => (res ? undefined : reject(err)));
  });
}

function openWebSocket(url: string): Promise<Watcher> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, 'ws'));
    const watcher: Watcher = { arrivals: new Arrivals(), close: () => ws.terminate() };
    ws.on('message', (data: Buffer) => onLine(watcher, data.toString('utf8'), now()));
    ws.once('open', () => resolve(watcher));
    ws.once('error', reject);
    ws.on('error', () => {});
  });
}

async function handle(cmd: FanoutCommand): Promise<FanoutReply> {
  switch (cmd.op) {
    case 'open': {
      mode = cmd.mode;
      const open = cmd.transport === 'http' ? openHttp : openWebSocket;
      // A few at a time: a thousand simultaneous connects overflow the server's accept backlog.
      const opened: Watcher[] = [];
      for (let i = 0; i < cmd.urls.length; i += 50)
        opened.push(...(await Promise.all(cmd.urls.slice(i, i + 50).map(open))));
      watchers = opened;
      return { type: 'opened' };
    }
    case 'count-start':
      counting = true;
      counted = 0;
      countFrom = now();
      return { type: 'counted', deliveries: 0, ms: 0 };
    case 'count-stop':
      counting = false;
      return { type: 'counted', deliveries: counted, ms: now() - countFrom };
    case 'collect':
      return {
        type: 'collected',
        watchers: watchers.map((w) => ({
          rvs: w.arrivals.rvs.slice(0, w.arrivals.length),
          times: w.arrivals.times.slice(0, w.arrivals.length),
          errors: w.arrivals.errors,
        })),
      };
    case 'close':
      for (const w of watchers) w.close();
      watchers = [];
      return { type: 'closed' };
  }
}

port.on('message', (cmd: FanoutCommand) => {
  handle(cmd).then(
    (reply) => port.postMessage(reply),
    (err: unknown) =>
      port.postMessage({
        type: 'failed',
        message: err instanceof Error ? err.message : String(err),
      } satisfies FanoutReply),
  );
});
