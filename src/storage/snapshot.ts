import { mkdirSync } from 'node:fs';
import { open, readFile, rename } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Low, type Adapter } from 'lowdb';
import type { KubeObject } from '../api/types.js';
import type { MemoryStore } from './memory-store.js';
import { fsyncDir } from './wal.js';

/**
 * The lowdb snapshot of `--data` (see wal.ts for the log replayed on top of it). The adapter writes a temporary
 * file, fsyncs it, renames it over the snapshot and fsyncs the directory, so a crash leaves either the old
 * snapshot or the new one, whole — lowdb's own JSONFile renames without fsync.
 */
export interface SnapshotData {
  revision: number;
  /** The cluster clock when the snapshot was taken (ms since epoch), so a virtual clock resumes from it. */
  clock?: number;
  resources: Record<string, KubeObject[]>;
}

class DurableJSONFile<T> implements Adapter<T> {
  constructor(private readonly path: string) {}

  async read(): Promise<T | null> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new Error(`snapshot ${this.path} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  async write(data: T): Promise<void> {
    const temp = join(dirname(this.path), `.${basename(this.path)}.tmp`);
    const fh = await open(temp, 'w');
    try {
      await fh.writeFile(JSON.stringify(data));
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

  constructor(readonly path: string) {
    mkdirSync(dirname(path), { recursive: true });
    this.db = new Low<SnapshotData>(new DurableJSONFile<SnapshotData>(path), { revision: 0, resources: {} });
  }

  async read(): Promise<SnapshotData> {
    await this.db.read();
    return this.db.data;
  }

  /** Captures the store now (synchronously) and writes it; resolves with the captured revision once on disk. */
  async write(store: MemoryStore, clock?: number): Promise<number> {
    const resources: Record<string, KubeObject[]> = {};
    for (const key of store.resourceKeys()) {
      const all = store.all(key);
      if (all.length > 0) resources[key] = all;
    }
    const revision = store.currentRevision;
    this.db.data = clock === undefined ? { revision, resources } : { revision, clock, resources };
    await this.db.write();
    return revision;
  }
}
