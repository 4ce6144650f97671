import type { ServerResponse } from 'node:http';
import type { WebSocket } from 'ws';
import { wallClock, type TimerHandle } from '../clock/clock.js';
import type { Status } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import type { StoreEvent, WatchEventType, WatchSink } from '../storage/watch.js';
import { jsonOf } from './encoding.js';

/** A watcher whose unsent output passes this many bytes is too slow: it is disconnected, memory stays bounded. */
export const SLOW_WATCHER_LIMIT_BYTES = 16 * 1024 * 1024;

export type EventEncoder = (type: WatchEventType, object: KubeObject) => string;

/** `{"type":…,"object":…}` with the object's cached JSON spliced in. */
export const plainEventEncoder: EventEncoder = (type, object) => `{"type":"${type}","object":${jsonOf(object)}}\n`;

export interface Transport {
  write(text: string): boolean;
  /** Bytes accepted but not yet sent. */
  buffered(): number;
  end(): void;
  /** Drops the connection without flushing (for clients that stopped reading). */
  destroy(): void;
  onClose(fn: () => void): void;
}

export function httpTransport(res: ServerResponse): Transport {
  return {
    write: (text) => {
      if (res.destroyed || res.writableEnded) return false;
      res.write(text);
      return true;
    },
    buffered: () => res.writableLength,
    end: () => {
      if (!res.writableEnded) res.end();
    },
    destroy: () => res.destroy(),
    onClose: (fn) => res.on('close', fn),
  };
}

export function webSocketTransport(ws: WebSocket): Transport {
  return {
    write: (text) => {
      if (ws.readyState !== ws.OPEN) return false;
      ws.send(text.endsWith('\n') ? text.slice(0, -1) : text);
      return true;
    },
    buffered: () => ws.bufferedAmount,
    end: () => ws.close(1000),
    destroy: () => ws.terminate(),
    onClose: (fn) => ws.on('close', fn),
  };
}

/**
 * Holds what is written until `until` settles (with --data: until the state a watch starts from is durable,
 * so its initial events never show a revision a crash could lose), then passes everything through.
 */
export function gatedTransport(inner: Transport, until: Promise<void>): Transport {
  let queue: string[] | undefined = [];
  let queued = 0;
  let ended = false;
  until.then(
    () => {
      const texts = queue!;
      queue = undefined;
      for (const text of texts) inner.write(text);
      if (ended) inner.end();
    },
    () => {
      queue = undefined;
      inner.destroy();
    },
  );
  return {
    write: (text) => {
      if (!queue) return inner.write(text);
      queue.push(text);
      queued += text.length;
      return true;
    },
    buffered: () => (queue ? queued : 0) + inner.buffered(),
    end: () => {
      if (queue) ended = true;
      else inner.end();
    },
    destroy: () => {
      queue = undefined;
      inner.destroy();
    },
    onClose: (fn) => inner.onClose(fn),
  };
}

/**
 * The server side of one watch: encodes events (once per event and format, shared across watchers),
 * writes them, sends bookmarks when asked, ends on timeout, and cuts off a client that stops reading.
 */
export class WatchStream implements WatchSink {
  private closed = false;
  private timers: TimerHandle[] = [];
  onEnd?: () => void;

  constructor(
    private readonly transport: Transport,
    private readonly format: string,
    private readonly encode: EventEncoder,
  ) {
    transport.onClose(() => this.finish());
  }

  send(type: WatchEventType, event: StoreEvent): boolean {
    if (this.closed) return false;
    if (this.transport.buffered() > SLOW_WATCHER_LIMIT_BYTES) {
      this.transport.destroy();
      this.finish();
      return false;
    }
    return this.transport.write(event.encoded(type, this.format, this.encode));
  }

  /** Sends an event that is not a store change (BOOKMARK, ERROR). */
  sendRaw(type: WatchEventType, object: KubeObject | Status): void {
    if (!this.closed) this.transport.write(`{"type":"${type}","object":${JSON.stringify(object)}}\n`);
  }

  endAfter(ms: number): void {
    this.timers.push(wallClock.setTimer(ms, () => this.close()));
  }

  every(ms: number, fn: () => void): void {
    const tick = (): void => {
      if (this.closed) return;
      fn();
      this.timers.push(wallClock.setTimer(ms, tick));
    };
    this.timers.push(wallClock.setTimer(ms, tick));
  }

  close(): void {
    if (this.closed) return;
    this.transport.end();
    this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) t.cancel();
    this.onEnd?.();
  }

  get isClosed(): boolean {
    return this.closed;
  }
}
