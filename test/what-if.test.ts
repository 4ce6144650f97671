import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseScenario } from '../src/scenario/loader.js';
import { runScenario } from '../src/scenario/runner.js';
import { ROOT } from './helpers/server.js';

const deployment = `
  - apply:
      manifest:
        - apiVersion: apps/v1
          kind: Deployment
          metadata: {name: web}
          spec:
            replicas: 2
            selector: {matchLabels: {app: web}}
            template:
              metadata: {labels: {app: web}}
              spec: {containers: [{name: web, image: "nginx:1.27"}]}
        - apiVersion: policy/v1
          kind: PodDisruptionBudget
          metadata: {name: web}
          spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}
  - waitFor: {object: {kind: PodDisruptionBudget, name: web}, jsonpath: '{.status.currentHealthy}', equals: 2, timeout: 1m}
`;

test('a drain that a PodDisruptionBudget refuses fails after its timeout of cluster time, naming the pods, and leaves the node cordoned', async () => {
  const text = `name: refused drain
nodes: 2
steps:${deployment}
  - drain: {selector: kubernetes.io/hostname=node-1, timeout: 30s}
  - expect: {object: {kind: Node, name: node-1}, jsonpath: '{.spec.unschedulable}', equals: true}
`;
  const run = await runScenario(parseScenario(text, 'drain.yaml', ROOT));
  const drain = run.steps[2]!;
  assert.equal(drain.status, 'failed');
  assert.equal(drain.end - drain.start, 30_000, 'it retried for its timeout of cluster time');
  assert.match(
    drain.message!,
    /1 pod\(s\) are still on node-1; evictions refused: default\/web-\S+ \(Cannot evict pod as it would violate the pod's disruption budget\.\)/,
  );
  assert.deepEqual(drain.notes, ['node/node-1 cordoned']);
});

test('node-fail by label selector fails every node of the pool; a selector that matches none fails the step', async () => {
  const text = `name: pool
nodes: 3
steps:
  - patch: {kind: Node, name: node-2, type: merge, patch: {metadata: {labels: {pool: spot}}}}
  - patch: {kind: Node, name: node-3, type: merge, patch: {metadata: {labels: {pool: spot}}}}
  - fault: {type: node-fail, selector: pool=spot}
  - waitFor: {object: {kind: Node, name: node-3}, condition: Ready, equals: Unknown, timeout: 2m}
  - expect:
      - {object: {kind: Node, name: node-2}, condition: Ready, equals: Unknown}
      - {object: {kind: Node, name: node-1}, condition: Ready}
  - fault: {type: node-fail, selector: pool=none}
`;
  const run = await runScenario(parseScenario(text, 'pool.yaml', ROOT));
  assert.deepEqual(run.steps[2]!.notes, ['node node-2 failed', 'node node-3 failed']);
  assert.deepEqual(
    run.steps.map((s) => s.status),
    ['passed', 'passed', 'passed', 'passed', 'passed', 'failed'],
  );
  assert.equal(run.steps[5]!.message, 'node-fail: no node matches pool=none');
});

test('a scenario whose snapshot file is missing is invalid (exit 2): it is read before anything runs', async () => {
  assert.throws(
    () => parseScenario('name: x\nsnapshot: nope.yaml\nsteps: [{advance: 1s}]\n', 'x.yaml', ROOT),
    /snapshot: no file nope\.yaml/,
  );
});
