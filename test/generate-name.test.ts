import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Cluster } from '../src/cluster/cluster.js';

test('generateName: a taken name is drawn again (RetryGenerateName), and long bases are cut to 58 characters', async (t) => {
  const cluster = await Cluster.start({ clock: 'virtual', seed: 1 });
  t.after(() => cluster.close());
  const configmaps = cluster.kind('', 'v1', 'configmaps');
  const suffixes = ['aaaaa', 'aaaaa', 'bbbbb'];
  cluster.random.alphanumeric = () => suffixes.shift() ?? 'zzzzz';
  const first = await cluster.api.create(configmaps, 'default', { metadata: { generateName: 'web-' } });
  const second = await cluster.api.create(configmaps, 'default', { metadata: { generateName: 'web-' } });
  assert.deepEqual([first.metadata.name, second.metadata.name], ['web-aaaaa', 'web-bbbbb']);
  const long = await cluster.api.create(configmaps, 'default', { metadata: { generateName: `${'x'.repeat(70)}-` } });
  assert.equal(long.metadata.name, `${'x'.repeat(58)}zzzzz`);
});
