import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LEASE_RENEW_MS, nextBeatDue } from '../src/kubelet/node-agent.js';

test('kubelets registered together renew their Leases spread over the 10 s period, not in one burst', () => {
  const now = 1_000_000;
  const offsets = Array.from({ length: 5000 }, (_, i) => nextBeatDue(`node-${i + 1}`, undefined, now) - now);
  for (const offset of offsets)
    assert.ok(offset > 0 && offset <= LEASE_RENEW_MS, `first beat within one period: ${offset}`);
  // Ten 1-second buckets of 500 expected each: none far off.
  const buckets = new Array(10).fill(0) as number[];
  for (const offset of offsets) buckets[Math.min(9, Math.floor(offset / 1000))]!++;
  for (const count of buckets) assert.ok(count > 350 && count < 650, `buckets ${buckets.join(' ')}`);
  // The same name always gets the same slot (no draw from the seeded RNG).
  assert.equal(nextBeatDue('node-7', undefined, now), nextBeatDue('node-7', undefined, now));
});

test('a Lease heartbeat keeps a fixed rate: a late beat does not push back the next ones', () => {
  const due = 50_000;
  // Ran on time, or 2.5 s late (a busy server): the next one is still due a period after this one was due.
  assert.equal(nextBeatDue('node-1', due, due), due + LEASE_RENEW_MS);
  assert.equal(nextBeatDue('node-1', due, due + 2500), due + LEASE_RENEW_MS);
  // More than a period late: the next slot still ahead, in the same phase.
  assert.equal(nextBeatDue('node-1', due, due + 25_000), due + 3 * LEASE_RENEW_MS);
  assert.equal(nextBeatDue('node-1', due, due + LEASE_RENEW_MS), due + 2 * LEASE_RENEW_MS);
});
