import assert from 'node:assert/strict';
import { test } from 'node:test';
import { listBody } from '../src/server/encoding.js';
import type { KubeObject } from '../src/api/types.js';

test('a short list body is its JSON, byte for byte, whatever the characters', () => {
  const head = { apiVersion: 'v1', kind: 'ConfigMapList', metadata: { resourceVersion: '7' } };
  const texts = ['', 'plain', 'é', '日本語', '😀 emoji', '\u0000\u001f"\\', 'x'.repeat(5000)];
  for (const count of [0, 1, texts.length]) {
    const items = texts.slice(0, count).map((t, i) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}` }, data: { t } }) as KubeObject);
    const body = listBody(head, items);
    assert.ok(Buffer.isBuffer(body));
    assert.deepEqual(body, Buffer.from(JSON.stringify({ kind: head.kind, apiVersion: head.apiVersion, metadata: head.metadata, items })));
  }
});
