import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VirtualClock } from '../src/clock/clock.js';
import { Metrics } from '../src/metrics/metrics.js';
import { WorkQueue } from '../src/runtime/work-queue.js';

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The keys handed out until the queue has none ready. */
async function drain(queue: WorkQueue): Promise<string[]> {
  const out: string[] = [];
  while (queue.length > 0) {
    const key = (await queue.get())!;
    out.push(key);
    queue.done(key);
  }
  return out;
}

test('a key is queued once however often it is added, and comes back after done when added meanwhile', async () => {
  const queue = new WorkQueue(new VirtualClock(0));
  queue.add('a');
  queue.add('b');
  queue.add('a');
  assert.equal(queue.length, 2);
  const first = await queue.get();
  assert.equal(first, 'a');
  queue.add('a'); // while a worker has it
  assert.deepEqual(await drain(queue), ['b']);
  assert.equal(queue.idle, false, 'a is still in a worker’s hands');
  queue.done('a');
  assert.deepEqual(await drain(queue), ['a']);
  assert.equal(queue.idle, true);
});

test('failures back off per key on the clock: 5 ms doubling, forget starts over', async () => {
  const clock = new VirtualClock(0);
  const queue = new WorkQueue(clock);
  const seen: number[] = [];
  for (let i = 0; i < 3; i++) {
    queue.addRateLimited('k');
    assert.equal(queue.length, 0);
    const at = clock.now();
    while (queue.length === 0) await clock.advance(1);
    seen.push(clock.now() - at);
    assert.deepEqual(await drain(queue), ['k']);
  }
  assert.deepEqual(seen, [5, 10, 20]);
  assert.equal(queue.retries('k'), 3);
  queue.forget('k');
  assert.equal(queue.retries('k'), 0);
});

test('batchTurns: keys added together are queued once, that many event-loop turns after the first', async () => {
  const clock = new VirtualClock(0);
  const queue = new WorkQueue(clock, { batchTurns: 4 });
  queue.add('a');
  queue.add('b');
  queue.add('a');
  assert.equal(queue.length, 0, 'nothing queued yet');
  assert.equal(queue.idle, false, 'keys waiting in a batch are work');
  for (let i = 0; i < 3; i++) await turn();
  assert.equal(queue.length, 0, 'still batching after 3 turns');
  await turn();
  assert.deepEqual(await drain(queue), ['a', 'b']);
  assert.equal(queue.idle, true);
});

test('batchTurns: a key added while processed, a delayed key and a retry come back without waiting for a batch', async () => {
  const clock = new VirtualClock(0);
  const queue = new WorkQueue(clock, { batchTurns: 4 });
  queue.add('a');
  for (let i = 0; i < 4; i++) await turn();
  const key = (await queue.get())!;
  queue.add('a');
  for (let i = 0; i < 4; i++) await turn();
  queue.done(key);
  assert.equal(queue.length, 1, 'back at done');
  await drain(queue);
  queue.addAfter('later', 100);
  await clock.advance(100);
  assert.equal(queue.length, 1, 'queued when its delay is over');
});

test('shutDown drops batched keys and wakes waiting workers with undefined', async () => {
  const queue = new WorkQueue(new VirtualClock(0), { batchTurns: 2 });
  const waiting = queue.get();
  queue.add('a');
  queue.shutDown();
  assert.equal(await waiting, undefined);
  for (let i = 0; i < 3; i++) await turn();
  assert.equal(queue.length, 0);
  assert.equal(queue.idle, true);
});

test("client-go's metrics: depth counts keys waiting (one added while worked on too), adds each add that queued, retries", async () => {
  const metrics = new Metrics().workQueue('q');
  const queue = new WorkQueue(new VirtualClock(0), { metrics });
  queue.add('a');
  queue.add('a');
  queue.add('b');
  assert.deepEqual([metrics.depth.value, metrics.adds.value], [2, 2], 'a second add of a waiting key is no add');
  const a = (await queue.get())!;
  assert.equal(metrics.depth.value, 1);
  queue.add(a); // while a worker has it: waiting again
  assert.deepEqual([metrics.depth.value, metrics.adds.value], [2, 3]);
  queue.done(a);
  assert.equal(metrics.depth.value, 2, 'coming back after done is not another add');
  assert.deepEqual(await drain(queue), ['b', 'a']);
  assert.deepEqual([metrics.depth.value, metrics.adds.value], [0, 3]);
  assert.equal(metrics.queueDuration.count, 3);
  assert.equal(metrics.workDuration.count, 3);
  queue.addRateLimited('c');
  assert.equal(metrics.retries.value, 1);
  queue.add('d');
  queue.shutDown();
  assert.equal(metrics.depth.value, 0, 'a queue shut down holds nothing');
});
