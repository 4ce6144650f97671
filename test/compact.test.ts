import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { Cluster } from '../src/cluster/cluster.js';
import { compactObject } from '../src/storage/compact.js';

test('compacting a stored object leaves every value as it was', () => {
  const name = 'pod';
  const obj = {
    metadata: {
      name: `${name}-${'x'.repeat(20)}`,
      labels: { a: 'b', long: ['0x10', String(12345678901234)].join(' ') },
    },
    spec: { list: [`${name}: ${'1e3'.repeat(5)}`, 7, null, true, { deep: [['  42  ']] }], empty: '' },
  };
  const copy = structuredClone(obj);
  compactObject(obj);
  assert.deepEqual(obj, copy);
  assert.equal(JSON.stringify(obj), JSON.stringify(copy));
});

test('parts two stored objects have alike are one frozen object; their own parts and metadata are not', () => {
  const pod = (n: number, node: string): Record<string, unknown> => ({
    metadata: { name: `p${n}`, labels: { app: 'web' } },
    spec: {
      nodeName: node,
      containers: [{ name: 'app', image: 'nginx', ports: [{ containerPort: 80 }] }],
      securityContext: {},
    },
    status: { podIP: `10.0.0.${n}`, conditions: [{ type: 'Ready', status: 'True' }] },
  });
  const a = pod(1, 'n1');
  const b = pod(2, 'n1');
  const c = pod(3, 'n2');
  for (const o of [a, b, c]) compactObject(o);
  const spec = (o: Record<string, unknown>): Record<string, unknown> => o.spec as Record<string, unknown>;
  assert.equal(a.spec, b.spec);
  assert.notEqual(a.spec, c.spec);
  assert.equal(spec(a).containers, spec(c).containers);
  assert.ok(Object.isFrozen(a.spec));
  assert.notEqual(a.status, b.status);
  assert.equal((a.status as { conditions: unknown }).conditions, (c.status as { conditions: unknown }).conditions);
  assert.equal((a.metadata as { labels: unknown }).labels, (b.metadata as { labels: unknown }).labels);
  assert.notEqual(a.metadata, b.metadata);
  assert.ok(!Object.isFrozen(a.metadata) && !Object.isFrozen(a));
  assert.deepEqual(c, pod(3, 'n2'));
});

test('nodes alike in text but not in value or order stay apart', () => {
  const objs = [
    { v: 1 },
    { v: '1' },
    { v: true },
    { v: 'true' },
    { v: null },
    { v: 'null' },
    { a: 1, b: 2 },
    { b: 2, a: 1 },
    { 'a:s1:b': 1 },
    { a: 's1:b1' },
  ];
  const stored = objs.map((o) => ({ metadata: { name: 'x' }, spec: structuredClone(o) }));
  const again = objs.map((o) => ({ metadata: { name: 'y' }, spec: structuredClone(o) }));
  for (const o of [...stored, ...again]) compactObject(o);
  for (let i = 0; i < objs.length; i++) {
    assert.deepEqual(stored[i]!.spec, objs[i]);
    assert.equal(JSON.stringify(stored[i]!.spec), JSON.stringify(objs[i]));
    assert.equal(again[i]!.spec, stored[i]!.spec);
    for (let j = 0; j < i; j++) assert.notEqual(stored[j]!.spec, stored[i]!.spec);
  }
});

test('an update keeps what it shares with the stored version, and a frozen part of another object is left alone', () => {
  const stored = { metadata: { name: 'a' }, spec: { x: { y: 1 } }, status: { phase: 'Pending' } };
  compactObject(stored);
  const foreign = Object.freeze({ z: 1 });
  const next = { ...stored, status: { phase: 'Running', extra: foreign } };
  compactObject(next, stored);
  assert.equal(next.spec, stored.spec);
  assert.equal(next.status.extra, foreign);
  const again = { metadata: { name: 'b' }, status: { phase: 'Running', extra: foreign } };
  compactObject(again);
  assert.equal(again.status, next.status, 'a frozen part counts as shared: its parent is interned');
  assert.deepEqual(next.status, { phase: 'Running', extra: { z: 1 } });
});

test('the store shares alike parts for Pods and Events only; other kinds keep their own objects', async () => {
  const cluster = await Cluster.start({ clock: 'virtual', seed: 2 });
  try {
    const pods = cluster.kind('', 'v1', 'pods');
    const configmaps = cluster.kind('', 'v1', 'configmaps');
    const pod = (name: string): KubeObject => ({
      metadata: { name },
      spec: { containers: [{ name: 'web', image: 'nginx:1.27', ports: [{ containerPort: 80 }] }] },
    });
    const a = await cluster.api.create(pods, 'default', pod('a'));
    const b = await cluster.api.create(pods, 'default', pod('b'));
    const containers = (p: KubeObject): unknown => (p.spec as { containers: unknown[] }).containers[0];
    assert.equal(containers(a), containers(b), 'one shared container for a template');
    const cm = (name: string): KubeObject => ({ metadata: { name }, data: { mode: 'fast', level: '3' } });
    const x = await cluster.api.create(configmaps, 'default', cm('x'));
    const y = await cluster.api.create(configmaps, 'default', cm('y'));
    assert.notEqual(x.data, y.data, 'ConfigMaps are not worth the cost of sharing');
    assert.deepEqual(x.data, y.data);
  } finally {
    await cluster.close();
  }
});

test('a node is shared with the one lately stored at its place only when alike member by member, in order', () => {
  const store = (name: string, spec: unknown): Record<string, unknown> => {
    const o = { metadata: { name }, spec: structuredClone(spec) };
    compactObject(o);
    return o;
  };
  // Written one after another at the same place ('spec' and its list's items), as a template's pods are.
  const specs: unknown[] = [
    { list: [{ a: 1 }, { b: 2 }] },
    { list: [{ a: 1 }, { b: 2 }, { c: 3 }] },
    { list: [{ a: 1 }] },
    { list: [{ a: 1, b: undefined }] },
    { list: [{ b: 2 }, { a: 1 }] },
    { list: [{ a: Number.NaN }] },
    { list: [{ a: -0 }] },
  ];
  const first = specs.map((s, i) => store(`x${i}`, s));
  const again = specs.map((s, i) => store(`y${i}`, s));
  for (let i = 0; i < specs.length; i++) {
    assert.equal(JSON.stringify(first[i]!.spec), JSON.stringify(specs[i]));
    assert.deepEqual(
      Object.keys((first[i]!.spec as { list: object[] }).list[0]!),
      Object.keys((specs[i] as { list: object[] }).list[0]!),
    );
    assert.equal(again[i]!.spec, first[i]!.spec, `spec ${i} is shared with its twin`);
    for (let j = 0; j < i; j++) assert.notEqual(first[j]!.spec, first[i]!.spec, `specs ${j} and ${i} stay apart`);
  }
  // Interleaved writes of five different parts at one place still find their twins.
  const kinds = [1, 2, 3, 4, 5].map((n) => ({ kind: n }));
  const a = kinds.map((k, i) => store(`a${i}`, k));
  const b = kinds.map((k, i) => store(`b${i}`, k));
  for (let i = 0; i < kinds.length; i++) {
    assert.equal(b[i]!.spec, a[i]!.spec);
    assert.deepEqual(b[i]!.spec, kinds[i]);
  }
});
