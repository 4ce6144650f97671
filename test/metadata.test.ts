import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api, assertStatus, cmPath, configMap, retryOnConflict, type Obj } from './helpers/http.js';
import { startServer, type SimServer } from './helpers/server.js';
import { httpWatch } from './helpers/watch.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

function deployment(name: string, replicas = 1): Obj {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'main', image: 'nginx:1.27' }] } },
    },
  };
}

const deployPath = (name?: string, sub?: string): string =>
  `/apis/apps/v1/namespaces/meta/deployments${name ? `/${name}` : ''}${sub ? `/${sub}` : ''}`;

describe('metadata the server owns, and write semantics', () => {
  let server: SimServer;
  let api: Api;
  after(() => server?.stop());
  before(async () => {
    server = await startServer();
    api = new Api(server.url);
    await api.namespace('meta');
  });

  test('uid, creationTimestamp and resourceVersion are set by the server, whatever the client sends', async () => {
    const sent = {
      ...configMap('owned', { k: 'v' }),
      metadata: { name: 'owned', uid: 'client-uid', creationTimestamp: '2001-01-01T00:00:00Z', generation: 7 },
    };
    const started = Date.now();
    const obj = await api.create(cmPath('meta'), sent);
    assert.match(obj.metadata.uid!, UUID);
    assert.notEqual(obj.metadata.uid, 'client-uid');
    assert.match(obj.metadata.creationTimestamp!, RFC3339);
    assert.ok(Math.abs(Date.parse(obj.metadata.creationTimestamp!) - started) < 5_000, 'creationTimestamp is now');
    assert.match(obj.metadata.resourceVersion!, /^[1-9]\d*$/, 'resourceVersion is a decimal string');
    assert.equal(obj.metadata.generation, undefined, 'configmaps have no generation');
    assert.equal(obj.metadata.namespace, 'meta');
    assert.deepEqual(await api.get(cmPath('meta', 'owned')), obj, 'GET returns what create returned');

    // An update may not move them: creationTimestamp is kept, a different uid is a failed precondition.
    const moved = await api.put(cmPath('meta', 'owned'), {
      ...obj,
      metadata: { ...obj.metadata, creationTimestamp: '2001-01-01T00:00:00Z' },
      data: { k: 'w' },
    });
    assert.equal(moved.metadata.creationTimestamp, obj.metadata.creationTimestamp);
    assert.equal(moved.metadata.uid, obj.metadata.uid);
    const otherUid = await api.request(cmPath('meta', 'owned'), {
      method: 'PUT',
      body: { ...moved, metadata: { ...moved.metadata, uid: '11111111-1111-4111-8111-111111111111' } },
    });
    assertStatus(otherUid, 409, 'Conflict');
  });

  test('resourceVersion increases globally, across kinds and namespaces', async () => {
    const versions: number[] = [];
    const push = (o: Obj): void => void versions.push(Number(o.metadata.resourceVersion));
    push(await api.create(cmPath('meta'), configMap('rv-1')));
    push(await api.create('/api/v1/namespaces/meta/secrets', { metadata: { name: 'rv-2' } }));
    push(await api.create('/api/v1/namespaces', { metadata: { name: 'rv-3' } }));
    push(await api.create(cmPath('rv-3'), configMap('rv-4')));
    push(await api.create(deployPath(), deployment('rv-5')));
    push(await api.mergePatch(cmPath('meta', 'rv-1'), { data: { a: 'b' } }));
    push(await api.mergePatch('/api/v1/namespaces/meta/secrets/rv-2', { metadata: { labels: { a: 'b' } } }));
    for (let i = 1; i < versions.length; i++)
      assert.ok(versions[i]! > versions[i - 1]!, `resourceVersions must increase: ${versions.join(', ')}`);
    const listRv = Number((await api.list('/api/v1/namespaces/meta/secrets')).metadata.resourceVersion);
    assert.ok(listRv >= versions.at(-1)!, 'a list carries the current (global) revision');
  });

  test('generateName: the server picks a unique name with a random suffix', async () => {
    const names = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const obj = await api.create(cmPath('meta'), { metadata: { generateName: 'gen-' }, data: { i: String(i) } });
      assert.match(obj.metadata.name!, /^gen-[a-z0-9]{5}$/);
      assert.equal(obj.metadata.generateName, 'gen-');
      names.add(obj.metadata.name!);
    }
    assert.equal(names.size, 5);
    const named = await api.create(cmPath('meta'), { metadata: { name: 'explicit', generateName: 'gen-' } });
    assert.equal(named.metadata.name, 'explicit', 'a name, when given, wins');
    const none = await api.request(cmPath('meta'), { method: 'POST', body: { metadata: {} } });
    assertStatus(none, 422, 'Invalid');
  });

  test('a Deployment’s generation moves on spec (and annotation) changes, not on labels or status', async () => {
    const created = await api.create(deployPath(), deployment('gen'));
    assert.equal(created.metadata.generation, 1);

    const scaled = await retryOnConflict(async () => {
      const current = await api.get(deployPath('gen'));
      return api.request<Obj>(deployPath('gen'), {
        method: 'PUT',
        body: { ...current, spec: { ...(current.spec as object), replicas: 3 } },
      });
    });
    assert.equal(scaled.status, 200, scaled.text);
    assert.equal(scaled.body.metadata.generation, 2, 'spec change');

    const labeled = await api.mergePatch(deployPath('gen'), { metadata: { labels: { team: 'a' } } });
    assert.equal(labeled.metadata.generation, 2, 'labels only');

    const annotated = await api.mergePatch(deployPath('gen'), { metadata: { annotations: { note: 'x' } } });
    assert.equal(annotated.metadata.generation, 3, 'annotations are copied to ReplicaSets, so they count as a change');

    const status = await api.expect<Obj>(200, deployPath('gen', 'status'), {
      method: 'PATCH',
      body: { status: { observedGeneration: 3, replicas: 3 } },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assert.equal(status.metadata.generation, 3, 'status writes never bump generation');
    assert.equal((status.status as { replicas: number }).replicas, 3);

    const viaScale = await api.expect<Obj>(200, deployPath('gen', 'scale'), {
      method: 'PATCH',
      body: { spec: { replicas: 5 } },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assert.equal((viaScale.spec as { replicas: number }).replicas, 5);
    assert.equal((await api.get(deployPath('gen'))).metadata.generation, 4, 'scaling changes spec.replicas');

    const noop = await api.mergePatch(deployPath('gen'), { spec: { replicas: 5 } });
    assert.equal(noop.metadata.generation, 4, 'a no-op leaves generation alone');
  });

  test('status subresource: a PUT of the object ignores status, a PUT of /status ignores spec', async () => {
    await api.create(deployPath(), deployment('sub', 2));

    // Main resource: the spec change lands, the status in the body is dropped.
    const main = await retryOnConflict(async () => {
      const current = await api.get(deployPath('sub'));
      return api.request<Obj>(deployPath('sub'), {
        method: 'PUT',
        body: {
          ...current,
          spec: { ...(current.spec as object), replicas: 4 },
          status: { replicas: 99, observedGeneration: 42 },
        },
      });
    });
    assert.equal(main.status, 200, main.text);
    assert.equal((main.body.spec as { replicas: number }).replicas, 4);
    assert.notEqual(
      (main.body.status as { replicas?: number } | undefined)?.replicas,
      99,
      'status from a main-resource PUT is ignored',
    );

    // /status: the status lands, the spec change in the same body is dropped, generation stays.
    const before = await api.get(deployPath('sub'));
    const sub = await retryOnConflict(async () => {
      const current = await api.get(deployPath('sub'));
      return api.request<Obj>(deployPath('sub', 'status'), {
        method: 'PUT',
        body: {
          ...current,
          metadata: { ...current.metadata, labels: { sneaky: 'label' } },
          spec: { ...(current.spec as object), replicas: 10 },
          status: { replicas: 7, observedGeneration: 2 },
        },
      });
    });
    assert.equal(sub.status, 200, sub.text);
    assert.deepEqual(sub.body.spec, before.spec, 'spec from a /status PUT is ignored');
    assert.deepEqual(sub.body.status, { replicas: 7, observedGeneration: 2 });
    assert.equal(sub.body.metadata.generation, before.metadata.generation);
    assert.equal(sub.body.metadata.labels, undefined, 'metadata from a /status PUT is ignored');
    const stored = await api.get(deployPath('sub'));
    assert.equal((stored.spec as { replicas: number }).replicas, 4);

    // Kinds without a status subresource have no /status.
    assertStatus(await api.request(`${cmPath('meta', 'owned')}/status`), 404, 'NotFound');
  });

  test('deleting an object with finalizers only marks it; it goes when the last finalizer is removed', async (t) => {
    const obj = await api.create(cmPath('meta'), {
      metadata: { name: 'held', finalizers: ['example.com/one', 'example.com/two'] },
      data: { k: 'v' },
    });
    const watch = await httpWatch(
      server.url,
      `${cmPath('meta')}?watch=true&resourceVersion=${obj.metadata.resourceVersion}&fieldSelector=metadata.name%3Dheld`,
    );
    t.after(() => watch.close());

    const del = await api.delete(cmPath('meta', 'held'));
    assert.equal(del.status, 200, 'kube-apiserver answers 202 only to orphanDependents=false');
    const marked = del.body as Obj;
    assert.equal(marked.kind, 'ConfigMap', 'the marked object comes back, not a Status');
    assert.match(marked.metadata.deletionTimestamp!, RFC3339);
    assert.equal(marked.metadata.deletionGracePeriodSeconds, 0);
    assert.deepEqual(marked.metadata.finalizers, ['example.com/one', 'example.com/two']);
    const stillThere = await api.get(cmPath('meta', 'held'));
    assert.deepEqual(stillThere, marked);

    // Deleting again changes nothing; new finalizers may not be added now; other updates are allowed.
    const again = await api.delete(cmPath('meta', 'held'));
    assert.equal(again.status, 200);
    assert.equal((again.body as Obj).metadata.resourceVersion, marked.metadata.resourceVersion);
    const added = await api.request(cmPath('meta', 'held'), {
      method: 'PATCH',
      body: { metadata: { finalizers: ['example.com/one', 'example.com/two', 'example.com/three'] } },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assert.match(
      assertStatus(added, 422, 'Invalid').message!,
      /no new finalizers can be added if the object is being deleted/,
    );
    const cleared = await api.mergePatch(cmPath('meta', 'held'), {
      metadata: { deletionTimestamp: null },
      data: { k: 'w' },
    });
    assert.equal(
      cleared.metadata.deletionTimestamp,
      marked.metadata.deletionTimestamp,
      'deletionTimestamp cannot be taken back',
    );

    const one = await api.expect<Obj>(200, cmPath('meta', 'held'), {
      method: 'PATCH',
      body: [{ op: 'remove', path: '/metadata/finalizers/0' }],
      headers: { 'content-type': 'application/json-patch+json' },
    });
    assert.deepEqual(one.metadata.finalizers, ['example.com/two']);
    assert.equal((await api.request(cmPath('meta', 'held'))).status, 200);

    const last = await api.request<Obj>(cmPath('meta', 'held'), {
      method: 'PATCH',
      body: { metadata: { finalizers: null } },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assert.equal(last.status, 200, last.text);
    assertStatus(await api.request(cmPath('meta', 'held')), 404, 'NotFound');

    // Watchers see the marking, the updates, then one DELETED: the write that empties the finalizers is the deletion.
    await watch.until((events) => events.some((e) => e.type === 'DELETED'), 'DELETED');
    await api.get('/version');
    assert.deepEqual(
      watch.events.map((e) => [
        e.type,
        e.object.metadata.finalizers?.length ?? 0,
        e.object.metadata.deletionTimestamp !== undefined,
      ]),
      [
        ['MODIFIED', 2, true],
        ['MODIFIED', 2, true],
        ['MODIFIED', 1, true],
        ['DELETED', 1, true],
      ],
    );
  });

  test('a delete with orphanDependents=false that cannot finish at once answers 202', async () => {
    await api.create(cmPath('meta'), { metadata: { name: 'accepted', finalizers: ['example.com/hold'] } });
    const reply = await api.delete(cmPath('meta', 'accepted'), {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      orphanDependents: false,
    });
    assert.equal(reply.status, 202, reply.text);
    assert.ok((reply.body as Obj).metadata.deletionTimestamp);
    await api.mergePatch(cmPath('meta', 'accepted'), { metadata: { finalizers: null } });
    assert.equal((await api.request(cmPath('meta', 'accepted'))).status, 404);
  });

  test('writing an empty map over a missing one is a no-op', async () => {
    const obj = await api.create(cmPath('meta'), configMap('empty'));
    const patched = await api.mergePatch(cmPath('meta', 'empty'), { metadata: { labels: {}, annotations: {} } });
    assert.equal(patched.metadata.resourceVersion, obj.metadata.resourceVersion);
    const put = await api.put(cmPath('meta', 'empty'), {
      ...obj,
      metadata: { ...obj.metadata, labels: {}, finalizers: [] },
    });
    assert.equal(put.metadata.resourceVersion, obj.metadata.resourceVersion);
  });
});
