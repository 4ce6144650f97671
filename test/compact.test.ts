import assert from 'node:assert/strict';
import { test } from 'node:test';
import { flattenStrings } from '../src/storage/compact.js';

test('flattening the strings of a stored object leaves every value as it was', () => {
  const name = 'pod';
  const obj = {
    metadata: { name: `${name}-${'x'.repeat(20)}`, labels: { a: 'b', long: ['0x10', String(12345678901234)].join(' ') } },
    spec: { list: [`${name}: ${'1e3'.repeat(5)}`, 7, null, true, { deep: [['  42  ']] }], empty: '' },
  };
  const copy = structuredClone(obj);
  flattenStrings(obj);
  assert.deepEqual(obj, copy);
});
