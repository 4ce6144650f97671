import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sameCondition } from '../src/kubelet/actions.js';

/** The kubelet skips a condition write only when setPodCondition would write the same condition. */
describe('kubelet sameCondition', () => {
  const stored = {
    conditions: [
      { type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: '2026-01-01T00:00:00Z' },
      {
        type: 'Ready',
        status: 'False',
        lastProbeTime: null,
        lastTransitionTime: '2026-01-01T00:00:01Z',
        reason: 'ContainersNotReady',
        message: 'containers with unready status: [web]',
      },
    ],
  };

  test('the same members in another order are the same condition', () => {
    assert.equal(
      sameCondition(stored, {
        message: 'containers with unready status: [web]',
        reason: 'ContainersNotReady',
        status: 'False',
        type: 'Ready',
      }),
      true,
    );
    assert.equal(sameCondition(stored, { status: 'True', type: 'PodScheduled' }), true);
  });

  test('another status, reason or message, a member more or less, or no condition of that type is a change', () => {
    const ready = {
      type: 'Ready',
      status: 'False',
      reason: 'ContainersNotReady',
      message: 'containers with unready status: [web]',
    };
    assert.equal(sameCondition(stored, { ...ready, status: 'True' }), false);
    assert.equal(sameCondition(stored, { ...ready, reason: 'PodCompleted' }), false);
    assert.equal(sameCondition(stored, { ...ready, message: 'other' }), false);
    assert.equal(sameCondition(stored, { type: 'Ready', status: 'False', reason: 'ContainersNotReady' }), false);
    assert.equal(sameCondition(stored, { ...ready, extra: 'x' }), false);
    assert.equal(sameCondition(stored, { type: 'Initialized', status: 'True' }), false);
    assert.equal(sameCondition({}, { type: 'Ready', status: 'True' }), false);
  });

  test('a stored condition with a probe time or without a transition time is rewritten', () => {
    const probed = {
      conditions: [{ type: 'Ready', status: 'True', lastProbeTime: '2026-01-01T00:00:00Z', lastTransitionTime: 'x' }],
    };
    assert.equal(sameCondition(probed, { type: 'Ready', status: 'True' }), false);
    const untimed = { conditions: [{ type: 'Ready', status: 'True', lastProbeTime: null }] };
    assert.equal(sameCondition(untimed, { type: 'Ready', status: 'True' }), false);
  });
});
