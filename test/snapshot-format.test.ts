import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  forSnapshot,
  parseSnapshot,
  relinkOwners,
  skippedObject,
  SnapshotError,
  yamlDocuments,
} from '../src/api/snapshot.js';
import type { KubeObject } from '../src/api/types.js';

test('yamlDocuments reads JSON documents with JSON.parse and the rest as YAML, split at --- lines', () => {
  const text = [
    'apiVersion: kube-sim.dev/v1alpha1',
    'kind: Snapshot',
    '---',
    '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"x":"---"}}',
    '--- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}',
    '---',
    '# only a comment',
    '---',
    'apiVersion: v1',
    'kind: ConfigMap',
    'metadata: {name: c}',
    'data:',
    '  script: |',
    '    ---',
    '    echo hi',
    '...',
  ].join('\n');
  const docs = yamlDocuments(text, 'f') as KubeObject[];
  assert.deepEqual(
    docs.map((d) => d.metadata?.name ?? d.kind),
    ['Snapshot', 'a', 'b', 'c'],
  );
  assert.equal((docs[3] as unknown as { data: { script: string } }).data.script, '---\necho hi\n');
  assert.throws(() => yamlDocuments('a: [\n', 'bad.yaml'), /bad\.yaml: document 1/);
});

test('parseSnapshot unpacks Lists, refuses objects without kind or name, and a header with a bad time', () => {
  const list = parseSnapshot(
    'apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n',
    'list.yaml',
  );
  assert.equal(list.objects.length, 1);
  assert.equal(list.header.time, '', 'no header: no time');
  assert.throws(() => parseSnapshot('kind: Pod\nmetadata: {name: x}\n', 'f'), SnapshotError);
  assert.throws(() => parseSnapshot('apiVersion: v1\nkind: Pod\nmetadata: {}\n', 'f'), /Pod without metadata.name/);
  assert.throws(
    () => parseSnapshot('apiVersion: kube-sim.dev/v1alpha1\nkind: Snapshot\ntime: yesterday\n', 'f'),
    /not an RFC 3339 time/,
  );
});

test('forSnapshot drops what belongs to the source and keeps what a restore needs', () => {
  const pod: KubeObject = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'p',
      namespace: 'd',
      uid: 'u1',
      resourceVersion: '9',
      generation: 1,
      creationTimestamp: '2025-01-01T00:00:00Z',
      managedFields: [{ manager: 'kubectl' }],
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'u0', controller: true }],
    },
    status: { phase: 'Running' },
  };
  const kept = forSnapshot(pod);
  assert.deepEqual(kept.metadata, {
    name: 'p',
    namespace: 'd',
    generation: 1,
    creationTimestamp: '2025-01-01T00:00:00Z',
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', controller: true }],
  });
  assert.deepEqual(kept.status, { phase: 'Running' });
  assert.deepEqual(forSnapshot(pod, { keepManagedFields: true }).metadata.managedFields, [{ manager: 'kubectl' }]);
  assert.equal(pod.metadata.uid, 'u1', 'the input is not changed');
  const pv = forSnapshot({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: 'pv' },
    spec: { claimRef: { kind: 'PersistentVolumeClaim', namespace: 'd', name: 'c', uid: 'x', resourceVersion: '3' } },
  });
  assert.deepEqual((pv.spec as { claimRef: unknown }).claimRef, {
    kind: 'PersistentVolumeClaim',
    namespace: 'd',
    name: 'c',
  });
});

test('skippedObject leaves out what every cluster makes itself', () => {
  const obj = (metadata: KubeObject['metadata'], extra: Record<string, unknown> = {}): KubeObject => ({
    metadata,
    ...extra,
  });
  assert.ok(skippedObject('services', obj({ name: 'kubernetes', namespace: 'default' })));
  assert.equal(skippedObject('services', obj({ name: 'kubernetes', namespace: 'shop' })), undefined);
  assert.ok(skippedObject('configmaps', obj({ name: 'kube-root-ca.crt', namespace: 'x' })));
  assert.ok(
    skippedObject('secrets', obj({ name: 't', namespace: 'x' }, { type: 'kubernetes.io/service-account-token' })),
  );
  assert.ok(
    skippedObject(
      'clusterroles.rbac.authorization.k8s.io',
      obj({ name: 'admin', labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' } }),
    ),
  );
  assert.equal(skippedObject('clusterroles.rbac.authorization.k8s.io', obj({ name: 'mine' })), undefined);
  assert.ok(skippedObject('priorityclasses.scheduling.k8s.io', obj({ name: 'system-node-critical' })));
});

test('relinkOwners gives new uids and points references at them, by source uid or by kind and name', () => {
  let n = 0;
  const uid = (): string => `new-${++n}`;
  const objects: KubeObject[] = [
    { apiVersion: 'apps/v1', kind: 'ReplicaSet', metadata: { name: 'rs', namespace: 'd' } },
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', uid: 'old-node' } },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'p',
        namespace: 'd',
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: '' },
          { apiVersion: 'v1', kind: 'Node', name: 'renamed-in-file', uid: 'old-node' },
          { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'gone', uid: '' },
        ],
      },
    },
    { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'c', namespace: 'd' } },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: 'pv' },
      spec: { claimRef: { kind: 'PersistentVolumeClaim', namespace: 'd', name: 'c' } },
    },
  ];
  const { objects: out, notes } = relinkOwners(objects, uid);
  assert.deepEqual(
    out.map((o) => o.metadata.uid),
    ['new-1', 'new-2', 'new-3', 'new-4', 'new-5'],
  );
  assert.deepEqual(
    out[2]!.metadata.ownerReferences!.map((r) => [r.name, r.uid]),
    [
      ['rs', 'new-1'],
      ['renamed-in-file', 'new-2'],
    ],
  );
  assert.equal((out[4]!.spec as { claimRef: { uid: string } }).claimRef.uid, 'new-4');
  assert.deepEqual(notes, ['removed 1 owner reference to ReplicaSet objects the snapshot does not hold (gone)']);
  assert.equal(objects[2]!.metadata.uid, undefined, 'the input is not changed');
});
