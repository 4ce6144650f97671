import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { rfc3339 } from '../src/clock/clock.js';
import { PodRecord } from '../src/kubelet/pod-record.js';
import { planPass, type PassPlan } from '../src/kubelet/stage-pass.js';
import { defaultStages, parseStages } from '../src/kubelet/stages.js';
import { stageEnv } from './helpers/stage-env.js';

// The kubelet's record of a pod: one transition per test, then the three bugs its loose maps had (e2e0fc1,
// a496c82, 4325bc6) replayed on the record with the default stages, as the pod worker drives it.
const T0 = Date.UTC(2025, 0, 1);
const S = 1000;
type Obj = Record<string, unknown>;

function pod(rv: number, extra: { status?: Obj; deletionTimestamp?: string; labels?: Record<string, string> } = {}) {
  const p: KubeObject = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'web',
      namespace: 'default',
      uid: 'uid-1',
      resourceVersion: String(rv),
      labels: extra.labels ?? { app: 'web' },
      annotations: { 'kube-sim.dev/stop-delay': '5s' },
    },
    spec: { nodeName: 'node-1', containers: [{ name: 'app', image: 'nginx:1.27' }] },
    status: extra.status ?? { phase: 'Running' },
  };
  if (extra.deletionTimestamp) p.metadata.deletionTimestamp = extra.deletionTimestamp;
  return p;
}

describe('PodRecord transitions', () => {
  test('caughtUp: the cache is stale while older than the own last write; the first version as new ends the wait', () => {
    const record = new PodRecord();
    assert.equal(record.caughtUp(pod(3)), true, 'nothing written: any version will do');
    record.wrote(pod(7), new Set());
    assert.equal(record.caughtUp(pod(5)), false, 'an event from before the write');
    assert.equal(record.caughtUp(pod(7)), true, 'the write itself');
    assert.equal(record.caughtUp(pod(6)), true, 'the wait is over: not compared again');
  });

  test('firstMatched: the first ask records the time, later asks get it back', () => {
    const record = new PodRecord();
    assert.equal(record.firstMatched('pod-stop', T0), T0);
    assert.equal(record.firstMatched('pod-stop', T0 + 3 * S), T0);
    assert.equal(record.firstMatched('pod-kill', T0 + 3 * S), T0 + 3 * S, 'per stage');
  });

  test('wrote: a new state, whose stages are first seen from now; the unchanged stages count for the pod written', () => {
    const record = new PodRecord();
    record.firstMatched('pod-stop', T0);
    const written = pod(8, { status: { phase: 'Running', podIP: '10.244.0.2' } });
    record.wrote(written, new Set(['pod-kill']));
    assert.equal(record.firstMatched('pod-stop', T0 + 2 * S), T0 + 2 * S);
    assert.deepEqual([...record.appliedWithoutChange(written)], ['pod-kill']);
    record.wrote(pod(9), new Set());
    assert.deepEqual([...record.appliedWithoutChange(pod(9))], [], 'a write whose last stage changed the pod');
  });

  test('wroteNothing: the state is the one it was, its anchors keep running', () => {
    const record = new PodRecord();
    record.firstMatched('pod-stop', T0);
    record.wroteNothing(pod(4), new Set(['pod-kill']));
    assert.equal(record.firstMatched('pod-stop', T0 + 2 * S), T0);
    assert.equal(record.caughtUp(pod(4)), true, 'nothing written: nothing to wait for');
    assert.deepEqual([...record.appliedWithoutChange(pod(4))], ['pod-kill']);
  });

  test('appliedWithoutChange: kept across others’ writes outside the status and the deletion', () => {
    const deleted = rfc3339(T0);
    const record = new PodRecord();
    const left = pod(4, { deletionTimestamp: deleted });
    record.wroteNothing(left, new Set(['pod-kill']));
    assert.deepEqual([...record.appliedWithoutChange(left)], ['pod-kill'], 'the same version');
    const relabelled = pod(5, { deletionTimestamp: deleted, labels: { app: 'web', seen: 'yes' } });
    assert.deepEqual([...record.appliedWithoutChange(relabelled)], ['pod-kill'], 'a label: same status and deletion');
    const restatused = pod(5, { deletionTimestamp: deleted, status: { phase: 'Running', message: 'x' } });
    assert.deepEqual([...record.appliedWithoutChange(restatused)], [], 'a status written by another');
    const redeleted = pod(5, { deletionTimestamp: rfc3339(T0 + S) });
    assert.deepEqual([...record.appliedWithoutChange(redeleted)], [], 'a deletion moved (a shorter grace period)');
  });

  test('inputsChanged: a ConfigMap or Secret changed, so no stage counts as applied', () => {
    const record = new PodRecord();
    record.wroteNothing(pod(4), new Set(['pod-start']));
    record.inputsChanged();
    assert.deepEqual([...record.appliedWithoutChange(pod(4))], []);
  });

  test('holdIP / releaseIP, and a record holding nothing is empty', () => {
    const record = new PodRecord();
    assert.equal(record.empty, true);
    record.holdIP('10.244.0.2');
    assert.equal(record.ip, '10.244.0.2');
    assert.equal(record.empty, false);
    assert.equal(record.releaseIP(), '10.244.0.2');
    assert.equal(record.releaseIP(), undefined, 'released once');
    assert.equal(record.empty, true);
    record.firstMatched('pod-accept', T0);
    assert.equal(record.empty, false, 'an anchor is something to remember');
  });

  test('commands: started, waiting in a program, exited; a stale run is refused; ended instances are stopped', () => {
    const record = new PodRecord();
    const stopped: string[] = [];
    record.commandStarted('app', 0, () => stopped.push('app#0'));
    assert.deepEqual(record.command('app', 0), { phase: 'running' });
    assert.equal(record.command('app', 1), undefined, 'another instance');
    assert.equal(record.empty, false);
    assert.equal(record.commandWaiting('app', 0, 'python'), true);
    assert.equal(record.commandWaiting('app', 0, 'curl'), false, 'it waits in the first program it reached');
    assert.deepEqual(record.command('app', 0), { phase: 'waiting', program: 'python' });
    record.commandStarted('app', 1, () => stopped.push('app#1'));
    assert.deepEqual(stopped, ['app#0'], 'a new instance stops the one it replaces');
    assert.equal(record.commandExited('app', 0, 0, T0), false, 'the old run is not current');
    assert.equal(record.commandExited('app', 1, 3, T0 + 5000), true);
    assert.equal(record.commandExited('app', 1, 0, T0 + 6000), false, 'exits once');
    assert.deepEqual(record.command('app', 1), { phase: 'exited', exitCode: 3, at: T0 + 5000 });
    record.commandStarted('side', 0, () => stopped.push('side#0'));
    record.endCommands((container, instance) => container === 'side' && instance === 0);
    assert.deepEqual(stopped, ['app#0', 'app#1'], 'the ended instance is stopped, the running one kept');
    assert.equal(record.command('app', 1), undefined);
    record.endCommands();
    assert.deepEqual(stopped, ['app#0', 'app#1', 'side#0']);
    assert.equal(record.empty, true);
  });
});

describe('the kubelet fixes, replayed on the record', () => {
  const stages = defaultStages();

  /** A running pod of the default stages, as the kubelet left it (rv 3), and its record. */
  function running(): { pod: KubeObject; record: PodRecord } {
    const record = new PodRecord();
    let p = pod(1, { status: { phase: 'Pending' } });
    for (let rv = 2; rv <= 3; rv++) {
      const plan = planPass(stages, p, record, stageEnv({ now: T0 }, record));
      assert.equal(plan.kind, 'apply');
      if (plan.kind !== 'apply') throw new Error('unreachable');
      p = { ...plan.pod, metadata: { ...plan.pod.metadata, resourceVersion: String(rv) } };
      record.wrote(p, plan.unchanged);
    }
    assert.equal((p.status as Obj).phase, 'Running');
    return { pod: p, record };
  }

  const stagesOf = (plan: PassPlan): string[] => (plan.kind === 'apply' ? plan.steps.map((s) => s.stage.name) : []);
  const deleted = (p: KubeObject, rv: number): KubeObject => ({
    ...p,
    metadata: {
      ...p.metadata,
      resourceVersion: String(rv),
      deletionTimestamp: rfc3339(T0 + 40 * S),
      deletionGracePeriodSeconds: 30,
    },
  });

  test('e2e0fc1: a stop write that fails is no transition; the retry finds the stop delay already run', () => {
    const { pod: p, record } = running();
    const terminating = deleted(p, 4);
    let plan = planPass(stages, terminating, record, stageEnv({ now: T0 + 10 * S }, record));
    assert.deepEqual(stagesOf(plan), ['pod-kill'], 'SIGTERM at once; the stop delay starts');
    record.wroteNothing(terminating, plan.kind === 'apply' ? plan.unchanged : new Set());
    plan = planPass(stages, terminating, record, stageEnv({ now: T0 + 10 * S }, record));
    assert.deepEqual(plan.kind === 'wait' && [plan.stage.name, plan.waitMs], ['pod-stop', 5 * S]);
    plan = planPass(stages, terminating, record, stageEnv({ now: T0 + 15 * S }, record));
    assert.deepEqual(stagesOf(plan), ['pod-stop'], 'stopped 5 s after the deletion was seen');
    // The status write is refused (409): the pod worker makes no transition, and the work queue retries.
    plan = planPass(stages, terminating, record, stageEnv({ now: T0 + 15.5 * S }, record));
    assert.deepEqual(stagesOf(plan), ['pod-stop'], 'the retry stops it at once, not 5 s after the conflict');
  });

  test('e2e0fc1: the stages a pass chains on states not written yet leave no anchors', () => {
    // Two stages due at once: the second matches only the state the first makes, which is not written yet.
    const chained = parseStages(`
kind: Stage
metadata: {name: mark}
spec:
  selector: {matchExpressions: [{key: .status.message, operator: DoesNotExist}]}
  next: {statusPatch: {message: marked}}
---
kind: Stage
metadata: {name: after-mark}
spec:
  selector: {matchExpressions: [{key: .status.message, operator: In, values: [marked]}]}
  next: {statusPatch: {reason: Marked}}
`);
    const record = new PodRecord();
    const plan = planPass(chained, pod(4), record, stageEnv({ now: T0 }, record));
    assert.deepEqual(stagesOf(plan), ['mark', 'after-mark'], 'one pass, one write');
    // The write fails: no transition. The retry a second later anchors its first decision then, and only that.
    assert.equal(record.firstMatched('mark', T0 + S), T0, 'the first decision is anchored');
    assert.equal(record.firstMatched('after-mark', T0 + S), T0 + S, 'the chained one is not');
  });

  test('a496c82: another writer changing a terminating pod does not start its stop delay over', () => {
    const { pod: p, record } = running();
    const terminating = deleted(p, 4);
    const plan = planPass(stages, terminating, record, stageEnv({ now: T0 + 10 * S }, record));
    assert.deepEqual(stagesOf(plan), ['pod-kill']);
    record.wroteNothing(terminating, plan.kind === 'apply' ? plan.unchanged : new Set());
    const relabelled = {
      ...terminating,
      metadata: { ...terminating.metadata, resourceVersion: '5', labels: { app: 'web', seen: 'yes' } },
    };
    const later = planPass(stages, relabelled, record, stageEnv({ now: T0 + 12 * S }, record));
    assert.deepEqual(later.kind === 'wait' && [later.stage.name, later.waitMs], ['pod-stop', 3 * S]);
  });

  test('4325bc6: a stage that wrote nothing stays done while others’ writes leave status and deletion as they were', () => {
    const { pod: p, record } = running();
    const terminating = deleted(p, 4);
    const plan = planPass(stages, terminating, record, stageEnv({ now: T0 + 10 * S }, record));
    assert.deepEqual(stagesOf(plan), ['pod-kill']);
    record.wroteNothing(terminating, plan.kind === 'apply' ? plan.unchanged : new Set());
    const finalizerRemoved = { ...terminating, metadata: { ...terminating.metadata, resourceVersion: '5' } };
    const again = planPass(stages, finalizerRemoved, record, stageEnv({ now: T0 + 11 * S }, record));
    assert.equal(again.kind, 'wait', 'no second SIGTERM (nor Killing event) for the same deletion');
  });
});
