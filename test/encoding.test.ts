import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Cluster } from '../src/cluster/cluster.js';
import { jsonOf, listBody, splicedJson } from '../src/storage/encoding.js';
import { compactObject, isInterned } from '../src/storage/compact.js';
import type { KubeObject } from '../src/api/types.js';

test('a short list body is its JSON, byte for byte, whatever the characters', () => {
  const head = { apiVersion: 'v1', kind: 'ConfigMapList', metadata: { resourceVersion: '7' } };
  const texts = ['', 'plain', 'é', '日本語', '😀 emoji', '\u0000\u001f"\\', 'x'.repeat(5000)];
  for (const count of [0, 1, texts.length]) {
    const items = texts
      .slice(0, count)
      .map(
        (t, i) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}` }, data: { t } }) as KubeObject,
      );
    const body = listBody(head, items);
    assert.ok(Buffer.isBuffer(body));
    assert.deepEqual(
      body,
      // With the newline Go's json.Encoder ends every answer with.
      Buffer.from(
        `${JSON.stringify({ kind: head.kind, apiVersion: head.apiVersion, metadata: head.metadata, items })}\n`,
      ),
    );
  }
});

/** JSON-shaped values and the things JSON.stringify treats specially: undefined, NaN, -0, Infinity, escapes, Dates. */
const oddValue = fc.oneof(
  fc.constantFrom(
    undefined,
    null,
    Number.NaN,
    -0,
    Infinity,
    -Infinity,
    1e21,
    '\u0000"\\\ud800x',
    '日本😀',
    () => 1,
    Symbol('s'),
  ),
  fc.date({ noInvalidDate: true }),
  fc.string({ maxLength: 8 }),
  fc.double(),
);
const anyValue = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, oddValue, tie('node')),
  node: fc.oneof(
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 6 }), tie('value'), { maxKeys: 5 }),
  ),
})).value;

test('a stored object serialised with its interned parts spliced in is JSON.stringify of it, byte for byte', () => {
  // Objects of one template, stored one after another, share parts (compactObject); some parts are their own.
  const template = fc.record({ spec: anyValue, status: anyValue, shared: anyValue });
  const own = fc.record(
    {
      metadata: fc.dictionary(fc.string({ maxLength: 6 }), anyValue, { maxKeys: 4 }),
      spec: anyValue,
      status: anyValue,
      extra: anyValue,
    },
    { requiredKeys: [] },
  );
  fc.assert(
    fc.property(template, fc.array(own, { minLength: 1, maxLength: 4 }), (shape, owns) => {
      for (const mine of [...owns, ...owns]) {
        const obj = {
          ...structuredCloneJsonish(shape),
          ...mine,
          status: { ...asRecord(shape.status), ...asRecord(mine.status) },
        } as Record<string, unknown>;
        compactObject(obj);
        assert.equal(splicedJson(obj), JSON.stringify(obj));
        assert.equal(jsonOf(obj), JSON.stringify(obj));
      }
    }),
    { numRuns: 300 },
  );
});

test('stored Pods and Events serialise as JSON.stringify of them', async () => {
  const cluster = await Cluster.start({ clock: 'virtual', seed: 4 });
  try {
    const pods = cluster.kind('', 'v1', 'pods');
    const events = cluster.kind('', 'v1', 'events');
    const template = {
      containers: [
        { name: 'web', image: 'nginx:1.27', ports: [{ containerPort: 80 }], resources: { requests: { cpu: '10m' } } },
      ],
      tolerations: [{ key: 'k', operator: 'Exists' }],
    };
    for (let i = 0; i < 20; i++) {
      const pod = await cluster.api.create(pods, 'default', {
        metadata: { name: `web-${i}`, labels: { app: 'web' } },
        spec: { nodeName: `node-${i % 3}`, ...structuredClone(template) },
      });
      cluster.api.create(events, 'default', {
        metadata: { name: `web-${i}.1` },
        involvedObject: { kind: 'Pod', namespace: 'default', name: `web-${i}`, uid: pod.metadata.uid },
        reason: 'Scheduled',
        message: `Successfully assigned default/web-${i} to node-${i % 3}`,
        type: 'Normal',
        source: { component: 'default-scheduler' },
      });
    }
    const stored = [...cluster.api.list(pods, 'default', {}).items, ...cluster.api.list(events, 'default', {}).items];
    assert.ok(
      stored.every((o) => o.kind === 'Event' || isInterned((o.spec as { containers: object[] }).containers)),
      'the pods share their containers',
    );
    for (const obj of stored) assert.equal(splicedJson(obj), JSON.stringify(obj));
  } finally {
    await cluster.close();
  }
});

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** A copy that keeps undefined, functions, symbols and Dates (structuredClone refuses functions and symbols). */
function structuredCloneJsonish<T>(value: T): T {
  if (typeof value !== 'object' || value === null || value instanceof Date) return value;
  if (Array.isArray(value)) return value.map(structuredCloneJsonish) as T;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, structuredCloneJsonish(v)])) as T;
}
