import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { startSimulator } from '../src/cluster/simulator.js';

// Unschedulable pods wait for a change in the cluster, after their back-off: a freed slot is taken by one of
// them, every freed slot is (a pod that failed again waits for the next change), and one that fits nowhere is
// tried again at most once per change, not once per change per failure.
test('scheduler: pods that fit nowhere are bound as slots free up, each retried after its back-off', async () => {
  const sim = await startSimulator({
    clock: 'virtual',
    seed: 7,
    nodes: 1,
    controllers: '',
    kubelet: {
      profile: { labels: {}, annotations: {}, taints: [], capacity: { cpu: '8', memory: '32Gi', pods: '2' } },
    },
  });
  const { cluster } = sim;
  const clock = cluster.virtualClock!;
  const pods = cluster.kind('', 'v1', 'pods');
  const events = cluster.kind('', 'v1', 'events');
  const pod = (name: string): KubeObject => ({
    metadata: { name },
    spec: { containers: [{ name: 'c', image: 'busybox' }] },
  });
  const nodeOf = (name: string): string | undefined =>
    (cluster.api.get(pods, 'default', name).spec as { nodeName?: string }).nodeName;
  const pending = (): string[] =>
    cluster.api
      .list(pods, 'default', {})
      .items.filter((p) => !(p.spec as { nodeName?: string }).nodeName)
      .map((p) => p.metadata.name!)
      .sort();
  const failedScheduling = (): number =>
    cluster.api
      .list(events, 'default', {})
      .items.filter((e) => e.reason === 'FailedScheduling')
      .reduce((n, e) => n + ((e.count as number | undefined) ?? 1), 0);
  try {
    await clock.settle();
    for (const name of ['a', 'b', 'c', 'd', 'e']) cluster.api.create(pods, 'default', pod(name));
    await clock.advance(1);
    assert.deepEqual(pending(), ['c', 'd', 'e'], 'two fit on the node, three wait');
    const condition = (
      (cluster.api.get(pods, 'default', 'c').status as { conditions?: Array<Record<string, string>> }).conditions ?? []
    ).find((c) => c.type === 'PodScheduled');
    assert.deepEqual([condition?.status, condition?.reason], ['False', 'Unschedulable']);
    assert.equal(failedScheduling(), 3);

    // Nothing changes in the cluster: nobody is retried before the 5-minute flush.
    await clock.advance(60_000);
    assert.equal(failedScheduling(), 3, 'no change, no retry');

    // A deleted pod frees a slot: one waiting pod takes it, the others fail once more and wait again.
    cluster.api.delete(pods, 'default', 'a', { gracePeriodSeconds: 0 });
    await clock.advance(1_000);
    assert.equal(pending().length, 2, 'one waiting pod took the freed slot');
    const retried = failedScheduling();
    assert.ok(retried <= 5, `each waiting pod tried at most once for one change (${retried} FailedScheduling in all)`);

    // Two changes in a row move each waiting pod once; a second slot is taken the same way.
    cluster.api.delete(pods, 'default', 'b', { gracePeriodSeconds: 0 });
    await clock.advance(30_000);
    assert.equal(pending().length, 1);
    const bound = ['c', 'd', 'e'].filter((n) => nodeOf(n) === 'node-1');
    assert.equal(bound.length, 2);
    assert.ok(failedScheduling() <= retried + 2, 'one retry of the last waiting pod at most');
  } finally {
    await sim.close();
  }
});
