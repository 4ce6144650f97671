import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { selectorFromObject } from '../src/api/selectors.js';
import type { KubeObject } from '../src/api/types.js';
import { rfc3339 } from '../src/clock/clock.js';
import { childSelector, planClaims } from '../src/controllers/claims.js';
import { isPodActive } from '../src/api/pod-util.js';
import { podsPerNode, podsToDelete, rankPodsForDeletion } from '../src/controllers/pod-ranking.js';
import { OwnedPodTally, summarizePods } from '../src/controllers/owned-pods.js';
import {
  planReplicaSet,
  podFromTemplate,
  slowStartBatch,
  templateLabels,
  withReplicaFailure,
  type ReplicaSetPlan,
} from '../src/controllers/replicaset.js';
import { cacheKey } from '../src/client/informer.js';
import { SeededRandom } from '../src/clock/random.js';

// The ReplicaSet controller's decisions are pure: these tests need no server. Times are on a fixed virtual day.
const T0 = Date.UTC(2025, 0, 1, 12);
const S = 1000;
let seq = 0;

interface PodOptions {
  node?: string;
  phase?: string;
  ready?: boolean;
  readySince?: number;
  created?: number;
  restarts?: number;
  cost?: number;
  labels?: Record<string, string>;
  owner?: KubeObject;
  deleting?: boolean;
  uid?: string;
}

function pod(name: string, o: PodOptions = {}): KubeObject {
  const status: Record<string, unknown> = { phase: o.phase ?? (o.node ? 'Running' : 'Pending') };
  if (o.ready !== undefined)
    status.conditions = [
      { type: 'Ready', status: o.ready ? 'True' : 'False', lastTransitionTime: rfc3339(o.readySince ?? T0 - 60 * S) },
    ];
  if (o.restarts !== undefined) status.containerStatuses = [{ name: 'c', restartCount: o.restarts }];
  const metadata: KubeObject['metadata'] = {
    name,
    namespace: 'default',
    uid: o.uid ?? `uid-${name}-${seq++}`,
    creationTimestamp: rfc3339(o.created ?? T0 - 120 * S),
    labels: o.labels ?? { app: 'web' },
  };
  if (o.cost !== undefined) metadata.annotations = { 'controller.kubernetes.io/pod-deletion-cost': String(o.cost) };
  if (o.owner)
    metadata.ownerReferences = [
      {
        apiVersion: 'apps/v1',
        kind: 'ReplicaSet',
        name: o.owner.metadata.name!,
        uid: o.owner.metadata.uid!,
        controller: true,
        blockOwnerDeletion: true,
      },
    ];
  if (o.deleting) metadata.deletionTimestamp = rfc3339(T0);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata,
    spec: { containers: [{ name: 'c', image: 'nginx' }], ...(o.node ? { nodeName: o.node } : {}) },
    status,
  };
}

function replicaSet(
  replicas: number,
  extra: { minReadySeconds?: number; generation?: number; status?: Record<string, unknown>; deleting?: boolean } = {},
): KubeObject {
  const rs: KubeObject = {
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    metadata: {
      name: 'web-abc',
      namespace: 'default',
      uid: 'rs-uid',
      generation: extra.generation ?? 1,
      creationTimestamp: rfc3339(T0 - 3600 * S),
    },
    spec: {
      replicas,
      minReadySeconds: extra.minReadySeconds ?? 0,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web', tier: 'front' }, annotations: { note: 'x' } },
        spec: { containers: [{ name: 'c', image: 'nginx' }] },
      },
    },
    status: extra.status ?? { replicas: 0 },
  };
  if (extra.deleting) rs.metadata.deletionTimestamp = rfc3339(T0);
  return rs;
}

const names = (pods: readonly KubeObject[]): string[] => pods.map((p) => p.metadata.name!);

/** planReplicaSet over a plain list of owned pods. */
function planFor(
  rs: KubeObject,
  pods: readonly KubeObject[],
  now: number,
  options: { manage: boolean },
): ReplicaSetPlan {
  return planReplicaSet(rs, summarizePods(pods, templateLabels(rs)), () => new Map(), now, options);
}

describe('pod ranking for deletion (ActivePodsWithRanks)', () => {
  test('unscheduled, then pending, then not ready go before ready running pods', () => {
    const ranked = rankPodsForDeletion(
      [
        pod('running-ready', { node: 'n1', ready: true }),
        pod('running-not-ready', { node: 'n1', ready: false }),
        pod('pending-scheduled', { node: 'n1', phase: 'Pending' }),
        pod('unscheduled'),
        pod('unknown', { node: 'n1', phase: 'Unknown' }),
      ],
      new Map(),
      T0,
    );
    assert.deepEqual(names(ranked), [
      'unscheduled',
      'pending-scheduled',
      'unknown',
      'running-not-ready',
      'running-ready',
    ]);
  });

  test('lower pod-deletion-cost first, then doubled-up nodes first', () => {
    const a = pod('cheap', { node: 'n1', ready: true, cost: -10 });
    const b = pod('dear', { node: 'n1', ready: true, cost: 100 });
    assert.deepEqual(names(rankPodsForDeletion([b, a], new Map(), T0)), ['cheap', 'dear']);
    const crowded = pod('crowded', { node: 'n1', ready: true });
    const alone = pod('alone', { node: 'n2', ready: true });
    const related = [
      crowded,
      alone,
      pod('sibling-1', { node: 'n1', ready: true }),
      pod('sibling-2', { node: 'n1', ready: true }),
    ];
    assert.deepEqual(names(rankPodsForDeletion([alone, crowded], podsPerNode(related), T0)), ['crowded', 'alone']);
  });

  test('ready for less time first, in log2 buckets; more restarts first; newest first', () => {
    // Ready 10 s ago (bucket 33) vs 100 s ago (bucket 36): the recent one goes first.
    const recent = pod('recent', { node: 'n1', ready: true, readySince: T0 - 10 * S });
    const older = pod('older', { node: 'n1', ready: true, readySince: T0 - 100 * S });
    assert.deepEqual(names(rankPodsForDeletion([older, recent], new Map(), T0)), ['recent', 'older']);
    // Same readiness bucket: 70 s and 90 s are both bucket 36, so the uids decide.
    const x = pod('x', { node: 'n1', ready: true, readySince: T0 - 90 * S, uid: 'aaa' });
    const y = pod('y', { node: 'n1', ready: true, readySince: T0 - 70 * S, uid: 'bbb' });
    assert.deepEqual(names(rankPodsForDeletion([y, x], new Map(), T0)), ['x', 'y']);
    const crashy = pod('crashy', { node: 'n1', ready: false, restarts: 5 });
    const calm = pod('calm', { node: 'n1', ready: false, restarts: 0 });
    assert.deepEqual(names(rankPodsForDeletion([calm, crashy], new Map(), T0)), ['crashy', 'calm']);
    const young = pod('young', { created: T0 - 5 * S });
    const old = pod('old', { created: T0 - 500 * S });
    assert.deepEqual(names(rankPodsForDeletion([old, young], new Map(), T0)), ['young', 'old']);
  });

  test('podsToDelete takes the least valuable, and everything when all go', () => {
    const pods = [pod('a', { node: 'n1', ready: true }), pod('b'), pod('c', { node: 'n1', ready: false })];
    assert.deepEqual(names(podsToDelete(pods, new Map(), 2, T0)), ['b', 'c']);
    assert.deepEqual(names(podsToDelete(pods, new Map(), 5, T0)), ['a', 'b', 'c']);
    assert.deepEqual(podsToDelete(pods, new Map(), 0, T0), []);
  });
});

describe('planReplicaSet', () => {
  test('creates the missing pods, at most burstReplicas at a time', () => {
    const rs = replicaSet(5);
    assert.equal(planFor(rs, [pod('a')], T0, { manage: true }).create, 4);
    assert.equal(planFor(replicaSet(2000), [], T0, { manage: true }).create, 500);
    assert.equal(planFor(rs, [], T0, { manage: false }).create, 0, 'nothing while expectations are pending');
  });

  test('deletes the extra pods, least valuable first', () => {
    const rs = replicaSet(1);
    const plan = planFor(rs, [pod('ready', { node: 'n1', ready: true }), pod('pending')], T0, { manage: true });
    assert.deepEqual(names(plan.delete), ['pending']);
    assert.equal(plan.create, 0);
  });

  test('status counts replicas, fully labeled, ready and available after minReadySeconds; requeues for the next', () => {
    const rs = replicaSet(4, { minReadySeconds: 30, generation: 3 });
    const labels = { app: 'web', tier: 'front' };
    const pods = [
      pod('a', { node: 'n1', ready: true, readySince: T0 - 60 * S, labels }),
      pod('b', { node: 'n1', ready: true, readySince: T0 - 10 * S, labels }),
      pod('c', { node: 'n1', ready: true, readySince: T0 - 25 * S }),
      pod('d', { node: 'n1', ready: false, labels }),
    ];
    const plan = planFor(rs, pods, T0, { manage: true });
    assert.deepEqual(plan.status, {
      replicas: 4,
      fullyLabeledReplicas: 3,
      readyReplicas: 3,
      availableReplicas: 1,
      observedGeneration: 3,
    });
    assert.equal(plan.requeueAfterMs, 5 * S, 'pod c becomes available in 5 s');
  });

  test('ReplicaFailure is set when writes fail, kept while they keep failing, removed once they succeed', () => {
    const rs = replicaSet(3);
    const plan = planFor(rs, [], T0, { manage: true });
    const failed = withReplicaFailure(
      plan.status,
      { replicas: 0 },
      new Error('pods "web-abc-x" is forbidden: exceeded quota'),
      -3,
      T0,
    );
    assert.deepEqual(failed.conditions, [
      {
        type: 'ReplicaFailure',
        status: 'True',
        lastTransitionTime: rfc3339(T0),
        reason: 'FailedCreate',
        message: 'pods "web-abc-x" is forbidden: exceeded quota',
      },
    ]);
    const again = withReplicaFailure(plan.status, failed, new Error('another message'), -3, T0 + 60 * S);
    assert.deepEqual(again.conditions, failed.conditions, 'an existing failure condition is left as it is');
    assert.equal(withReplicaFailure(plan.status, failed, undefined, 0, T0).conditions, undefined);
  });

  test('pods come from the template, owned by the ReplicaSet', () => {
    const rs = replicaSet(1);
    const ref = {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      name: 'web-abc',
      uid: 'rs-uid',
      controller: true,
      blockOwnerDeletion: true,
    };
    const p = podFromTemplate(rs, ref);
    assert.equal(p.metadata.generateName, 'web-abc-');
    assert.deepEqual(p.metadata.labels, { app: 'web', tier: 'front' });
    assert.deepEqual(p.metadata.annotations, { note: 'x' });
    assert.deepEqual(p.metadata.ownerReferences, [ref]);
    assert.deepEqual(p.spec, { containers: [{ name: 'c', image: 'nginx' }] });
  });

  test('slow start: batches of 1, 2, 4 …, stopping at the first failing batch', async () => {
    let calls = 0;
    const ok = await slowStartBatch(10, 1, async () => void calls++);
    assert.deepEqual(ok, { successes: 10 });
    assert.equal(calls, 10);
    calls = 0;
    const failing = await slowStartBatch(10, 1, async () => {
      if (++calls > 3) throw new Error('quota');
    });
    // Batches of 1 and 2 succeed (3 calls); every call of the batch of 4 fails, and no batch of 8 is tried.
    assert.equal(failing.successes, 3);
    assert.equal(failing.error?.message, 'quota');
    assert.equal(calls, 7);
  });
});

describe('claiming pods', () => {
  const selector = selectorFromObject({ matchLabels: { app: 'web' } });

  test('keeps matching owned pods, releases non-matching ones, adopts matching orphans', () => {
    const rs = replicaSet(3);
    const mine = pod('mine', { owner: rs });
    const strayed = pod('strayed', { owner: rs, labels: { app: 'other' } });
    const orphan = pod('orphan');
    const foreign = pod('foreign', { labels: { app: 'nope' } });
    const dying = pod('dying', { deleting: true });
    const claims = planClaims(rs, childSelector(selector), [mine, strayed], [orphan, foreign, dying]);
    assert.deepEqual(names(claims.owned), ['mine']);
    assert.deepEqual(names(claims.release), ['strayed']);
    assert.deepEqual(names(claims.adopt), ['orphan']);
  });

  test('a ReplicaSet being deleted neither adopts nor releases', () => {
    const rs = replicaSet(3, { deleting: true });
    const claims = planClaims(
      rs,
      childSelector(selector),
      [pod('strayed', { owner: rs, labels: { app: 'other' } })],
      [pod('orphan')],
    );
    assert.deepEqual(claims, { owned: [], adopt: [], release: [] });
  });
});

describe('the incremental tally of owned pods', () => {
  test('agrees with recounting from scratch through a random history of pod events', () => {
    const rng = new SeededRandom(7);
    const rs = replicaSet(10);
    const other = { ...replicaSet(1), metadata: { ...replicaSet(1).metadata, name: 'other', uid: 'other-uid' } };
    const selector = childSelector(selectorFromObject({ matchLabels: { app: 'web' } }));
    const labels = templateLabels(rs);
    const cache = new Map<string, KubeObject>();
    const tally = new OwnedPodTally('rs-uid');
    const source = {
      get: (key: string) => cache.get(key),
      controlledKeys: () =>
        [...cache.values()].filter((p) => p.metadata.ownerReferences?.[0]?.uid === 'rs-uid').map(cacheKey),
    };
    const touch = (p: KubeObject | undefined): void => {
      if (p?.metadata.ownerReferences?.[0]?.uid === 'rs-uid') tally.touch(cacheKey(p));
    };
    for (let step = 0; step < 2000; step++) {
      const name = `p${rng.int(40)}`;
      const key = `default/${name}`;
      const old = cache.get(key);
      const roll = rng.next();
      if (roll < 0.15) {
        cache.delete(key);
      } else {
        const next = pod(name, {
          owner: rng.next() < 0.8 ? rs : rng.next() < 0.5 ? other : undefined,
          labels:
            rng.next() < 0.85 ? { app: 'web', ...(rng.next() < 0.7 ? { tier: 'front' } : {}) } : { app: 'elsewhere' },
          ready: rng.next() < 0.6,
          readySince: T0 - rng.int(100) * S,
          phase: rng.next() < 0.1 ? 'Failed' : 'Running',
          node: rng.next() < 0.1 ? undefined : `n${rng.int(4)}`,
          deleting: rng.next() < 0.05,
        });
        if (!next.metadata.ownerReferences) delete next.metadata.ownerReferences;
        cache.set(key, next);
        touch(next);
      }
      touch(old);
      if (rng.next() < 0.3) {
        tally.refresh(source, selector, labels);
        const truth = [...cache.values()].filter(
          (p) => p.metadata.ownerReferences?.[0]?.uid === 'rs-uid' && isPodActive(p) && selector.matches(p),
        );
        const expected = summarizePods(truth, labels);
        assert.deepEqual(
          {
            count: tally.count,
            fullyLabeled: tally.fullyLabeled,
            ready: tally.ready,
            since: [...tally.readySince()].sort(),
            pods: names(tally.pods()).sort(),
          },
          {
            count: expected.count,
            fullyLabeled: expected.fullyLabeled,
            ready: expected.ready,
            since: [...expected.readySince()].sort(),
            pods: names(expected.pods()).sort(),
          },
          `step ${step}`,
        );
        assert.deepEqual([...tally.podsPerNode()].sort(), [...podsPerNode(truth)].sort());
        const strays = [...cache.values()].filter(
          (p) => p.metadata.ownerReferences?.[0]?.uid === 'rs-uid' && isPodActive(p) && !selector.matches(p),
        );
        assert.deepEqual(names(tally.strays()).sort(), names(strays).sort());
      }
    }
  });
});
