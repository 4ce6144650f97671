import { posix } from 'node:path';

/**
 * The files a simulated container sees, in memory: a writable layer of its own (what the container runtime's
 * overlay gives each container instance, gone when the container restarts or the pod goes), the pod's emptyDir
 * volumes (shared by its containers, kept across restarts) and read-only mounts of ConfigMaps, Secrets and the
 * downward API. `kubectl cp`, redirections and `mkdir`/`rm`/`tar` in the exec shell write here.
 *
 * Memory is bounded as a node's disk is: every layer charges its bytes to a quota (its own, its pod's and the
 * kubelet's), and a write past any of them fails with ENOSPC, as a full disk does. Nothing is evicted.
 */

export type FsErrorCode = 'ENOENT' | 'EISDIR' | 'ENOTDIR' | 'EEXIST' | 'ENOTEMPTY' | 'EROFS' | 'ENOSPC' | 'EINVAL';

const MESSAGES: Record<FsErrorCode, string> = {
  ENOENT: 'No such file or directory',
  EISDIR: 'Is a directory',
  ENOTDIR: 'Not a directory',
  EEXIST: 'File exists',
  ENOTEMPTY: 'Directory not empty',
  EROFS: 'Read-only file system',
  ENOSPC: 'No space left on device',
  EINVAL: 'Invalid argument',
};

/** A failed file operation; `message` is the C library's text (strerror), as the coreutils print it. */
export class FsError extends Error {
  constructor(
    readonly code: FsErrorCode,
    readonly path: string,
  ) {
    super(MESSAGES[code]);
  }
}

/** Bytes a layer may hold; charges go up the chain (a container's layer, its pod, the kubelet). */
export class Quota {
  used = 0;
  constructor(
    readonly limit: number,
    readonly parent?: Quota,
  ) {}

  /** Takes `delta` bytes (negative gives back) or throws ENOSPC, changing nothing. */
  charge(delta: number, path: string): void {
    if (delta > 0)
      for (let q: Quota | undefined = this; q; q = q.parent)
        if (q.used + delta > q.limit) throw new FsError('ENOSPC', path);
    for (let q: Quota | undefined = this; q; q = q.parent) q.used += delta;
  }
}

/** What an entry costs besides its bytes (name, metadata), so a million empty files are bounded too. */
const ENTRY_COST = 128;

export interface FileNode {
  kind: 'file';
  data: Buffer;
  mode: number;
  mtime: number;
}

export interface DirNode {
  kind: 'dir';
  entries: Map<string, FsNode>;
  mode: number;
  mtime: number;
}

export type FsNode = FileNode | DirNode;

export interface Stat {
  kind: 'file' | 'dir';
  size: number;
  /** Permission bits (0o755, 0o644, ...). */
  mode: number;
  /** Modification time, ms since the epoch (cluster time). */
  mtime: number;
}

/** One tree of files: a container's writable layer, an emptyDir, or the contents of a read-only volume. */
export class FsLayer {
  readonly root: DirNode;

  constructor(
    readonly readOnly: boolean,
    private readonly quota?: Quota,
    mtime = 0,
  ) {
    this.root = { kind: 'dir', entries: new Map(), mode: 0o755, mtime };
  }

  /** Bytes charged so far (for tests and limits). */
  get used(): number {
    return this.quota?.used ?? 0;
  }

  charge(delta: number, path: string): void {
    this.quota?.charge(delta, path);
  }

  /** Returns every layer's bytes to its quota (the layer is being dropped). */
  release(): void {
    if (this.quota && this.quota.used > 0) this.quota.charge(-this.quota.used, '/');
  }
}

interface Mount {
  /** Absolute, normalised; '/' for the root layer. */
  path: string;
  layer: FsLayer;
  /** A single-file mount (subPath): the layer holds the file at this name under its root. */
  file?: string;
}

function split(rel: string): string[] {
  return rel.split('/').filter((p) => p !== '');
}

/**
 * A container's view: the root layer with layers mounted over directories (and single files, for subPath
 * mounts). Paths are absolute or relative to `/`; callers resolve the working directory first.
 */
export class ContainerFs {
  private readonly mounts: Mount[] = [];

  constructor(
    root: FsLayer,
    readonly now: () => number = () => 0,
  ) {
    this.mounts.push({ path: '/', layer: root });
  }

  /** Mounts `layer` over the directory `path` (created in the layer below, as a mount point is). */
  mount(path: string, layer: FsLayer): void {
    const p = posix.resolve('/', path);
    this.mkdirBelow(p);
    this.mounts.push({ path: p, layer });
    this.mounts.sort((a, b) => b.path.length - a.path.length);
  }

  /** Mounts one file at `path` (a subPath mount): its content, read-only. */
  mountFile(path: string, content: Buffer | string, mtime = 0): void {
    const p = posix.resolve('/', path);
    const layer = new FsLayer(true, undefined, mtime);
    layer.root.entries.set('file', {
      kind: 'file',
      data: Buffer.from(content),
      mode: 0o644,
      mtime,
    });
    this.mkdirBelow(posix.dirname(p));
    this.mounts.push({ path: p, layer, file: 'file' });
    this.mounts.sort((a, b) => b.path.length - a.path.length);
  }

  /** Writes a file without the read-only check: the kubelet filling a volume before it is mounted. */
  static fill(layer: FsLayer, path: string, content: Buffer | string, mtime = 0): void {
    let dir = layer.root;
    const parts = split(path);
    for (const name of parts.slice(0, -1)) {
      let next = dir.entries.get(name);
      if (next?.kind !== 'dir') {
        next = { kind: 'dir', entries: new Map(), mode: 0o755, mtime };
        dir.entries.set(name, next);
      }
      dir = next;
    }
    const last = parts.at(-1);
    if (last !== undefined) dir.entries.set(last, { kind: 'file', data: Buffer.from(content), mode: 0o644, mtime });
  }

  private mkdirBelow(path: string): void {
    const { layer, parts } = this.locate(path);
    let dir = layer.root;
    for (const name of parts) {
      const next = dir.entries.get(name);
      if (next?.kind === 'dir') {
        dir = next;
        continue;
      }
      const created: DirNode = { kind: 'dir', entries: new Map(), mode: 0o755, mtime: this.now() };
      dir.entries.set(name, created);
      dir = created;
    }
  }

  private locate(path: string): { mount: Mount; layer: FsLayer; parts: string[] } {
    const p = posix.resolve('/', path);
    for (const m of this.mounts) {
      if (m.path === '/' || p === m.path || p.startsWith(`${m.path}/`)) {
        const rest = m.path === '/' ? p : p.slice(m.path.length);
        const parts = m.file !== undefined ? [m.file, ...split(rest)] : split(rest);
        return { mount: m, layer: m.layer, parts };
      }
    }
    throw new Error('unreachable: the root is always mounted');
  }

  /** The node at `path`, or undefined; throws ENOTDIR when a parent is a file. */
  private node(path: string): FsNode | undefined {
    const { layer, parts } = this.locate(path);
    let node: FsNode = layer.root;
    for (const name of parts) {
      if (node.kind !== 'dir') throw new FsError('ENOTDIR', path);
      const next: FsNode | undefined = node.entries.get(name);
      if (!next) return undefined;
      node = next;
    }
    return node;
  }

  /** The directory that holds `path`'s last part, the part, and the layer; throws when the parent is missing. */
  private parent(path: string): { dir: DirNode; name: string; layer: FsLayer } {
    const { layer, parts, mount } = this.locate(path);
    const name = parts.at(-1);
    // `path` is a mount point itself: its parent is in the layer below, where it cannot be replaced.
    if (name === undefined || (mount.file !== undefined && parts.length === 1)) throw new FsError('EINVAL', path);
    let dir: FsNode = layer.root;
    for (const part of parts.slice(0, -1)) {
      const next: FsNode | undefined = dir.kind === 'dir' ? dir.entries.get(part) : undefined;
      if (!next) throw new FsError('ENOENT', path);
      if (next.kind !== 'dir') throw new FsError('ENOTDIR', path);
      dir = next;
    }
    if (dir.kind !== 'dir') throw new FsError('ENOTDIR', path);
    return { dir, name, layer };
  }

  private writable(layer: FsLayer, path: string): void {
    if (layer.readOnly) throw new FsError('EROFS', path);
  }

  stat(path: string): Stat | undefined {
    let node: FsNode | undefined;
    try {
      node = this.node(path);
    } catch {
      return undefined;
    }
    if (!node) return undefined;
    return {
      kind: node.kind,
      size: node.kind === 'file' ? node.data.length : 4096,
      mode: node.mode,
      mtime: node.mtime,
    };
  }

  isDir(path: string): boolean {
    return this.stat(path)?.kind === 'dir';
  }

  /** A file's bytes; throws ENOENT or EISDIR. */
  read(path: string): Buffer {
    const node = this.node(path);
    if (!node) throw new FsError('ENOENT', path);
    if (node.kind === 'dir') throw new FsError('EISDIR', path);
    return node.data;
  }

  /** Creates or replaces (or with `append`, extends) a file. */
  write(path: string, data: Buffer | string, options: { append?: boolean; mode?: number; mtime?: number } = {}): void {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    const existing = this.node(path);
    if (existing?.kind === 'dir') throw new FsError('EISDIR', path);
    const { dir, name, layer } = existing ? this.parentOf(path) : this.parent(path);
    this.writable(layer, path);
    const mtime = options.mtime ?? this.now();
    if (existing) {
      const next = options.append ? Buffer.concat([existing.data, bytes]) : bytes;
      layer.charge(next.length - existing.data.length, path);
      existing.data = next;
      existing.mtime = mtime;
      if (options.mode !== undefined) existing.mode = options.mode;
      return;
    }
    layer.charge(bytes.length + ENTRY_COST, path);
    dir.entries.set(name, { kind: 'file', data: bytes, mode: options.mode ?? 0o644, mtime });
    dir.mtime = mtime;
  }

  /** Like `parent`, for a path known to exist (a subPath file mount is its own parent). */
  private parentOf(path: string): { dir: DirNode; name: string; layer: FsLayer } {
    const { mount, parts, layer } = this.locate(path);
    if (mount.file !== undefined && parts.length === 1) return { dir: layer.root, name: mount.file, layer };
    return this.parent(path);
  }

  /** `mkdir` (`parents`: `mkdir -p`, no error when it exists). */
  mkdir(path: string, options: { parents?: boolean; mode?: number; mtime?: number } = {}): void {
    const p = posix.resolve('/', path);
    const existing = this.node(p);
    if (existing) {
      if (options.parents && existing.kind === 'dir') return;
      throw new FsError('EEXIST', path);
    }
    if (options.parents && p !== '/') {
      const up = posix.dirname(p);
      if (!this.node(up)) this.mkdir(up, { parents: true });
    }
    const { dir, name, layer } = this.parent(p);
    this.writable(layer, path);
    const mtime = options.mtime ?? this.now();
    layer.charge(ENTRY_COST, path);
    dir.entries.set(name, { kind: 'dir', entries: new Map(), mode: options.mode ?? 0o755, mtime });
    dir.mtime = mtime;
  }

  /** Names in a directory, sorted, including mount points below it. */
  list(path: string): string[] {
    const node = this.node(path);
    if (!node) throw new FsError('ENOENT', path);
    if (node.kind !== 'dir') throw new FsError('ENOTDIR', path);
    return [...node.entries.keys()].sort();
  }

  /** `rm` (`recursive` for a directory and everything under it); `rmdir` when `dirOnly`. */
  remove(path: string, options: { recursive?: boolean; dirOnly?: boolean } = {}): void {
    const p = posix.resolve('/', path);
    const node = this.node(p);
    if (!node) throw new FsError('ENOENT', path);
    if (this.mounts.some((m) => m.path === p) || p === '/') throw new FsError('EINVAL', path);
    if (node.kind === 'dir' && !options.recursive && !options.dirOnly) throw new FsError('EISDIR', path);
    if (node.kind === 'file' && options.dirOnly) throw new FsError('ENOTDIR', path);
    if (node.kind === 'dir' && options.dirOnly && node.entries.size > 0) throw new FsError('ENOTEMPTY', path);
    const { dir, name, layer } = this.parent(p);
    this.writable(layer, path);
    if (this.mounts.some((m) => m.path.startsWith(`${p}/`))) throw new FsError('EINVAL', path);
    dir.entries.delete(name);
    dir.mtime = this.now();
    layer.charge(-cost(node), path);
  }

  /** `touch`: an empty file when missing, else a new modification time. */
  touch(path: string, mtime = this.now()): void {
    const node = this.node(path);
    if (!node) return this.write(path, Buffer.alloc(0), { mtime });
    const { layer } = this.locate(path);
    this.writable(layer, path);
    node.mtime = mtime;
  }

  /** Sets permission bits (`chmod`). */
  chmod(path: string, mode: number): void {
    const node = this.node(path);
    if (!node) throw new FsError('ENOENT', path);
    const { layer } = this.locate(path);
    this.writable(layer, path);
    node.mode = mode & 0o7777;
  }
}

function cost(node: FsNode): number {
  if (node.kind === 'file') return node.data.length + ENTRY_COST;
  let total = ENTRY_COST;
  for (const child of node.entries.values()) total += cost(child);
  return total;
}

/** Per-container writable layer, per-pod emptyDir and kubelet-wide limits (README, "The exec shell"). */
export interface DiskLimits {
  container: number;
  pod: number;
  total: number;
}

const MiB = 1024 * 1024;
export const DEFAULT_DISK_LIMITS: DiskLimits = { container: 64 * MiB, pod: 128 * MiB, total: 512 * MiB };

interface PodDisks {
  quota: Quota;
  containers: Map<string, { instance: number; layer: FsLayer }>;
  emptyDirs: Map<string, FsLayer>;
}

/**
 * The kubelet's store of what containers wrote: a layer per container instance (a restart starts a fresh one,
 * as the runtime's overlay does) and each pod's emptyDirs. Made on first use, so pods that are never exec'd
 * into cost nothing; a pod's disks go when the pod does (`remove`).
 */
export class ContainerDisks {
  private readonly pods = new Map<string, PodDisks>();
  private readonly quota: Quota;

  constructor(readonly limits: DiskLimits = DEFAULT_DISK_LIMITS) {
    this.quota = new Quota(limits.total);
  }

  get used(): number {
    return this.quota.used;
  }

  private pod(uid: string): PodDisks {
    let pod = this.pods.get(uid);
    if (!pod) {
      pod = { quota: new Quota(this.limits.pod, this.quota), containers: new Map(), emptyDirs: new Map() };
      this.pods.set(uid, pod);
    }
    return pod;
  }

  /** The writable layer of a container instance (`instance`: its restart count); `fresh` is true when just made. */
  layer(uid: string, container: string, instance: number): { layer: FsLayer; fresh: boolean } {
    const pod = this.pod(uid);
    const held = pod.containers.get(container);
    if (held && held.instance === instance) return { layer: held.layer, fresh: false };
    held?.layer.release();
    const layer = new FsLayer(false, new Quota(this.limits.container, pod.quota));
    pod.containers.set(container, { instance, layer });
    return { layer, fresh: true };
  }

  /** A pod's emptyDir volume, sized by its `sizeLimit` when it has one (bytes). */
  emptyDir(uid: string, volume: string, sizeLimit?: number): FsLayer {
    const pod = this.pod(uid);
    let layer = pod.emptyDirs.get(volume);
    if (!layer) {
      layer = new FsLayer(false, new Quota(sizeLimit ?? this.limits.pod, pod.quota));
      pod.emptyDirs.set(volume, layer);
    }
    return layer;
  }

  remove(uid: string): void {
    const pod = this.pods.get(uid);
    if (!pod) return;
    for (const { layer } of pod.containers.values()) layer.release();
    for (const layer of pod.emptyDirs.values()) layer.release();
    this.pods.delete(uid);
  }
}
