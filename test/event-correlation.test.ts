import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { Resources } from '../src/client/client.js';
import { InProcessClient } from '../src/cluster/in-process-client.js';
import { Cluster } from '../src/cluster/cluster.js';
import { AGGREGATE_MESSAGE_PREFIX, EventRecorder } from '../src/runtime/events.js';

/** The recorder's event correlation (client-go tools/record events_cache.go), seen through the Events it writes. */

interface EventObj extends KubeObject {
  reason: string;
  message: string;
  count: number;
  firstTimestamp: string;
  lastTimestamp: string;
  reportingComponent: string;
}

async function setup(): Promise<{
  cluster: Cluster;
  client: InProcessClient;
  recorder: EventRecorder;
  rs: KubeObject;
  events: () => Promise<EventObj[]>;
}> {
  const cluster = await Cluster.start({ clock: 'virtual', seed: 3 });
  const client = new InProcessClient(cluster);
  const recorder = new EventRecorder(client, cluster.clock, 'replicaset-controller');
  const rs = await client.create(Resources.configmaps, 'default', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'web' },
  });
  const events = async (): Promise<EventObj[]> => {
    await cluster.virtualClock!.settle();
    const list = await client.list(Resources.events, 'default');
    return (list.items as EventObj[]).sort((a, b) => a.metadata.name!.localeCompare(b.metadata.name!));
  };
  return { cluster, client, recorder, rs, events };
}

test('an identical event bumps the count and lastTimestamp of the first one', async () => {
  const { cluster, recorder, rs, events } = await setup();
  recorder.event(rs, 'Normal', 'Synced', 'all good');
  await cluster.virtualClock!.advance(5000);
  recorder.event(rs, 'Normal', 'Synced', 'all good');
  await cluster.virtualClock!.advance(5000);
  recorder.event(rs, 'Normal', 'Synced', 'all good');
  const written = await events();
  assert.equal(written.length, 1);
  assert.equal(written[0]!.count, 3);
  assert.equal(written[0]!.firstTimestamp, '2025-01-01T00:00:00Z');
  assert.equal(written[0]!.lastTimestamp, '2025-01-01T00:00:10Z');
  // Another message, or another reason, is another event.
  recorder.event(rs, 'Normal', 'Synced', 'still good');
  recorder.event(rs, 'Warning', 'Synced', 'all good');
  assert.equal((await events()).length, 3);
  await cluster.close();
});

test('from the 10th distinct message of one reason in 10 minutes, events are combined into one', async () => {
  const { cluster, recorder, rs, events } = await setup();
  for (let i = 0; i < 12; i++) recorder.event(rs, 'Normal', 'SuccessfulCreate', `Created pod: web-${i}`);
  const written = await events();
  const plain = written.filter((e) => !e.message.startsWith(AGGREGATE_MESSAGE_PREFIX));
  const combined = written.filter((e) => e.message.startsWith(AGGREGATE_MESSAGE_PREFIX));
  assert.deepEqual(
    plain.map((e) => e.message),
    Array.from({ length: 9 }, (_, i) => `Created pod: web-${i}`),
  );
  assert.equal(combined.length, 1);
  assert.equal(combined[0]!.message, `${AGGREGATE_MESSAGE_PREFIX}Created pod: web-11`);
  assert.equal(combined[0]!.count, 3);
  assert.equal(combined[0]!.reason, 'SuccessfulCreate');
  assert.equal(combined[0]!.reportingComponent, '');

  // More than 10 minutes later the window starts over: the next messages are events of their own again.
  await cluster.virtualClock!.advance(10 * 60_000 + 1000);
  recorder.event(rs, 'Normal', 'SuccessfulCreate', 'Created pod: web-12');
  const after = await events();
  assert.equal(after.length, 11);
  assert.ok(after.some((e) => e.message === 'Created pod: web-12' && e.count === 1));
  await cluster.close();
});

test('a source may write 25 events about an object, then one more every 5 minutes', async () => {
  const { cluster, recorder, rs, events } = await setup();
  for (let i = 0; i < 40; i++) recorder.event(rs, 'Normal', `Reason${i}`, 'something');
  assert.equal((await events()).length, 25);
  await cluster.virtualClock!.advance(5 * 60_000);
  recorder.event(rs, 'Normal', 'Late1', 'something');
  recorder.event(rs, 'Normal', 'Late2', 'something');
  const written = await events();
  assert.equal(written.length, 26);
  assert.ok(written.some((e) => e.reason === 'Late1'));
  assert.ok(!written.some((e) => e.reason === 'Late2'));
  // Another object has a bucket of its own.
  recorder.event(
    { ...rs, metadata: { ...rs.metadata, name: 'other', uid: 'other-uid' } },
    'Normal',
    'Reason0',
    'something',
  );
  assert.equal((await events()).length, 27);
  await cluster.close();
});

test('a recurring event whose Event is gone is written again under its name, with the next count', async () => {
  const { cluster, client, recorder, rs, events } = await setup();
  recorder.event(rs, 'Warning', 'FailedCreate', 'quota exceeded');
  recorder.event(rs, 'Warning', 'FailedCreate', 'quota exceeded');
  const [first] = await events();
  assert.equal(first!.count, 2);
  await client.delete(Resources.events, 'default', first!.metadata.name!);
  recorder.event(rs, 'Warning', 'FailedCreate', 'quota exceeded');
  const again = await events();
  assert.equal(again.length, 1);
  assert.equal(again[0]!.metadata.name, first!.metadata.name);
  assert.equal(again[0]!.count, 3);
  await cluster.close();
});

test('a recorder remembers the 4,096 events it used last (client-go LRU caches): an older one is written anew', async () => {
  const { cluster, recorder, rs, events } = await setup();
  const settle = (): Promise<void> => cluster.virtualClock!.settle();
  const pod = (i: number): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `p-${i}`, namespace: 'default', uid: `uid-${i}` },
  });
  recorder.event(rs, 'Normal', 'Dropped', 'not seen again for a while');
  await settle();
  recorder.event(rs, 'Normal', 'Kept', 'seen again');
  await settle();
  // 4,095 more events: with "Kept" seen again halfway, "Dropped" is the least recently used when the 4,097th comes.
  for (let i = 0; i < 4095; i++) {
    recorder.event(pod(i), 'Normal', 'Created', 'Created container: app');
    if (i === 2000) recorder.event(rs, 'Normal', 'Kept', 'seen again');
    await settle();
  }
  recorder.event(rs, 'Normal', 'Kept', 'seen again');
  recorder.event(rs, 'Normal', 'Dropped', 'not seen again for a while');
  const about = (await events()).filter((e) => e.reason === 'Kept' || e.reason === 'Dropped');
  assert.deepEqual(about.map((e) => [e.reason, e.count]).sort(), [
    ['Dropped', 1],
    ['Dropped', 1],
    ['Kept', 3],
  ]);
  await cluster.close();
});
