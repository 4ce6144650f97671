import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Cluster } from '../src/cluster/cluster.js';

test('events expire an hour after they were last written, like kube-apiserver --event-ttl', async () => {
  const cluster = await Cluster.start({ clock: 'virtual', seed: 1 });
  const clock = cluster.virtualClock!;
  const events = cluster.kind('', 'v1', 'events');
  const event = (name: string) => ({
    metadata: { name },
    involvedObject: { kind: 'Pod', name: 'p', namespace: 'default' },
    reason: 'Test',
    message: name,
    type: 'Normal',
  });
  cluster.api.create(events, 'default', event('first'));
  await clock.advance(30 * 60 * 1000);
  cluster.api.create(events, 'default', event('second'));
  // Rewriting "first" at 30 min postpones its expiry to 90 min.
  cluster.api.patch(events, 'default', 'first', 'merge', { count: 2 });
  await clock.advance(31 * 60 * 1000);
  assert.deepEqual(
    cluster.api
      .list(events, 'default', {})
      .items.map((e) => e.metadata.name)
      .sort(),
    ['first', 'second'],
  );
  await clock.advance(30 * 60 * 1000);
  assert.deepEqual(
    cluster.api.list(events, 'default', {}).items.map((e) => e.metadata.name),
    [],
  );
  await cluster.close();
});
