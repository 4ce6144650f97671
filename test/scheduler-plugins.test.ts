import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { desiredTaints, evictionTime } from '../src/controllers/node-lifecycle.js';
import {
  allocatableOf,
  feasibleNodesToFind,
  filterNode,
  fitErrorMessage,
  podRequest,
  selectHost,
  type Candidate,
  type FilterFailure,
  type NodeState,
} from '../src/scheduler/plugins.js';

// The scheduler's filters and scores, and the node lifecycle's taint decisions, are pure: no server here.
type Obj = Record<string, unknown>;

function node(
  name: string,
  extra: {
    labels?: Record<string, string>;
    taints?: Obj[];
    unschedulable?: boolean;
    cpu?: string;
    pods?: string;
    ready?: string;
  } = {},
): KubeObject {
  const spec: Obj = {};
  if (extra.taints) spec.taints = extra.taints;
  if (extra.unschedulable) spec.unschedulable = true;
  return {
    metadata: {
      name,
      labels: { 'kubernetes.io/hostname': name, 'topology.kubernetes.io/zone': 'zone-a', ...(extra.labels ?? {}) },
    },
    spec,
    status: {
      allocatable: { cpu: extra.cpu ?? '4', memory: '16Gi', pods: extra.pods ?? '110' },
      conditions: [{ type: 'Ready', status: extra.ready ?? 'True' }],
    },
  };
}

function state(n: KubeObject, used: { cpu?: number; pods?: number } = {}): NodeState {
  return {
    name: n.metadata.name!,
    node: n,
    allocatable: allocatableOf(n),
    requested: new Map([['cpu', (used.cpu ?? 0) * 1000]]),
    nonZeroCpu: (used.cpu ?? 0) * 1000,
    nonZeroMemory: 0,
    pods: used.pods ?? 0,
  };
}

function pod(spec: Obj = {}): KubeObject {
  return { metadata: { name: 'p', namespace: 'default' }, spec: { containers: [{ name: 'c', image: 'x' }], ...spec } };
}

const withCpu = (cpu: string, spec: Obj = {}): KubeObject =>
  pod({ containers: [{ name: 'c', image: 'x', resources: { requests: { cpu } } }], ...spec });

function fit(p: KubeObject, n: KubeObject, used: { cpu?: number; pods?: number } = {}): FilterFailure | undefined {
  return filterNode(p, podRequest(p), state(n, used));
}

describe('scheduler filters', () => {
  test('requests: containers add up, the largest init container counts when larger, limits stand in for requests', () => {
    const p = pod({
      containers: [
        { name: 'a', image: 'x', resources: { requests: { cpu: '250m', memory: '64Mi' } } },
        { name: 'b', image: 'x', resources: { limits: { cpu: '1' } } },
      ],
      initContainers: [{ name: 'i', image: 'x', resources: { requests: { cpu: '2', memory: '1Gi' } } }],
    });
    const r = podRequest(p);
    assert.equal(r.resources.get('cpu'), 2000);
    assert.equal(r.resources.get('memory'), 1024 * 1024 * 1024 * 1000);
    assert.equal(r.nonZeroCpu, 1250);
  });

  test('resources and the pods limit', () => {
    assert.equal(fit(withCpu('3'), node('n1'), { cpu: 1 }), undefined);
    assert.deepEqual(fit(withCpu('3'), node('n1'), { cpu: 1.5 }), {
      reasons: ['Insufficient cpu'],
      unresolvable: false,
    });
    assert.deepEqual(fit(pod(), node('n1', { pods: '2' }), { pods: 2 }), {
      reasons: ['Too many pods'],
      unresolvable: false,
    });
    const big = pod({
      containers: [
        { name: 'c', image: 'x', resources: { requests: { cpu: '8', memory: '32Gi', 'nvidia.com/gpu': '1' } } },
      ],
    });
    assert.deepEqual(fit(big, node('n1'))?.reasons, [
      'Insufficient cpu',
      'Insufficient memory',
      'Insufficient nvidia.com/gpu',
    ]);
  });

  test('nodeSelector, required node affinity (terms ORed, expressions ANDed, matchFields)', () => {
    const ssd = node('n1', { labels: { disk: 'ssd', gen: '5' } });
    const hdd = node('n2', { labels: { disk: 'hdd' } });
    const selector = pod({ nodeSelector: { disk: 'ssd' } });
    assert.equal(fit(selector, ssd), undefined);
    assert.deepEqual(fit(selector, hdd), {
      reasons: ["node(s) didn't match Pod's node affinity/selector"],
      unresolvable: true,
    });
    const affinity = (terms: Obj[]): KubeObject =>
      pod({
        affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } },
      });
    assert.equal(
      fit(affinity([{ matchExpressions: [{ key: 'gen', operator: 'Gt', values: ['4'] }] }]), ssd),
      undefined,
    );
    assert.notEqual(
      fit(affinity([{ matchExpressions: [{ key: 'gen', operator: 'Gt', values: ['5'] }] }]), ssd),
      undefined,
    );
    assert.equal(
      fit(
        affinity([
          { matchExpressions: [{ key: 'disk', operator: 'In', values: ['nvme'] }] },
          { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n2'] }] },
        ]),
        hdd,
      ),
      undefined,
    );
    assert.equal(
      fit(affinity([{ matchExpressions: [{ key: 'disk', operator: 'DoesNotExist' }] }]), hdd)?.unresolvable,
      true,
    );
  });

  test('taints need tolerations (NoSchedule and NoExecute; PreferNoSchedule does not filter); cordoned nodes', () => {
    const tainted = node('n1', { taints: [{ key: 'dedicated', value: 'gpu', effect: 'NoSchedule' }] });
    assert.deepEqual(fit(pod(), tainted), {
      reasons: ['node(s) had untolerated taint {dedicated: gpu}'],
      unresolvable: true,
    });
    assert.equal(
      fit(pod({ tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'gpu', effect: 'NoSchedule' }] }), tainted),
      undefined,
    );
    assert.equal(fit(pod({ tolerations: [{ operator: 'Exists' }] }), tainted), undefined);
    assert.notEqual(fit(pod({ tolerations: [{ key: 'dedicated', value: 'cpu' }] }), tainted), undefined);
    assert.equal(fit(pod(), node('n2', { taints: [{ key: 'x', effect: 'PreferNoSchedule' }] })), undefined);
    const unreachable = node('n3', { taints: [{ key: 'node.kubernetes.io/unreachable', effect: 'NoSchedule' }] });
    assert.deepEqual(fit(pod(), unreachable)?.reasons, [
      'node(s) had untolerated taint {node.kubernetes.io/unreachable: }',
    ]);
    assert.deepEqual(fit(pod(), node('n4', { unschedulable: true })), {
      reasons: ['node(s) were unschedulable'],
      unresolvable: true,
    });
    assert.equal(
      fit(
        pod({ tolerations: [{ key: 'node.kubernetes.io/unschedulable', operator: 'Exists', effect: 'NoSchedule' }] }),
        node('n4', { unschedulable: true }),
      ),
      undefined,
    );
  });

  test('the FitError message: a sorted histogram, then what preemption found', () => {
    const cpu: FilterFailure = { reasons: ['Insufficient cpu'], unresolvable: false };
    const taint: FilterFailure = { reasons: ['node(s) had untolerated taint {dedicated: gpu}'], unresolvable: true };
    assert.equal(
      fitErrorMessage(3, [cpu, cpu, cpu]),
      '0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.',
    );
    assert.equal(
      fitErrorMessage(3, [cpu, taint, { reasons: ['Insufficient cpu', 'Insufficient memory'], unresolvable: false }]),
      '0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.',
    );
    assert.equal(fitErrorMessage(0, []), 'no nodes available to schedule pods');
    assert.match(fitErrorMessage(1, [cpu], 'Never'), /preemption: not eligible due to preemptionPolicy=Never\.$/);
  });

  test('how many feasible nodes to look for (percentageOfNodesToScore)', () => {
    assert.deepEqual([3, 99, 100, 1000, 5000].map(feasibleNodesToFind), [3, 99, 100, 420, 500]);
  });
});

describe('scheduler scores', () => {
  test('the emptier node wins; siblings spread across nodes and zones; ties broken by the seeded pick', () => {
    const p = withCpu('500m');
    const c = (n: KubeObject, cpu: number, onNode = 0, inZone = 0): Candidate => ({
      state: state(n, { cpu }),
      siblingsOnNode: onNode,
      siblingsInZone: inZone,
    });
    assert.equal(
      selectHost(p, podRequest(p), [c(node('busy'), 3), c(node('idle'), 0)], () => 0),
      1,
    );
    const a = node('a', { labels: { 'topology.kubernetes.io/zone': 'zone-a' } });
    const b = node('b', { labels: { 'topology.kubernetes.io/zone': 'zone-b' } });
    assert.equal(
      selectHost(p, podRequest(p), [c(a, 0, 2, 2), c(b, 0, 0, 0)], () => 0),
      1,
      'away from its siblings',
    );
    assert.equal(
      selectHost(p, podRequest(p), [c(node('x'), 0), c(node('y'), 0)], (n) => n - 1),
      1,
    );
    const preferred = pod({
      affinity: {
        nodeAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            { weight: 50, preference: { matchExpressions: [{ key: 'disk', operator: 'In', values: ['ssd'] }] } },
          ],
        },
      },
    });
    assert.equal(
      selectHost(
        preferred,
        podRequest(preferred),
        [c(node('hdd'), 0), c(node('ssd', { labels: { disk: 'ssd' } }), 1)],
        () => 0,
      ),
      1,
    );
  });
});

describe('node lifecycle decisions', () => {
  const at = '2025-01-01T00:01:00Z';
  test('taints follow the Ready condition and cordoning; other taints and timeAdded are kept', () => {
    assert.deepEqual(
      desiredTaints(node('n', { ready: 'Unknown', taints: [{ key: 'team', value: 'a', effect: 'NoSchedule' }] }), at),
      [
        { key: 'team', value: 'a', effect: 'NoSchedule' },
        { key: 'node.kubernetes.io/unreachable', effect: 'NoSchedule' },
        { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: at },
      ],
    );
    const earlier = [
      { key: 'node.kubernetes.io/not-ready', effect: 'NoExecute', timeAdded: '2025-01-01T00:00:00Z' },
      { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' },
    ];
    assert.deepEqual(desiredTaints(node('n', { ready: 'False', taints: earlier }), at), earlier);
    assert.deepEqual(desiredTaints(node('n', { ready: 'True', taints: earlier, unschedulable: true }), at), [
      { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' },
    ]);
  });

  test('NoExecute: untolerated → now, tolerationSeconds → taint time + seconds, forever → never', () => {
    const now = Date.parse('2025-01-01T00:02:00Z');
    const taints = [{ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: at }];
    const tolerating = (seconds?: number): KubeObject =>
      pod({
        tolerations: [
          {
            key: 'node.kubernetes.io/unreachable',
            operator: 'Exists',
            effect: 'NoExecute',
            ...(seconds === undefined ? {} : { tolerationSeconds: seconds }),
          },
        ],
      });
    assert.equal(evictionTime(pod(), taints, now), now);
    assert.equal(evictionTime(tolerating(300), taints, now), Date.parse(at) + 300_000);
    assert.equal(evictionTime(tolerating(), taints, now), undefined);
    assert.equal(evictionTime(pod(), [{ key: 'x', effect: 'NoSchedule' }], now), undefined);
  });
});
