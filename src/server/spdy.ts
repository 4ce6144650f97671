import { Duplex } from 'node:stream';
import { constants as zlib, createInflate, type Inflate } from 'node:zlib';
import { wallClock } from '../clock/clock.js';

/**
 * SPDY/3.1 framing, the server side, as client-go's SPDY dialer (moby/spdystream) speaks it for exec, attach, cp and
 * port-forward: the client opens every stream (odd ids), each SYN_STREAM carrying a few headers (streamtype, port,
 * requestid); the server answers each with a SYN_REPLY and both sides then exchange DATA frames.
 *
 * Written here rather than taken from npm's spdy-transport (the one SPDY library for Node, last released in 2018):
 * its parser fails the whole connection on a SYN_STREAM without HTTP's :method and :path, which no Kubernetes stream
 * carries, and it enforces SPDY/3 flow control, which spdystream never replenishes (it sends no WINDOW_UPDATE), so
 * output would stop after the first 64 KiB. Like spdystream (and so kubelet), this side does no flow control either:
 * TCP's own backpressure is the flow control, and WINDOW_UPDATE and SETTINGS frames are read and ignored.
 *
 * Header blocks are zlib-compressed with SPDY's dictionary, one compression context per direction for the life of the
 * connection. Incoming blocks go through one inflate stream, in frame order. Outgoing blocks (only SYN_REPLY, whose
 * header set is empty) are written as zlib stored blocks: valid zlib that any inflater reads, and it keeps writing
 * synchronous.
 */

const VERSION = 3;
const FRAME_HEADER_BYTES = 8;
const FLAG_FIN = 0x01;
const FLAG_UNIDIRECTIONAL = 0x02;

enum FrameType {
  SynStream = 1,
  SynReply = 2,
  RstStream = 3,
  Settings = 4,
  Ping = 6,
  GoAway = 7,
  Headers = 8,
  WindowUpdate = 9,
}

/** RST_STREAM status codes (SPDY/3.1 §2.6.3). */
export enum RstStatus {
  ProtocolError = 1,
  InvalidStream = 2,
  RefusedStream = 3,
  Cancel = 5,
  InternalError = 6,
  StreamInUse = 8,
  StreamAlreadyClosed = 9,
}

enum GoAwayStatus {
  Ok = 0,
  ProtocolError = 1,
}

/** A control frame beyond this is refused: the client's are a few hundred bytes (headers of three short values). */
const MAX_CONTROL_FRAME_BYTES = 64 * 1024;
/** Decompressed header block limit: guards against a zlib bomb in a small frame. */
const MAX_HEADER_BLOCK_BYTES = 256 * 1024;
const MAX_HEADERS = 100;
/** Outgoing DATA frames are cut to this size so that one large write does not make one 16 MiB frame. */
const MAX_DATA_FRAME_BYTES = 32 * 1024;
/** Unread input kept before the socket is paused (while a header block is being inflated). */
const MAX_BUFFERED_INPUT = 1024 * 1024;

/**
 * SPDY/3's header compression dictionary (draft-mbelshe-httpbis-spdy-00 §2.6.10.1): length-prefixed header names
 * and values, then a run of status lines, dates and media types.
 */
export const DICTIONARY = (() => {
  const words = [
    'options',
    'head',
    'post',
    'put',
    'delete',
    'trace',
    'accept',
    'accept-charset',
    'accept-encoding',
    'accept-language',
    'accept-ranges',
    'age',
    'allow',
    'authorization',
    'cache-control',
    'connection',
    'content-base',
    'content-encoding',
    'content-language',
    'content-length',
    'content-location',
    'content-md5',
    'content-range',
    'content-type',
    'date',
    'etag',
    'expect',
    'expires',
    'from',
    'host',
    'if-match',
    'if-modified-since',
    'if-none-match',
    'if-range',
    'if-unmodified-since',
    'last-modified',
    'location',
    'max-forwards',
    'pragma',
    'proxy-authenticate',
    'proxy-authorization',
    'range',
    'referer',
    'retry-after',
    'server',
    'te',
    'trailer',
    'transfer-encoding',
    'upgrade',
    'user-agent',
    'vary',
    'via',
    'warning',
    'www-authenticate',
    'method',
    'get',
    'status',
    '200 OK',
    'version',
    'HTTP/1.1',
    'url',
    'public',
    'set-cookie',
    'keep-alive',
    'origin',
  ];
  const tail =
    '100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505' +
    '203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized' +
    '403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable' +
    'Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT' +
    'chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,' +
    'text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.';
  const parts: Buffer[] = [];
  for (const word of words) {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(word.length);
    parts.push(length, Buffer.from(word, 'latin1'));
  }
  parts.push(Buffer.from(tail, 'latin1'));
  return Buffer.concat(parts);
})();

/** Adler-32 (RFC 1950 §9), for the dictionary id in the zlib header. */
function adler32(data: Buffer): number {
  let a = 1;
  let b = 0;
  for (const byte of data) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

/**
 * The zlib header of the outgoing header blocks: deflate with a 32 KiB window (0x78), FLEVEL 0 and FDICT set (0x20;
 * 0x7820 is a multiple of 31, so FCHECK is 0), then the dictionary's Adler-32.
 */
const ZLIB_HEADER = (() => {
  const header = Buffer.alloc(6);
  header[0] = 0x78;
  header[1] = 0x20;
  header.writeUInt32BE(adler32(DICTIONARY), 2);
  return header;
})();

const SYNC_FLUSH = Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff]);

/** Writes header blocks as zlib stored (uncompressed) blocks, continuing one zlib stream. */
class StoredDeflate {
  private started = false;

  block(raw: Buffer): Buffer {
    const parts: Buffer[] = [];
    if (!this.started) {
      parts.push(ZLIB_HEADER);
      this.started = true;
    }
    for (let offset = 0; offset < raw.length; offset += 0xffff) {
      const chunk = raw.subarray(offset, offset + 0xffff);
      // BFINAL 0, BTYPE 00 (stored), padded to the byte; then LEN and its one's complement, little-endian.
      const head = Buffer.alloc(5);
      head[0] = 0;
      head.writeUInt16LE(chunk.length, 1);
      head.writeUInt16LE(~chunk.length & 0xffff, 3);
      parts.push(head, chunk);
    }
    // An empty stored block, as zlib's Z_SYNC_FLUSH ends its output: Go's inflater hands out what it holds only there.
    parts.push(SYNC_FLUSH);
    return Buffer.concat(parts);
  }
}

function encodeHeaderBlock(headers: Record<string, string>): Buffer {
  const entries = Object.entries(headers);
  const parts: Buffer[] = [];
  const count = Buffer.alloc(4);
  count.writeUInt32BE(entries.length);
  parts.push(count);
  for (const [name, value] of entries) {
    for (const text of [name.toLowerCase(), value]) {
      const bytes = Buffer.from(text, 'utf8');
      const length = Buffer.alloc(4);
      length.writeUInt32BE(bytes.length);
      parts.push(length, bytes);
    }
  }
  return Buffer.concat(parts);
}

/** Parses a decompressed name/value block; undefined when it is malformed. Values may hold several, NUL-separated. */
function parseHeaderBlock(raw: Buffer): Map<string, string[]> | undefined {
  if (raw.length < 4) return undefined;
  const count = raw.readUInt32BE(0);
  if (count > MAX_HEADERS) return undefined;
  const headers = new Map<string, string[]>();
  let offset = 4;
  const text = (): string | undefined => {
    if (offset + 4 > raw.length) return undefined;
    const length = raw.readUInt32BE(offset);
    offset += 4;
    if (offset + length > raw.length) return undefined;
    const value = raw.toString('utf8', offset, offset + length);
    offset += length;
    return value;
  };
  for (let i = 0; i < count; i++) {
    const name = text();
    const value = text();
    if (name === undefined || value === undefined || name === '') return undefined;
    const values = headers.get(name.toLowerCase()) ?? [];
    values.push(...value.split('\0'));
    headers.set(name.toLowerCase(), values);
  }
  return headers;
}

function controlFrame(type: FrameType, flags: number, body: Buffer): Buffer {
  const frame = Buffer.alloc(FRAME_HEADER_BYTES + body.length);
  frame.writeUInt16BE(0x8000 | VERSION, 0);
  frame.writeUInt16BE(type, 2);
  frame.writeUInt32BE(((flags & 0xff) << 24) | body.length, 4);
  body.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

function dataFrameHeader(id: number, flags: number, length: number): Buffer {
  const head = Buffer.alloc(FRAME_HEADER_BYTES);
  head.writeUInt32BE(id & 0x7fffffff, 0);
  head.writeUInt32BE(((flags & 0xff) << 24) | length, 4);
  return head;
}

function twoWords(a: number, b: number): Buffer {
  const body = Buffer.alloc(8);
  body.writeUInt32BE(a >>> 0, 0);
  body.writeUInt32BE(b >>> 0, 4);
  return body;
}

/** Decides what to do with each stream the client opens: accept (the stream gets its SYN_REPLY) or refuse. */
export type StreamHandler = (stream: SpdyStream) => 'accept' | 'refuse';

/** The frame the parser is in the middle of. */
type Pending =
  | { kind: 'head' }
  | { kind: 'control'; type: number; version: number; flags: number; length: number }
  | { kind: 'data'; id: number; flags: number; remaining: number; stream: SpdyStream | undefined };

/** How long a session that ended waits for the client to close the socket before dropping it. */
const CLOSE_GRACE_MS = 5_000;

/**
 * One SPDY session over an upgraded socket (or any byte stream, e.g. a WebSocket tunnel). Frames are handled in the
 * order they arrive; a protocol error ends the session with GOAWAY. Nothing a client sends throws out of here: every
 * failure closes the session.
 */
export class SpdyConnection {
  private readonly streams = new Map<number, SpdyStream>();
  private input: Buffer = Buffer.alloc(0);
  private pending: Pending = { kind: 'head' };
  private parsing = false;
  /** A header block is being inflated: frames after it wait. */
  private inflating = false;
  private paused = false;
  private lastStreamId = 0;
  private goingAway = false;
  private ended = false;
  private readonly deflate = new StoredDeflate();
  private inflater?: Inflate;
  private inflated: Buffer[] = [];
  private inflatedBytes = 0;
  private readonly drainWaiters: Array<() => void> = [];
  private readonly closeListeners: Array<() => void> = [];

  /** `head`: bytes the client sent after its upgrade request, already read off the socket. */
  constructor(
    private readonly socket: Duplex,
    private readonly onStream: StreamHandler,
    head?: Buffer,
    private readonly maxStreams = 1024,
  ) {
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('drain', () => this.drained());
    socket.on('error', () => this.destroy());
    socket.on('end', () => this.destroy());
    socket.on('close', () => this.destroy());
    if (head && head.length > 0) this.receive(head);
  }

  /** Calls `listener` once the session is over (the socket closed, or a protocol error ended it). */
  onClose(listener: () => void): void {
    if (this.ended) queueMicrotask(listener);
    else this.closeListeners.push(listener);
  }

  get closed(): boolean {
    return this.ended;
  }

  /** Ends the session as kubelet does: every stream reset, then GOAWAY, then the socket ends. */
  close(): void {
    if (this.ended) return;
    for (const stream of [...this.streams.values()]) stream.reset();
    this.shutdown(GoAwayStatus.Ok);
  }

  /** Drops the socket at once. */
  destroy(): void {
    if (!this.socket.destroyed) this.socket.destroy();
    this.finish();
  }

  private protocolError(): void {
    this.shutdown(GoAwayStatus.ProtocolError);
  }

  /** GOAWAY, then the socket ends; the client has a moment to close its side before it is dropped. */
  private shutdown(status: GoAwayStatus): void {
    if (this.ended) return;
    this.send(controlFrame(FrameType.GoAway, 0, twoWords(this.lastStreamId, status)));
    this.goingAway = true;
    this.socket.end();
    this.finish();
    const socket = this.socket;
    if (!socket.destroyed) wallClock.setTimer(CLOSE_GRACE_MS, () => socket.destroy());
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.input = Buffer.alloc(0);
    this.inflater?.destroy();
    this.inflater = undefined;
    for (const stream of [...this.streams.values()]) stream.destroy();
    this.streams.clear();
    this.drained();
    for (const listener of this.closeListeners.splice(0)) listener();
  }

  // ---------------------------------------------------------------------------------------------------
  // writing

  private send(frame: Buffer): boolean {
    if (this.ended || !this.socket.writable) return true;
    return this.socket.write(frame);
  }

  private drained(): void {
    for (const waiter of this.drainWaiters.splice(0)) waiter();
  }

  /** @internal SpdyStream's writes: DATA frames; `done` once the socket takes more. */
  writeData(id: number, data: Buffer, fin: boolean, done: () => void): void {
    let ready = true;
    if (data.length === 0) ready = this.send(dataFrameHeader(id, fin ? FLAG_FIN : 0, 0));
    for (let offset = 0; offset < data.length; offset += MAX_DATA_FRAME_BYTES) {
      const chunk = data.subarray(offset, offset + MAX_DATA_FRAME_BYTES);
      const last = offset + MAX_DATA_FRAME_BYTES >= data.length;
      ready = this.send(Buffer.concat([dataFrameHeader(id, last && fin ? FLAG_FIN : 0, chunk.length), chunk]));
    }
    if (ready || this.ended) done();
    else this.drainWaiters.push(done);
  }

  /** @internal */
  resetStream(id: number, status: RstStatus): void {
    this.send(controlFrame(FrameType.RstStream, 0, twoWords(id, status)));
  }

  /** @internal A stream is gone (both sides finished, reset, or destroyed). */
  forget(id: number): void {
    this.streams.delete(id);
    this.maybeResume();
  }

  /**
   * @internal Reads the socket again once no stream's reader is behind and little input waits. While paused, what
   * was already read is still handled: pausing only stops more from coming in.
   */
  maybeResume(): void {
    if (!this.paused || this.ended || this.inflating || this.input.length > MAX_BUFFERED_INPUT) return;
    for (const stream of this.streams.values()) if (stream.readableLength >= stream.readableHighWaterMark) return;
    this.paused = false;
    this.socket.resume();
  }

  private pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  // ---------------------------------------------------------------------------------------------------
  // reading

  private receive(chunk: Buffer): void {
    if (this.ended) return;
    this.input = this.input.length === 0 ? chunk : Buffer.concat([this.input, chunk]);
    this.parse();
  }

  /** Handles every complete frame (and partial DATA payload) in the input, stopping while a header block inflates. */
  private parse(): void {
    if (this.parsing) return;
    this.parsing = true;
    try {
      this.parseFrames();
    } finally {
      this.parsing = false;
    }
    if (!this.ended && (this.inflating || this.input.length > MAX_BUFFERED_INPUT)) this.pause();
  }

  private parseFrames(): void {
    while (!this.ended && !this.inflating) {
      const pending = this.pending;
      if (pending.kind === 'data') {
        if (pending.remaining > 0 && this.input.length === 0) return;
        const take = Math.min(pending.remaining, this.input.length);
        const payload = this.input.subarray(0, take);
        this.input = this.input.subarray(take);
        pending.remaining -= take;
        const last = pending.remaining === 0;
        if (last) this.pending = { kind: 'head' };
        const stream = pending.stream;
        if (stream && !stream.destroyed) {
          if (payload.length > 0 && !stream.receive(payload)) this.pause();
          if (last && pending.flags & FLAG_FIN) stream.receiveFin();
        }
        continue;
      }
      if (pending.kind === 'head') {
        if (this.input.length < FRAME_HEADER_BYTES) return;
        const first = this.input.readUInt32BE(0);
        const second = this.input.readUInt32BE(4);
        this.input = this.input.subarray(FRAME_HEADER_BYTES);
        const flags = second >>> 24;
        const length = second & 0xffffff;
        if (first & 0x80000000) {
          if (length > MAX_CONTROL_FRAME_BYTES) return this.protocolError();
          this.pending = { kind: 'control', type: first & 0xffff, version: (first >>> 16) & 0x7fff, flags, length };
        } else {
          const id = first & 0x7fffffff;
          if (id === 0) return this.protocolError();
          this.pending = { kind: 'data', id, flags, remaining: length, stream: this.dataStream(id) };
        }
        continue;
      }
      if (this.input.length < pending.length) return;
      const body = this.input.subarray(0, pending.length);
      this.input = this.input.subarray(pending.length);
      this.pending = { kind: 'head' };
      if (pending.version !== VERSION) return this.protocolError();
      this.control(pending.type, pending.flags, body);
    }
  }

  /** The stream a DATA frame is for, or undefined (after answering what SPDY asks when there is none). */
  private dataStream(id: number): SpdyStream | undefined {
    const stream = this.streams.get(id);
    if (stream) {
      if (stream.remoteEnded) {
        this.resetStream(id, RstStatus.StreamAlreadyClosed);
        stream.destroy();
        return undefined;
      }
      return stream;
    }
    // Frames for a stream this side already reset or finished are dropped; a stream never opened is an error.
    if (id > this.lastStreamId) this.resetStream(id, RstStatus.InvalidStream);
    return undefined;
  }

  private control(type: number, flags: number, body: Buffer): void {
    switch (type) {
      case FrameType.SynStream:
        if (body.length < 10) return this.protocolError();
        return this.withHeaders(body.subarray(10), (headers) => this.synStream(body, flags, headers));
      case FrameType.SynReply:
      case FrameType.Headers:
        // This side opens no streams and takes no trailing headers, but the block still moves the zlib context on.
        if (body.length < 4) return this.protocolError();
        return this.withHeaders(body.subarray(4), () => undefined);
      case FrameType.RstStream: {
        if (body.length !== 8) return this.protocolError();
        this.streams.get(body.readUInt32BE(0) & 0x7fffffff)?.peerReset();
        return;
      }
      case FrameType.Ping:
        if (body.length !== 4) return this.protocolError();
        // Answer the client's pings (odd ids); an even id would answer one of ours, and this side sends none.
        if (body.readUInt32BE(0) % 2 === 1) this.send(controlFrame(FrameType.Ping, 0, body));
        return;
      case FrameType.GoAway:
        this.goingAway = true;
        return;
      default:
        // SETTINGS and WINDOW_UPDATE (no flow control here, see above), and unknown control frames, are ignored.
        return;
    }
  }

  /** Inflates one header block, then calls `use` with it, holding every later frame until then. */
  private withHeaders(block: Buffer, use: (headers: Map<string, string[]>) => void): void {
    const inflater = this.inflater ?? this.createInflater();
    this.inflating = true;
    this.inflated = [];
    this.inflatedBytes = 0;
    inflater.write(block, () => {
      if (this.ended) return;
      this.inflating = false;
      const headers = parseHeaderBlock(Buffer.concat(this.inflated));
      this.inflated = [];
      if (!headers) return this.protocolError();
      use(headers);
      this.parse();
      this.maybeResume();
    });
  }

  private createInflater(): Inflate {
    const inflater = createInflate({ dictionary: DICTIONARY, flush: zlib.Z_SYNC_FLUSH });
    inflater.on('data', (chunk: Buffer) => {
      this.inflatedBytes += chunk.length;
      if (this.inflatedBytes > MAX_HEADER_BLOCK_BYTES) return this.protocolError();
      this.inflated.push(chunk);
    });
    inflater.on('error', () => this.protocolError());
    this.inflater = inflater;
    return inflater;
  }

  private synStream(body: Buffer, flags: number, headers: Map<string, string[]>): void {
    const id = body.readUInt32BE(0) & 0x7fffffff;
    if (id === 0 || id % 2 === 0) return this.resetStream(id, RstStatus.ProtocolError);
    // Stream ids only grow (SPDY/3.1 §2.3.2): an old one is a session error.
    if (id <= this.lastStreamId) return this.protocolError();
    this.lastStreamId = id;
    if (this.goingAway || this.streams.size >= this.maxStreams) return this.resetStream(id, RstStatus.RefusedStream);
    const stream = new SpdyStream(this, id, headers, (flags & FLAG_UNIDIRECTIONAL) === 0);
    this.streams.set(id, stream);
    if (this.onStream(stream) === 'refuse') {
      this.resetStream(id, RstStatus.RefusedStream);
      stream.destroy();
      return;
    }
    if (stream.destroyed) return;
    const streamId = Buffer.alloc(4);
    streamId.writeUInt32BE(id);
    this.send(
      controlFrame(FrameType.SynReply, 0, Buffer.concat([streamId, this.deflate.block(encodeHeaderBlock({}))])),
    );
    stream.replied();
    if (flags & FLAG_FIN) stream.receiveFin();
  }
}

/**
 * One SPDY stream as a Node Duplex: what the client sends is read, what is written goes out as DATA frames, `end()`
 * half-closes (FIN) and `reset()` aborts (RST_STREAM). It never emits 'error': a stream the client resets or a
 * connection that drops just ends ('close').
 */
export class SpdyStream extends Duplex {
  /** The client sent FIN: nothing more will be read. */
  remoteEnded = false;
  private localEnded = false;
  private aborted = false;
  /** Writes made before the SYN_REPLY went out (the client drops DATA for a stream it has no reply for). */
  private unreplied: Array<() => void> | undefined = [];

  constructor(
    private readonly connection: SpdyConnection,
    readonly id: number,
    readonly headers: ReadonlyMap<string, readonly string[]>,
    writable: boolean,
  ) {
    super({ allowHalfOpen: true });
    if (!writable) {
      this.localEnded = true;
      super.end();
    }
  }

  /** The first value of a header, as Go's Header.Get. */
  header(name: string): string | undefined {
    return this.headers.get(name.toLowerCase())?.[0];
  }

  /** Aborts the stream (RST_STREAM CANCEL), as kubelet's Reset. */
  reset(): void {
    if (this.destroyed) return;
    if (!this.aborted && !this.connection.closed) this.connection.resetStream(this.id, RstStatus.Cancel);
    this.aborted = true;
    this.destroy();
  }

  /** @internal The SYN_REPLY is out: writes may go. */
  replied(): void {
    const waiting = this.unreplied ?? [];
    this.unreplied = undefined;
    for (const write of waiting) write();
  }

  private afterReply(write: () => void): void {
    if (this.unreplied) this.unreplied.push(write);
    else write();
  }

  /** @internal DATA from the client; false when the reader is behind. */
  receive(data: Buffer): boolean {
    if (this.remoteEnded) return true;
    return this.push(data);
  }

  /** @internal */
  receiveFin(): void {
    if (this.remoteEnded) return;
    this.remoteEnded = true;
    this.push(null);
  }

  /** @internal The client reset the stream. */
  peerReset(): void {
    this.aborted = true;
    this.destroy();
  }

  override _read(): void {
    this.connection.maybeResume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.afterReply(() => {
      if (this.aborted || this.connection.closed) return callback();
      this.connection.writeData(this.id, chunk, false, () => callback());
    });
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.afterReply(() => {
      if (this.localEnded || this.aborted || this.connection.closed) return callback();
      this.localEnded = true;
      this.connection.writeData(this.id, Buffer.alloc(0), true, () => callback());
    });
  }

  override _destroy(_error: Error | null, callback: (error?: Error | null) => void): void {
    this.unreplied = undefined;
    this.connection.forget(this.id);
    // Never hand an error on: nobody need listen for 'error' on a stream.
    callback(null);
  }
}
