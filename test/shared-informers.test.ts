import assert from 'node:assert/strict';
import { describe, it, test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { Resources } from '../src/client/client.js';
import { SharedInformers } from '../src/client/informer.js';
import { Cluster } from '../src/cluster/cluster.js';
import { InProcessClient } from '../src/cluster/in-process-client.js';
import { startSimulator, type Simulator } from '../src/cluster/simulator.js';

// Issue 23: one informer cache per process for the controllers, the scheduler and the kubelets (each kind listed and
// watched once), and --informers separate, which gives each component its own as out-of-process components have.

/** apiserver_registered_watchers of a kind, as /metrics reports it. */
async function watchersOf(sim: Simulator, kind: string): Promise<number> {
  const res = await sim.buildServer().inject({ method: 'GET', url: '/metrics' });
  assert.equal(res.statusCode, 200);
  const line = res.body
    .split('\n')
    .find((l) => l.startsWith('apiserver_registered_watchers{') && l.includes(`kind="${kind}"`));
  assert.ok(line, `a series for ${kind}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** A Deployment of 4 replicas, stepped on the virtual clock until it is Available; its pods' phases. */
async function rollOut(sim: Simulator): Promise<string[]> {
  const client = sim.client();
  await client.create(Resources.deployments, 'default', {
    metadata: { name: 'web' },
    spec: {
      replicas: 4,
      selector: { matchLabels: { app: 'web' } },
      template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
    },
  });
  const clock = sim.cluster.virtualClock!;
  for (let i = 0; i < 60; i++) {
    const d = await client.get(Resources.deployments, 'default', 'web');
    if ((d.status as { availableReplicas?: number } | undefined)?.availableReplicas === 4) break;
    await clock.advance(1000);
  }
  const pods = await client.list(Resources.pods, 'default', { labelSelector: 'app=web' });
  return pods.items.map((p) => String((p.status as { phase?: unknown }).phase)).sort();
}

describe('the components of one process', () => {
  it('share one watch of pods and of nodes, and roll a Deployment out', async (t) => {
    const sim = await startSimulator({ clock: 'virtual', seed: 3, nodes: 2 });
    t.after(() => sim.close());
    await sim.cluster.virtualClock!.settle();
    assert.equal(await watchersOf(sim, 'Pod'), 1);
    assert.equal(await watchersOf(sim, 'Node'), 1);
    assert.deepEqual(await rollOut(sim), ['Running', 'Running', 'Running', 'Running']);
    assert.equal(await watchersOf(sim, 'Pod'), 1);
  });

  it('with informers: separate, watch each through their own client (controllers, scheduler, kubelets)', async (t) => {
    const sim = await startSimulator({ clock: 'virtual', seed: 3, nodes: 2, informers: 'separate' });
    t.after(() => sim.close());
    await sim.cluster.virtualClock!.settle();
    assert.equal(await watchersOf(sim, 'Pod'), 3);
    assert.equal(await watchersOf(sim, 'Node'), 3);
    assert.deepEqual(await rollOut(sim), ['Running', 'Running', 'Running', 'Running']);
  });

  it('keep scheduling and running pods when the controllers stop', async (t) => {
    const sim = await startSimulator({ clock: 'virtual', seed: 3, nodes: 1 });
    t.after(() => sim.close());
    const clock = sim.cluster.virtualClock!;
    await clock.settle();
    sim.controllers.stop();
    await clock.settle();
    assert.equal(await watchersOf(sim, 'Pod'), 1, 'the scheduler and the kubelets still hold the pods');
    // The informers only the controllers read are let go (Deployments: no one else watches them).
    assert.equal(await watchersOf(sim, 'Deployment'), 0);
    const client = sim.client();
    await client.create(Resources.pods, 'default', {
      metadata: { name: 'bare' },
      spec: { containers: [{ name: 'c', image: 'nginx' }] },
    });
    let pod: KubeObject = await client.get(Resources.pods, 'default', 'bare');
    for (let i = 0; i < 30; i++) {
      await clock.advance(1000);
      pod = await client.get(Resources.pods, 'default', 'bare');
      if ((pod.status as { phase?: unknown }).phase === 'Running') break;
    }
    assert.equal((pod.status as { phase?: unknown }).phase, 'Running');
    assert.ok((pod.spec as { nodeName?: unknown }).nodeName);
  });
});

test('a component stopping takes only its own handlers away; one that throws does not keep others from hearing', async (t) => {
  const cluster = await Cluster.start({ clock: 'virtual', seed: 1 });
  t.after(() => cluster.close());
  const clock = cluster.virtualClock!;
  const client = new InProcessClient(cluster);
  const failures: string[] = [];
  const shared = new SharedInformers(client, cluster.clock, (gvr, err) =>
    failures.push(`${gvr.resource}: ${(err as Error).message}`),
  );
  t.after(() => shared.stop());
  const a = shared.component();
  const b = shared.component();
  const heardA: string[] = [];
  const heardB: string[] = [];
  a.for(Resources.configmaps).addEventHandler({
    add: (o) => {
      heardA.push(o.metadata.name!);
      throw new Error('a handler that fails');
    },
  });
  b.for(Resources.configmaps).addEventHandler({ add: (o) => heardB.push(o.metadata.name!) });
  let cacheTold = 0;
  a.for(Resources.configmaps).addCacheIndex({ changed: () => cacheTold++ });
  await Promise.all([a.start(), b.start()]);
  const configmaps = cluster.store.watcherCount('/configmaps');
  assert.equal(configmaps, 1, 'one watch for both');

  await client.create(Resources.configmaps, 'default', { metadata: { name: 'one' } });
  await clock.settle();
  assert.ok(heardA.includes('one'));
  assert.ok(heardB.includes('one'), 'b heard it though a threw');
  assert.deepEqual(failures, ['configmaps: a handler that fails']);

  a.stop();
  const toldBefore = cacheTold;
  await client.create(Resources.configmaps, 'default', { metadata: { name: 'two' } });
  await clock.settle();
  assert.ok(!heardA.includes('two'), 'a stopped: its handler is gone');
  assert.equal(cacheTold, toldBefore, 'and its cache index');
  assert.ok(heardB.includes('two'));
  assert.equal(cluster.store.watcherCount('/configmaps'), 1, 'b still holds the informer');
  b.stop();
  assert.equal(cluster.store.watcherCount('/configmaps'), 0, 'the last holder gone, the watch ends');
});
