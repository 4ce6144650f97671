import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { compileScenarioValidator, PRECOMPILED_VALIDATOR, scenarioValidator } from '../src/scenario/schema.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Scenarios good and bad: every fixture, and mistakes of each kind the explanations handle. */
function samples(): unknown[] {
  const dirs = ['fixtures/scenarios', 'test/fixtures/scenarios', 'bench/scenarios'];
  const files = dirs.flatMap((d) =>
    readdirSync(join(ROOT, d))
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => join(ROOT, d, f)),
  );
  return [
    ...files.map((f) => parse(readFileSync(f, 'utf8')) as unknown),
    { name: 'x', steps: [] },
    { name: 'x', steps: [{ advance: '1s', waitFor: { equal: 3 } }] },
    { name: 'x', steps: [{ expect: { count: { kind: 'Pod' }, equal: 2 } }, { advanse: '1s' }] },
    { name: 3, seed: -1, nodes: 'many', steps: [{ delete: { kind: 'Pod', cascade: 'sideways' } }] },
    { steps: [{ fault: { type: 'node-explode' } }, { kubectl: { args: 3 } }, { advance: 'soon' }] },
  ];
}

test('the build precompiles the scenario validator from the schema the runner has, and the replay uses it', () => {
  assert.ok(existsSync(PRECOMPILED_VALIDATOR), `${fileURLToPath(PRECOMPILED_VALIDATOR)} is made by the bundle step`);
  assert.notEqual(scenarioValidator(), compileScenarioValidator(), 'the precompiled one, not a fresh compile');
  assert.equal(typeof (scenarioValidator() as { schemaJson?: unknown }).schemaJson, 'string');
});

test('the precompiled scenario validator gives the same verdicts and errors as the schema compiled at run time', () => {
  const precompiled = scenarioValidator();
  const compiled = compileScenarioValidator();
  for (const sample of samples()) {
    assert.equal(precompiled(sample), compiled(sample));
    assert.deepEqual(precompiled.errors ?? null, compiled.errors ?? null);
  }
});
