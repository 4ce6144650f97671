import { connect as tcp, type Socket } from 'node:net';
import { connect as tls } from 'node:tls';
import { constants, createDeflate, createInflate, type Deflate, type Inflate } from 'node:zlib';
import { DICTIONARY } from '../../src/server/spdy.js';

/**
 * A SPDY/3.1 client as client-go's (spdystream) behaves, for tests that need to see frames: it upgrades a request,
 * opens streams with compressed headers, and records every frame the server sends. Its header compressor is zlib's
 * with SPDY's dictionary, as Go's is, so the server's inflater is tested against real compressed blocks.
 */

export interface Frame {
  type: 'data' | 'syn_reply' | 'rst' | 'goaway' | 'ping' | 'settings' | 'other';
  id: number;
  flags: number;
  data: Buffer;
  /** RST_STREAM and GOAWAY status. */
  status?: number;
}

export interface UpgradeAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export class SpdyClient {
  readonly frames: Frame[] = [];
  closed = false;
  private buffer = Buffer.alloc(0);
  private nextId = 1;
  private readonly deflate: Deflate = createDeflate({ dictionary: DICTIONARY, flush: constants.Z_SYNC_FLUSH });
  private readonly inflate: Inflate = createInflate({ dictionary: DICTIONARY, flush: constants.Z_SYNC_FLUSH });
  private waiters: Array<() => void> = [];
  private compressing: Promise<void> = Promise.resolve();

  /** How many headers each SYN_REPLY's block held, once inflated in the server's zlib stream. */
  readonly replyHeaderCounts: number[] = [];

  private constructor(
    readonly socket: Socket,
    readonly answer: UpgradeAnswer,
  ) {
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    this.deflate.on('error', () => undefined);
    this.inflate.on('error', () => undefined);
  }

  /**
   * Sends `request` (method, path and headers; Connection/Upgrade are added) and resolves with the client once the
   * server switched protocols, or with the HTTP answer when it did not.
   */
  static async upgrade(
    url: string,
    method: string,
    path: string,
    headers: Record<string, string | string[]>,
  ): Promise<SpdyClient | UpgradeAnswer> {
    const target = new URL(url);
    const socket =
      target.protocol === 'https:'
        ? tls({ host: target.hostname, port: Number(target.port), rejectUnauthorized: false })
        : tcp(Number(target.port), target.hostname);
    const lines = [`${method} ${path} HTTP/1.1`, `Host: ${target.host}`, 'Connection: Upgrade', 'Upgrade: SPDY/3.1'];
    for (const [name, value] of Object.entries(headers))
      for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`);
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    let head = Buffer.alloc(0);
    return new Promise((resolve, reject) => {
      const onData = (chunk: Buffer): void => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        const [statusLine, ...headerLines] = head.subarray(0, end).toString('latin1').split('\r\n');
        const status = Number(statusLine!.split(' ')[1]);
        const answerHeaders: Record<string, string> = {};
        for (const line of headerLines) {
          const colon = line.indexOf(':');
          answerHeaders[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
        }
        if (status !== 101) {
          socket.off('data', onData);
          let body = head.subarray(end + 4).toString('utf8');
          socket.on('data', (more: Buffer) => (body += more.toString('utf8')));
          socket.on('close', () => resolve({ status, headers: answerHeaders, body }));
          return;
        }
        socket.off('data', onData);
        const client = new SpdyClient(socket, { status, headers: answerHeaders, body: '' });
        const rest = head.subarray(end + 4);
        if (rest.length > 0) client.receive(rest);
        resolve(client);
      };
      socket.on('data', onData);
      socket.once('error', reject);
    });
  }

  /** Opens a stream with these headers (SYN_STREAM); resolves with its id. */
  async open(headers: Record<string, string>, flags = 0): Promise<number> {
    const id = this.nextId;
    this.nextId += 2;
    const block = await this.compress(encodeHeaders(headers));
    const body = Buffer.alloc(10);
    body.writeUInt32BE(id, 0);
    this.socket.write(control(1, flags, Buffer.concat([body, block])));
    return id;
  }

  /** Sends DATA on a stream, with FIN when `fin`. */
  send(id: number, data: Buffer | string, fin = false): void {
    const payload = typeof data === 'string' ? Buffer.from(data) : data;
    const head = Buffer.alloc(8);
    head.writeUInt32BE(id & 0x7fffffff, 0);
    head.writeUInt32BE((((fin ? 1 : 0) << 24) | payload.length) >>> 0, 4);
    this.socket.write(Buffer.concat([head, payload]));
  }

  /** A raw control frame (for malformed input). */
  control(type: number, flags: number, body: Buffer): void {
    this.socket.write(control(type, flags, body));
  }

  reset(id: number, status = 5): void {
    const body = Buffer.alloc(8);
    body.writeUInt32BE(id, 0);
    body.writeUInt32BE(status, 4);
    this.control(3, 0, body);
  }

  ping(id: number): void {
    const body = Buffer.alloc(4);
    body.writeUInt32BE(id, 0);
    this.control(6, 0, body);
  }

  /** Everything received on a stream's DATA frames so far. */
  data(id: number): string {
    return Buffer.concat(this.frames.filter((f) => f.type === 'data' && f.id === id).map((f) => f.data)).toString(
      'utf8',
    );
  }

  /** Resolves once `done()` holds (checked after every frame), or rejects after `timeoutMs`. */
  until(done: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out waiting for ${what}; frames: ${JSON.stringify(this.summary())}`)),
        timeoutMs,
      );
      const check = (): void => {
        if (done()) {
          clearTimeout(timer);
          resolve();
        } else this.waiters.push(check);
      };
      check();
    });
  }

  summary(): string[] {
    return this.frames.map((f) => `${f.type}:${f.id}${f.status === undefined ? '' : `:${f.status}`}:${f.data.length}`);
  }

  close(): void {
    this.socket.destroy();
  }

  private compress(raw: Buffer): Promise<Buffer> {
    const result = this.compressing.then(
      () =>
        new Promise<Buffer>((resolve) => {
          const out: Buffer[] = [];
          const onData = (chunk: Buffer): number => out.push(chunk);
          this.deflate.on('data', onData);
          this.deflate.write(raw, () => {
            this.deflate.off('data', onData);
            resolve(Buffer.concat(out));
          });
        }),
    );
    this.compressing = result.then(() => undefined);
    return result;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private receive(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    while (this.buffer.length >= 8) {
      const length = this.buffer.readUInt32BE(4) & 0xffffff;
      if (this.buffer.length < 8 + length) break;
      const first = this.buffer.readUInt32BE(0);
      const flags = this.buffer[4]!;
      const body = this.buffer.subarray(8, 8 + length);
      this.buffer = this.buffer.subarray(8 + length);
      if (!(first & 0x80000000)) {
        this.frames.push({ type: 'data', id: first & 0x7fffffff, flags, data: body });
        continue;
      }
      const type = first & 0xffff;
      const word = (at: number): number => (body.length >= at + 4 ? body.readUInt32BE(at) : 0);
      if (type === 2) {
        // The header block must inflate in the server's zlib stream (it moves the context on).
        const out: Buffer[] = [];
        const onData = (c: Buffer): number => out.push(c);
        this.inflate.on('data', onData);
        this.inflate.write(body.subarray(4), () => {
          this.inflate.off('data', onData);
          const raw = Buffer.concat(out);
          this.replyHeaderCounts.push(raw.length >= 4 ? raw.readUInt32BE(0) : -1);
          this.wake();
        });
        this.frames.push({ type: 'syn_reply', id: word(0) & 0x7fffffff, flags, data: body.subarray(4) });
      } else if (type === 3)
        this.frames.push({ type: 'rst', id: word(0) & 0x7fffffff, flags, data: body, status: word(4) });
      else if (type === 7)
        this.frames.push({ type: 'goaway', id: word(0) & 0x7fffffff, flags, data: body, status: word(4) });
      else if (type === 6) this.frames.push({ type: 'ping', id: word(0), flags, data: body });
      else if (type === 4) this.frames.push({ type: 'settings', id: 0, flags, data: body });
      else this.frames.push({ type: 'other', id: type, flags, data: body });
    }
    this.wake();
  }
}

function control(type: number, flags: number, body: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt16BE(0x8003, 0);
  head.writeUInt16BE(type, 2);
  head.writeUInt32BE(((flags << 24) | body.length) >>> 0, 4);
  return Buffer.concat([head, body]);
}

function encodeHeaders(headers: Record<string, string>): Buffer {
  const parts: Buffer[] = [];
  const u32 = (n: number): Buffer => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  const entries = Object.entries(headers);
  parts.push(u32(entries.length));
  for (const [name, value] of entries) {
    parts.push(u32(Buffer.byteLength(name)), Buffer.from(name), u32(Buffer.byteLength(value)), Buffer.from(value));
  }
  return Buffer.concat(parts);
}
