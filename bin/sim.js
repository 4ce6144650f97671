#!/usr/bin/env node
import { statSync } from 'node:fs';

// The bundle (scripts/build-bundle.mjs) starts faster; it is used only when it was made after the last tsc build,
// so that a `tsc` without the bundle step never runs stale code.
const dist = new URL('../dist/', import.meta.url);
const mtime = (path) => statSync(new URL(path, dist), { throwIfNoEntry: false })?.mtimeMs ?? Number.NaN;
const bundled = mtime('src/bundle/main.js') >= mtime('.tsbuildinfo');
await import(bundled ? '../dist/src/bundle/main.js' : '../dist/src/cli/main.js');
