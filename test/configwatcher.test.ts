import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { startSimulator } from '../src/cluster/simulator.js';

// The config-watcher acts on data changes only: creating a ConfigMap, relabelling it or writing the same data
// again does nothing; a change of its data deletes the selected pods (the seed article) and rolls the workloads
// that follow it (Reloader), once per change.
test('config-watcher: pods deleted and workloads rolled on data changes, and on nothing else', async () => {
  const sim = await startSimulator({ clock: 'virtual', seed: 3, nodes: 0, controllers: 'configwatcher' });
  const { cluster } = sim;
  const clock = cluster.virtualClock!;
  const configmaps = cluster.kind('', 'v1', 'configmaps');
  const pods = cluster.kind('', 'v1', 'pods');
  const deployments = cluster.kind('apps', 'v1', 'deployments');
  const podNames = (): string[] =>
    cluster.api
      .list(pods, 'default', {})
      .items.map((p) => p.metadata.name!)
      .sort();
  const pod = (name: string, app: string): KubeObject => ({
    metadata: { name, labels: { app } },
    spec: { containers: [{ name: 'c', image: 'busybox' }] },
  });
  const envOf = (name: string): unknown => {
    const d = cluster.api.get(deployments, 'default', name);
    return (
      (d.spec as { template: { spec: { containers: Array<{ env?: unknown }> } } }).template.spec.containers[0]!.env ??
      []
    );
  };
  const writeData = async (data: Record<string, string>, labels: Record<string, string> = {}): Promise<void> => {
    const current = cluster.api.get(configmaps, 'default', 'app-config');
    cluster.api.update(configmaps, 'default', 'app-config', {
      ...current,
      metadata: { ...current.metadata, labels },
      data,
    });
    await clock.settle();
  };
  try {
    cluster.api.create(pods, 'default', pod('web-1', 'web'));
    cluster.api.create(pods, 'default', pod('db-1', 'db'));
    cluster.api.create(deployments, 'default', {
      metadata: { name: 'follower', annotations: { 'reloader.stakater.com/auto': 'true' } },
      spec: {
        selector: { matchLabels: { app: 'follower' } },
        template: {
          metadata: { labels: { app: 'follower' } },
          spec: { containers: [{ name: 'c', image: 'busybox', envFrom: [{ configMapRef: { name: 'app-config' } }] }] },
        },
      },
    });
    cluster.api.create(configmaps, 'default', {
      metadata: { name: 'app-config', annotations: { 'k8spatterns.io/podDeleteSelector': 'app=web' } },
      data: { mode: 'a' },
    });
    await clock.settle();
    assert.deepEqual(podNames(), ['db-1', 'web-1'], 'creating the ConfigMap deletes nothing');
    assert.deepEqual(envOf('follower'), [], 'creating the ConfigMap rolls nothing');

    await writeData({ mode: 'a' }, { touched: 'yes' });
    assert.deepEqual(podNames(), ['db-1', 'web-1'], 'a label change is no data change');
    assert.deepEqual(envOf('follower'), []);

    await writeData({ mode: 'b' }, { touched: 'yes' });
    assert.deepEqual(podNames(), ['db-1'], 'the data changed: the selected pod is deleted, the other kept');
    const rolled = envOf('follower') as Array<{ name: string; value: string }>;
    assert.equal(rolled.length, 1);
    assert.equal(rolled[0]!.name, 'STAKATER_APP_CONFIG_CONFIGMAP');
    assert.match(rolled[0]!.value, /^[0-9a-f]{40}$/);

    cluster.api.create(pods, 'default', pod('web-2', 'web'));
    await writeData({ mode: 'b' });
    assert.deepEqual(podNames(), ['db-1', 'web-2'], 'the same data again: nothing is deleted');
    assert.deepEqual(envOf('follower'), rolled, 'and nothing rolled');

    await writeData({ mode: 'c' });
    assert.deepEqual(podNames(), ['db-1']);
    const again = envOf('follower') as Array<{ name: string; value: string }>;
    assert.notEqual(again[0]!.value, rolled[0]!.value, 'a new hash for new data');
  } finally {
    await sim.close();
  }
});
