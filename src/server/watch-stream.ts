import type { ServerResponse } from 'node:http';
import type { WebSocket } from 'ws';
import { wallClock, type TimerHandle } from '../clock/clock.js';
import type { Status } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import type { StoreEvent, WatchEventType, WatchSink } from '../storage/watch.js';
import { listedJsonOf } from '../storage/encoding.js';

/** A watcher whose unsent output passes this many bytes is too slow: it is disconnected, memory stays bounded. */
export const SLOW_WATCHER_LIMIT_BYTES = 16 * 1024 * 1024;

export type EventEncoder = (type: WatchEventType, object: KubeObject) => string;

/**
 * `{"type":…,"object":…}` with the object's JSON spliced in: its cached text if a get or the write-ahead log made
 * it, else made without caching it, since the event caches its bytes for every watcher (StoreEvent.encoded). A
 * rollout's 80,000 pod versions each kept 2.9 KB of text they never served again, in the old generation.
 */
export const plainEventEncoder: EventEncoder = (type, object) =>
  `{"type":"${type}","object":${listedJsonOf(object)}}\n`;

/** What a watch writes: an event's shared bytes, or a one-off text (BOOKMARK, ERROR). */
export type WatchChunk = Buffer | string;

export interface Transport {
  write(chunk: WatchChunk): boolean;
  /** Bytes accepted but not yet sent. */
  buffered(): number;
  end(): void;
  /** Drops the connection without flushing (for clients that stopped reading). */
  destroy(): void;
  onClose(fn: () => void): void;
}

interface Corkable {
  cork(): void;
  uncork(): void;
}

/** Streams written to during this turn of the event loop, and those of them corked, uncorked when it ends. */
const writtenThisTurn = new Set<Corkable>();
const corked = new Set<Corkable>();
let turnEndScheduled = false;

function endTurn(): void {
  turnEndScheduled = false;
  writtenThisTurn.clear();
  const streams = [...corked];
  corked.clear();
  for (const stream of streams) stream.uncork();
}

/**
 * Called before each write to a watch socket. The first write of a turn of the event loop goes out at once (no
 * added delay); from a second one in the same turn, the socket is corked until the turn ends, so a watcher gets
 * one write system call per turn however many events reached it (on loopback a write costs ~10–20 µs of kernel
 * time, more than building the event). Idle, nothing waits; under load the batches grow with the load.
 * setImmediate is event-loop order, not time: it runs once the current I/O callbacks are done.
 */
function beforeWrite(stream: Corkable): void {
  if (!writtenThisTurn.has(stream)) {
    writtenThisTurn.add(stream);
    if (!turnEndScheduled) {
      turnEndScheduled = true;
      setImmediate(endTurn);
    }
    return;
  }
  if (corked.has(stream)) return;
  stream.cork();
  corked.add(stream);
}

export function httpTransport(res: ServerResponse): Transport {
  return {
    write: (chunk) => {
      if (res.destroyed || res.writableEnded) return false;
      beforeWrite(res);
      res.write(chunk);
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

/** A WebSocket message is one event without the line's newline; a Buffer is cut without a copy. */
function withoutNewline(chunk: WatchChunk): WatchChunk {
  if (typeof chunk === 'string') return chunk.endsWith('\n') ? chunk.slice(0, -1) : chunk;
  return chunk.length > 0 && chunk[chunk.length - 1] === 0x0a ? chunk.subarray(0, chunk.length - 1) : chunk;
}

export function webSocketTransport(ws: WebSocket): Transport {
  // ws keeps its socket in _socket (no public accessor); corking it batches frames the same way as HTTP chunks.
  const socket = (ws as unknown as { _socket?: Partial<Corkable> })._socket;
  const corkable =
    typeof socket?.cork === 'function' && typeof socket.uncork === 'function' ? (socket as Corkable) : undefined;
  return {
    write: (chunk) => {
      if (ws.readyState !== ws.OPEN) return false;
      if (corkable) beforeWrite(corkable);
      // Text frames, as kube-apiserver sends them, whether the event is a Buffer or a string.
      ws.send(withoutNewline(chunk), { binary: false });
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
  let queue: WatchChunk[] | undefined = [];
  let queued = 0;
  let ended = false;
  until.then(
    () => {
      const chunks = queue!;
      queue = undefined;
      for (const chunk of chunks) inner.write(chunk);
      if (ended) inner.end();
    },
    () => {
      queue = undefined;
      inner.destroy();
    },
  );
  return {
    write: (chunk) => {
      if (!queue) return inner.write(chunk);
      queue.push(chunk);
      queued += chunk.length;
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
