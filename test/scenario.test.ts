import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { htmlReport } from '../src/scenario/html.js';
import { evaluateJsonPath, toJsonPathPlus } from '../src/api/jsonpath.js';
import { splitArgs } from '../src/scenario/kubectl.js';
import { loadScenario, parseScenario, ScenarioError } from '../src/scenario/loader.js';
import { replayReport, scenarioReport } from '../src/scenario/report.js';
import { runScenario } from '../src/scenario/runner.js';
import { scenarioSchema } from '../src/scenario/schema.js';
import { ROOT } from './helpers/server.js';

const SCENARIOS = join(ROOT, 'test/fixtures/scenarios');

/** Runs a scenario file embedded and returns its JSON report text and HTML, as `sim replay` writes them. */
async function replayOnce(file: string, seed?: number): Promise<{ json: string; html: string; passed: boolean }> {
  const loaded = loadScenario(file);
  const run = await runScenario(loaded, seed === undefined ? {} : { seed });
  const report = replayReport([scenarioReport(run)]);
  return { json: `${JSON.stringify(report, null, 2)}\n`, html: htmlReport(report), passed: run.passed };
}

test('the same scenario and seed give a byte-identical JSON report (and HTML) on every run', async () => {
  const file = join(SCENARIOS, 'determinism.yaml');
  const first = await replayOnce(file);
  assert.ok(first.passed, `the determinism scenario should pass:\n${first.json.slice(0, 4000)}`);
  const report = JSON.parse(first.json) as {
    scenarios: Array<{ steps: Array<{ changes: unknown[] }>; pods: unknown[] }>;
  };
  const changes = report.scenarios[0]!.steps.reduce((n, s) => n + s.changes.length, 0);
  assert.ok(changes > 20, `the report should record the cluster's changes (got ${changes})`);
  assert.ok(report.scenarios[0]!.pods.length > 0);
  for (let i = 0; i < 3; i++) {
    const again = await replayOnce(file);
    assert.equal(again.json, first.json, `run ${i + 2} differs from run 1`);
    assert.equal(again.html, first.html, `HTML of run ${i + 2} differs from run 1`);
  }
  // And the seed is what decides: another seed gives other uids and generated names.
  const other = await replayOnce(file, 99);
  assert.notEqual(other.json, first.json);
});

test('a failed expectation names the step, the expectation and what was found; later steps still run', async () => {
  const run = await runScenario(loadScenario(join(SCENARIOS, 'broken.yaml')));
  assert.equal(run.passed, false);
  const report = scenarioReport(run);
  assert.equal(report.result, 'failed');
  assert.deepEqual(
    report.steps.map((s) => s.status),
    ['passed', 'passed', 'failed', 'passed'],
  );
  assert.equal(report.failures.length, 1);
  assert.match(
    report.failures[0]!,
    /^step 3 "count the pods" \(expect\): expected count of Pod app=web in default equals 2; found 3: web-\S+ \(\w+\), web-\S+ \(\w+\), web-\S+ \(\w+\)$/,
  );
});

test('a step that cannot work says why instead of pretending: a wait that cannot end, a missing node simulator endpoint', async () => {
  const text = `
name: honest failures
nodes: 0
steps:
  - apply:
      manifest:
        apiVersion: v1
        kind: Pod
        metadata: {name: lonely}
        spec: {containers: [{name: c, image: busybox}]}
  - waitFor: {object: {kind: Pod, name: lonely}, jsonpath: '{.status.phase}', equals: Running, timeout: 30s}
`;
  const run = await runScenario(parseScenario(text, 'inline.yaml', ROOT));
  const report = scenarioReport(run);
  const wait = report.steps[1]!;
  assert.equal(wait.status, 'failed');
  assert.match(
    wait.message!,
    /timed out after 30s of cluster time waiting until \{\.status\.phase\} of Pod default\/lonely equals Running; found (no value|Pending)/,
  );
  // The wait ends on the cluster clock: 30s later, not a moment more.
  assert.equal(wait.end, '2025-01-01T00:00:30.000Z');
});

test('a waitFor that times out names the pods that block it, their waiting reasons and last events', async () => {
  const text = `
name: too big
nodes: 3
steps:
  - apply:
      manifest:
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: big}
        spec:
          replicas: 2
          selector: {matchLabels: {app: big}}
          template:
            metadata: {labels: {app: big}}
            spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "64"}}}]}
  - waitFor: {object: {kind: Deployment, name: big}, condition: Available, timeout: 1m}
  - waitFor: {object: {kind: Deployment, name: big}, jsonpath: '{.status.replica}', equals: 2, timeout: 10s}
  - waitFor: {count: {kind: Pod, selector: app=big, where: {'{.status.phase}': Running}}, equals: 2, timeout: 10s}
`;
  const report = scenarioReport(await runScenario(parseScenario(text, 'inline.yaml', ROOT)));
  const [, available, typo] = report.steps;
  assert.match(
    available!.message!,
    /^timed out after 1m of cluster time waiting until condition Available of Deployment default\/big equals True; found False\nnot Ready:\n {2}big-\S+ \(Pending\) — Unschedulable — last event Warning FailedScheduling: 0\/3 nodes are available: 3 Insufficient cpu\./m,
  );
  assert.equal(available!.message!.split('\n').filter((l) => l.startsWith('  big-')).length, 2);
  // Only the first wait failed the run; the rest were skipped. A jsonpath naming no field says which.
  assert.equal(typo!.status, 'skipped');
  const again = scenarioReport(
    await runScenario(
      parseScenario(
        text.replace(/ {2}- waitFor: \{object: \{kind: Deployment, name: big\}, condition.*\n/, ''),
        'inline.yaml',
        ROOT,
      ),
    ),
  );
  assert.match(
    again.steps[1]!.message!,
    /found no value: \.status has no field "replica" \(did you mean "replicas"\?\); it has: observedGeneration, replicas, /,
  );
});

test('faults: a container crashes once, a pod is killed, a node fails and recovers; an unknown node is an error', async () => {
  const run = await runScenario(loadScenario(join(SCENARIOS, 'faults.yaml')));
  // Nodes that never registered (no node simulator) are a failure of this build, not a reason to skip.
  assert.deepEqual(run.problems, []);
  const report = scenarioReport(run);
  const failed = report.steps
    .filter((s) => s.status !== 'passed')
    .map((s) => `${s.index} ${s.name}: ${s.message ?? ''}`);
  assert.deepEqual(failed, ['15 no such node: node-fail node-9: nodes "node-9" not found']);
  const crash = report.steps[3]!;
  assert.match(crash.notes[0]!, /^pod p: containers exited with code 3; now (Ready|Running), 1 restart\(s\)$/);
  assert.ok(
    crash.changes.some((c) => c.kind === 'Pod' && /\[Error \(exit 3\)\]/.test(c.summary)),
    JSON.stringify(crash.changes),
  );
});

test('apply is server-side apply when the server has it: fields the last apply set and this one does not are removed', async () => {
  const text = `
name: ssa
steps:
  - apply:
      manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}, data: {k: v, gone: soon}}
  - apply:
      manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}, data: {k: v2}}
  - expect:
      - object: {kind: ConfigMap, name: a}
        jsonpath: '{.metadata.managedFields[0].manager}'
        equals: kube-sim-replay
      - object: {kind: ConfigMap, name: a}
        jsonpath: '{.data}'
        equals: {k: v2}
`;
  const report = scenarioReport(await runScenario(parseScenario(text, 'ssa.yaml', ROOT)));
  assert.deepEqual(report.failures, []);
  assert.deepEqual(
    report.steps.map((s) => s.notes),
    [['configmaps/a created'], ['configmaps/a configured'], []],
  );
});

test('invalid scenario files are rejected with every problem, by path', () => {
  assert.throws(
    () => loadScenario(join(SCENARIOS, 'invalid.yaml')),
    (err: unknown) => {
      assert.ok(err instanceof ScenarioError);
      assert.match(err.message, /steps\[0\]\.advance: "soon" is not valid here: expected Cluster time/);
      assert.match(err.message, /steps\[1\]: unknown key "jump" \(a step has a name and one of: apply, /);
      assert.match(err.message, /steps\[2\]: a step needs exactly one action .* found waitFor, expect/);
      assert.match(err.message, /steps\[3\]\.delete\.cascade: must be one of "background", "foreground", "orphan"/);
      return true;
    },
  );
  assert.throws(() => parseScenario('name: x\nsteps: []\n', 'x.yaml', ROOT), /steps: must NOT have fewer than 1 items/);
  assert.throws(() => parseScenario('- a\n- b\n', 'x.yaml', ROOT), /a scenario is a YAML mapping/);
});

test('a typo is one line naming the closest key or value (did you mean), in the form the author meant', () => {
  const problems = (steps: string): string[] => {
    try {
      parseScenario(`name: typo\nsteps:\n${steps}`, 'typo.yaml', ROOT);
    } catch (err) {
      return (err as Error).message.split('\n').slice(1);
    }
    return [];
  };
  // Six lines before, half of them about the count form nobody meant.
  assert.deepEqual(
    problems("  - waitFor: {object: {kind: Deployment, name: web}, jsonpath: '{.status.readyReplicas}', equal: 3}\n"),
    ['  - steps[0].waitFor: unknown key "equal" (did you mean "equals"?)'],
  );
  assert.deepEqual(
    problems(
      [
        '  - waitfor: {object: {kind: Deployment, name: web}, condition: Available}',
        '  - expect: {count: {kind: Pod, selectr: app=web}, equals: 2}',
        '  - expect: [{object: {kind: Pod, nme: x}, exists: true}]',
        '  - apply: {fille: x.yaml}',
        '  - delete: {kind: Pod, name: x, cascade: backgruond}',
        '  - fault: {type: node-fial, node: n}',
        '  - advance: soon',
        '',
      ].join('\n'),
    ),
    [
      '  - steps[0]: unknown key "waitfor" (did you mean "waitFor"?)',
      '  - steps[1].expect.count: unknown key "selectr" (did you mean "selector"?)',
      '  - steps[2].expect[0].object: unknown key "nme" (did you mean "name"?)',
      '  - steps[3].apply: unknown key "fille" (did you mean "file"?)',
      '  - steps[4].delete.cascade: must be one of "background", "foreground", "orphan" (did you mean "background"?)',
      '  - steps[5].fault.type: must be one of "node-fail", "node-recover", "pod-kill", "container-crash" (did you mean "node-fail"?)',
      '  - steps[6].advance: "soon" is not valid here: expected Cluster time: "90s", "5m", "1h30m", "2d", or a number of seconds',
    ],
  );
  // Nothing near enough: no guess.
  assert.deepEqual(problems('  - delete: {kind: Pod, name: x, cascade: sideways}\n'), [
    '  - steps[0].delete.cascade: must be one of "background", "foreground", "orphan"',
  ]);
});

test('schema/scenario.schema.json is the schema the runner validates with (regenerate: sim replay --print-schema)', () => {
  const onDisk: unknown = JSON.parse(readFileSync(join(ROOT, 'schema/scenario.schema.json'), 'utf8'));
  assert.deepEqual(onDisk, JSON.parse(JSON.stringify(scenarioSchema)));
});

test('every shipped scenario is valid against the schema', async () => {
  const { readdirSync } = await import('node:fs');
  const dir = join(ROOT, 'fixtures/scenarios');
  const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
  assert.ok(files.length >= 4, `expected the shipped scenarios in ${dir}`);
  for (const f of files) loadScenario(join(dir, f));
});

test('kubectl-style JSONPath', () => {
  const pod = {
    metadata: { name: 'p', labels: { 'app.kubernetes.io/name': 'web' } },
    status: {
      phase: 'Running',
      conditions: [
        { type: 'Ready', status: 'True' },
        { type: 'Initialized', status: 'True' },
      ],
    },
    spec: {
      containers: [
        { name: 'a', image: 'x' },
        { name: 'b', image: 'y' },
      ],
    },
  };
  assert.equal(toJsonPathPlus('{.status.phase}'), '$.status.phase');
  assert.deepEqual(evaluateJsonPath(pod, '{.status.phase}'), ['Running']);
  assert.deepEqual(evaluateJsonPath(pod, '{.status.conditions[?(@.type=="Ready")].status}'), ['True']);
  assert.deepEqual(evaluateJsonPath(pod, '{.spec.containers[*].image}'), ['x', 'y']);
  assert.deepEqual(evaluateJsonPath(pod, '{.spec.containers[1].name}'), ['b']);
  assert.deepEqual(evaluateJsonPath(pod, '{.metadata.labels.app\\.kubernetes\\.io/name}'), ['web']);
  assert.deepEqual(evaluateJsonPath(pod, ".metadata.labels['app.kubernetes.io/name']"), ['web']);
  assert.deepEqual(evaluateJsonPath(pod, '{.status.missing}'), []);
  assert.throws(() => evaluateJsonPath(pod, 'phase is {.status.phase}'), /single \{\.\.\.\} expression/);
});

test('kubectl argument strings split like a shell would', () => {
  assert.deepEqual(splitArgs('get pods -o wide'), ['get', 'pods', '-o', 'wide']);
  assert.deepEqual(splitArgs(`get pods -o jsonpath='{.items[*].metadata.name}'`), [
    'get',
    'pods',
    '-o',
    'jsonpath={.items[*].metadata.name}',
  ]);
  assert.deepEqual(splitArgs('exec deploy/web -- sh -c "echo a  b"'), [
    'exec',
    'deploy/web',
    '--',
    'sh',
    '-c',
    'echo a  b',
  ]);
  assert.deepEqual(splitArgs(`label cm x a=b\\ c ''`), ['label', 'cm', 'x', 'a=b c', '']);
  assert.throws(() => splitArgs('get "pods'), /unbalanced/);
});
