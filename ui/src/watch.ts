/**
 * List, then watch over a WebSocket from the list's resourceVersion (client-go's reflector): bookmarks keep the
 * resourceVersion fresh, a dropped watch resumes from it, a 410 Gone relists. With --auth the token travels as the
 * `base64url.bearer.authorization.k8s.io.` subprotocol, since a browser cannot set headers on a WebSocket.
 */
import { ApiError, collectionPath, currentToken, type Kind, type KubeObject, RESOURCES, request } from './api.js';
import { keyOf, store, type WatchType } from './store.js';

/** Beside the token's subprotocol the server needs a real one; watches send JSON text frames whatever it is. */
const WATCH_SUBPROTOCOL = 'binary.k8s.io';

function bearerProtocol(token: string): string {
  const bytes = new TextEncoder().encode(token);
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return `base64url.bearer.authorization.k8s.io.${btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')}`;
}

interface ListReply {
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
  items: KubeObject[];
}

interface WatchEvent {
  type: WatchType | 'BOOKMARK' | 'ERROR';
  object: KubeObject & { code?: number; message?: string };
}

const MAX_BACKOFF_MS = 10_000;

export class Reflector {
  private socket: WebSocket | undefined;
  private resourceVersion = '';
  private stopped = false;
  private failures = 0;
  private retry: ReturnType<typeof setTimeout> | undefined;
  /** Set while a relist to fill a sample that deletions thinned is pending. */
  private refill: ReturnType<typeof setTimeout> | undefined;
  /** With a limit: the keys kept (a sample), and how many objects the cluster has. */
  private sample: Set<string> | undefined;
  private total = 0;

  constructor(
    private readonly kind: Kind,
    /** At most this many objects are listed; past it the page shows a sample and says so. */
    private readonly limit?: number,
    /**
     * 'sample': a sample listed once is kept, new objects join it only while there is room. 'newest': every new
     * object is taken (the store lets the oldest go), as a feed of Events wants the latest rather than the first.
     */
    private readonly keep: 'sample' | 'newest' = 'sample',
  ) {}

  start(): void {
    this.stopped = false;
    void this.list();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retry);
    clearTimeout(this.refill);
    this.socket?.close();
    this.socket = undefined;
  }

  private later(fn: () => void): void {
    const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(this.failures, 5));
    this.failures++;
    clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      if (!this.stopped) fn();
    }, delay);
  }

  private async list(): Promise<void> {
    this.feedState('listing');
    const resource = RESOURCES[this.kind];
    const query = this.limit ? `?limit=${this.limit}` : '';
    let reply: ListReply;
    try {
      reply = await request<ListReply>(`${collectionPath(resource)}${query}`);
    } catch (err) {
      if (this.stopped) return;
      const denied = err instanceof ApiError && (err.status === 401 || err.status === 403);
      store.setFeed(this.kind, {
        state: denied ? 'forbidden' : 'failed',
        message: err instanceof Error ? err.message : String(err),
      });
      this.later(() => void this.list());
      return;
    }
    if (this.stopped) return;
    const items = reply.items ?? [];
    const more = reply.metadata.continue ? (reply.metadata.remainingItemCount ?? 0) : 0;
    this.total = items.length + more;
    this.sample = reply.metadata.continue ? new Set(items.map(keyOf)) : undefined;
    this.resourceVersion = reply.metadata.resourceVersion;
    store.reset(this.kind, items);
    // The header counts the cluster's objects from this frame on, not the sample's.
    if (this.sample) this.feedState('listing');
    this.watch();
  }

  /** Tells the header how this feed is; a sample is said so in every state (a relist keeps the banner up). */
  private feedState(state: 'listing' | 'live' = 'live'): void {
    store.setFeed(this.kind, {
      state,
      ...(this.sample ? { sample: { shown: this.sample.size, total: this.total } } : {}),
    });
  }

  private watch(): void {
    const resource = RESOURCES[this.kind];
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const url = `${scheme}//${location.host}${collectionPath(resource)}?watch=true&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(this.resourceVersion)}`;
    const token = currentToken();
    const socket =
      token === undefined ? new WebSocket(url) : new WebSocket(url, [bearerProtocol(token), WATCH_SUBPROTOCOL]);
    this.socket = socket;
    let opened = false;
    socket.onopen = () => {
      opened = true;
      this.failures = 0;
      this.feedState();
    };
    socket.onmessage = (message) => {
      if (typeof message.data !== 'string') return;
      let event: WatchEvent;
      try {
        event = JSON.parse(message.data) as WatchEvent;
      } catch {
        return;
      }
      this.handle(event, socket);
    };
    socket.onclose = () => {
      if (this.socket !== socket || this.stopped) return;
      this.socket = undefined;
      store.setFeed(this.kind, { state: 'reconnecting' });
      // Refused before it opened (a 401 or 403 to the upgrade, which a browser does not show): the list says why.
      this.later(() => (opened ? this.watch() : void this.list()));
    };
  }

  private handle(event: WatchEvent, socket: WebSocket): void {
    const rv = event.object?.metadata?.resourceVersion;
    if (event.type === 'ERROR') {
      // 410 Gone: the resourceVersion is older than the server's history; start again from a fresh list.
      socket.onclose = null;
      socket.close();
      this.socket = undefined;
      if (event.object.code === 410) void this.list();
      else {
        store.setFeed(this.kind, { state: 'reconnecting', message: event.object.message ?? 'watch error' });
        this.later(() => void this.list());
      }
      return;
    }
    if (rv) this.resourceVersion = rv;
    if (event.type === 'BOOKMARK') return;
    if (this.sample) {
      const key = keyOf(event.object);
      if (event.type === 'ADDED') this.total++;
      if (event.type === 'DELETED') this.total--;
      if (!this.sample.has(key)) {
        const full = this.keep === 'sample' && this.sample.size >= (this.limit ?? 0);
        if (event.type !== 'ADDED' || full) {
          if (event.type !== 'MODIFIED') this.feedState();
          return;
        }
        this.sample.add(key);
      }
      if (event.type === 'DELETED') {
        this.sample.delete(key);
        // Objects outside the sample are not watched into it: once deletions leave room, a list (at most one a
        // second) takes the sample up again.
        if (this.keep === 'sample' && this.sample.size < this.total && this.refill === undefined)
          this.refill = setTimeout(() => {
            this.refill = undefined;
            // Pods added since may have filled the room again.
            const room = this.sample !== undefined && this.sample.size < Math.min(this.limit ?? 0, this.total);
            if (this.stopped || !this.socket || !room) return;
            this.socket.onclose = null;
            this.socket.close();
            this.socket = undefined;
            void this.list();
          }, 1000);
      }
      if (event.type !== 'MODIFIED') this.feedState();
    }
    store.enqueue(this.kind, event.type, event.object);
  }
}
