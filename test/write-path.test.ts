import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { leavesOf, managedFieldsAfterUpdate, toFieldsV1, type WriteContext } from '../src/api/managed-fields.js';
import { schemaNameForKind } from '../src/api/schema/schema.js';
import type { KubeObject } from '../src/api/types.js';
import { Cluster } from '../src/cluster/cluster.js';
import { listJson, STREAMED_LIST_ITEMS } from '../src/storage/encoding.js';
import { buildServer } from '../src/server/server.js';

/**
 * The create path's shortcuts must give what the general path gives: a create's managedFields are built in one
 * walk instead of from leaf paths, so they are checked here against toFieldsV1(leavesOf(…)).
 */
const objects: KubeObject[] = [
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'web-',
      labels: { z: '1', a: '2' },
      annotations: { note: 'x' },
      finalizers: ['b', 'a'],
      uid: 'ignored',
      resourceVersion: '5',
    },
    spec: {
      containers: [
        {
          name: 'web',
          image: 'nginx',
          ports: [
            { containerPort: 8080, name: 'http' },
            { containerPort: 53, protocol: 'UDP' },
          ],
          env: [
            { name: 'Z', value: '1' },
            { name: 'A', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
          resources: { requests: { cpu: '100m' }, limits: {} },
          args: ['--a', '--b'],
        },
        { name: 'sidecar', image: 'busybox' },
      ],
      volumes: [{ name: 'config', configMap: { name: 'c' } }],
      tolerations: [],
      nodeSelector: {},
      securityContext: null,
    },
    status: { phase: 'Pending' },
  },
  // Two containers with one name (invalid, but the field set must still be the general path's).
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'dup' },
    spec: { containers: [{ name: 'b', image: 'z', tty: true }, { name: 'a' }, { name: 'b', args: ['x'], image: 'y' }] },
  },
  {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'd', ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'n', uid: 'u' }] },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: 'd' } },
      template: { metadata: { labels: { app: 'd' } }, spec: { containers: [{ name: 'c', image: 'i' }] } },
    },
    status: { replicas: 1 },
  },
  {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 's' },
    spec: { ports: [{ port: 80, protocol: 'UDP' }, { port: 80 }], selector: { app: 's' } },
  },
  {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'cm', labels: { team: 'x' } },
    data: { 'b.txt': '1', 'a.txt': '2' },
    binaryData: {},
  },
  // A kind without a schema: every map is a plain structure.
  {
    apiVersion: 'example.com/v1',
    kind: 'Widget',
    metadata: { name: 'w' },
    spec: { b: { y: 1, x: [1, 2] }, a: null, c: {} },
  },
];

function context(obj: KubeObject, hasStatus: boolean, subresource?: string): WriteContext {
  const [group, version] = obj.apiVersion!.includes('/') ? obj.apiVersion!.split('/') : ['', obj.apiVersion!];
  return {
    manager: 'tester',
    apiVersion: obj.apiVersion!,
    time: '2025-01-01T00:00:00Z',
    typeName: schemaNameForKind(group!, version!, obj.kind!),
    hasStatus,
    subresource,
  };
}

describe('write path shortcuts', () => {
  test("a create's managedFields entry owns exactly the general path's field set, in sorted order", () => {
    for (const obj of objects) {
      for (const hasStatus of [true, false]) {
        for (const subresource of [undefined, 'status']) {
          const ctx = context(obj, hasStatus, subresource);
          const entries = managedFieldsAfterUpdate(undefined, obj, undefined, ctx);
          const leaves = leavesOf(
            structuredClone(obj),
            ctx.typeName,
            subresource === 'status' ? 'status' : 'main',
            hasStatus,
          );
          const where = `${obj.kind}/${obj.metadata.name ?? obj.metadata.generateName} hasStatus=${hasStatus} subresource=${subresource}`;
          if (leaves.size === 0) {
            assert.deepEqual(entries, [], where);
            continue;
          }
          assert.equal(entries.length, 1, where);
          // JSON text, so that key order counts too: fieldsV1 is served sorted, as structured-merge-diff writes it.
          assert.equal(
            JSON.stringify(entries[0]!.fieldsV1),
            JSON.stringify(sortedDeep(toFieldsV1(leaves.keys()))),
            where,
          );
          assert.equal(entries[0]!.operation, 'Update');
          assert.equal(entries[0]!.manager, 'tester');
        }
      }
    }
  });

  test('stored objects of one template share their field sets (the store interns them), and a different one gets its own', async () => {
    const cluster = await Cluster.start({ seed: 3, clock: 'virtual' });
    try {
      cluster.api.create(cluster.kind('', 'v1', 'namespaces'), undefined, { metadata: { name: 'tries' } });
      // Deployments: a kind whose other parts the store does not share; Pods: one whose parts it does.
      for (const [kind, body] of [
        [cluster.kind('apps', 'v1', 'deployments'), objects[2]!],
        [cluster.kind('', 'v1', 'pods'), objects[0]!],
      ] as const) {
        const create = async (name: string, change?: (o: KubeObject) => void): Promise<Record<string, unknown>> => {
          const obj = structuredClone(body);
          obj.metadata = { ...obj.metadata, name, generateName: undefined, resourceVersion: undefined };
          change?.(obj);
          const stored = (await cluster.api.create(kind, 'tries', obj, { fieldManager: 'tester' })) as KubeObject;
          const entry = stored.metadata.managedFields?.[0] as { fieldsV1: Record<string, unknown> };
          return entry.fieldsV1['f:spec'] as Record<string, unknown>;
        };
        const a = await create('a');
        const b = await create('b');
        assert.equal(a, b, `${body.kind}: one f:spec node for both`);
        assert.ok(Object.isFrozen(a));
        const c = await create('c', (o) => {
          (o.spec as { paused?: boolean; hostNetwork?: boolean })[body.kind === 'Pod' ? 'hostNetwork' : 'paused'] =
            true;
        });
        assert.notEqual(c, a);
        const some = Object.keys(a).find((k) => typeof a[k] === 'object' && Object.keys(a[k] as object).length > 0)!;
        assert.equal(c[some], a[some], `${body.kind}: ${some} still shared`);
      }
    } finally {
      await cluster.close();
    }
  });

  test('toFieldsV1 sorts every level whatever order the paths come in', () => {
    const obj = objects[0]!;
    const ctx = context(obj, true);
    const paths = [...leavesOf(structuredClone(obj), ctx.typeName, 'main', true).keys()];
    const forward = JSON.stringify(toFieldsV1(paths));
    assert.equal(JSON.stringify(toFieldsV1([...paths].reverse())), forward);
    assert.equal(forward, JSON.stringify(sortedDeep(JSON.parse(forward))));
  });
});

describe('list bodies written straight from the cached JSON', () => {
  let cluster: Cluster;
  let close: () => Promise<void>;
  let url: string;
  const many = STREAMED_LIST_ITEMS + 37;
  before(async () => {
    cluster = await Cluster.start({ seed: 3, clock: 'virtual' });
    const namespaces = cluster.kind('', 'v1', 'namespaces');
    const configmaps = cluster.kind('', 'v1', 'configmaps');
    for (const ns of ['long', 'short']) cluster.api.create(namespaces, undefined, { metadata: { name: ns } });
    // Non-ASCII text takes more bytes than characters: the encoder must not cut it short or misjudge the length.
    for (let i = 0; i < many; i++)
      cluster.api.create(configmaps, 'long', {
        metadata: { name: `cm-${i}`, labels: { odd: String(i % 2) } },
        data: { text: `ünïcødé ✓ 𝄞 ${'x'.repeat(i % 700)}` },
      });
    for (let i = 0; i < 3; i++)
      cluster.api.create(configmaps, 'short', { metadata: { name: `cm-${i}` }, data: { text: '✓' } });
    const app = buildServer(cluster);
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    close = async () => {
      await app.close();
      await cluster.close();
    };
  });
  after(() => close?.());

  const expected = (namespace: string, labelSelector?: string): string => {
    const list = cluster.api.list(
      cluster.kind('', 'v1', 'configmaps'),
      namespace,
      labelSelector ? { labelSelector } : {},
    );
    // The body ends with the newline Go's json.Encoder writes after every answer.
    return `${listJson(list, list.items)}\n`;
  };

  test(`a list of more than ${STREAMED_LIST_ITEMS} items is streamed (chunked) and is the same JSON, byte for byte`, async () => {
    const res = await fetch(`${url}/api/v1/namespaces/long/configmaps`);
    assert.equal(res.status, 200);
    // As kube-apiserver sends it (a string body got fastify's "; charset=utf-8" added).
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.equal(res.headers.get('transfer-encoding'), 'chunked');
    assert.equal(res.headers.get('content-length'), null);
    const body = await res.text();
    assert.equal(body, expected('long'));
    assert.equal((JSON.parse(body) as { items: unknown[] }).items.length, many);
  });

  test('a shorter list is one body with its exact Content-Length', async () => {
    for (const [path, namespace, selector] of [
      ['/api/v1/namespaces/short/configmaps', 'short', undefined],
      ['/api/v1/namespaces/long/configmaps?labelSelector=odd%3D1&limit=500', 'long', undefined],
    ] as const) {
      const res = await fetch(`${url}${path}`);
      assert.equal(res.status, 200);
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(res.headers.get('content-type'), 'application/json');
      assert.equal(res.headers.get('content-length'), String(bytes.length));
      const parsed = JSON.parse(bytes.toString('utf8')) as { items: KubeObject[]; metadata: { continue?: string } };
      if (namespace === 'short') assert.equal(bytes.toString('utf8'), expected(namespace, selector));
      else {
        assert.equal(parsed.items.length, 500);
        assert.ok(parsed.items.every((o) => o.metadata.labels?.odd === '1'));
        assert.ok(parsed.metadata.continue);
      }
    }
  });

  test("an in-process create leaves the caller's object as it was (only HTTP bodies are taken over)", async () => {
    const mine = { metadata: { name: 'kept', labels: {} }, data: { a: '1' } };
    const before = structuredClone(mine);
    const created = await cluster.api.create(cluster.kind('', 'v1', 'configmaps'), 'short', mine, {
      fieldManager: 'tester',
      fieldValidation: 'Warn',
    });
    assert.deepEqual(mine, before);
    assert.notEqual(created, mine as unknown);
    assert.ok(created.metadata.managedFields);
  });
});

function sortedDeep(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const record = value as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(record)
      .sort()
      .map((k) => [k, sortedDeep(record[k])]),
  );
}
