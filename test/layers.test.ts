import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, test } from 'node:test';

// The layer map (.dependency-cruiser.cjs) holds for src/, and the check that `npm test` runs (npm run lint:layers)
// fails when an import breaks it: each case copies src/, adds one import and runs the same check on the copy.

const root = resolve(import.meta.dirname, '..', '..');
const depcruise = join(root, 'node_modules', '.bin', 'depcruise');
const scratch = mkdtempSync(join(tmpdir(), 'kube-sim-layers-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

interface Violation {
  rule: string;
  from: string;
  to: string;
}

let copies = 0;
/** A copy of src/ with `edit` applied, checked as `npm run lint:layers` checks the real one. */
function violationsAfter(edit: (dir: string) => void): Violation[] {
  const dir = join(scratch, String(copies++));
  mkdirSync(dir);
  cpSync(join(root, 'src'), join(dir, 'src'), { recursive: true });
  for (const file of ['tsconfig.json', '.dependency-cruiser.cjs']) cpSync(join(root, file), join(dir, file));
  edit(dir);
  // The very command `npm run lint:layers` runs: its exit status is what fails `npm test`.
  const run = spawnSync(depcruise, ['src', '--config', '.dependency-cruiser.cjs', '--output-type', 'err'], {
    cwd: dir,
    encoding: 'utf8',
  });
  assert.ok(run.status !== null, `depcruise did not finish: ${run.stderr}`);
  const violations = [...run.stdout.matchAll(/^\s*error ([\w-]+): (\S+) → (\S*)/gm)].map(([, rule, from, to]) => ({
    rule: rule!,
    from: from!,
    to: to!,
  }));
  assert.equal(run.status, violations.length, run.stdout + run.stderr);
  return violations;
}

const rules = (violations: Violation[]): string[] => [...new Set(violations.map((v) => v.rule))].sort();

test('src/ keeps the layer map', () => {
  assert.deepEqual(
    violationsAfter(() => undefined),
    [],
  );
});

test('storage importing the server breaks its layer and makes a cycle between folders', () => {
  const violations = violationsAfter((dir) =>
    appendFileSync(join(dir, 'src/storage/wal.ts'), "\nexport { toApiError } from '../server/server.js';\n"),
  );
  assert.deepEqual(rules(violations), ['layer-storage', 'no-folder-cycle']);
  assert.ok(violations.some((v) => v.rule === 'layer-storage' && v.to === 'src/server/server.ts'));
});

test('a type-only import counts: auth may not see the cluster', () => {
  const violations = violationsAfter((dir) =>
    appendFileSync(
      join(dir, 'src/auth/rbac.ts'),
      "\nimport type { Cluster } from '../cluster/cluster.js';\nexport type Seen = Cluster;\n",
    ),
  );
  assert.ok(rules(violations).includes('layer-auth'), JSON.stringify(violations));
});

test('a component may not reach into the API server: a controller importing the registry', () => {
  const violations = violationsAfter((dir) =>
    appendFileSync(
      join(dir, 'src/controllers/podgc.ts'),
      "\nexport { bindPod } from '../registry/pod-subresources.js';\n",
    ),
  );
  assert.deepEqual(rules(violations), ['layer-controllers']);
});

test('a folder outside the map is refused until it is given a place', () => {
  const violations = violationsAfter((dir) => {
    mkdirSync(join(dir, 'src/extras'));
    writeFileSync(join(dir, 'src/extras/x.ts'), "export { KUBERNETES_VERSION } from '../api/version.js';\n");
  });
  assert.deepEqual(rules(violations), ['unknown-folder']);
});
