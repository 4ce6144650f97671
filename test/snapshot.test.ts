import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { forSnapshot, parseSnapshot } from '../src/api/snapshot.js';
import type { KubeObject } from '../src/api/types.js';
import { fetchTransport, resourcePath } from '../src/client/http.js';
import { ApiResources } from '../src/scenario/resources.js';
import { Api, type Obj } from './helpers/http.js';
import { ROOT, startServer, type SimServer } from './helpers/server.js';
import { runSim } from './helpers/sim.js';

/** Server-side applies every object of a manifest file, in order, through discovery (as kubectl apply does). */
async function applyAll(url: string, objects: KubeObject[]): Promise<void> {
  const http = fetchTransport(url);
  let resources = new ApiResources(http);
  await resources.load();
  for (const obj of objects) {
    let r = resources.byKind(obj.apiVersion!, obj.kind!);
    for (let i = 0; !r && i < 50; i++) {
      // a CRD's kind is served once it is Established
      await new Promise((resolve) => setTimeout(resolve, 20));
      resources = new ApiResources(http);
      await resources.load();
      r = resources.byKind(obj.apiVersion!, obj.kind!);
    }
    assert.ok(r, `the server serves ${obj.apiVersion} ${obj.kind}`);
    const reply = await http({
      method: 'PATCH',
      path: `${resourcePath(r.gvr, r.namespaced ? (obj.metadata.namespace ?? 'default') : undefined, obj.metadata.name)}?fieldManager=test&force=true`,
      body: JSON.stringify(obj),
      contentType: 'application/apply-patch+yaml',
    });
    assert.ok(reply.status === 200 || reply.status === 201, `apply ${obj.kind} ${obj.metadata.name}: ${reply.text}`);
  }
}

async function advance(api: Api, by: string): Promise<void> {
  await api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
}

async function pods(api: Api, namespace: string): Promise<Obj[]> {
  return (await api.list(`/api/v1/namespaces/${namespace}/pods`)).items;
}

interface PodFacts {
  node: unknown;
  phase: unknown;
  ip: unknown;
  ready: unknown;
  restarts: unknown;
  hash: unknown;
  owner: unknown;
}

function facts(pod: Obj): PodFacts {
  const status = pod.status as {
    phase?: string;
    podIP?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: Array<{ restartCount: number }>;
  };
  return {
    node: (pod.spec as { nodeName?: string }).nodeName,
    phase: status.phase,
    ip: status.podIP,
    ready: status.conditions?.find((c) => c.type === 'Ready')?.status,
    restarts: status.containerStatuses?.map((c) => c.restartCount),
    hash: pod.metadata.labels?.['pod-template-hash'],
    owner: ((pod.metadata.ownerReferences ?? []) as Array<{ kind: string; name: string }>).map(
      (o) => `${o.kind}/${o.name}`,
    ),
  };
}

/** Node fields the new kubelet writes when it takes the node over: its heartbeat times. */
function withoutHeartbeats(obj: KubeObject): KubeObject {
  if (obj.kind !== 'Node') return obj;
  const status = obj.status as { conditions?: Array<Record<string, unknown>> };
  return {
    ...obj,
    status: { ...status, conditions: status.conditions?.map(({ lastHeartbeatTime: _h, ...c }) => c) },
  };
}

function label(obj: KubeObject): string {
  return `${obj.apiVersion} ${obj.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name}`;
}

test('snapshot export of a populated cluster boots another with the same objects and no pod recreated; its rollout goes on', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-snapshot-'));
  const servers: SimServer[] = [];
  t.after(async () => {
    for (const s of servers) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const source = await startServer(['--clock', 'virtual', '--nodes', '4', '--seed', '5']);
  servers.push(source);
  const src = new Api(source.url);
  // node-3 and node-4 are a tainted pool for the database.
  for (const node of ['node-3', 'node-4'])
    await src.mergePatch(`/api/v1/nodes/${node}`, {
      metadata: { labels: { pool: 'db' } },
      spec: { taints: [{ key: 'dedicated', value: 'db', effect: 'NoSchedule' }] },
    });
  const manifests = parseAllDocuments(readFileSync(join(ROOT, 'test/fixtures/snapshot/source.yaml'), 'utf8')).map(
    (d) => d.toJS() as KubeObject,
  );
  await applyAll(source.url, manifests);
  await advance(src, '1m');
  const before = await pods(src, 'shop');
  assert.equal(before.filter((p) => facts(p).ready === 'True').length, 6, 'web ×4 and db ×2 ready');
  // A new version whose pods take an hour to be ready: the rollout (maxSurge 1, maxUnavailable 0) holds mid-way.
  await src.mergePatch('/apis/apps/v1/namespaces/shop/deployments/web', {
    spec: {
      template: {
        metadata: { annotations: { 'kube-sim.dev/ready-delay': '1h' } },
        spec: { containers: [{ name: 'web', image: 'nginx:1.28' }] },
      },
    },
  });
  await advance(src, '1m');
  const deployment = await src.get('/apis/apps/v1/namespaces/shop/deployments/web');
  assert.equal((deployment.status as { updatedReplicas?: number }).updatedReplicas, 1, 'the rollout is mid-way');
  assert.equal((await pods(src, 'shop')).length, 7);

  const exported = await runSim(['snapshot', 'export', '--server', source.url]);
  assert.equal(exported.code, 0, exported.stderr);
  assert.match(exported.stderr, /^ {2}pods: 7$/m, 'progress names each resource read');
  assert.match(exported.stderr, /snapshot: \d+ objects of \d+ resources from /);
  const file = join(dir, 'cluster.yaml');
  writeFileSync(file, exported.stdout);
  const snapshot = parseSnapshot(exported.stdout, file);
  const sourceClock = (await src.get('/sim/v1/clock')) as unknown as { now: string };
  assert.equal(snapshot.header.time, sourceClock.now, "the header records the source's (virtual) time");
  assert.equal(snapshot.header.source.server, source.url);
  const kinds = new Set(snapshot.objects.map((o) => o.kind));
  for (const kind of ['Node', 'Pod', 'Deployment', 'ReplicaSet', 'StatefulSet', 'ControllerRevision'])
    assert.ok(kinds.has(kind), `the snapshot holds ${kind}s`);
  for (const kind of ['PersistentVolumeClaim', 'PersistentVolume', 'StorageClass', 'PodDisruptionBudget'])
    assert.ok(kinds.has(kind), `the snapshot holds ${kind}s`);
  for (const kind of ['CustomResourceDefinition', 'Backup', 'PriorityClass', 'Role', 'ConfigMap', 'Namespace'])
    assert.ok(kinds.has(kind), `the snapshot holds ${kind}s`);
  for (const kind of ['Event', 'Lease', 'Endpoints', 'EndpointSlice', 'Secret'])
    assert.ok(!kinds.has(kind), `the snapshot leaves ${kind}s out`);
  assert.ok(!snapshot.objects.some((o) => o.metadata.name === 'kube-root-ca.crt'));
  assert.ok(!snapshot.objects.some((o) => o.kind === 'Service' && o.metadata.name === 'kubernetes'));
  assert.ok(!snapshot.objects.some((o) => o.metadata.labels?.['kubernetes.io/bootstrapping'] === 'rbac-defaults'));
  for (const obj of snapshot.objects) {
    assert.equal(obj.metadata.uid, undefined, `${label(obj)} has no uid`);
    assert.equal(obj.metadata.resourceVersion, undefined);
    assert.equal(obj.metadata.managedFields, undefined);
    for (const ref of obj.metadata.ownerReferences ?? []) assert.equal(ref.uid, undefined);
  }
  const withSecrets = await runSim(['snapshot', 'export', '--server', source.url, '--include-secrets', '-o', 'json']);
  assert.equal(withSecrets.code, 0, withSecrets.stderr);
  const jsonSnapshot = parseSnapshot(withSecrets.stdout, 'json');
  assert.deepEqual(
    jsonSnapshot.objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name),
    ['password'],
    '--include-secrets adds the Secret (no service-account token)',
  );
  assert.deepEqual(
    jsonSnapshot.objects.filter((o) => o.kind !== 'Secret'),
    snapshot.objects,
    '-o json holds the same objects',
  );

  const target = await startServer(['--snapshot', file]);
  servers.push(target);
  const dst = new Api(target.url);
  const targetClock = (await dst.get('/sim/v1/clock')) as unknown as { now: string; mode: string };
  assert.equal(targetClock.mode, 'virtual');
  assert.equal(targetClock.now, snapshot.header.time, "the clock starts at the snapshot's time");
  // Let the controllers and kubelets do whatever they would at start-up.
  await advance(dst, '0s');
  await advance(dst, '5s');

  const http = fetchTransport(target.url);
  const resources = new ApiResources(http);
  await resources.load();
  const uids = new Map<string, string>();
  const restored: KubeObject[] = [];
  for (const wanted of snapshot.objects) {
    const r = resources.byKind(wanted.apiVersion!, wanted.kind!);
    assert.ok(r, `the target serves ${wanted.apiVersion} ${wanted.kind}`);
    const reply = await http({
      method: 'GET',
      path: resourcePath(r.gvr, wanted.metadata.namespace, wanted.metadata.name),
    });
    assert.equal(reply.status, 200, `${label(wanted)} is in the target: ${reply.text}`);
    const got = JSON.parse(reply.text) as KubeObject;
    uids.set(`${got.kind}/${got.metadata.name}`, got.metadata.uid!);
    restored.push(got);
    // Every object as it was but for the documented fields (and the heartbeat times a new kubelet posts).
    assert.deepEqual(
      withoutHeartbeats(forSnapshot(got)),
      withoutHeartbeats(wanted),
      `${label(wanted)} is restored as it was`,
    );
  }
  // Owner references point at the new owners.
  for (const obj of restored)
    for (const ref of obj.metadata.ownerReferences ?? [])
      assert.equal(
        ref.uid,
        uids.get(`${ref.kind}/${ref.name}`),
        `${label(obj)}: owner ${ref.kind}/${ref.name} relinked`,
      );
  const pv = restored.find((o) => o.kind === 'PersistentVolume')!;
  const claim = (pv.spec as { claimRef: { name: string; uid: string } }).claimRef;
  assert.equal(claim.uid, uids.get(`PersistentVolumeClaim/${claim.name}`), 'a PV claimRef points at its new PVC');

  // No pod recreated: same names, nodes, phases, IPs, readiness and restart counts.
  const factsOf = (list: Obj[]): Record<string, PodFacts> =>
    Object.fromEntries(list.map((p) => [p.metadata.name!, facts(p)]));
  const sourcePods = factsOf(await pods(src, 'shop'));
  assert.deepEqual(factsOf(await pods(dst, 'shop')), sourcePods);
  // Time goes on in the target: the new version turns ready and the rollout finishes with the same ReplicaSet.
  const newHash = Object.values(sourcePods).find((p) => p.ready === 'False')!.hash;
  await advance(dst, '65m');
  for (let i = 0; i < 10; i++) await advance(dst, '1h');
  const finished = await dst.get('/apis/apps/v1/namespaces/shop/deployments/web');
  const status = finished.status as { updatedReplicas?: number; readyReplicas?: number; replicas?: number };
  assert.deepEqual([status.updatedReplicas, status.readyReplicas, status.replicas], [4, 4, 4], 'the rollout finished');
  assert.equal(finished.metadata.annotations?.['deployment.kubernetes.io/revision'], '2');
  const webPods = (await pods(dst, 'shop')).filter((p) => p.metadata.labels?.app === 'web');
  assert.deepEqual(
    [...new Set(webPods.map((p) => p.metadata.labels?.['pod-template-hash']))],
    [newHash],
    'the rollout went on with the ReplicaSet of the snapshot',
  );
  assert.ok(
    webPods.some((p) => p.metadata.name! in sourcePods),
    'the surged pod of the snapshot is one of them',
  );
});
