import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../src/api/errors.js';
import type { KubeObject } from '../src/api/types.js';
import { Resources, type KubeClient } from '../src/client/client.js';
import { Cluster } from '../src/cluster/cluster.js';
import { controllerHost } from '../src/cluster/controller-host.js';
import { deploymentController } from '../src/controllers/deployment/controller.js';
import { replicaSetController } from '../src/controllers/replicaset.js';
import { ControllerManager } from '../src/runtime/manager.js';

// The API refusing pods (as quota admission would): the ReplicaSet reports ReplicaFailure, its Deployment shows
// it too, and both clear once pods can be created. In process, on a virtual clock, with a client that refuses.

test('pods the API refuses: ReplicaFailure on the ReplicaSet and its Deployment, FailedCreate events, then recovery', async (t) => {
  const cluster = await Cluster.start({ clock: 'virtual', seed: 3 });
  const clock = cluster.virtualClock!;
  const manager = new ControllerManager(controllerHost(cluster), () => undefined);
  let refuse = true;
  const real = manager.client;
  const client: KubeClient = Object.create(real) as KubeClient;
  client.create = async (gvr, namespace, obj) => {
    if (refuse && gvr.resource === 'pods') {
      throw new ApiError(
        403,
        'Forbidden',
        `pods "${String(obj.metadata.generateName)}x" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=0, limited: pods=0`,
      );
    }
    return real.create(gvr, namespace, obj);
  };
  const context = { ...manager.context, client };
  const controllers = [replicaSetController(context), deploymentController(context)];
  await manager.informers.start();
  for (const c of controllers) await c.start();
  t.after(async () => {
    for (const c of controllers) c.stop();
    manager.stop();
    await cluster.close();
  });

  await real.create(Resources.deployments, 'default', {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: {
      replicas: 3,
      selector: { matchLabels: { app: 'web' } },
      template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
    },
  } as KubeObject);
  await clock.advance(1000);

  const [rs] = (await real.list(Resources.replicasets, 'default')).items;
  const failure = (obj: KubeObject): { reason?: string; message?: string } | undefined =>
    ((obj.status as { conditions?: Array<{ type: string; reason?: string; message?: string }> }).conditions ?? []).find(
      (c) => c.type === 'ReplicaFailure',
    );
  assert.deepEqual(failure(rs!), {
    type: 'ReplicaFailure',
    status: 'True',
    lastTransitionTime: '2025-01-01T00:00:00Z',
    reason: 'FailedCreate',
    message: `pods "${rs!.metadata.name}-x" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=0, limited: pods=0`,
  });
  const d = await real.get(Resources.deployments, 'default', 'web');
  assert.equal(failure(d)?.reason, 'FailedCreate', 'the Deployment carries its ReplicaSet failure');
  const events = (await real.list(Resources.events, 'default')).items.filter(
    (e) => (e.involvedObject as { kind: string }).kind === 'ReplicaSet',
  );
  assert.ok(
    events.some((e) => e.reason === 'FailedCreate' && String(e.message).startsWith('Error creating: pods "web-')),
  );
  assert.equal((await real.list(Resources.pods, 'default')).items.length, 0);

  refuse = false;
  await clock.advance(60_000);
  const healed = await real.get(Resources.replicasets, 'default', rs!.metadata.name!);
  assert.equal((healed.status as { replicas: number }).replicas, 3);
  assert.equal(failure(healed), undefined, 'the condition goes once pods are created');
  assert.equal(failure(await real.get(Resources.deployments, 'default', 'web')), undefined);
});
