import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { applyMergePatch } from '../src/api/patch.js';
import { deepEqual, isPlainObject, type KubeObject } from '../src/api/types.js';
import { PodRecord } from '../src/kubelet/pod-record.js';
import { annotationChanges, planPass } from '../src/kubelet/stage-pass.js';
import { DEFAULT_STAGES_PATH, loadStageFile } from '../src/kubelet/stages.js';
import { stageEnv } from './helpers/stage-env.js';

// Golden files for the stage engine with the default stage file (fixtures/stages/default.yaml): each
// test/fixtures/stages/default/NAME.in.yaml holds a pod, its node, the settings and what the kubelet's record of the
// pod holds (anchors, stages applied, failed pulls, its containers' commands); NAME.out.yaml the stage selected, when it is due, and what the pass makes of the pod: the stages it
// applied, the status merge patch and annotations it writes, its events and log lines, whether it deletes the pod.
//
// After a deliberate change of the default stages or the actions, regenerate the outputs and read their diff:
//   npx tsc -p . && UPDATE_GOLDEN=1 node --test dist/test/kubelet-stage-golden.test.js
const DIR = fileURLToPath(new URL('../../test/fixtures/stages/default/', import.meta.url));
const UPDATE = process.env.UPDATE_GOLDEN === '1';
type Obj = Record<string, unknown>;

/** The JSON merge patch that turns `before` into `after` (arrays are replaced whole, as merge patches do). */
function mergePatch(before: unknown, after: unknown): unknown {
  if (!isPlainObject(before) || !isPlainObject(after)) return after;
  const patch: Obj = {};
  for (const key of Object.keys(before)) if (!(key in after)) patch[key] = null;
  for (const [key, value] of Object.entries(after)) {
    if (!deepEqual(before[key], value)) patch[key] = mergePatch(before[key], value);
  }
  return patch;
}

interface GoldenInput {
  now: string;
  pod: KubeObject;
  node?: KubeObject;
  settings?: Record<string, string>;
  objects?: KubeObject[];
  missingImages?: string[];
  /**
   * What the kubelet's record of the pod holds: stage anchors, stages applied to the pod without change, and failed
   * pulls per image (how many, the last one's time).
   */
  record?: {
    firstSeen?: Record<string, string>;
    applied?: string[];
    pulls?: Record<string, { failures: number; lastAt: string }>;
    /** Per container, its command in the exec shell: the instance, and `waiting` (a program) or its exit. */
    commands?: Record<string, { instance: number; waiting?: string; exitCode?: number; at?: string }>;
  };
}

function run(input: GoldenInput): Obj {
  const stages = loadStageFile(DEFAULT_STAGES_PATH);
  const now = Date.parse(input.now);
  const record = new PodRecord();
  for (const [stage, at] of Object.entries(input.record?.firstSeen ?? {})) record.firstMatched(stage, Date.parse(at));
  if (input.record?.applied) record.wroteNothing(input.pod, new Set(input.record.applied));
  for (const [image, { failures, lastAt }] of Object.entries(input.record?.pulls ?? {}))
    for (let i = 0; i < failures; i++) record.pullFailed(image, Date.parse(lastAt));
  for (const [container, c] of Object.entries(input.record?.commands ?? {})) {
    record.commandStarted(container, c.instance, () => undefined);
    if (c.waiting !== undefined) record.commandWaiting(container, c.instance, c.waiting);
    if (c.exitCode !== undefined)
      record.commandExited(container, c.instance, c.exitCode, Date.parse(c.at ?? input.now));
  }
  const plan = planPass(stages, input.pod, record, stageEnv({ ...input, now }, record));
  if (plan.kind === 'idle') return { stage: null };
  if (plan.kind === 'wait') return { stage: plan.stage.name, dueInMs: plan.waitMs };
  const written = plan.pod;
  const statusChanged = !deepEqual(written.status, input.pod.status);
  const annotations = annotationChanges(input.pod, plan.steps);
  const statusPatch = statusChanged ? mergePatch(input.pod.status ?? {}, written.status) : undefined;
  if (statusPatch !== undefined)
    assert.deepEqual(applyMergePatch(input.pod.status ?? {}, statusPatch), written.status, 'the patch is exact');
  return {
    stage: plan.steps[0]!.stage.name,
    dueInMs: 0,
    stages: plan.steps.map((s) => s.stage.name),
    write: statusChanged ? 'status' : Object.keys(annotations).length > 0 ? 'annotations' : 'nothing',
    ...(statusPatch !== undefined ? { statusPatch } : {}),
    ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    events: plan.steps.flatMap((s) => s.events.map((e) => ({ ...e }))),
    logs: plan.steps.flatMap((s) => s.logs.map((l) => ({ ...l }))),
    ...(plan.steps.some((s) => s.pulls.length > 0) ? { pulls: plan.steps.flatMap((s) => s.pulls) } : {}),
    ...(plan.steps.some((s) => s.commands.length > 0) ? { commands: plan.steps.flatMap((s) => s.commands) } : {}),
    delete: plan.steps[plan.steps.length - 1]!.stage.next.delete === true,
    unchanged: [...plan.unchanged],
  };
}

const names = readdirSync(DIR)
  .filter((f) => f.endsWith('.in.yaml'))
  .map((f) => f.slice(0, -'.in.yaml'.length))
  .sort();

test('every golden output has its input', () => {
  const outputs = readdirSync(DIR).filter((f) => f.endsWith('.out.yaml'));
  for (const out of outputs) assert.ok(names.includes(out.slice(0, -'.out.yaml'.length)), `${out} has no .in.yaml`);
  assert.ok(names.length >= 10, 'the default stages are covered by golden files');
});

for (const name of names) {
  test(`golden stage pass: ${name}`, () => {
    const input = parse(readFileSync(join(DIR, `${name}.in.yaml`), 'utf8')) as GoldenInput;
    const actual = run(input);
    const outPath = join(DIR, `${name}.out.yaml`);
    if (UPDATE) {
      const header = `# Generated from ${name}.in.yaml by test/kubelet-stage-golden.test.ts (UPDATE_GOLDEN=1 regenerates).\n`;
      writeFileSync(outPath, header + stringify(actual, { lineWidth: 0 }));
      return;
    }
    let expected: unknown;
    try {
      expected = parse(readFileSync(outPath, 'utf8'));
    } catch (err) {
      assert.fail(`${name}.out.yaml: ${(err as Error).message} (UPDATE_GOLDEN=1 writes it)`);
    }
    assert.deepEqual(JSON.parse(JSON.stringify(actual)), expected);
  });
}
