import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { startSimulator } from '../src/cluster/simulator.js';

// What a /status write may change besides status, kind by kind as kube-apiserver's status strategies decide:
// pods/status keeps the labels, annotations and finalizers it is sent and resets spec and ownerReferences
// (podStatusStrategy); deployments/status keeps annotations but not labels (deploymentStatusStrategy).
test('pods/status keeps labels, annotations and finalizers, not spec or ownerReferences; deployments/status keeps no labels', async () => {
  const sim = await startSimulator({ clock: 'virtual', seed: 4, nodes: 0, controllers: '-*' });
  const { cluster } = sim;
  const pods = cluster.kind('', 'v1', 'pods');
  const deployments = cluster.kind('apps', 'v1', 'deployments');
  try {
    const owner = {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      name: 'web-1',
      uid: '00000000-0000-4000-8000-000000000001',
      controller: true,
    };
    const pod = await cluster.api.create(pods, 'default', {
      metadata: { name: 'web', labels: { app: 'web' }, ownerReferences: [owner] },
      spec: { containers: [{ name: 'c', image: 'nginx:1' }] },
    });
    const sent: KubeObject = {
      ...pod,
      metadata: {
        ...pod.metadata,
        labels: { app: 'web', probed: 'yes' },
        annotations: { 'example.com/note': 'seen' },
        finalizers: ['example.com/hold'],
        ownerReferences: [],
      },
      spec: { ...(pod.spec as object), containers: [{ name: 'c', image: 'nginx:2' }] },
      status: { phase: 'Running' },
    };
    const updated = await cluster.api.update(pods, 'default', 'web', sent, { subresource: 'status' });
    assert.equal((updated.status as { phase: string }).phase, 'Running');
    assert.deepEqual(updated.metadata.labels, { app: 'web', probed: 'yes' });
    assert.deepEqual(updated.metadata.annotations, { 'example.com/note': 'seen' });
    assert.deepEqual(updated.metadata.finalizers, ['example.com/hold']);
    assert.deepEqual(
      updated.metadata.ownerReferences,
      [owner],
      'ownerReferences are not the status endpoint’s to change',
    );
    assert.equal(
      (updated.spec as { containers: Array<{ image: string }> }).containers[0]!.image,
      'nginx:1',
      'spec is reset',
    );
    assert.deepEqual(
      cluster.api.list(pods, 'default', { labelSelector: 'probed=yes' }).items.map((p) => p.metadata.name),
      ['web'],
      'the new label is indexed',
    );

    const deployment = await cluster.api.create(deployments, 'default', {
      metadata: { name: 'web', labels: { app: 'web' } },
      spec: {
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image: 'nginx:1' }] } },
      },
    });
    const status = await cluster.api.update(
      deployments,
      'default',
      'web',
      {
        ...deployment,
        metadata: {
          ...deployment.metadata,
          labels: { app: 'changed' },
          annotations: { 'deployment.kubernetes.io/revision': '1' },
        },
        status: { replicas: 0 },
      },
      { subresource: 'status' },
    );
    assert.deepEqual(status.metadata.labels, { app: 'web' });
    assert.equal(status.metadata.annotations?.['deployment.kubernetes.io/revision'], '1');
    assert.equal(status.metadata.generation, deployment.metadata.generation, 'no generation bump');
  } finally {
    await sim.close();
  }
});
