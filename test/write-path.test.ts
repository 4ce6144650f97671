import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { leavesOf, managedFieldsAfterUpdate, toFieldsV1, type WriteContext } from '../src/api/managed-fields.js';
import { schemaNameForKind } from '../src/api/schema/schema.js';
import type { KubeObject } from '../src/api/types.js';

/**
 * The create path's shortcuts must give what the general path gives: a create's managedFields are built in one
 * walk instead of from leaf paths, so they are checked here against toFieldsV1(leavesOf(…)).
 */
const objects: KubeObject[] = [
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-', labels: { z: '1', a: '2' }, annotations: { note: 'x' }, finalizers: ['b', 'a'], uid: 'ignored', resourceVersion: '5' },
    spec: {
      containers: [
        {
          name: 'web',
          image: 'nginx',
          ports: [{ containerPort: 8080, name: 'http' }, { containerPort: 53, protocol: 'UDP' }],
          env: [{ name: 'Z', value: '1' }, { name: 'A', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
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
    spec: { replicas: 2, selector: { matchLabels: { app: 'd' } }, template: { metadata: { labels: { app: 'd' } }, spec: { containers: [{ name: 'c', image: 'i' }] } } },
    status: { replicas: 1 },
  },
  { apiVersion: 'v1', kind: 'Service', metadata: { name: 's' }, spec: { ports: [{ port: 80, protocol: 'UDP' }, { port: 80 }], selector: { app: 's' } } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', labels: { team: 'x' } }, data: { 'b.txt': '1', 'a.txt': '2' }, binaryData: {} },
  // A kind without a schema: every map is a plain structure.
  { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' }, spec: { b: { y: 1, x: [1, 2] }, a: null, c: {} } },
];

function context(obj: KubeObject, hasStatus: boolean, subresource?: string): WriteContext {
  const [group, version] = obj.apiVersion!.includes('/') ? obj.apiVersion!.split('/') : ['', obj.apiVersion!];
  return { manager: 'tester', apiVersion: obj.apiVersion!, time: '2025-01-01T00:00:00Z', typeName: schemaNameForKind(group!, version!, obj.kind!), hasStatus, subresource };
}

describe('write path shortcuts', () => {
  test("a create's managedFields entry owns exactly the general path's field set, in sorted order", () => {
    for (const obj of objects) {
      for (const hasStatus of [true, false]) {
        for (const subresource of [undefined, 'status']) {
          const ctx = context(obj, hasStatus, subresource);
          const entries = managedFieldsAfterUpdate(undefined, obj, undefined, ctx);
          const leaves = leavesOf(structuredClone(obj), ctx.typeName, subresource === 'status' ? 'status' : 'main', hasStatus);
          const where = `${obj.kind}/${obj.metadata.name ?? obj.metadata.generateName} hasStatus=${hasStatus} subresource=${subresource}`;
          if (leaves.size === 0) {
            assert.deepEqual(entries, [], where);
            continue;
          }
          assert.equal(entries.length, 1, where);
          // JSON text, so that key order counts too: fieldsV1 is served sorted, as structured-merge-diff writes it.
          assert.equal(JSON.stringify(entries[0]!.fieldsV1), JSON.stringify(sortedDeep(toFieldsV1(leaves.keys()))), where);
          assert.equal(entries[0]!.operation, 'Update');
          assert.equal(entries[0]!.manager, 'tester');
        }
      }
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

function sortedDeep(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const record = value as Record<string, unknown>;
  return Object.fromEntries(Object.keys(record).sort().map((k) => [k, sortedDeep(record[k])]));
}
