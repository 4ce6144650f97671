/**
 * Byte streams between the exec shell's commands, as file descriptors are between processes: a command reads
 * its stdin chunk by chunk as it arrives (a client typing, a tar stream from `kubectl cp`), writes wait while a
 * pipe is full, and a write to a pipe whose reader has gone fails with EPIPE (the writer ends, as on SIGPIPE).
 */

/** Where chunks come from: the next one, or undefined at end of input. */
export interface ByteSource {
  read(): Promise<Uint8Array | undefined>;
  /** The reader will read no more (a pipe's writer then gets EPIPE). */
  close?(): void;
}

/** Where a command's output goes; a returned promise means "wait before writing more". */
export interface Writer {
  write(data: string | Uint8Array): void | Promise<void>;
}

/** A write to a pipe nobody reads any more. */
export class BrokenPipe extends Error {
  constructor() {
    super('Broken pipe');
  }
}

/** Input bigger than a command keeps in memory at once (`wc`, `sort`, `tar` read whole streams). */
export class InputTooLarge extends Error {
  constructor(limit: number) {
    super(`input larger than ${limit} bytes`);
  }
}

/** The longest line a command holds at once (a line-oriented command past it fails, as with a full buffer). */
export const LINE_LIMIT = 16 * 1024 * 1024;

export const EMPTY_SOURCE: ByteSource = { read: () => Promise.resolve(undefined) };

function bytes(data: string | Uint8Array): Buffer {
  return typeof data === 'string' ? Buffer.from(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
}

/**
 * A command's stdin: reads as they come, with what a reader did not use put back, so that the shell reading a
 * script line by line from stdin and the commands it runs (`read`, `cat`) share one input, as they share a file
 * descriptor.
 */
export class Reader {
  private pending: Buffer[] = [];
  private ended = false;

  constructor(private readonly source: ByteSource = EMPTY_SOURCE) {}

  /** The next chunk, or undefined at end of input. */
  async chunk(): Promise<Buffer | undefined> {
    const held = this.pending.shift();
    if (held) return held;
    if (this.ended) return undefined;
    const next = await this.source.read();
    if (next === undefined) {
      this.ended = true;
      return undefined;
    }
    return bytes(next);
  }

  /** Puts bytes back in front of the input. */
  unread(data: Buffer): void {
    if (data.length > 0) this.pending.unshift(data);
  }

  /**
   * One line without its newline; at end of input the last, unterminated line, then undefined. `terminated`
   * tells whether the line ended with a newline (`read` fails on a last line without one, as sh's does).
   */
  async line(limit = LINE_LIMIT): Promise<{ text: string; terminated: boolean } | undefined> {
    const parts: Buffer[] = [];
    let size = 0;
    for (;;) {
      const chunk = await this.chunk();
      if (chunk === undefined) {
        if (parts.length === 0) return undefined;
        return { text: Buffer.concat(parts).toString('utf8'), terminated: false };
      }
      const nl = chunk.indexOf(10);
      if (nl < 0) {
        size += chunk.length;
        if (size > limit) throw new InputTooLarge(limit);
        parts.push(chunk);
        continue;
      }
      parts.push(chunk.subarray(0, nl));
      this.unread(chunk.subarray(nl + 1));
      return { text: Buffer.concat(parts).toString('utf8'), terminated: true };
    }
  }

  /** Everything up to end of input; throws InputTooLarge past `limit` bytes. */
  async all(limit = 64 * 1024 * 1024): Promise<Buffer> {
    const parts: Buffer[] = [];
    let size = 0;
    for (let chunk = await this.chunk(); chunk !== undefined; chunk = await this.chunk()) {
      size += chunk.length;
      if (size > limit) throw new InputTooLarge(limit);
      parts.push(chunk);
    }
    return Buffer.concat(parts);
  }

  /** Lines as they arrive (the last one even without a newline). */
  async *lines(): AsyncGenerator<string> {
    for (let line = await this.line(); line !== undefined; line = await this.line()) yield line.text;
  }

  /** The reader is done with this input. */
  close(): void {
    this.pending = [];
    this.source.close?.();
  }
}

const PIPE_CAPACITY = 64 * 1024;

/** A pipe between two commands of a pipeline: bounded, so a fast writer waits for a slow reader. */
export class Pipe implements ByteSource, Writer {
  private chunks: Buffer[] = [];
  private size = 0;
  private ended = false;
  private closed = false;
  private readerWaiting?: () => void;
  private writersWaiting: Array<() => void> = [];

  write(data: string | Uint8Array): void | Promise<void> {
    if (this.closed) throw new BrokenPipe();
    const buf = bytes(data);
    if (buf.length === 0) return;
    this.chunks.push(buf);
    this.size += buf.length;
    this.wakeReader();
    if (this.size < PIPE_CAPACITY) return;
    return new Promise<void>((resolve, reject) =>
      this.writersWaiting.push(() => (this.closed ? reject(new BrokenPipe()) : resolve())),
    );
  }

  /** The writer is done: the reader sees end of input after what is buffered. */
  end(): void {
    this.ended = true;
    this.wakeReader();
  }

  async read(): Promise<Uint8Array | undefined> {
    while (this.chunks.length === 0) {
      if (this.ended || this.closed) return undefined;
      await new Promise<void>((resolve) => (this.readerWaiting = resolve));
    }
    const chunk = this.chunks.shift()!;
    this.size -= chunk.length;
    if (this.size < PIPE_CAPACITY) this.wakeWriters();
    return chunk;
  }

  close(): void {
    this.closed = true;
    this.chunks = [];
    this.size = 0;
    this.wakeWriters();
  }

  private wakeReader(): void {
    const w = this.readerWaiting;
    this.readerWaiting = undefined;
    w?.();
  }

  private wakeWriters(): void {
    for (const w of this.writersWaiting.splice(0)) w();
  }
}

/** Collects output in memory (`$(…)`), failing the writer past `limit` bytes. */
export class Capture implements Writer {
  private parts: Buffer[] = [];
  private size = 0;

  constructor(private readonly limit = 16 * 1024 * 1024) {}

  write(data: string | Uint8Array): void {
    const buf = bytes(data);
    this.size += buf.length;
    if (this.size > this.limit) throw new InputTooLarge(this.limit);
    this.parts.push(buf);
  }

  text(): string {
    return Buffer.concat(this.parts).toString('utf8');
  }
}

/** Discards everything (`>/dev/null`). */
export const NULL_WRITER: Writer = { write: () => undefined };
