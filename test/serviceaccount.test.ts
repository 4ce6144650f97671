import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startSimulator } from '../src/cluster/simulator.js';

test('every active namespace gets a ServiceAccount named default, made again when it is deleted', async () => {
  const sim = await startSimulator({ clock: 'virtual', seed: 1, controllers: 'serviceaccount,namespace' });
  const { cluster } = sim;
  const clock = cluster.virtualClock!;
  const namespaces = cluster.kind('', 'v1', 'namespaces');
  const accounts = cluster.kind('', 'v1', 'serviceaccounts');
  try {
    await clock.settle();
    assert.ok(cluster.api.get(accounts, 'default', 'default'), 'the default namespace has one from the start');

    cluster.api.create(namespaces, undefined, { metadata: { name: 'team-a' } });
    await clock.settle();
    const made = cluster.api.get(accounts, 'team-a', 'default');
    assert.equal(made.metadata.name, 'default');

    cluster.api.delete(accounts, 'team-a', 'default');
    await clock.settle();
    const again = cluster.api.get(accounts, 'team-a', 'default');
    assert.notEqual(again.metadata.uid, made.metadata.uid, 'a new account, not the old one');

    // Other accounts are the user's to delete: nothing brings them back.
    cluster.api.create(accounts, 'team-a', { metadata: { name: 'builder' } });
    cluster.api.delete(accounts, 'team-a', 'builder');
    await clock.settle();
    assert.deepEqual(
      cluster.api.list(accounts, 'team-a', {}).items.map((a) => a.metadata.name),
      ['default'],
    );
  } finally {
    await sim.close();
  }
});
