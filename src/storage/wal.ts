import { makeDirectories } from '../api/directories.js';
import { closeSync, existsSync, fstatSync, fsyncSync, ftruncateSync, openSync, readFileSync, statSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import * as zlib from 'node:zlib';
import type { KubeObject } from '../api/types.js';
import { jsonOf } from './encoding.js';
import type { StoreEvent } from './watch.js';

/**
 * `--data PATH`'s write-ahead log. Every store change is one line, `CRC32HEX JSON\n`, where the JSON is
 * `{"r":revision,"k":resource,"t":"A"|"M"|"D","o":object}` (a deletion carries `"n":namespace,"m":name` instead
 * of the object). Lines are appended in revision order; a group commit writes everything that accumulated
 * while the previous fsync ran, then fsyncs once, so many writes share one fsync and at most one is in flight.
 * Each commit starts with a marker line `{"t":"B","r":<revision before it>}`: only the last commit can be torn
 * by a crash (the ones before it were fsynced before it was written), so damage followed by valid records of
 * that same commit is a torn tail, while damage followed by a later commit's marker is corruption.
 */
export interface WalMarker {
  t: 'B';
  r: number;
  /** The cluster clock (ms since epoch) when the commit was written, so a virtual clock resumes from it. */
  c?: number;
}

export interface WalRecord {
  r: number;
  k: string;
  t: 'A' | 'M' | 'D';
  o?: KubeObject;
  n?: string;
  m?: string;
}

/** Where the snapshot and the log live: PATH/ holding snapshot.json + wal.log, or (an existing file / *.json) PATH + PATH.wal. */
export function dataPaths(path: string): { snapshot: string; wal: string } {
  const isFile = existsSync(path) ? statSync(path).isFile() : path.endsWith('.json');
  if (isFile) return { snapshot: path, wal: `${path}.wal` };
  makeDirectories(path);
  return { snapshot: join(path, 'snapshot.json'), wal: join(path, 'wal.log') };
}

const CRC_TABLE = (() => {
  const table = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c;
  }
  return table;
})();

/** CRC-32 (IEEE): node:zlib's when this Node has it (20.15+), else a table-driven one. */
export const crc32: (data: Buffer) => number =
  typeof (zlib as { crc32?: unknown }).crc32 === 'function'
    ? (data) => zlib.crc32(data)
    : (data) => {
        let c = -1;
        for (let i = 0; i < data.length; i++) c = CRC_TABLE[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
        return (c ^ -1) >>> 0;
      };

export function encodeRecord(record: WalRecord | WalMarker): string {
  // The object's JSON goes through the shared cache, so the write's response (and watch events) reuse it.
  const json =
    record.t !== 'B' && record.o
      ? `${JSON.stringify({ ...record, o: undefined }).slice(0, -1)},"o":${jsonOf(record.o)}}`
      : JSON.stringify(record);
  return `${crc32(Buffer.from(json)).toString(16).padStart(8, '0')} ${json}\n`;
}

/**
 * The records queued for the next commit, encoded as they are appended straight into one growing buffer: each
 * object's cached JSON is written as UTF-8 once, its checksum taken over those bytes, and the buffer is what the
 * commit writes (encodeRecord's text built, encoded for the checksum and encoded again with the batch took ~a
 * third of the log's CPU per write). The bytes are encodeRecord's.
 */
const BATCH_BYTES = 64 * 1024;

class RecordBuffer {
  private buf = Buffer.allocUnsafe(BATCH_BYTES);
  private used = 0;

  get length(): number {
    return this.used;
  }

  push(record: WalRecord): void {
    const object = record.o ? jsonOf(record.o) : undefined;
    const head =
      object === undefined
        ? JSON.stringify(record)
        : `${JSON.stringify({ ...record, o: undefined }).slice(0, -1)},"o":`;
    // A UTF-16 code unit takes at most 3 bytes of UTF-8; 8 hex digits, a space, '}' and the newline around it.
    this.reserve(11 + (head.length + (object?.length ?? 0)) * 3);
    const start = this.used;
    let at = start + 9;
    at += this.buf.write(head, at, 'utf8');
    if (object !== undefined) {
      at += this.buf.write(object, at, 'utf8');
      this.buf[at++] = 0x7d; // }
    }
    const crc = crc32(this.buf.subarray(start + 9, at));
    this.buf.write(crc.toString(16).padStart(8, '0'), start, 'latin1');
    this.buf[start + 8] = 0x20;
    this.buf[at++] = 0x0a;
    this.used = at;
  }

  /** The bytes queued so far; the buffer starts empty again. */
  take(): Buffer {
    const out = this.buf.subarray(0, this.used);
    this.buf = Buffer.allocUnsafe(Math.max(BATCH_BYTES, this.buf.length >> 1));
    this.used = 0;
    return out;
  }

  private reserve(bytes: number): void {
    if (this.used + bytes <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.used + bytes));
    this.buf.copy(bigger, 0, 0, this.used);
    this.buf = bigger;
  }
}

/** What is left of `buffers` once their first `bytes` were written. */
function unwritten(buffers: Buffer[], bytes: number): Buffer[] {
  const rest: Buffer[] = [];
  for (const b of buffers) {
    if (bytes >= b.length) bytes -= b.length;
    else {
      rest.push(bytes > 0 ? b.subarray(bytes) : b);
      bytes = 0;
    }
  }
  return rest;
}

export function recordOf(resource: string, event: StoreEvent): WalRecord {
  if (event.type === 'DELETED')
    return {
      r: event.revision,
      k: resource,
      t: 'D',
      n: event.object.metadata.namespace ?? '',
      m: event.object.metadata.name!,
    };
  return { r: event.revision, k: resource, t: event.type === 'ADDED' ? 'A' : 'M', o: event.object };
}

export class WalCorruptError extends Error {
  constructor(
    readonly file: string,
    readonly offset: number,
    readonly why: string,
  ) {
    super(
      `write-ahead log ${file} is corrupt at byte offset ${offset} (${why}), and later commits follow it. ` +
        `Start with \`sim serve --data … --repair\` to truncate the log at that offset (the records from there on are lost).`,
    );
    this.name = 'WalCorruptError';
  }
}

export interface WalScan {
  records: WalRecord[];
  /** Bytes of valid records from the start; everything after is discarded (a torn tail) or repaired away. */
  goodLength: number;
  size: number;
  /** The latest cluster clock a kept commit recorded (ms since epoch). */
  clock?: number;
  /** Set when bytes after goodLength were discarded: why, and whether --repair was needed. */
  discarded?: { offset: number; why: string; repaired: boolean };
}

function parseLine(buf: Buffer, start: number, end: number, after: number): WalRecord | WalMarker | string {
  // start..end excludes the newline
  if (end - start < 10 || buf[start + 8] !== 0x20) return 'malformed record';
  const crcText = buf.toString('latin1', start, start + 8);
  if (!/^[0-9a-f]{8}$/.test(crcText)) return 'malformed checksum';
  const body = buf.subarray(start + 9, end);
  if (crc32(body) !== parseInt(crcText, 16)) return 'checksum mismatch';
  let parsed: WalRecord | WalMarker;
  try {
    parsed = JSON.parse(body.toString('utf8')) as WalRecord | WalMarker;
  } catch {
    return 'unparsable record';
  }
  if (parsed.t === 'B')
    return typeof parsed.r === 'number' && (parsed.c === undefined || typeof parsed.c === 'number')
      ? parsed
      : 'malformed commit marker';
  const record = parsed;
  if (
    typeof record.r !== 'number' ||
    typeof record.k !== 'string' ||
    (record.t !== 'D' && typeof record.o !== 'object')
  )
    return 'malformed record';
  if (record.r <= after) return `revision ${record.r} does not follow ${after}`;
  return record;
}

/**
 * Reads the log. A bad record (partial line, bad checksum) followed by no later commit is a torn tail from a
 * crash mid-write: it and the rest of its commit are discarded. A bad record with a later commit after it is
 * corruption: WalCorruptError, unless `repair`, which keeps the records before it.
 */
export function scanWal(file: string, repair: boolean): WalScan {
  if (!existsSync(file)) return { records: [], goodLength: 0, size: 0 };
  const buf = readFileSync(file);
  const records: WalRecord[] = [];
  let pos = 0;
  let last = 0;
  let clock: number | undefined;
  let firstBad: { offset: number; why: string } | undefined;
  let validAfterBad = false;
  while (pos < buf.length) {
    const nl = buf.indexOf(0x0a, pos);
    const end = nl < 0 ? buf.length : nl;
    const parsed = nl < 0 ? 'incomplete record' : parseLine(buf, pos, end, firstBad ? -1 : last);
    if (typeof parsed === 'string') {
      firstBad ??= { offset: pos, why: parsed };
    } else if (firstBad) {
      // Valid records of the damaged commit itself are part of its torn tail; a later commit means corruption.
      if (parsed.t === 'B') {
        validAfterBad = true;
        break;
      }
    } else if (parsed.t !== 'B') {
      records.push(parsed);
      last = parsed.r;
    } else if (parsed.c !== undefined) {
      clock = Math.max(clock ?? parsed.c, parsed.c);
    }
    pos = nl < 0 ? buf.length : nl + 1;
  }
  if (!firstBad) return { records, goodLength: buf.length, size: buf.length, clock };
  if (validAfterBad && !repair) throw new WalCorruptError(file, firstBad.offset, firstBad.why);
  return {
    records,
    goodLength: firstBad.offset,
    size: buf.length,
    clock,
    discarded: { ...firstBad, repaired: validAfterBad },
  };
}

/** Cuts the log to `length` bytes, durably. */
export function truncateWal(file: string, length: number): void {
  const fd = openSync(file, 'r+');
  try {
    ftruncateSync(fd, length);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** fsyncs a directory so a file created or renamed in it survives a crash. */
export function fsyncDir(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // not every platform lets a directory be fsynced
  }
}

interface Batch {
  promise: Promise<void>;
  resolve: () => void;
  reject: (err: Error) => void;
}

function newBatch(): Batch {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined); // a batch nobody waits for must not be an unhandled rejection
  return { promise, resolve, reject };
}

export interface WalOptions {
  /**
   * Compact (snapshot + empty log) once the log passes this many bytes, or the size of the last snapshot if that is
   * larger: rewriting the whole state then costs at most a byte per byte logged, however large the state grows
   * (as Redis rewrites its append-only file once it has doubled).
   */
  compactBytes: number;
  /** Writes the snapshot of the current state (durably) and returns its size in bytes. */
  snapshot: () => Promise<number>;
  /** The size of the snapshot already on disk that this log continues (after a restart), in bytes. */
  snapshotBytes?: number;
  /** Called after each fsync with the revision now durable (watch events up to it may be released). */
  onDurable: (revision: number) => void;
  onError?: (err: Error) => void;
  /** The cluster clock, recorded in each commit marker (ms since epoch). */
  now?: () => number;
}

/** The appending side: group commit, durability promises and compaction. */
export class WriteAheadLog {
  private readonly pending = new RecordBuffer();
  private pendingRevision = 0;
  private next: Batch | undefined;
  private inFlight: { batch: Batch; revision: number } | undefined;
  private durableRevision: number;
  private size: number;
  private failed: Error | undefined;
  private running: Promise<void> | undefined;
  private compactWanted = false;
  private lastSnapshotBytes = 0;

  private constructor(
    private readonly file: string,
    private readonly fh: FileHandle,
    size: number,
    revision: number,
    private readonly options: WalOptions,
  ) {
    this.size = size;
    this.durableRevision = revision;
    // A restart continues the snapshot on disk: the first compaction waits for the log to outgrow it too.
    this.lastSnapshotBytes = options.snapshotBytes ?? 0;
  }

  static async open(file: string, options: WalOptions): Promise<WriteAheadLog> {
    makeDirectories(dirname(file));
    const fh = await open(file, 'a');
    fsyncDir(dirname(file));
    return new WriteAheadLog(file, fh, fstatSync(fh.fd).size, 0, options);
  }

  /** The revision the restored state is at (everything up to it is on disk), before the first append. */
  startAt(revision: number): void {
    this.durableRevision = revision;
  }

  get path(): string {
    return this.file;
  }

  get durable(): number {
    return this.durableRevision;
  }

  /** Changes queued or being committed (whose watch events are still held). */
  get busy(): boolean {
    return this.running !== undefined || this.pending.length > 0;
  }

  /** Queues one change (called synchronously by the store, in revision order). */
  append(resource: string, event: StoreEvent): void {
    this.pending.push(recordOf(resource, event));
    this.pendingRevision = event.revision;
    this.kick();
  }

  /** undefined when `revision` is already durable; else a promise that settles when it is (or the log failed). */
  whenDurable(revision: number): Promise<void> | undefined {
    if (this.failed) return Promise.reject(this.failed);
    if (revision <= this.durableRevision) return undefined;
    if (this.inFlight && revision <= this.inFlight.revision) return this.inFlight.batch.promise;
    this.next ??= newBatch();
    this.kick();
    return this.next.promise;
  }

  /** Asks for a compaction at the next opportunity (it runs between group commits). */
  requestCompaction(): Promise<void> {
    this.compactWanted = true;
    this.kick();
    return this.idle();
  }

  /** Resolves when nothing is queued or in flight. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private kick(): void {
    if (!this.running && !this.failed) this.running = this.loop();
  }

  private async loop(): Promise<void> {
    try {
      await new Promise<void>((resolve) => setImmediate(resolve)); // let the rest of this tick's writes join
      while (this.pending.length > 0 || this.compactWanted) {
        if (this.pending.length > 0) await this.commit();
        if (this.compactWanted || this.size > Math.max(this.options.compactBytes, this.lastSnapshotBytes)) {
          this.compactWanted = false;
          await this.compact();
        }
      }
      // Asked about a revision that needed no commit (nothing was queued): it is durable already.
      if (this.next && this.pending.length === 0) {
        this.next.resolve();
        this.next = undefined;
      }
    } catch (err) {
      this.fail(err instanceof Error ? err : new Error(String(err)));
    } finally {
      this.running = undefined;
    }
  }

  private async commit(): Promise<void> {
    const marker = Buffer.from(encodeRecord({ t: 'B', r: this.durableRevision, c: this.options.now?.() }));
    const records = this.pending.take();
    const revision = this.pendingRevision;
    const batch = this.next ?? newBatch();
    this.next = undefined;
    this.inFlight = { batch, revision };
    const total = marker.length + records.length;
    let rest = [marker, records];
    for (let left = total; left > 0; ) {
      const { bytesWritten } = await this.fh.writev(rest);
      left -= bytesWritten;
      rest = unwritten(rest, bytesWritten);
    }
    await this.fh.datasync();
    this.size += total;
    this.durableRevision = revision;
    this.inFlight = undefined;
    this.options.onDurable(revision);
    batch.resolve();
  }

  /**
   * Snapshot, then an empty log. Runs between commits, so nothing is being appended to the file; changes made
   * meanwhile wait in `pending` and go to the emptied log (those the snapshot already holds are skipped on replay).
   */
  private async compact(): Promise<void> {
    this.lastSnapshotBytes = await this.options.snapshot();
    await this.fh.truncate(0);
    await this.fh.sync();
    this.size = 0;
  }

  private fail(err: Error): void {
    this.failed = err;
    this.inFlight?.batch.reject(err);
    this.next?.reject(err);
    this.options.onError?.(err);
  }

  /** Commits what is queued, compacts, and closes the file. */
  async close(): Promise<void> {
    await this.idle();
    if (!this.failed) {
      this.compactWanted = true;
      this.kick();
      await this.idle();
    }
    await this.fh.close();
  }
}
