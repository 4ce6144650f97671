import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { Errors } from '../src/api/errors.js';
import { startSimulator } from '../src/cluster/simulator.js';
import type { WatchEventType } from '../src/storage/watch.js';

// How many pod writes the kubelet makes, as a watcher sees them: stages due at once are written together (as
// kubelet's status manager syncs only a pod's newest status), stages with a delay each get their own write,
// and ContainerCreating is always written before the containers start.
type Obj = Record<string, unknown>;

/** One watch event as a step of the pod: phase, the first container's state, Ready, terminating. */
function stepOf(type: WatchEventType, pod: KubeObject): string {
  if (type === 'DELETED') return 'DELETED';
  const status = (pod.status ?? {}) as Obj;
  const cs = ((status.containerStatuses as Obj[] | undefined) ?? [])[0];
  const state = cs
    ? Object.entries(cs.state as Obj).map(([k, v]) => (k === 'waiting' ? String((v as Obj).reason) : k))[0]
    : '-';
  const ready = ((status.conditions as Obj[] | undefined) ?? []).find((c) => c.type === 'Ready')?.status ?? '-';
  const bound = (pod.spec as Obj).nodeName ? 'bound' : 'unbound';
  return `${String(status.phase ?? '-')} ${bound} ${state ?? '-'} ready=${String(ready)}${pod.metadata.deletionTimestamp ? ' terminating' : ''}`;
}

test('kubelet: zero-delay stages reach Running+Ready in one pods/status write; stages with delays keep their steps', async () => {
  const sim = await startSimulator({ clock: 'virtual', seed: 8, nodes: 1, controllers: '' });
  const { cluster } = sim;
  const clock = cluster.virtualClock!;
  const pods = cluster.kind('', 'v1', 'pods');
  const events = cluster.kind('', 'v1', 'events');
  const watched = new Map<string, string[]>();
  const pod = (name: string, annotations: Record<string, string> = {}): KubeObject => ({
    metadata: { name, annotations },
    spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] },
  });
  try {
    await clock.settle();
    const { watch } = cluster.api.watch(
      pods,
      'default',
      { resourceVersion: String(cluster.api.list(pods, 'default', {}).metadata.resourceVersion) },
      {
        send: (type, event) => {
          const name = event.object.metadata.name!;
          watched.set(name, [...(watched.get(name) ?? []), stepOf(type, event.object)]);
          return true;
        },
        close: () => undefined,
      },
    );

    cluster.api.create(pods, 'default', pod('fast', { 'kube-sim.dev/stop-delay': '0s' }));
    cluster.api.create(
      pods,
      'default',
      pod('slow', { 'kube-sim.dev/startup-delay': '2s', 'kube-sim.dev/ready-delay': '5s' }),
    );
    await clock.settle();
    assert.deepEqual(
      watched.get('fast'),
      [
        'Pending unbound - ready=-',
        'Pending bound - ready=-',
        'Pending bound ContainerCreating ready=False',
        'Running bound running ready=True',
      ],
      'accepted (ContainerCreating), then started and ready in one write',
    );
    const fast = cluster.api.get(pods, 'default', 'fast');
    assert.ok(fast.metadata.annotations?.['kube-sim.dev/env-app'], 'the env annotation rides on the same write');
    const reasons = cluster.api
      .list(events, 'default', { fieldSelector: 'involvedObject.name=fast' })
      .items.map((e) => e.reason);
    assert.deepEqual(reasons, ['Scheduled', 'Pulled', 'Created', 'Started'], 'every stage’s events, in order');

    await clock.advance(2_000);
    await clock.advance(5_000);
    assert.deepEqual(
      watched.get('slow'),
      [
        'Pending unbound - ready=-',
        'Pending bound - ready=-',
        'Pending bound ContainerCreating ready=False',
        'Running bound running ready=False',
        'Running bound running ready=True',
      ],
      'each delayed stage is its own write',
    );

    // A container's exit is written before the restart or back-off that follows it (Error, then CrashLoopBackOff).
    cluster.api.create(
      pods,
      'default',
      pod('crasher', { 'kube-sim.dev/duration': '1s', 'kube-sim.dev/exit-code': '1' }),
    );
    await clock.settle();
    await clock.advance(1_000);
    await clock.advance(1_000);
    assert.deepEqual(watched.get('crasher')!.slice(3), [
      'Running bound running ready=True',
      'Running bound terminated ready=False',
      'Running bound running ready=True',
      'Running bound terminated ready=False',
      'Running bound CrashLoopBackOff ready=False',
    ]);

    // A graceful delete with no stop delay: Killing and the stopped status together, then the kubelet's delete.
    cluster.api.delete(pods, 'default', 'fast', {});
    await clock.settle();
    assert.deepEqual(watched.get('fast')!.slice(4), [
      'Running bound running ready=True terminating',
      'Succeeded bound terminated ready=False terminating',
      'DELETED',
    ]);
    const killing = cluster.api.list(events, 'default', {
      fieldSelector: 'involvedObject.name=fast,reason=Killing',
    }).items;
    assert.equal(killing.length, 1);
    watch.stop();
  } finally {
    await sim.close();
  }
});

test('kubelet: a stop status write that conflicts is retried without starting the stop delay over', async () => {
  const sim = await startSimulator({ clock: 'virtual', seed: 8, nodes: 1, controllers: '' });
  const { cluster } = sim;
  const clock = cluster.virtualClock!;
  const pods = cluster.kind('', 'v1', 'pods');
  const api = cluster.api;
  const update = api.update.bind(api);
  let conflicts = 0;
  try {
    api.create(pods, 'default', {
      metadata: { name: 'p', annotations: { 'kube-sim.dev/stop-delay': '5s' } },
      spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] },
    });
    await clock.settle();
    api.delete(pods, 'default', 'p', {});
    await clock.settle();
    // The kubelet's stopped status is refused once with a 409, as when another writer got in first.
    api.update = (info, ns, name, body, opts) => {
      if (
        name === 'p' &&
        opts?.subresource === 'status' &&
        ((body as KubeObject).status as Obj | undefined)?.phase === 'Succeeded' &&
        conflicts++ === 0
      ) {
        throw Errors.conflict({ group: '', resource: 'pods' }, name, 'the object has been modified');
      }
      return update(info, ns, name, body, opts);
    };
    await clock.advance(4_900);
    assert.equal((api.get(pods, 'default', 'p').status as Obj).phase, 'Running', 'still in its stop delay');
    await clock.advance(600);
    assert.ok(conflicts >= 2, 'the first stopped status was refused and written again');
    assert.throws(
      () => api.get(pods, 'default', 'p'),
      /not found/,
      'stopped and deleted ~5 s after the delete, not 5 s after the conflict',
    );
  } finally {
    api.update = update;
    await sim.close();
  }
});

test('kubelet: another writer changing a terminating pod does not start its stop delay over', async () => {
  const sim = await startSimulator({ clock: 'virtual', seed: 8, nodes: 1, controllers: '' });
  const { cluster } = sim;
  const clock = cluster.virtualClock!;
  const pods = cluster.kind('', 'v1', 'pods');
  const api = cluster.api;
  try {
    api.create(pods, 'default', {
      metadata: { name: 'p', annotations: { 'kube-sim.dev/stop-delay': '5s' } },
      spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] },
    });
    await clock.settle();
    api.delete(pods, 'default', 'p', {});
    await clock.settle();
    await clock.advance(2_000);
    // A label written meanwhile moves the pod's resourceVersion; the container is still stopping from the delete.
    api.patch(pods, 'default', 'p', 'merge', { metadata: { labels: { seen: 'yes' } } });
    await clock.advance(2_900);
    assert.equal((api.get(pods, 'default', 'p').status as Obj).phase, 'Running', 'still in its stop delay');
    await clock.advance(600);
    assert.throws(
      () => api.get(pods, 'default', 'p'),
      /not found/,
      'stopped and deleted ~5 s after the delete, not 5 s after the label',
    );
    const killing = api.list(cluster.kind('', 'v1', 'events'), 'default', {
      fieldSelector: 'involvedObject.name=p,reason=Killing',
    }).items;
    assert.deepEqual(
      killing.map((e) => e.count),
      [1],
      'one SIGTERM for the deletion, not another after the label',
    );
  } finally {
    await sim.close();
  }
});
