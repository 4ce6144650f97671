import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { yaml } from '../api/yaml.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { validateScenario } from './schema.js';
import { parseSnapshot, SnapshotError, type Snapshot } from '../api/snapshot.js';
import type { Scenario } from './types.js';

export interface LoadedScenario {
  scenario: Scenario;
  /** The path relative to the working directory when it is under it, else as given (it names the scenario in reports). */
  file: string;
  /** Directory that relative manifest paths resolve against. */
  baseDir: string;
  /** The snapshot the scenario starts from (its `snapshot` file), read when the scenario is loaded. */
  snapshot?: Snapshot;
}

export class ScenarioError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScenarioError';
  }
}

/** Reads and validates a scenario file; throws a ScenarioError listing every problem. */
export function loadScenario(file: string): LoadedScenario {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ScenarioError(`${file}: cannot read: ${(err as Error).message}`);
  }
  return parseScenario(text, shownPath(file), dirname(resolve(file)));
}

/**
 * A scenario's path as reports show it: relative to the working directory, so that a report made from an
 * absolute path (a CI job's checkout) reads, and compares, the same as one made from inside the repository.
 */
function shownPath(file: string): string {
  const rel = relative(process.cwd(), resolve(file));
  return rel === '' || rel.startsWith('..') || isAbsolute(rel) ? file : rel.split(sep).join('/');
}

export function parseScenario(text: string, file: string, baseDir: string): LoadedScenario {
  const docs = yaml().parseAllDocuments(text, { prettyErrors: true });
  if (!Array.isArray(docs)) throw new ScenarioError(`${file}: empty file`);
  if (docs.length !== 1)
    throw new ScenarioError(`${file}: a scenario file holds one YAML document, found ${docs.length}`);
  const doc = docs[0]!;
  if (doc.errors.length > 0)
    throw new ScenarioError(`${file}: invalid YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
  const value: unknown = doc.toJS({ maxAliasCount: 100 });
  if (!isPlainObject(value)) throw new ScenarioError(`${file}: a scenario is a YAML mapping with name and steps`);
  const problems = validateScenario(value);
  if (problems.length > 0)
    throw new ScenarioError(`${file}: invalid scenario:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  const scenario = value as unknown as Scenario;
  const unreadable = manifestFileProblems(scenario, baseDir);
  if (unreadable.length > 0)
    throw new ScenarioError(`${file}: invalid scenario:\n${unreadable.map((p) => `  - ${p}`).join('\n')}`);
  if (scenario.snapshot === undefined) return { scenario, file, baseDir };
  return { scenario, file, baseDir, snapshot: readSnapshot(file, baseDir, scenario.snapshot) };
}

/** The scenario's snapshot file, read and parsed: a missing or broken one is a mistake in the scenario (exit 2). */
function readSnapshot(file: string, baseDir: string, path: string): Snapshot {
  let text: string;
  try {
    text = readFileSync(resolve(baseDir, path), 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ScenarioError(
      `${file}: invalid scenario:\n  - snapshot: ${code === 'ENOENT' ? `no file ${path}` : `cannot read ${path}: ${(err as Error).message}`} (paths are relative to the scenario file's directory, ${baseDir})`,
    );
  }
  try {
    return parseSnapshot(text, path);
  } catch (err) {
    if (!(err instanceof SnapshotError)) throw err;
    throw new ScenarioError(`${file}: invalid scenario:\n  - snapshot: ${err.message}`);
  }
}

/**
 * The manifest files of apply and create steps must be there and parse before anything runs: a missing file is a
 * mistake in the scenario (exit 2), not something to find out half-way through a run.
 */
function manifestFileProblems(scenario: Scenario, baseDir: string): string[] {
  const problems: string[] = [];
  scenario.steps.forEach((step, i) => {
    for (const action of ['apply', 'create'] as const) {
      const source = step[action];
      const path = typeof source === 'string' ? source : source?.file;
      if (path === undefined) continue;
      let text: string;
      try {
        text = readFileSync(resolve(baseDir, path), 'utf8');
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        problems.push(
          `steps[${i}].${action}: ${code === 'ENOENT' ? `no file ${path}` : `cannot read ${path}: ${(err as Error).message}`} (paths are relative to the scenario file's directory, ${baseDir})`,
        );
        continue;
      }
      try {
        parseManifests(text, path);
      } catch (err) {
        problems.push(`steps[${i}].${action}: ${(err as Error).message}`);
      }
    }
  });
  return problems;
}

/** Parses a multi-document manifest text into objects (empty documents and `List`s are unpacked). */
export function parseManifests(text: string, origin: string): KubeObject[] {
  const out: KubeObject[] = [];
  for (const doc of yaml().parseAllDocuments(text)) {
    if (doc.errors.length > 0)
      throw new ScenarioError(`${origin}: invalid YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    if (value === null || value === undefined) continue;
    out.push(...manifestObjects(value, origin));
  }
  return out;
}

/** Objects from an inline manifest: one object, a list of them, or a kind: List. */
export function manifestObjects(value: unknown, origin: string): KubeObject[] {
  if (Array.isArray(value)) return value.flatMap((v) => manifestObjects(v, origin));
  if (!isPlainObject(value))
    throw new ScenarioError(`${origin}: a manifest must be an object with apiVersion and kind`);
  if (typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items))
    return manifestObjects(value.items, origin);
  if (typeof value.apiVersion !== 'string' || typeof value.kind !== 'string')
    throw new ScenarioError(`${origin}: an object without apiVersion and kind`);
  if (!isPlainObject(value.metadata)) throw new ScenarioError(`${origin}: ${value.kind} without metadata`);
  return [value as unknown as KubeObject];
}
