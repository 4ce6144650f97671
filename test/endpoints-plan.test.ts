import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { rfc3339 } from '../src/clock/clock.js';
import {
  endpointSubsets,
  MAX_ENDPOINTS_CAPACITY,
  OVER_CAPACITY,
  planEndpoints,
  truncateSubsets,
} from '../src/controllers/endpoints/endpoints.js';
import {
  MANAGED_BY_LABEL,
  planEndpointSlices,
  SERVICE_NAME_LABEL,
  type SlicePlan,
} from '../src/controllers/endpoints/endpointslices.js';
import { planMirroredSlices } from '../src/controllers/endpoints/mirroring.js';
import { TriggerTimeTracker } from '../src/controllers/endpoints/trigger-time.js';

// The endpoints, EndpointSlice and mirroring controllers' decisions are pure: these tests need no server.
const T0 = Date.UTC(2025, 0, 1, 12);
type Obj = Record<string, unknown>;

interface PodOptions {
  ip?: string;
  ready?: boolean;
  deleting?: boolean;
  phase?: string;
  labels?: Record<string, string>;
  ports?: Array<{ name: string; containerPort: number; protocol?: string }>;
  hostname?: string;
  subdomain?: string;
  node?: string;
}

let n = 0;
function pod(name: string, o: PodOptions = {}): KubeObject {
  const status: Obj = { phase: o.phase ?? 'Running', conditions: [] };
  if (o.ip !== '') {
    n++;
    status.podIP = o.ip ?? `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
    status.podIPs = [{ ip: status.podIP }];
  }
  status.conditions = [
    { type: 'Ready', status: o.ready === false ? 'False' : 'True', lastTransitionTime: rfc3339(T0) },
  ];
  const spec: Obj = {
    nodeName: o.node ?? 'node-1',
    containers: [{ name: 'c', image: 'nginx', ports: o.ports ?? [{ name: 'http', containerPort: 8080 }] }],
  };
  if (o.hostname) spec.hostname = o.hostname;
  if (o.subdomain) spec.subdomain = o.subdomain;
  const metadata: KubeObject['metadata'] = {
    name,
    namespace: 'default',
    uid: `uid-${name}`,
    labels: o.labels ?? { app: 'web' },
  };
  if (o.deleting) metadata.deletionTimestamp = rfc3339(T0);
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec, status };
}

function service(spec: Obj = {}, name = 'web'): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'default', uid: `uid-svc-${name}`, creationTimestamp: rfc3339(T0 - 60_000) },
    spec: {
      selector: { app: 'web' },
      clusterIP: '10.96.0.10',
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 'http' }],
      ...spec,
    },
  };
}

const ips = (addresses: Obj[] | undefined): string[] => (addresses ?? []).map((a) => String(a.ip));

describe('Endpoints', () => {
  test('ready pods under addresses, others under notReadyAddresses; named target ports resolved per pod', () => {
    const subsets = endpointSubsets(service(), [
      pod('a', { ip: '10.244.0.3' }),
      pod('b', { ip: '10.244.0.2', ready: false }),
      pod('c', { ip: '10.244.0.4', ports: [{ name: 'http', containerPort: 9090 }] }),
      pod('d', { ip: '10.244.0.5', ports: [{ name: 'other', containerPort: 1 }] }),
      pod('e', { ip: '' }),
      pod('f', { ip: '10.244.0.6', phase: 'Succeeded' }),
      pod('g', { ip: '10.244.0.7', deleting: true }),
    ]);
    // d offers no port named http; e has no IP; f finished; g is terminating.
    assert.equal(subsets.length, 2);
    const on8080 = subsets.find((s) => (s.ports ?? [])[0]?.port === 8080)!;
    assert.deepEqual(ips(on8080.addresses), ['10.244.0.3']);
    assert.deepEqual(ips(on8080.notReadyAddresses), ['10.244.0.2']);
    assert.deepEqual(on8080.ports, [{ port: 8080, protocol: 'TCP', name: 'http' }]);
    assert.deepEqual((on8080.addresses ?? [])[0], {
      ip: '10.244.0.3',
      nodeName: 'node-1',
      targetRef: { kind: 'Pod', namespace: 'default', name: 'a', uid: 'uid-a' },
    });
    const on9090 = subsets.find((s) => (s.ports ?? [])[0]?.port === 9090)!;
    assert.deepEqual(ips(on9090.addresses), ['10.244.0.4']);
  });

  test('publishNotReadyAddresses lists every pod as ready, terminating ones included', () => {
    const subsets = endpointSubsets(service({ publishNotReadyAddresses: true }), [
      pod('a', { ip: '10.244.0.2', ready: false }),
      pod('b', { ip: '10.244.0.3', deleting: true }),
    ]);
    assert.equal(subsets.length, 1);
    assert.deepEqual(ips(subsets[0]!.addresses), ['10.244.0.2', '10.244.0.3']);
    assert.equal(subsets[0]!.notReadyAddresses, undefined);
  });

  test('a headless Service without ports lists its pods, with StatefulSet hostnames', () => {
    const svc = service({ clusterIP: 'None', ports: undefined }, 'db');
    const subsets = endpointSubsets(svc, [
      pod('db-0', { ip: '10.244.0.2', hostname: 'db-0', subdomain: 'db' }),
      pod('other', { ip: '10.244.0.3', hostname: 'other', subdomain: 'elsewhere' }),
    ]);
    assert.equal(subsets.length, 1);
    assert.equal(subsets[0]!.ports, undefined);
    assert.equal((subsets[0]!.addresses ?? [])[0]!.hostname, 'db-0');
    assert.equal((subsets[0]!.addresses ?? [])[1]!.hostname, undefined);
    const ep = planEndpoints(svc, [], undefined, undefined)!;
    assert.deepEqual(ep.metadata.labels, { 'service.kubernetes.io/headless': '' });
  });

  test('past 1000 addresses, the Endpoints are truncated and annotated', () => {
    const pods = Array.from({ length: 1200 }, (_, i) =>
      pod(`p${i}`, { ip: `10.${Math.floor(i / 250)}.${i % 250}.1`, ready: i < 900 }),
    );
    const ep = planEndpoints(service(), pods, undefined, undefined)!;
    const subsets = ep.subsets as Array<{ addresses?: Obj[]; notReadyAddresses?: Obj[] }>;
    const total = subsets.reduce((sum, s) => sum + (s.addresses?.length ?? 0) + (s.notReadyAddresses?.length ?? 0), 0);
    assert.equal(total, MAX_ENDPOINTS_CAPACITY);
    assert.equal(subsets[0]!.addresses!.length, 900, 'every ready address is kept');
    assert.equal(ep.metadata.annotations?.[OVER_CAPACITY], 'truncated');
    // Under capacity again: the annotation goes.
    const fewer = planEndpoints(service(), pods.slice(0, 10), ep, undefined)!;
    assert.equal(fewer.metadata.annotations?.[OVER_CAPACITY], undefined);
  });

  test('truncation shares the room between subsets, rounding up', () => {
    const addresses = (count: number, prefix: string): Obj[] =>
      Array.from({ length: count }, (_, i) => ({ ip: `${prefix}.${i}` }));
    const { subsets, truncated } = truncateSubsets([
      { addresses: addresses(900, '10.0.0'), notReadyAddresses: addresses(300, '10.1.0') },
      { notReadyAddresses: addresses(200, '10.2.0') },
    ]);
    assert.equal(truncated, true);
    assert.equal(subsets[0]!.addresses!.length, 900);
    assert.equal(subsets[0]!.notReadyAddresses!.length, 60);
    assert.equal(subsets[1]!.notReadyAddresses!.length, 40);
  });

  test('no write when the Endpoints already say it; labels follow the Service', () => {
    const svc = { ...service(), metadata: { ...service().metadata, labels: { team: 'a' } } };
    const first = planEndpoints(svc, [pod('a', { ip: '10.244.0.2' })], undefined, undefined)!;
    assert.deepEqual(first.metadata.labels, { team: 'a' });
    assert.equal(planEndpoints(svc, [pod('a', { ip: '10.244.0.2' })], first, undefined), undefined);
    const relabelled = { ...svc, metadata: { ...svc.metadata, labels: { team: 'b' } } };
    assert.deepEqual(planEndpoints(relabelled, [pod('a', { ip: '10.244.0.2' })], first, undefined)?.metadata.labels, {
      team: 'b',
    });
  });

  test('the trigger time is the earliest change since the previous sync, none on the first', () => {
    const tracker = new TriggerTimeTracker();
    const svc = service();
    const ready = (name: string, at: number): KubeObject => {
      const p = pod(name);
      (p.status as Obj).conditions = [{ type: 'Ready', status: 'True', lastTransitionTime: rfc3339(at) }];
      return p;
    };
    const a = ready('a', T0);
    assert.equal(tracker.compute('default/web', svc, [a]), undefined);
    assert.equal(tracker.compute('default/web', svc, [a]), undefined);
    const [b, c] = [ready('b', T0 + 5000), ready('c', T0 + 3000)];
    tracker.podChanged('default/web', b, true);
    tracker.podChanged('default/web', c, true);
    assert.equal(tracker.compute('default/web', svc, [a, b, c]), T0 + 3000);
    // A pod whose time did not move is no change; one that turned ready again is.
    tracker.podChanged('default/web', c, true);
    assert.equal(tracker.compute('default/web', svc, [a, b, c]), undefined);
    const b2 = ready('b', T0 + 9000);
    tracker.podChanged('default/web', b2, true);
    assert.equal(tracker.compute('default/web', svc, [a, b2, c]), T0 + 9000);
    // A pod that left and came back counts again; a changed Service is compared pod by pod.
    tracker.podChanged('default/web', c, false);
    assert.equal(tracker.compute('default/web', svc, [a, b2]), undefined);
    tracker.podChanged('default/web', c, true);
    assert.equal(tracker.compute('default/web', svc, [a, b2, c]), T0 + 3000);
    const changed = { ...svc, metadata: { ...svc.metadata, resourceVersion: '99' } };
    const a2 = ready('a', T0 + 7000);
    assert.equal(tracker.compute('default/web', changed, [a2, b2, c]), T0 + 7000);
  });
});

const ends = (plan: SlicePlan): number[] => [...plan.create, ...plan.update].map((s) => (s.endpoints as Obj[]).length);

function stored(plan: SlicePlan, prefix = 'web'): KubeObject[] {
  let i = 0;
  return [...plan.create, ...plan.update].map((s) => ({
    ...s,
    metadata: { ...s.metadata, name: s.metadata.name ?? `${prefix}-${i++}`, uid: `uid-slice-${i}`, generation: 1 },
  }));
}

describe('EndpointSlices', () => {
  test('100 endpoints a slice, labelled and owned by the Service', () => {
    const pods = Array.from({ length: 250 }, (_, i) => pod(`p${String(i).padStart(3, '0')}`));
    const plan = planEndpointSlices(service(), pods, []);
    assert.deepEqual(ends(plan), [100, 100, 50]);
    const slice = plan.create[0]!;
    assert.equal(slice.metadata.generateName, 'web-');
    assert.equal(slice.metadata.labels?.[SERVICE_NAME_LABEL], 'web');
    assert.equal(slice.metadata.labels?.[MANAGED_BY_LABEL], 'endpointslice-controller.k8s.io');
    assert.deepEqual(slice.metadata.ownerReferences, [
      {
        apiVersion: 'v1',
        kind: 'Service',
        name: 'web',
        uid: 'uid-svc-web',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.deepEqual(slice.ports, [{ name: 'http', protocol: 'TCP', port: 8080 }]);
    assert.equal(slice.addressType, 'IPv4');
  });

  test('terminating pods stay, serving while ready, never ready; not-ready ones neither', () => {
    const plan = planEndpointSlices(
      service(),
      [
        pod('a', { ip: '10.244.0.2' }),
        pod('b', { ip: '10.244.0.3', deleting: true }),
        pod('c', { ip: '10.244.0.4', ready: false }),
      ],
      [],
    );
    const endpoints = plan.create[0]!.endpoints as Obj[];
    assert.deepEqual(
      endpoints.map((e) => [(e.addresses as string[])[0], e.conditions]),
      [
        ['10.244.0.2', { ready: true, serving: true, terminating: false }],
        ['10.244.0.3', { ready: false, serving: true, terminating: true }],
        ['10.244.0.4', { ready: false, serving: false, terminating: false }],
      ],
    );
  });

  test('a change touches only the slice it concerns; a Service without endpoints keeps a placeholder', () => {
    const pods = Array.from({ length: 150 }, (_, i) => pod(`p${String(i).padStart(3, '0')}`));
    const slices = stored(planEndpointSlices(service(), pods, []));
    // Nothing changed: nothing to write.
    const same = planEndpointSlices(service(), pods, slices);
    assert.deepEqual([same.create.length, same.update.length, same.delete.length], [0, 0, 0]);
    // One pod becomes not ready: only its slice is updated.
    const changed = pods.map((p, i) =>
      i === 120 ? pod(p.metadata.name!, { ip: (p.status as Obj).podIP as string, ready: false }) : p,
    );
    const one = planEndpointSlices(service(), changed, slices);
    assert.deepEqual([one.create.length, one.update.length, one.delete.length], [0, 1, 0]);
    // Every pod gone: the slices give way to one empty placeholder (one of them reused for it).
    const none = planEndpointSlices(service(), [], slices);
    assert.equal(none.create.length + none.update.length, 1);
    const placeholder = [...none.create, ...none.update][0]!;
    assert.equal(placeholder.endpoints, null);
    assert.equal(none.delete.length, slices.length - none.update.length);
    // And the placeholder, once there, is left alone.
    const kept = planEndpointSlices(service(), [], stored(none));
    assert.deepEqual([kept.create.length, kept.update.length, kept.delete.length], [0, 0, 0]);
  });

  test('pods offering different ports get slices of their own', () => {
    const plan = planEndpointSlices(
      service(),
      [
        pod('a', { ports: [{ name: 'http', containerPort: 8080 }] }),
        pod('b', { ports: [{ name: 'http', containerPort: 9090 }] }),
      ],
      [],
    );
    assert.deepEqual(plan.create.map((s) => (s.ports as Obj[])[0]!.port).sort(), [8080, 9090]);
  });

  test('a headless StatefulSet Service publishes hostnames', () => {
    const svc = service({ clusterIP: 'None' }, 'db');
    const plan = planEndpointSlices(svc, [pod('db-0', { hostname: 'db-0', subdomain: 'db' })], []);
    assert.equal((plan.create[0]!.endpoints as Obj[])[0]!.hostname, 'db-0');
    assert.equal(plan.create[0]!.metadata.labels?.['service.kubernetes.io/headless'], '');
  });

  test('mirrored slices of a selector-less Service’s Endpoints are owned by the Endpoints', () => {
    const endpoints: KubeObject = {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: 'db', namespace: 'default', uid: 'uid-ep', labels: { team: 'a' } },
      subsets: [
        {
          addresses: [{ ip: '192.0.2.10' }],
          notReadyAddresses: [{ ip: '192.0.2.11', hostname: 'db-1' }],
          ports: [{ name: 'pg', port: 5432, protocol: 'TCP' }],
        },
      ],
    };
    const plan = planMirroredSlices(endpoints, []);
    assert.equal(plan.create.length, 1);
    const slice = plan.create[0]!;
    assert.deepEqual(slice.metadata.labels, {
      team: 'a',
      'kubernetes.io/service-name': 'db',
      'endpointslice.kubernetes.io/managed-by': 'endpointslicemirroring-controller.k8s.io',
    });
    assert.equal(slice.metadata.ownerReferences?.[0]?.kind, 'Endpoints');
    assert.deepEqual(slice.endpoints, [
      { addresses: ['192.0.2.10'], conditions: { ready: true } },
      { addresses: ['192.0.2.11'], conditions: { ready: false }, hostname: 'db-1' },
    ]);
    assert.deepEqual(slice.ports, [{ name: 'pg', protocol: 'TCP', port: 5432 }]);
  });
});
