import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * `mkdir -p` that reports the real reason it cannot: Node's recursive mkdirSync answers ENOENT on a read-only
 * file system (where the error is EROFS) and loops for ever under /proc. This finds the deepest directory
 * that exists and makes each missing one below it with a plain mkdir, whose error is the kernel's own.
 */
export function makeDirectories(path: string, mode?: number): void {
  const missing: string[] = [];
  let current = resolve(path);
  for (;;) {
    try {
      if (statSync(current).isDirectory()) break;
      const err = new Error(`ENOTDIR: not a directory, mkdir '${path}'`) as NodeJS.ErrnoException;
      err.code = 'ENOTDIR';
      throw err;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    missing.push(current);
    const parent = dirname(current);
    if (parent === current) break;
    current = parent;
  }
  for (const dir of missing.reverse()) {
    try {
      mkdirSync(dir, mode === undefined ? undefined : { mode });
    } catch (err) {
      // Another process made it meanwhile: as good as made.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}
