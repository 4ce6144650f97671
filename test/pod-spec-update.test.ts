import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ApiError } from '../src/api/errors.js';
import type { KubeObject } from '../src/api/types.js';
import { startSimulator } from '../src/cluster/simulator.js';

// A pod's spec is immutable but for images, activeDeadlineSeconds, tolerations and terminationGracePeriodSeconds
// (ValidatePodUpdate). Updates that leave the spec as it was — most pod writes: labels, annotations, finalizers —
// are accepted whatever order its keys come in; others get kube-apiserver's Forbidden.
test('pod updates: metadata changes pass, an image may change, other spec changes are Forbidden', async () => {
  const sim = await startSimulator({ clock: 'virtual', seed: 6, nodes: 0, controllers: '-*' });
  const { cluster } = sim;
  const pods = cluster.kind('', 'v1', 'pods');
  const spec = (o: KubeObject): Record<string, unknown> => o.spec as Record<string, unknown>;
  try {
    const pod = await cluster.api.create(pods, 'default', {
      metadata: { name: 'web' },
      spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'nginx:1' }] },
    });

    const labelled = await cluster.api.patch(pods, 'default', 'web', 'merge', {
      metadata: { labels: { seen: 'yes' }, finalizers: ['example.com/hold'] },
    });
    assert.equal(labelled.metadata.labels?.seen, 'yes');

    // The same spec with its keys in reverse order is the same spec.
    const reversed = Object.fromEntries(Object.entries(spec(labelled)).reverse());
    const put = await cluster.api.update(pods, 'default', 'web', {
      ...labelled,
      metadata: { ...labelled.metadata, annotations: { a: 'b' } },
      spec: reversed,
    });
    assert.equal(put.metadata.annotations?.a, 'b');

    const image = await cluster.api.patch(pods, 'default', 'web', 'strategic', {
      spec: { containers: [{ name: 'c', image: 'nginx:2' }] },
    });
    assert.equal((spec(image).containers as Array<{ image: string }>)[0]!.image, 'nginx:2');

    // A replace of the whole pod with its keys sorted (as `kubectl get -o yaml` then `kubectl replace` sends it)
    // that changes only an image is allowed too.
    const sortKeys = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(sortKeys)
        : v !== null && typeof v === 'object'
          ? Object.fromEntries(
              Object.entries(v)
                .sort(([a], [b]) => a.localeCompare(b))
                .map(([k, x]) => [k, sortKeys(x)]),
            )
          : v;
    const sorted = sortKeys(image) as KubeObject;
    (spec(sorted).containers as Array<{ image: string }>)[0]!.image = 'nginx:3';
    const replaced = await cluster.api.update(pods, 'default', 'web', sorted);
    assert.equal((spec(replaced).containers as Array<{ image: string }>)[0]!.image, 'nginx:3');

    let forbidden: ApiError | undefined;
    try {
      cluster.api.patch(pods, 'default', 'web', 'merge', { spec: { restartPolicy: 'Always' } });
    } catch (err) {
      forbidden = err as ApiError;
    }
    assert.equal(forbidden?.code, 422);
    assert.match(
      forbidden!.message,
      /spec: Forbidden: pod updates may not change fields other than `spec\.containers\[\*\]\.image`/,
    );
    assert.equal(spec(cluster.api.get(pods, 'default', 'web')).restartPolicy, 'Never');
    assert.notEqual(pod.metadata.resourceVersion, replaced.metadata.resourceVersion);
  } finally {
    await sim.close();
  }
});
