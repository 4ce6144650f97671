import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseFieldSelector, parseLabelSelector } from '../src/api/selectors.js';
import type { KubeObject } from '../src/api/types.js';
import { MemoryStore } from '../src/storage/memory-store.js';

test('selected lists stay exact while an index entry grows from one key to many and shrinks back', () => {
  const store = new MemoryStore();
  const fieldsOf = (o: KubeObject) => (f: string) =>
    f === 'spec.nodeName' ? String((o.spec as { nodeName: string }).nodeName) : undefined;
  store.register({
    key: '/pods',
    groupResource: { group: '', resource: 'pods' },
    indexedFields: ['spec.nodeName'],
    fieldsOf,
  });
  const pod = (i: number, group: string): KubeObject => ({
    metadata: { name: `p${String(i).padStart(2, '0')}`, namespace: 'ns', labels: { group } },
    spec: { nodeName: `n${group}` },
  });
  const names = (label: string, field = ''): string[] =>
    store
      .list('/pods', { label: parseLabelSelector(label), field: parseFieldSelector(field, new Set(['spec.nodeName'])) })
      .items.map((o) => o.metadata.name!);
  const expected = new Set<string>();
  for (let i = 0; i < 20; i++) {
    store.create('/pods', pod(i, 'a'));
    store.create('/pods', pod(100 + i, `solo${i}`));
    expected.add(`p${String(i).padStart(2, '0')}`);
    assert.deepEqual(names('group=a'), [...expected].sort());
    assert.deepEqual(names('', 'spec.nodeName=na'), [...expected].sort());
  }
  for (let i = 19; i >= 0; i--) {
    store.delete('/pods', 'ns', `p${String(i).padStart(2, '0')}`);
    expected.delete(`p${String(i).padStart(2, '0')}`);
    assert.deepEqual(names('group=a'), [...expected].sort());
    assert.deepEqual(names('group=a', 'spec.nodeName=na'), [...expected].sort());
  }
  assert.deepEqual(names('group=solo7'), ['p107']);
  store.guaranteedUpdate('/pods', 'ns', 'p107', {}, (cur) => ({
    ...cur,
    metadata: { ...cur.metadata, labels: { group: 'solo8' } },
  }));
  assert.deepEqual(names('group=solo7'), []);
  assert.deepEqual(names('group=solo8'), ['p107', 'p108']);
});
