import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The YAML files kube-sim ships and reads at every start (the default stages, the image catalog). Parsing them
 * took ~35 ms of a ~300 ms `sim serve` start, so the build (scripts/build-bundle.mjs) writes each one's documents
 * as JSON under dist/fixtures/, and a start reads that twin while it is newer than the YAML: an edited file is
 * parsed again. A user's own files (`--stages`, `--images`) are always parsed as YAML.
 */
export const SHIPPED_YAML = ['stages/default.yaml', 'images.yaml'] as const;

/** From dist/src/kubelet/ or dist/src/bundle/ alike (the same depth). */
const FIXTURES = fileURLToPath(new URL('../../../fixtures/', import.meta.url));
const TWINS = fileURLToPath(new URL('../../fixtures/', import.meta.url));

const twinOf = (path: string): string => `${TWINS}${relative(FIXTURES, path)}.json`;
const mtime = (path: string): number => statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? Number.NaN;

/** The documents of a shipped YAML file from its twin, or undefined when there is none newer than the file. */
export function shippedDocuments(path: string): unknown[] | undefined {
  const twin = twinOf(path);
  if (!(mtime(twin) >= mtime(path))) return undefined;
  return JSON.parse(readFileSync(twin, 'utf8')) as unknown[];
}

/** Writes every shipped file's twin; the build calls it. Throws on a file that does not parse. */
export async function writeShippedTwins(): Promise<void> {
  const { parseAllDocuments } = await import('yaml');
  for (const name of SHIPPED_YAML) {
    const path = `${FIXTURES}${name}`;
    const docs = parseAllDocuments(readFileSync(path, 'utf8'));
    const list = Array.isArray(docs) ? docs : [docs];
    for (const doc of list) if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors[0]!.message}`);
    mkdirSync(dirname(twinOf(path)), { recursive: true });
    writeFileSync(twinOf(path), JSON.stringify(list.map((doc) => doc.toJS() as unknown)));
  }
}
