import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError, Errors, FieldErrors } from '../src/api/errors.js';
import { VirtualClock } from '../src/clock/clock.js';
import { ReconcileLoop, type ControllerContext, type ReconcileResult } from '../src/runtime/controller.js';

// One switch decides what follows a reconcile: an error retries with backoff unless it is terminal (the API refused
// the request itself), requeueAfterMs schedules a look on the clock, anything else waits for the next change.

function loopWith(reconcile: (key: string) => Promise<ReconcileResult | void>): {
  loop: ReconcileLoop;
  clock: VirtualClock;
  logged: string[];
} {
  const clock = new VirtualClock(0);
  const logged: string[] = [];
  // The loop uses the context's clock and log only.
  const ctx = { clock, log: (_level: string, message: string) => logged.push(message) } as unknown as ControllerContext;
  const loop = new ReconcileLoop('test', ctx, reconcile);
  loop.start();
  return { loop, clock, logged };
}

const invalid = (): ApiError =>
  Errors.invalid('apps', 'Deployment', 'd', [
    FieldErrors.invalid('spec.replicas', -1, 'must be greater than or equal to 0'),
  ]);

test('a 422 from the API is not retried: the key waits for the next change', async () => {
  let runs = 0;
  const { loop, clock, logged } = loopWith(async () => {
    runs++;
    throw invalid();
  });
  loop.queue.add('default/d');
  await clock.advance(2_000_000);
  assert.equal(runs, 1, 'not retried in 2,000 s');
  assert.equal(loop.queue.retries('default/d'), 0);
  assert.match(
    logged[0]!,
    /^test: reconcile default\/d: Deployment.apps "d" is invalid: .* \(not retried until it changes\)$/,
  );
  loop.queue.add('default/d'); // the object changed
  await clock.advance(0);
  assert.equal(runs, 2);
  loop.stop();
});

test('a 400 is terminal too; a 500, a 403 and a conflict are retried with backoff', async () => {
  for (const [error, terminal] of [
    [Errors.badRequest('bad'), true],
    [new ApiError(500, 'InternalError', 'boom'), false],
    [Errors.forbidden({ group: '', resource: 'pods' }, 'p', 'exceeded quota'), false],
    [Errors.conflict({ group: 'apps', resource: 'deployments' }, 'd', 'the object has been modified'), false],
  ] as const) {
    const times: number[] = [];
    const { loop, clock } = loopWith(async () => {
      times.push(clock.now());
      throw error;
    });
    loop.queue.add('k');
    await clock.advance(100);
    loop.stop();
    assert.deepEqual(times, terminal ? [0] : [0, 5, 15, 35, 75], `${error.code} ${error.reason}`);
  }
});

test('requeueAfterMs looks again after that long on the clock; nothing returned waits for a change', async () => {
  const times: number[] = [];
  const { loop, clock } = loopWith(async () => {
    times.push(clock.now());
    return times.length < 3 ? { requeueAfterMs: 1000 } : undefined;
  });
  loop.queue.add('k');
  await clock.advance(10_000);
  loop.stop();
  assert.deepEqual(times, [0, 1000, 2000]);
});
