import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { Low } from 'lowdb';
import { JSONFile } from 'lowdb/node';
import type { KubeObject } from '../api/types.js';
import type { MemoryStore } from './memory-store.js';

/**
 * `--data PATH`: the cluster kept in a lowdb JSON file. Every change marks the snapshot dirty; one write runs
 * at a time and the next one picks up everything that changed meanwhile, so a burst of writes costs a few
 * file writes, not one each. (Crash-proof durability — a write-ahead log — is a later step.)
 */
interface SnapshotData {
  revision: number;
  resources: Record<string, KubeObject[]>;
}

export class SnapshotPersistence {
  private readonly db: Low<SnapshotData>;
  private dirty = false;
  private writing: Promise<void> | undefined;

  constructor(
    path: string,
    private readonly store: MemoryStore,
  ) {
    mkdirSync(dirname(path), { recursive: true });
    this.db = new Low<SnapshotData>(new JSONFile<SnapshotData>(path), { revision: 0, resources: {} });
  }

  /** Reads the snapshot; returns the revision to continue from. */
  async read(): Promise<SnapshotData> {
    await this.db.read();
    return this.db.data;
  }

  /** Loads what was read into the store (whose tables must already be registered). */
  restore(data: SnapshotData, known: Set<string>): void {
    for (const [resource, objects] of Object.entries(data.resources)) {
      if (known.has(resource)) this.store.load(resource, objects);
    }
  }

  attach(): void {
    this.store.onChange(() => this.markDirty());
  }

  private markDirty(): void {
    this.dirty = true;
    if (!this.writing) this.writing = this.drain();
  }

  private async drain(): Promise<void> {
    try {
      while (this.dirty) {
        this.dirty = false;
        await new Promise<void>((resolve) => setImmediate(resolve)); // let the rest of this burst land first
        const resources: Record<string, KubeObject[]> = {};
        for (const key of this.store.resourceKeys()) {
          const all = this.store.all(key);
          if (all.length > 0) resources[key] = all;
        }
        this.db.data = { revision: this.store.currentRevision, resources };
        await this.db.write();
      }
    } finally {
      this.writing = undefined;
    }
  }

  /** Waits until everything written so far is on disk. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.dirty) {
      this.writing = this.drain();
      await this.writing;
    }
  }
}
