import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../src/api/errors.js';
import { parseFieldSelector, parseLabelSelector } from '../src/api/selectors.js';
import type { KubeObject } from '../src/api/types.js';
import { Resources } from '../src/client/client.js';
import { InProcessClient } from '../src/cluster/in-process-client.js';
import { startSimulator } from '../src/cluster/simulator.js';
import type { StoreEvent, WatchEventType } from '../src/storage/watch.js';

// The /status write path checks only what a status write can change (kube-apiserver's ValidatePodStatusUpdate:
// ObjectMeta update rules and status), takes an in-process body's own parts over without a copy, and moves only the index entries whose values changed. What clients see must not change.
test('a /status write: metadata errors as before, private copies of what it keeps, indexes and watches follow', async () => {
  const sim = await startSimulator({ clock: 'virtual', seed: 5, nodes: 0, controllers: '-*' });
  const { cluster } = sim;
  const pods = cluster.kind('', 'v1', 'pods');
  const client = new InProcessClient(cluster);
  try {
    const pod = await cluster.api.create(pods, 'default', {
      metadata: { name: 'web', labels: { app: 'web', track: 'a' }, finalizers: ['example.com/hold'] },
      spec: { containers: [{ name: 'c', image: 'nginx:1' }] },
    });
    const seen: string[] = [];
    const watch = cluster.store.watch(
      '/pods',
      cluster.store.currentRevision,
      { label: parseLabelSelector('track=a'), field: parseFieldSelector(undefined, new Set()) },
      {
        send: (type: WatchEventType, event: StoreEvent) => {
          seen.push(`${type} ${event.objectFor(type).metadata.labels?.track ?? '-'}`);
          return true;
        },
        close: () => undefined,
      },
    );

    // A bad label sent with a status write fails as it fails on create, and nothing is stored.
    const invalid = (body: KubeObject): ApiError => {
      try {
        cluster.api.update(pods, 'default', 'web', body, { subresource: 'status' });
      } catch (err) {
        if (err instanceof ApiError) return err;
        throw err;
      }
      assert.fail('the write was accepted');
    };
    const bad = invalid({
      ...pod,
      metadata: { ...pod.metadata, labels: { app: 'web', 'bad key!': 'x' } },
      status: { phase: 'Running' },
    });
    assert.equal(bad.code, 422);
    let createError: ApiError | undefined;
    try {
      cluster.api.create(pods, 'default', {
        metadata: { name: 'web', labels: { app: 'web', 'bad key!': 'x' } },
        spec: { containers: [{ name: 'c', image: 'nginx:1' }] },
      });
    } catch (err) {
      createError = err as ApiError;
    }
    assert.deepEqual(bad.details?.causes, createError?.details?.causes, 'the same causes as a create with that label');
    assert.equal(cluster.api.get(pods, 'default', 'web').metadata.resourceVersion, pod.metadata.resourceVersion);

    // The in-process caller hands its body over (WriteOptions.handOver): what it made is kept, not copied, and frozen
    // with the stored object under KUBE_SIM_FREEZE_OBJECTS=1, so that a writer that changed it later fails in tests.
    const current = await client.get(Resources.pods, 'default', 'web');
    const status = { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', message: 'handed over' }] };
    const labels = { app: 'web', track: 'b' };
    const written = await client.updateStatus(Resources.pods, {
      ...current,
      metadata: { ...current.metadata, labels },
      status,
    });
    const stored = cluster.api.get(pods, 'default', 'web');
    assert.deepEqual(stored.status, {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True', message: 'handed over' }],
    });
    assert.deepEqual(stored.metadata.labels, { app: 'web', track: 'b' });
    const storedConditions = (stored.status as { conditions: unknown[] }).conditions;
    assert.equal(storedConditions[0], status.conditions[0], 'the condition the writer made is the stored one');
    if (process.env.KUBE_SIM_FREEZE_OBJECTS === '1')
      assert.throws(() => {
        status.conditions[0]!.status = 'False';
      }, TypeError);
    assert.equal(written.spec, current.spec, 'the spec is the stored one, not a copy');
    // Parts of the body that are the stored object's own stay the stored ones: only what is new is copied.
    const before = cluster.api.get(pods, 'default', 'web');
    await client.updateStatus(Resources.pods, {
      ...before,
      status: { ...(before.status as Record<string, unknown>), phase: 'Succeeded' },
    });
    const after = cluster.api.get(pods, 'default', 'web');
    assert.equal((after.status as Record<string, unknown>).phase, 'Succeeded');
    assert.equal(
      (after.status as Record<string, unknown>).conditions,
      (before.status as Record<string, unknown>).conditions,
      'the unchanged conditions are shared',
    );

    // The label moved in the index, and the watcher of track=a saw the pod leave.
    const names = (selector: string): string[] =>
      cluster.api.list(pods, 'default', { labelSelector: selector }).items.map((p) => p.metadata.name!);
    assert.deepEqual(names('track=a'), []);
    assert.deepEqual(names('track=b'), ['web']);
    assert.deepEqual(names('app=web'), ['web']);
    assert.deepEqual(seen, ['DELETED a']);

    // Once the pod is being deleted, a status write may not add a finalizer.
    cluster.api.delete(pods, 'default', 'web', { gracePeriodSeconds: 0 });
    const deleting = cluster.api.get(pods, 'default', 'web');
    assert.ok(deleting.metadata.deletionTimestamp);
    const added = invalid({
      ...deleting,
      metadata: { ...deleting.metadata, finalizers: ['example.com/hold', 'example.com/more'] },
    });
    assert.equal(added.code, 422);
    assert.match(
      added.message,
      /no new finalizers can be added if the object is being deleted, found new finalizers \[\]string\{"example\.com\/more"\}/,
    );
    watch.stop();
  } finally {
    await sim.close();
  }
});
