import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { sameButHeartbeats } from '../src/scenario/history.js';

/** What the history compared before: the JSON text without the heartbeat fields. */
function normalized(obj: unknown): string | undefined {
  return JSON.stringify(obj, (key, value: unknown) =>
    key === 'resourceVersion' || key === 'managedFields' || key === 'lastHeartbeatTime' || key === 'renewTime'
      ? undefined
      : value,
  );
}

// Few keys, so that two random objects often share keys, and the heartbeat fields among them.
const key = fc.constantFrom('a', 'b', 'status', 'resourceVersion', 'renewTime', 'lastHeartbeatTime', 'managedFields');
const leaf = fc.oneof(
  fc.constantFrom(0, 1, -0, 'x', '', true, false, null, undefined, Number.NaN, Number.POSITIVE_INFINITY),
  fc.integer({ min: -3, max: 3 }),
);
const value = fc.letrec((tie) => ({
  any: fc.oneof({ depthSize: 'small' }, leaf, tie('array'), tie('object')),
  array: fc.array(tie('any'), { maxLength: 3 }),
  object: fc.dictionary(key, tie('any'), { maxKeys: 4 }),
})).object;

/** A copy with one random change (or none), so that pairs are often nearly alike, as two versions of an object are. */
function mutated(v: unknown, rng: () => number): unknown {
  if (Array.isArray(v)) return v.map((x) => (rng() < 0.3 ? mutated(x, rng) : x));
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      const r = rng();
      if (r < 0.05) continue;
      out[k] = r < 0.3 ? mutated(x, rng) : x;
    }
    if (rng() < 0.05) out.renewTime = 't';
    return out;
  }
  const r = rng();
  return r < 0.1 ? 'changed' : r < 0.15 ? undefined : v;
}

test('sameButHeartbeats agrees with comparing the JSON texts without the heartbeat fields', () => {
  fc.assert(
    fc.property(value, value, (a, b) => sameButHeartbeats(a, b) === (normalized(a) === normalized(b))),
    { numRuns: 5000 },
  );
  fc.assert(
    fc.property(value, fc.integer(), (a, seed) => {
      let s = seed >>> 0;
      const rng = (): number => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
      const b = mutated(a, rng);
      return sameButHeartbeats(a, b) === (normalized(a) === normalized(b));
    }),
    { numRuns: 5000 },
  );
});

test('sameButHeartbeats: key order counts, heartbeat fields and undefined values do not', () => {
  assert.equal(sameButHeartbeats({ a: 1, b: 2 }, { b: 2, a: 1 }), false);
  assert.equal(sameButHeartbeats({ a: 1, renewTime: 'x' }, { renewTime: 'y', a: 1 }), true);
  assert.equal(sameButHeartbeats({ a: 1, b: undefined }, { a: 1 }), true);
  assert.equal(sameButHeartbeats([undefined], [null]), true);
  assert.equal(
    sameButHeartbeats(
      { metadata: { resourceVersion: '1' }, status: { conditions: [{ lastHeartbeatTime: 'a', status: 'True' }] } },
      { metadata: { resourceVersion: '2' }, status: { conditions: [{ lastHeartbeatTime: 'b', status: 'True' }] } },
    ),
    true,
  );
  assert.equal(sameButHeartbeats({ status: { phase: 'Running' } }, { status: { phase: 'Failed' } }), false);
});
