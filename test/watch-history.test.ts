import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../src/api/errors.js';
import { parseFieldSelector, parseLabelSelector } from '../src/api/selectors.js';
import { EVENT_FRESH_MS, StoreEvent, WatchHub } from '../src/storage/watch.js';

// The events a resource keeps for resuming watches are sized as kube-apiserver sizes its watch cache
// (watch_cache.go resizeCacheLocked): from 100 up to --watch-history, doubled when full while all of them are
// younger than 75 s, halved when full while even the newest quarter is older. A watch from a revision no longer
// held gets 410 Expired.
const MINUTE = 60_000;

function hub(capacity: number, now?: () => number): { hub: WatchHub; push(): number } {
  const h = new WatchHub(capacity, 0, () => () => undefined, now);
  let revision = 0;
  return {
    hub: h,
    push: () => {
      revision++;
      h.record(
        new StoreEvent(
          'ADDED',
          {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: `cm-${revision}`, namespace: 'default', resourceVersion: String(revision) },
          },
          undefined,
          revision,
        ),
      );
      return revision;
    },
  };
}

function resumable(h: WatchHub, from: number): boolean {
  const filter = { label: parseLabelSelector(undefined), field: parseFieldSelector(undefined, new Set()) };
  try {
    h.watchFrom(from, filter, { send: () => true, close: () => undefined }).stop();
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.code === 410) return false;
    throw err;
  }
}

test('watch history: a burst keeps growing up to the bound, a quiet resource shrinks back to 100 events', () => {
  let now = 0;
  const { hub: h, push } = hub(10_000, () => now);
  // A burst within 75 s: everything is kept, well past the first 100 events (6,400 is 100 doubled six times:
  // the history is then full, which is when kube-apiserver resizes its cache).
  for (let i = 0; i < 6_400; i++) push();
  assert.equal(h.oldestResumableRevision(), 0);
  assert.ok(resumable(h, 0));

  // Twenty quiet minutes later, writes find even the newest quarter stale: the history halves down to 100 events.
  now += 20 * MINUTE;
  let last = 0;
  for (let i = 0; i < 50; i++) last = push();
  assert.equal(last - h.oldestResumableRevision(), 100);
  assert.ok(!resumable(h, last - 101), 'a revision older than the kept 100 events is Expired');
  assert.ok(resumable(h, last - 100));

  // A new burst grows it again: all of a burst within 75 s stays resumable.
  now += EVENT_FRESH_MS / 2;
  const before = last;
  for (let i = 0; i < 3_000; i++) last = push();
  assert.ok(resumable(h, before), 'the whole new burst is kept');
  assert.ok(last - h.oldestResumableRevision() >= 3_000);
});

test('watch history: --watch-history bounds it, and without a clock it is a fixed number of events', () => {
  let now = 0;
  const bounded = hub(500, () => now);
  let last = 0;
  for (let i = 0; i < 1_000; i++) last = bounded.push();
  assert.equal(last - bounded.hub.oldestResumableRevision(), 500, 'a fresh burst grows only up to the bound');
  now += 10 * MINUTE;
  const small = hub(50, () => now);
  for (let i = 0; i < 80; i++) last = small.push();
  assert.equal(last - small.hub.oldestResumableRevision(), 50, 'a bound under 100 is the size');

  const fixed = hub(300);
  for (let i = 0; i < 1_000; i++) last = fixed.push();
  assert.equal(last - fixed.hub.oldestResumableRevision(), 300);
});
