import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { OwnedPodTally, type PodSource } from '../src/controllers/owned-pods.js';
import { podsToDelete, podsPerNode, POD_DELETION_COST } from '../src/controllers/pod-ranking.js';

/**
 * OwnedPodTally.toDelete skips nodes that cannot hold a victim when every pod is ordinary (running, ready, no
 * deletion cost); it must choose exactly what ranking every pod (podsToDelete over pods()) chooses, through pod
 * churn, ordinary or not. Kubernetes' rules are not transitive when some pods share a ready (or creation) second
 * and others differ within one log2 bucket, so pods here have distinct times and uids: then there is one answer.
 */

const NOW = Date.UTC(2025, 0, 1, 12);
const iso = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');

/** A small deterministic generator (the test must replay the same way every time). */
function lcg(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state = (Math.imul(state, 1103515245) + 12345) & 0x7fffffff;
    return state % n;
  };
}

const owner = 'rs-uid';
const selector = { empty: false, matches: () => true };
const labels = { app: 'web' };

/** An empty tally over a pod store the test fills. */
function storeAndTally(): { store: Map<string, KubeObject>; source: PodSource; tally: OwnedPodTally } {
  const store = new Map<string, KubeObject>();
  return {
    store,
    source: { get: (key) => store.get(key), controlledKeys: () => store.keys() },
    tally: new OwnedPodTally(owner),
  };
}

test('the tally picks the same pods to delete as ranking all of them, ordinary or not', () => {
  const rnd = lcg(42);
  for (let round = 0; round < 40; round++) {
    const unusualOdds = round % 2 === 0 ? 0 : 4; // half the rounds: only ordinary pods, the fast path
    const { store, source, tally } = storeAndTally();
    let serial = 0;
    const makePod = (): KubeObject => {
      const n = serial++;
      const ordinary = unusualOdds === 0 || rnd(unusualOdds) > 0;
      const ready = ordinary || rnd(2) === 0;
      return {
        metadata: {
          name: `web-${n}`,
          namespace: 'default',
          uid: `uid-${rnd(1000)}-${n}`,
          labels,
          creationTimestamp: iso(NOW - 1000 * (1 + 3 * n + rnd(3))),
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web', uid: owner, controller: true }],
          ...(ordinary || rnd(2) ? {} : { annotations: { [POD_DELETION_COST]: String(rnd(3)) } }),
        },
        spec: { nodeName: ordinary || rnd(3) ? `node-${rnd(6)}` : undefined },
        status: {
          phase: ordinary ? 'Running' : ['Pending', 'Running', 'Unknown'][rnd(3)],
          conditions: ready
            ? [{ type: 'Ready', status: 'True', lastTransitionTime: iso(NOW - 1000 * (1 + 5 * n + rnd(5))) }]
            : [],
          containerStatuses: [{ name: 'app', restartCount: rnd(3) }],
        },
      };
    };
    for (let step = 0; step < 15; step++) {
      // Churn: new pods, replaced versions (they move to the end of the tally's order), deletions.
      for (let i = rnd(6); i > 0; i--) {
        const p = makePod();
        store.set(`default/${p.metadata.name}`, p);
        tally.touch(`default/${p.metadata.name}`);
      }
      for (const key of [...store.keys()]) {
        const dice = rnd(10);
        if (dice === 0) store.delete(key);
        else if (dice === 1) store.set(key, { ...makePod(), metadata: { ...store.get(key)!.metadata } });
        else continue;
        tally.touch(key);
      }
      tally.refresh(source, selector, labels);
      const pods = tally.pods();
      if (pods.length === 0) continue;
      // Crowding also counts sibling ReplicaSets' pods: add some on the same nodes.
      const onNode = podsPerNode(pods);
      for (const [node, n] of onNode) onNode.set(node, n + rnd(3));
      const count = 1 + rnd(pods.length);
      const expected = podsToDelete(pods, onNode, count, NOW).map((p) => p.metadata.name);
      assert.deepEqual(
        tally.toDelete(onNode, count, NOW).map((p) => p.metadata.name),
        expected,
        `round ${round}, step ${step}, count ${count}`,
      );
    }
  }
});

test('the tally keeps picking what ranking every pod picks as time moves pods into older log2 buckets', () => {
  const rnd = lcg(7);
  const { store, source, tally } = storeAndTally();
  for (let n = 0; n < 60; n++) {
    // Ages from half a second to a few minutes: the young ones change bucket within the steps below.
    const ready = NOW - 500 - 37 * n * n - rnd(400);
    const pod: KubeObject = {
      metadata: {
        name: `web-${n}`,
        namespace: 'default',
        uid: `uid-${rnd(1000)}-${n}`,
        labels,
        creationTimestamp: new Date(ready - 1000 - rnd(5000)).toISOString(),
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web', uid: owner, controller: true }],
      },
      spec: { nodeName: `node-${rnd(4)}` },
      status: {
        phase: 'Running',
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(ready).toISOString() }],
        containerStatuses: [{ name: 'app', restartCount: 0 }],
      },
    };
    store.set(`default/web-${n}`, pod);
    tally.touch(`default/web-${n}`);
  }
  tally.refresh(source, selector, labels);
  for (let now = NOW, step = 0; step < 40; step++, now += 50 + rnd(3000)) {
    const pods = tally.pods();
    const onNode = podsPerNode(pods);
    const count = 1 + rnd(3);
    const expected = podsToDelete(pods, onNode, count, now).map((p) => p.metadata.name);
    const chosen = tally.toDelete(onNode, count, now);
    assert.deepEqual(
      chosen.map((p) => p.metadata.name),
      expected,
      `step ${step}, ${now - NOW} ms on`,
    );
    // The chosen pods go, as a scale-down deletes them.
    for (const p of chosen) {
      store.delete(`default/${p.metadata.name}`);
      tally.touch(`default/${p.metadata.name}`);
    }
    tally.refresh(source, selector, labels);
  }
});
