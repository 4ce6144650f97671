import { makeDirectories } from '../api/directories.js';
import { open, readFile, rename } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Low, type Adapter } from 'lowdb';
import type { KubeObject } from '../api/types.js';
import { listedJsonOf } from './encoding.js';
import type { MemoryStore } from './memory-store.js';
import { fsyncDir } from './wal.js';

/**
 * The lowdb snapshot of `--data` (see wal.ts for the log replayed on top of it). The adapter writes a temporary
 * file, fsyncs it, renames it over the snapshot and fsyncs the directory, so a crash leaves either the old
 * snapshot or the new one, whole — lowdb's own JSONFile renames without fsync. It writes the objects' JSON in
 * pieces of about a megabyte, each write yielding to the event loop, so a large snapshot neither builds one huge
 * string nor stops the server while it is written.
 */
export interface SnapshotData {
  revision: number;
  /** The cluster clock when the snapshot was taken (ms since epoch), so a virtual clock resumes from it. */
  clock?: number;
  resources: Record<string, KubeObject[]>;
}

const PIECE_BYTES = 1 << 20;

class DurableSnapshotFile implements Adapter<SnapshotData> {
  /** Bytes of the snapshot last written, or read. */
  written = 0;

  constructor(private readonly path: string) {}

  async read(): Promise<SnapshotData | null> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    this.written = Buffer.byteLength(text);
    try {
      return JSON.parse(text) as SnapshotData;
    } catch (err) {
      throw new Error(`snapshot ${this.path} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  async write(data: SnapshotData): Promise<void> {
    const temp = join(dirname(this.path), `.${basename(this.path)}.tmp`);
    const fh = await open(temp, 'w');
    try {
      let piece: string[] = [];
      let pieceLength = 0;
      let written = 0;
      const put = async (text: string): Promise<void> => {
        piece.push(text);
        pieceLength += text.length;
        if (pieceLength < PIECE_BYTES) return;
        const bytes = Buffer.from(piece.join(''));
        piece = [];
        pieceLength = 0;
        await fh.write(bytes);
        written += bytes.length;
      };
      await put(
        `{"revision":${data.revision}${data.clock === undefined ? '' : `,"clock":${data.clock}`},"resources":{`,
      );
      let firstResource = true;
      for (const [resource, objects] of Object.entries(data.resources)) {
        await put(`${firstResource ? '' : ','}${JSON.stringify(resource)}:[`);
        firstResource = false;
        for (let i = 0; i < objects.length; i++)
          await put(i === 0 ? listedJsonOf(objects[i]!) : `,${listedJsonOf(objects[i]!)}`);
        await put(']');
      }
      const tail = Buffer.from(`${piece.join('')}}}`);
      await fh.write(tail);
      this.written = written + tail.length;
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(temp, this.path);
    fsyncDir(dirname(this.path));
  }
}

export class SnapshotFile {
  private readonly db: Low<SnapshotData>;
  private readonly file: DurableSnapshotFile;

  constructor(readonly path: string) {
    makeDirectories(dirname(path));
    this.file = new DurableSnapshotFile(path);
    this.db = new Low<SnapshotData>(this.file, { revision: 0, resources: {} });
  }

  async read(): Promise<SnapshotData> {
    await this.db.read();
    return this.db.data;
  }

  /** The size of the snapshot on disk in bytes, as last read or written (0 if there is none). */
  get bytes(): number {
    return this.file.written;
  }

  /**
   * Captures the store now (synchronously: stored objects are never changed in place, so holding them is a
   * consistent copy) and writes it; resolves with the snapshot's size in bytes once it is on disk.
   */
  async write(store: MemoryStore, clock?: number): Promise<number> {
    const resources: Record<string, KubeObject[]> = {};
    for (const key of store.resourceKeys()) {
      const all = store.all(key);
      if (all.length > 0) resources[key] = all;
    }
    const revision = store.currentRevision;
    this.db.data = clock === undefined ? { revision, resources } : { revision, clock, resources };
    await this.db.write();
    return this.file.written;
  }
}
