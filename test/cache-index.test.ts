import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { Resources } from '../src/client/client.js';
import { SharedInformer } from '../src/client/informer.js';
import { Cluster } from '../src/cluster/cluster.js';
import { InProcessClient } from '../src/cluster/in-process-client.js';

const rv = (o: KubeObject | undefined): string => o?.metadata.resourceVersion ?? '-';

test('a cache index is told of every cache change, with the versions before and after, ahead of the handlers', async (t) => {
  const cluster = await Cluster.start({ clock: 'virtual', seed: 1 });
  t.after(() => cluster.close());
  const clock = cluster.virtualClock!;
  const client = new InProcessClient(cluster);
  await client.create(Resources.configmaps, 'default', { metadata: { name: 'before' }, data: { a: '1' } });

  const informer = new SharedInformer(client, Resources.configmaps, cluster.clock);
  const told: string[] = [];
  informer.addCacheIndex({
    changed: (key, old, next) => told.push(`${key} ${rv(old)} -> ${rv(next)}`),
  });
  const handled: string[] = [];
  const seenFirst = (obj: KubeObject): void => {
    handled.push(obj.metadata.name!);
    assert.ok(
      told.some((line) => line.startsWith(`default/${obj.metadata.name}`)),
      'the index knew before the handler',
    );
  };
  informer.addEventHandler({ add: seenFirst, update: (_old, obj) => seenFirst(obj), delete: seenFirst });
  await informer.start();
  t.after(() => informer.stop());
  const first = informer.get('default', 'before')!;
  assert.deepEqual(told, [`default/before - -> ${rv(first)}`]);

  const created = await client.create(Resources.configmaps, 'default', { metadata: { name: 'x' }, data: {} });
  const updated = await client.update(Resources.configmaps, { ...created, data: { b: '2' } });
  await client.delete(Resources.configmaps, 'default', 'x');
  await clock.settle();
  assert.deepEqual(told.slice(1), [
    `default/x - -> ${rv(created)}`,
    `default/x ${rv(created)} -> ${rv(updated)}`,
    `default/x ${rv(updated)} -> -`,
  ]);
  assert.deepEqual(handled, ['before', 'x', 'x', 'x']);

  // An index added later is first told of what is cached already.
  const late: string[] = [];
  informer.addCacheIndex({ changed: (key, old, next) => late.push(`${key} ${rv(old)} -> ${rv(next)}`) });
  assert.deepEqual(late, [`default/before - -> ${rv(first)}`]);
});
