import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { rfc3339 } from '../src/clock/clock.js';
import { SeededRandom } from '../src/clock/random.js';
import { resolveFenceposts, scaledValue } from '../src/controllers/deployment/fenceposts.js';
import { computeHash, fnv32a } from '../src/controllers/deployment/hash.js';
import type { DeploymentCondition, DeploymentStatus } from '../src/controllers/deployment/model.js';
import { planDeployment } from '../src/controllers/deployment/plan.js';
import { equalIgnoreHash } from '../src/controllers/deployment/replicasets.js';
import { setNewReplicaSetAnnotations } from '../src/controllers/deployment/revision.js';
import type { DeploymentPlan } from '../src/controllers/deployment/sync.js';

// The deployment controller's decisions are pure: these tests drive them against a small model of the
// ReplicaSet controller, without a server. Times are on a fixed virtual day.
const T0 = Date.UTC(2025, 0, 1, 12);
const S = 1000;

interface DeploymentOptions {
  replicas: number;
  surge?: number | string;
  unavailable?: number | string;
  strategy?: 'RollingUpdate' | 'Recreate';
  image?: string;
  paused?: boolean;
  historyLimit?: number;
  deadline?: number;
}

function deployment(o: DeploymentOptions): KubeObject {
  const strategy =
    o.strategy === 'Recreate'
      ? { type: 'Recreate' }
      : {
          type: 'RollingUpdate',
          rollingUpdate: { maxSurge: o.surge ?? '25%', maxUnavailable: o.unavailable ?? '25%' },
        };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web', namespace: 'default', uid: 'd-uid', generation: 1, creationTimestamp: rfc3339(T0) },
    spec: {
      replicas: o.replicas,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' } },
        spec: { containers: [{ name: 'c', image: o.image ?? 'nginx:1' }] },
      },
      strategy,
      minReadySeconds: 0,
      revisionHistoryLimit: o.historyLimit ?? 10,
      progressDeadlineSeconds: o.deadline ?? 600,
      paused: o.paused ?? false,
    },
  };
}

interface SimReplicaSet {
  rs: KubeObject;
  /** Pods that exist (not terminating). */
  pods: number;
  /** Of those, the available ones. */
  available: number;
}

/**
 * A model cluster: the Deployment, its ReplicaSets, and a ReplicaSet controller that acts on a random subset of
 * ReplicaSets each tick (so the deployment controller often sees stale statuses). Pods created at one tick of
 * their ReplicaSet are available at its next; a scale-down deletes unavailable pods first.
 */
class Model {
  d: KubeObject;
  readonly sets = new Map<string, SimReplicaSet>();
  now = T0;
  private seq = 0;
  private readonly rng: SeededRandom;
  readonly events: string[] = [];
  plans = 0;

  constructor(d: KubeObject, seed = 1) {
    this.d = d;
    this.rng = new SeededRandom(seed);
  }

  get replicaSets(): KubeObject[] {
    return [...this.sets.values()].map((s) => s.rs);
  }

  totalPods(): number {
    let n = 0;
    for (const s of this.sets.values()) n += s.pods;
    return n;
  }

  totalAvailable(): number {
    let n = 0;
    for (const s of this.sets.values()) n += s.available;
    return n;
  }

  /** Runs the deployment controller once and applies its plan. */
  sync(): DeploymentPlan {
    this.plans++;
    const plan = planDeployment({
      deployment: this.d,
      replicaSets: this.replicaSets,
      podsOf: (uid) => this.podsOf(uid),
      now: this.now,
    });
    if (plan.create) {
      const rs = structuredClone(plan.create.rs);
      rs.metadata.uid = `rs-${this.seq++}`;
      rs.metadata.generation = 1;
      rs.metadata.creationTimestamp = rfc3339(this.now);
      rs.status = { replicas: 0 };
      this.sets.set(rs.metadata.name!, { rs, pods: 0, available: 0 });
      this.events.push(...plan.create.events.map((e) => e.message));
    }
    for (const w of plan.updates) {
      const current = this.sets.get(w.rs.metadata.name!)!;
      const specChanged = JSON.stringify(current.rs.spec) !== JSON.stringify(w.rs.spec);
      current.rs = {
        ...structuredClone(w.rs),
        metadata: {
          ...structuredClone(w.rs.metadata),
          generation: (current.rs.metadata.generation ?? 1) + (specChanged ? 1 : 0),
        },
      };
      this.events.push(...w.events.map((e) => e.message));
    }
    for (const rs of plan.deletes) this.sets.delete(rs.metadata.name!);
    if (plan.deployment) this.d = structuredClone(plan.deployment);
    return plan;
  }

  podsOf(uid: string): KubeObject[] {
    for (const s of this.sets.values()) {
      if (s.rs.metadata.uid === uid)
        return Array.from({ length: s.pods }, () => ({ metadata: {}, status: { phase: 'Running' } }) as KubeObject);
    }
    return [];
  }

  /** The ReplicaSet controller acting on one ReplicaSet. */
  reconcileReplicaSet(s: SimReplicaSet): void {
    const want = (s.rs.spec as { replicas: number }).replicas;
    if (want < s.pods) s.available = Math.min(s.available, want);
    else s.available = s.pods;
    s.pods = want;
    s.rs = {
      ...s.rs,
      status: {
        replicas: s.pods,
        availableReplicas: s.available,
        readyReplicas: s.available,
        observedGeneration: s.rs.metadata.generation,
      },
    };
  }

  /** One tick: some ReplicaSets are reconciled (all of them when `all`), time moves a second. */
  tick(all = false): void {
    for (const s of this.sets.values()) if (all || this.rng.next() < 0.5) this.reconcileReplicaSet(s);
    this.now += S;
  }

  setTemplateImage(image: string): void {
    const d = structuredClone(this.d);
    (d.spec as { template: { spec: { containers: Array<{ image: string }> } } }).template.spec.containers[0]!.image =
      image;
    d.metadata.generation = (d.metadata.generation ?? 1) + 1;
    this.d = d;
  }

  setSpec(fields: Record<string, unknown>): void {
    const d = structuredClone(this.d);
    d.spec = { ...(d.spec as object), ...fields };
    d.metadata.generation = (d.metadata.generation ?? 1) + 1;
    this.d = d;
  }

  get status(): DeploymentStatus {
    return (this.d.status ?? {}) as DeploymentStatus;
  }

  condition(type: string): DeploymentCondition | undefined {
    return this.status.conditions?.find((c) => c.type === type);
  }

  complete(): boolean {
    const replicas = (this.d.spec as { replicas: number }).replicas;
    const s = this.status;
    return (
      (s.observedGeneration ?? 0) >= (this.d.metadata.generation ?? 0) &&
      (s.updatedReplicas ?? 0) === replicas &&
      (s.replicas ?? 0) === replicas &&
      (s.availableReplicas ?? 0) === replicas
    );
  }

  /** Syncs and ticks until the rollout is complete (and the plans stop changing anything). */
  settle(check: () => void = () => undefined, maxTicks = 500): void {
    for (let i = 0; i < maxTicks; i++) {
      const plan = this.sync();
      check();
      this.tick();
      check();
      if (this.complete() && !plan.create && plan.updates.length === 0 && !plan.deployment) return;
    }
    assert.fail(`no convergence after ${maxTicks} ticks: ${JSON.stringify(this.status)}`);
  }
}

describe('maxSurge and maxUnavailable', () => {
  test('percentages: surge rounds up, unavailable rounds down', () => {
    assert.deepEqual(resolveFenceposts('25%', '25%', 10), { surge: 3, unavailable: 2 });
    assert.deepEqual(resolveFenceposts(0, '10%', 10), { surge: 0, unavailable: 1 });
    assert.deepEqual(resolveFenceposts('1%', '0%', 10), { surge: 1, unavailable: 0 });
    assert.deepEqual(resolveFenceposts('0%', '0%', 10), { surge: 0, unavailable: 1 }, 'never both 0');
    assert.deepEqual(resolveFenceposts(2, 3, 10), { surge: 2, unavailable: 3 });
    assert.equal(scaledValue('33%', 10, true), 4);
    assert.equal(scaledValue('33%', 10, false), 3);
    assert.equal(scaledValue('5', 10, true), undefined, 'a string that is not a percentage is invalid');
  });
});

describe('pod-template-hash', () => {
  test('FNV-32a, safe-encoded; stable, and moved by the collision count', () => {
    assert.equal(fnv32a(Buffer.from('')), 0x811c9dc5);
    assert.equal(fnv32a(Buffer.from('a')), 0xe40c292c);
    assert.equal(fnv32a(Buffer.from('foobar')), 0xbf9cf968);
    const template = deployment({ replicas: 1 }).spec as { template: unknown };
    const h = computeHash(template.template);
    assert.match(h, /^[4-9bcdf]{8,10}$/);
    assert.equal(computeHash(structuredClone(template.template)), h);
    assert.notEqual(computeHash(template.template, 1), h);
    assert.notEqual(
      computeHash(template.template, 0),
      h,
      'a collision count of 0 is hashed too, as a non-nil pointer is',
    );
    assert.notEqual(
      computeHash((deployment({ replicas: 1, image: 'nginx:2' }).spec as { template: unknown }).template),
      h,
    );
  });

  test('templates are equal ignoring the hash label and empty maps', () => {
    const a = {
      metadata: { labels: { app: 'web', 'pod-template-hash': 'abc' } },
      spec: { containers: [{ name: 'c' }] },
    };
    const b = {
      metadata: { labels: { app: 'web' }, annotations: {} },
      spec: { containers: [{ name: 'c' }], volumes: [] },
    };
    assert.ok(equalIgnoreHash(a, b));
    assert.ok(!equalIgnoreHash(a, { ...b, spec: { containers: [{ name: 'd' }] } }));
  });
});

describe('a new Deployment', () => {
  test('creates its ReplicaSet named by the hash, with revision 1, and reports progress', () => {
    const d = deployment({ replicas: 3 });
    const plan = planDeployment({ deployment: d, replicaSets: [], podsOf: () => [], now: T0 });
    const rs = plan.create!.rs;
    const hash = computeHash((d.spec as { template: unknown }).template);
    assert.equal(rs.metadata.name, `web-${hash}`);
    assert.deepEqual(rs.metadata.labels, { app: 'web', 'pod-template-hash': hash });
    assert.deepEqual((rs.spec as { selector: unknown }).selector, {
      matchLabels: { app: 'web', 'pod-template-hash': hash },
    });
    assert.equal((rs.spec as { replicas: number }).replicas, 3);
    assert.deepEqual(rs.metadata.annotations, {
      'deployment.kubernetes.io/desired-replicas': '3',
      'deployment.kubernetes.io/max-replicas': '4',
      'deployment.kubernetes.io/revision': '1',
    });
    assert.deepEqual(rs.metadata.ownerReferences, [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name: 'web',
        uid: 'd-uid',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.deepEqual(
      plan.create!.events.map((e) => e.message),
      [`Scaled up replica set web-${hash} from 0 to 3`],
    );
    assert.equal(plan.deployment!.metadata.annotations!['deployment.kubernetes.io/revision'], '1');
    const status = plan.deployment!.status as DeploymentStatus;
    assert.equal(status.observedGeneration, 1);
    assert.deepEqual(
      status.conditions!.map((c) => [c.type, c.status, c.reason, c.message]),
      [
        ['Progressing', 'True', 'NewReplicaSetCreated', `Created new replica set "web-${hash}"`],
        ['Available', 'False', 'MinimumReplicasUnavailable', 'Deployment does not have minimum availability.'],
      ],
    );
  });

  test('becomes Available and Progressing NewReplicaSetAvailable', () => {
    const m = new Model(deployment({ replicas: 3 }));
    m.settle();
    const rs = m.replicaSets[0]!;
    assert.deepEqual(m.condition('Available')?.reason, 'MinimumReplicasAvailable');
    assert.equal(m.condition('Available')?.message, 'Deployment has minimum availability.');
    assert.equal(m.condition('Progressing')?.reason, 'NewReplicaSetAvailable');
    assert.equal(m.condition('Progressing')?.message, `ReplicaSet "${rs.metadata.name}" has successfully progressed.`);
    assert.deepEqual(
      { ...m.status, conditions: undefined },
      {
        observedGeneration: 1,
        replicas: 3,
        updatedReplicas: 3,
        readyReplicas: 3,
        availableReplicas: 3,
        conditions: undefined,
      },
    );
  });
});

describe('rolling updates keep within maxSurge and maxUnavailable at every step', () => {
  const settings: Array<[number, number | string, number | string]> = [
    [10, '25%', '25%'],
    [10, 3, 2],
    [5, 0, 1],
    [7, '0%', '30%'],
    [4, '50%', 0],
    [9, '1%', '0%'],
    [1, 0, 1],
    [3, 1, 0],
  ];
  for (const [replicas, surge, unavailable] of settings) {
    test(`${replicas} replicas, maxSurge ${surge}, maxUnavailable ${unavailable}`, () => {
      const { surge: s, unavailable: u } = resolveFenceposts(surge, unavailable, replicas);
      for (const seed of [1, 2, 3, 4]) {
        const m = new Model(deployment({ replicas, surge, unavailable }), seed);
        m.settle();
        m.setTemplateImage('nginx:2');
        let worst = { pods: 0, available: replicas };
        m.settle(() => {
          worst = {
            pods: Math.max(worst.pods, m.totalPods()),
            available: Math.min(worst.available, m.totalAvailable()),
          };
          assert.ok(m.totalPods() <= replicas + s, `seed ${seed}: ${m.totalPods()} pods > ${replicas} + ${s}`);
          assert.ok(
            m.totalAvailable() >= replicas - Math.min(u, replicas),
            `seed ${seed}: ${m.totalAvailable()} available < ${replicas} - ${u}`,
          );
        });
        const sets = [...m.sets.values()];
        assert.equal(sets.length, 2);
        const [old, next] = sets;
        assert.equal(old!.pods, 0);
        assert.equal(next!.pods, replicas);
        assert.equal(next!.rs.metadata.annotations!['deployment.kubernetes.io/revision'], '2');
        assert.equal(m.d.metadata.annotations!['deployment.kubernetes.io/revision'], '2');
        if (s > 0) assert.equal(worst.pods, replicas + s, `seed ${seed}: the surge is used`);
      }
    });
  }
});

describe('Recreate', () => {
  test('scales the old ReplicaSet to 0 and waits for its pods before creating the new one', () => {
    const m = new Model(deployment({ replicas: 3, strategy: 'Recreate' }));
    m.settle();
    m.setTemplateImage('nginx:2');
    const first = m.sync();
    assert.equal(first.create, undefined, 'no new ReplicaSet while old pods exist');
    assert.deepEqual(
      first.updates.map((u) => (u.rs.spec as { replicas: number }).replicas),
      [0],
    );
    m.sync();
    assert.equal(m.sets.size, 1, 'still waiting: the old pods are not gone');
    m.tick(true);
    const second = m.sync();
    assert.equal((second.create!.rs.spec as { replicas: number }).replicas, 3, 'created at full size');
    m.settle(() => assert.ok(m.totalPods() <= 3));
    assert.equal(m.condition('Available')?.status, 'True');
  });
});

describe('proportional scaling during a rollout', () => {
  test('the worked example: 10 → 15 mid-rollout spreads 5 over old and new by size', () => {
    const m = new Model(deployment({ replicas: 10, surge: 3, unavailable: 2 }));
    m.settle();
    m.setTemplateImage('nginx:2');
    // First sync: new ReplicaSet created at 3 and old down to 8 (2 may be unavailable); second: new up to 5.
    // Old 8 + new 5 = 13 = 10 + 3.
    for (let i = 0; i < 2; i++) {
      m.sync();
      m.tick(true);
    }
    const [old, next] = [...m.sets.values()];
    assert.deepEqual([old!.pods, next!.pods], [8, 5]);
    m.setSpec({ replicas: 15 });
    const plan = m.sync();
    const sizes = Object.fromEntries(
      plan.updates.map((u) => [u.rs.metadata.name, (u.rs.spec as { replicas: number }).replicas]),
    );
    assert.deepEqual(sizes, { [old!.rs.metadata.name!]: 11, [next!.rs.metadata.name!]: 7 });
    for (const u of plan.updates)
      assert.equal(u.rs.metadata.annotations!['deployment.kubernetes.io/desired-replicas'], '15');
    m.settle();
    assert.equal(m.totalPods(), 15);
  });

  test('scaling down a settled Deployment resizes its one active ReplicaSet', () => {
    const m = new Model(deployment({ replicas: 5 }));
    m.settle();
    m.setSpec({ replicas: 2 });
    const plan = m.sync();
    assert.deepEqual(
      plan.updates.map((u) => u.events.map((e) => e.message)),
      [[`Scaled down replica set ${m.replicaSets[0]!.metadata.name} from 5 to 2`]],
    );
    m.settle();
    assert.equal(m.totalPods(), 2);
  });
});

describe('revisions and rollback', () => {
  test('going back to an old template reuses its ReplicaSet as a new revision, keeping the old number in history', () => {
    const m = new Model(deployment({ replicas: 2 }));
    m.settle();
    m.setTemplateImage('nginx:2');
    m.settle();
    m.setTemplateImage('nginx:1');
    m.settle();
    assert.equal(m.sets.size, 2, 'no new ReplicaSet: the first one is reused');
    const first = m.replicaSets[0]!;
    assert.equal(first.metadata.annotations!['deployment.kubernetes.io/revision'], '3');
    assert.equal(first.metadata.annotations!['deployment.kubernetes.io/revision-history'], '1');
    assert.equal(m.d.metadata.annotations!['deployment.kubernetes.io/revision'], '3');
  });

  test('revision-history is capped in length, oldest entries dropped', () => {
    const annotations: Record<string, string> = {
      'deployment.kubernetes.io/revision': '7',
      'deployment.kubernetes.io/revision-history': `${'1,'.repeat(999)}2`,
    };
    setNewReplicaSetAnnotations(deployment({ replicas: 1 }), annotations, 8, true);
    const history = annotations['deployment.kubernetes.io/revision-history']!;
    assert.ok(history.length <= 2000);
    assert.ok(history.endsWith(',2,7'));
  });

  test('revisionHistoryLimit deletes the oldest settled old ReplicaSets', () => {
    const m = new Model(deployment({ replicas: 1, historyLimit: 2 }));
    for (let v = 1; v <= 5; v++) {
      if (v > 1) m.setTemplateImage(`nginx:${v}`);
      m.settle();
      m.tick(true);
      m.settle();
    }
    const revisions = m.replicaSets.map((rs) => rs.metadata.annotations!['deployment.kubernetes.io/revision']).sort();
    assert.deepEqual(revisions, ['3', '4', '5']);
  });
});

describe('conditions', () => {
  test('no progress for progressDeadlineSeconds → Progressing False ProgressDeadlineExceeded; a requeue is asked for the deadline', () => {
    const m = new Model(deployment({ replicas: 2, deadline: 60 }));
    const plan = m.sync();
    assert.equal(plan.requeueAfterMs, 61 * S);
    m.now += 30 * S;
    assert.equal(m.sync().requeueAfterMs, 31 * S);
    m.now += 31 * S;
    m.sync();
    assert.deepEqual(
      [m.condition('Progressing')?.status, m.condition('Progressing')?.reason, m.condition('Progressing')?.message],
      [
        'False',
        'ProgressDeadlineExceeded',
        `ReplicaSet "${m.replicaSets[0]!.metadata.name}" has timed out progressing.`,
      ],
    );
    // Progress after the deadline makes it True again (ReplicaSetUpdated), and completion NewReplicaSetAvailable.
    m.settle();
    assert.equal(m.condition('Progressing')?.reason, 'NewReplicaSetAvailable');
  });

  test('pausing shows Progressing Unknown and holds the rollout; resuming continues it', () => {
    const m = new Model(deployment({ replicas: 2 }));
    m.settle();
    m.setSpec({ paused: true });
    m.sync();
    assert.deepEqual(
      [m.condition('Progressing')?.status, m.condition('Progressing')?.reason, m.condition('Progressing')?.message],
      ['Unknown', 'DeploymentPaused', 'Deployment is paused'],
    );
    m.setTemplateImage('nginx:2');
    const paused = m.sync();
    assert.equal(paused.create, undefined, 'a paused Deployment does not roll out');
    m.setSpec({ paused: false });
    const resumed = m.sync();
    assert.ok(resumed.create, 'resuming rolls out');
    assert.notEqual(m.condition('Progressing')?.reason, 'DeploymentPaused');
    m.settle();
    assert.equal(m.condition('Progressing')?.reason, 'NewReplicaSetAvailable');
  });

  test('a ReplicaSet that cannot create pods shows as ReplicaFailure on the Deployment', () => {
    const m = new Model(deployment({ replicas: 2 }));
    m.sync();
    const s = [...m.sets.values()][0]!;
    s.rs = {
      ...s.rs,
      status: {
        replicas: 0,
        conditions: [
          {
            type: 'ReplicaFailure',
            status: 'True',
            reason: 'FailedCreate',
            message: 'forbidden',
            lastTransitionTime: rfc3339(T0),
          },
        ],
      },
    };
    m.sync();
    assert.deepEqual(
      [m.condition('ReplicaFailure')?.reason, m.condition('ReplicaFailure')?.message],
      ['FailedCreate', 'forbidden'],
    );
  });
});
