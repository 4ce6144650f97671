import http from 'node:http';
import { WebSocket } from 'ws';
import type { Obj, StatusBody } from './http.js';
import { onLines } from '../../src/client/watch-lines.js';

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: Obj & Partial<StatusBody>;
}

const WAIT_TIMEOUT_MS = 10_000;

/**
 * A watch stream as a client sees it: every event in arrival order, and promises that settle when an event
 * (or the end of the stream) arrives, so tests wait on events instead of sleeping.
 */
export class WatchClient {
  readonly events: WatchEvent[] = [];
  status = 0;
  contentType = '';
  ended = false;
  private waiters: Array<() => void> = [];
  private closeFn: () => void = () => undefined;
  /** Settles when the server ends the stream (or the client closes it). */
  readonly done: Promise<void>;
  private markDone!: () => void;

  constructor(readonly description: string) {
    this.done = new Promise((resolve) => (this.markDone = resolve));
  }

  /** @internal */ push(event: WatchEvent): void {
    this.events.push(event);
    this.wake();
  }

  /** @internal */ finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.markDone();
    this.wake();
  }

  /** @internal */ onClose(fn: () => void): void {
    this.closeFn = fn;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Resolves once `predicate(events)` holds; rejects on timeout or if the stream ends first. */
  until(
    predicate: (events: readonly WatchEvent[]) => boolean,
    what = 'the expected events',
    timeoutMs = WAIT_TIMEOUT_MS,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new Error(
            `${this.description}: timed out after ${timeoutMs} ms waiting for ${what}; got ${this.events.length} events: ${summarize(this.events.slice(-10))}`,
          ),
        );
      }, timeoutMs);
      const check = (): void => {
        if (predicate(this.events)) {
          clearTimeout(timer);
          resolve();
        } else if (this.ended) {
          clearTimeout(timer);
          reject(
            new Error(
              `${this.description}: stream ended while waiting for ${what}; got ${this.events.length} events: ${summarize(this.events.slice(-10))}`,
            ),
          );
        } else this.waiters.push(check);
      };
      check();
    });
  }

  /** Resolves once at least n events have arrived. */
  count(n: number, timeoutMs = WAIT_TIMEOUT_MS): Promise<void> {
    return this.until((events) => events.length >= n, `${n} events`, timeoutMs);
  }

  close(): void {
    this.closeFn();
    this.finish();
  }
}

export function summarize(events: readonly WatchEvent[]): string {
  return events
    .map(
      (e) =>
        `${e.type} ${e.object.metadata?.name ?? e.object.reason ?? ''}@${e.object.metadata?.resourceVersion ?? ''}`,
    )
    .join(', ');
}

/** Opens an HTTP watch (`path` must carry `watch=true`); resolves once the response headers are in, when the watch is registered. */
export function httpWatch(base: string, path: string, headers: Record<string, string> = {}): Promise<WatchClient> {
  const client = new WatchClient(`watch ${path}`);
  return new Promise((resolve, reject) => {
    const req = http.get(base + path, { headers: { accept: 'application/json', ...headers }, agent: false }, (res) => {
      client.status = res.statusCode ?? 0;
      client.contentType = String(res.headers['content-type'] ?? '');
      onLines(res, (line) => client.push(JSON.parse(line) as WatchEvent));
      res.on('end', () => client.finish());
      res.on('close', () => client.finish());
      resolve(client);
    });
    client.onClose(() => req.destroy());
    req.on('error', (err) => {
      if (client.status === 0) reject(err);
      client.finish();
    });
  });
}

/** Opens the same watch over WebSocket (one event per message); resolves once the connection is open. */
export function webSocketWatch(base: string, path: string): Promise<WatchClient> {
  const client = new WatchClient(`websocket watch ${path}`);
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(base.replace(/^http/, 'ws') + path);
    client.onClose(() => ws.terminate());
    ws.on('upgrade', (res) => (client.status = res.statusCode ?? 0));
    ws.on('open', () => resolve(client));
    ws.on('message', (data) => client.push(JSON.parse(String(data)) as WatchEvent));
    ws.on('close', () => client.finish());
    ws.on('error', (err) => {
      client.finish();
      reject(err);
    });
  });
}
