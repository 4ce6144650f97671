import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { etcdMissing, startEtcdCluster, type EtcdCluster } from './helpers/etcd.js';
import { Api, assertStatus, cmPath, configMap, type Obj } from './helpers/http.js';
import { kubectlAgainst, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';
import { httpWatch, summarize, type WatchClient } from './helpers/watch.js';

/**
 * `sim serve --etcd-servers`: a real 3-member etcd cluster (Debian's etcd-server) on loopback ports, and two kube-sim
 * processes over it — one with the controllers, one serving the API alone — as one cluster: what one writes the
 * other serves and watches at the same resourceVersion, optimistic locking holds across them, and etcd holds the
 * objects under kube-apiserver's keys.
 */
const missing = etcdMissing();
const NS = 'etcd-e2e';

describe('sim serve --etcd-servers: two API servers over a 3-member etcd cluster', { skip: missing }, () => {
  let etcd: EtcdCluster;
  let a: SimServer;
  let b: SimServer;
  let apiA: Api;
  let apiB: Api;
  const watches: WatchClient[] = [];
  const logs = (): string =>
    `\n--- a ---\n${a?.stderr()}\n--- b ---\n${b?.stderr()}\n--- etcd ---\n${etcd?.log().slice(-3000)}`;

  before(async () => {
    etcd = await startEtcdCluster(3);
    const flags = ['--etcd-servers', etcd.endpoints, '--etcd-compaction-interval', '0', '--nodes', '0'];
    a = await startServer(flags);
    b = await startServer([...flags, '--controllers', '-*']);
    apiA = new Api(a.url);
    apiB = new Api(b.url);
    await apiA.create('/api/v1/namespaces', { metadata: { name: NS } });
  });

  after(async () => {
    for (const w of watches) w.close();
    await a?.stop();
    await b?.stop();
    await etcd?.stop();
  });

  const watch = async (api: Api, path: string): Promise<WatchClient> => {
    const w = await httpWatch(api.url, path);
    watches.push(w);
    return w;
  };

  it('keeps objects under kube-apiserver keys, as JSON whose resourceVersion is the mod_revision', async () => {
    const pod = await apiA.create(`/api/v1/namespaces/${NS}/pods`, {
      metadata: { name: 'lone-1' },
      spec: { containers: [{ name: 'c', image: 'nginx' }] },
    });
    await apiA.create('/api/v1/nodes', { metadata: { name: 'node-a' } });
    const keys = etcd.ctl(['get', '--prefix', '/registry/pods', '--keys-only']).split('\n').filter(Boolean);
    assert.deepEqual(keys, [`/registry/pods/${NS}/lone-1`]);
    const listed = (prefix: string): string[] =>
      etcd.ctl(['get', '--prefix', prefix, '--keys-only']).split('\n').filter(Boolean);
    assert.deepEqual(listed('/registry/minions/'), ['/registry/minions/node-a']);
    assert.ok(listed('/registry/services/specs/').includes('/registry/services/specs/default/kubernetes'));
    assert.ok(listed('/registry/namespaces/').includes(`/registry/namespaces/${NS}`));
    assert.ok(
      listed('/registry/apiregistration.k8s.io/apiservices/').includes(
        '/registry/apiregistration.k8s.io/apiservices/v1.apps',
      ),
    );
    const raw = JSON.parse(etcd.ctl(['get', `/registry/pods/${NS}/lone-1`, '-w', 'json'])) as {
      kvs: Array<{ value: string; mod_revision: number }>;
    };
    const stored = JSON.parse(Buffer.from(raw.kvs[0]!.value, 'base64').toString('utf8')) as Obj;
    assert.equal(stored.kind, 'Pod');
    assert.equal(stored.metadata.uid, pod.metadata.uid);
    assert.equal(stored.metadata.resourceVersion, undefined, 'kube-apiserver stores objects without resourceVersion');
    assert.equal(String(raw.kvs[0]!.mod_revision), pod.metadata.resourceVersion);
    // The other API server reads it at once, at the same resourceVersion (a consistent read waits for its cache).
    const fromB = await apiB.get(`/api/v1/namespaces/${NS}/pods/lone-1`);
    assert.equal(fromB.metadata.resourceVersion, pod.metadata.resourceVersion);
  });

  it('serves every write of one API server to watches on both, in the same order at the same resourceVersions', async () => {
    const path = `${cmPath(NS)}?watch=true&labelSelector=suite%3Dorder`;
    const onA = await watch(apiA, path);
    const onB = await watch(apiB, path);
    const written: string[] = [];
    for (let i = 0; i < 6; i++) {
      const api = i % 2 === 0 ? apiA : apiB;
      const cm = await api.create(cmPath(NS), configMap(`order-${i}`, { i: String(i) }, { suite: 'order' }));
      written.push(`ADDED order-${i}@${cm.metadata.resourceVersion}`);
    }
    const updated = await apiB.mergePatch(cmPath(NS, 'order-0'), { data: { i: 'changed' } });
    written.push(`MODIFIED order-0@${updated.metadata.resourceVersion}`);
    const deleted = await apiB.request(cmPath(NS, 'order-1'), { method: 'DELETE' });
    assert.equal(deleted.status, 200, deleted.text);
    for (const w of [onA, onB])
      await w.count(written.length + 1).catch((err: Error) => assert.fail(err.message + logs()));
    const seen = (w: WatchClient): string[] =>
      w.events.map((e) => `${e.type} ${e.object.metadata.name}@${e.object.metadata.resourceVersion}`);
    assert.deepEqual(seen(onA).slice(0, written.length), written);
    assert.deepEqual(seen(onB), seen(onA));
    assert.match(summarize(onB.events.slice(-1)), /^DELETED order-1@\d+$/);
    // Every acknowledged write is readable at once through the other server.
    for (let i = 0; i < 10; i++) {
      const cm = await apiA.create(cmPath(NS), configMap(`read-${i}`));
      const read = await apiB.get(cmPath(NS, `read-${i}`));
      assert.equal(read.metadata.resourceVersion, cm.metadata.resourceVersion);
    }
  });

  it('answers a write based on a stale resourceVersion with 409 Conflict, whichever server took the newer one', async () => {
    const first = await apiA.create(cmPath(NS), configMap('locked', { v: '1' }));
    const second = await apiA.put(cmPath(NS, 'locked'), { ...first, data: { v: '2' } });
    assert.notEqual(second.metadata.resourceVersion, first.metadata.resourceVersion);
    const stale = await apiB.request(cmPath(NS, 'locked'), { method: 'PUT', body: { ...first, data: { v: 'stale' } } });
    const status = assertStatus(stale, 409, 'Conflict');
    assert.equal(
      status.message,
      'Operation cannot be fulfilled on configmaps "locked": the object has been modified; please apply your changes to the latest version and try again',
    );
    const staleDelete = await apiB.request(cmPath(NS, 'locked'), {
      method: 'DELETE',
      body: { preconditions: { resourceVersion: first.metadata.resourceVersion } },
    });
    assertStatus(staleDelete, 409, 'Conflict');
    // Concurrent increments through both servers: optimistic locking loses none of them.
    const bump = async (api: Api): Promise<void> => {
      for (let attempt = 0; attempt < 50; attempt++) {
        const cm = await api.get(cmPath(NS, 'locked'));
        const n = Number((cm.data as Record<string, string>).n ?? '0');
        const r = await api.request(cmPath(NS, 'locked'), {
          method: 'PUT',
          body: { ...cm, data: { ...(cm.data as object), n: String(n + 1) } },
        });
        if (r.status === 200) return;
        assert.equal(r.status, 409, r.text);
      }
      assert.fail('no increment got through in 50 attempts');
    };
    await Promise.all([...Array(5)].flatMap(() => [bump(apiA), bump(apiB)]));
    const final = await apiB.get(cmPath(NS, 'locked'));
    assert.equal((final.data as Record<string, string>).n, '10');
    assert.equal((second.data as Record<string, string>).v, '2');
  });

  it('resumes a watch from a resourceVersion on either server, and selects by label across label changes', async () => {
    const start = (await apiB.list(cmPath(NS))).metadata.resourceVersion!;
    await apiA.create(cmPath(NS), configMap('resume-1', {}, { tier: 'web' }));
    await apiA.create(cmPath(NS), configMap('resume-2', {}, { tier: 'db' }));
    await apiB.mergePatch(cmPath(NS, 'resume-2'), { metadata: { labels: { tier: 'web' } } });
    await apiA.mergePatch(cmPath(NS, 'resume-1'), { metadata: { labels: { tier: 'db' } } });
    const expected = ['ADDED resume-1', 'ADDED resume-2', 'DELETED resume-1'];
    const selected = `${cmPath(NS)}?watch=true&labelSelector=tier%3Dweb&resourceVersion=${start}`;
    const onA = await watch(apiA, selected);
    const onB = await watch(apiB, selected);
    for (const w of [onA, onB]) await w.count(expected.length).catch((err: Error) => assert.fail(err.message + logs()));
    const seen = (w: WatchClient): string[] => w.events.map((e) => `${e.type} ${e.object.metadata.name}`);
    assert.deepEqual(seen(onA), expected);
    assert.deepEqual(seen(onB), expected);
    assert.deepEqual(
      onA.events.map((e) => e.object.metadata.resourceVersion),
      onB.events.map((e) => e.object.metadata.resourceVersion),
    );
    const listA = await apiA.list(`${cmPath(NS)}?labelSelector=tier%3Dweb`);
    const listB = await apiB.list(`${cmPath(NS)}?labelSelector=tier%3Dweb`);
    assert.deepEqual(
      listA.items.map((i) => i.metadata.name),
      ['resume-2'],
    );
    assert.deepEqual(listB, listA);
  });

  it('works with kubectl against each server', { skip: kubectlMissing() }, async () => {
    const kA = kubectlAgainst(a, logs);
    const kB = kubectlAgainst(b, logs);
    await kA.ok(['-n', NS, 'create', 'configmap', 'from-kubectl', '--from-literal=k=v']);
    const out = await kB.ok(['-n', NS, 'get', 'configmap', 'from-kubectl', '-o', 'jsonpath={.data.k}']);
    assert.equal(out, 'v');
    await kB.ok(['-n', NS, 'label', 'configmap', 'from-kubectl', 'via=b']);
    const names = await kA.ok(['-n', NS, 'get', 'configmaps', '-l', 'via=b', '-o', 'name']);
    assert.equal(names.trim(), 'configmap/from-kubectl');
    // A Deployment written through B is rolled out by the controllers of A.
    await kB.ok(['-n', NS, 'create', 'deployment', 'web', '--image=nginx', '--replicas=2']);
    for (let i = 0; ; i++) {
      const pods = await kB.ok(['-n', NS, 'get', 'pods', '-l', 'app=web', '-o', 'name']);
      if (pods.trim().split('\n').filter(Boolean).length === 2) break;
      if (i > 100) assert.fail(`no 2 pods for the Deployment: ${pods}${logs()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const keys = etcd
      .ctl(['get', '--prefix', `/registry/pods/${NS}/web-`, '--keys-only'])
      .split('\n')
      .filter(Boolean);
    assert.equal(keys.length, 2, keys.join('\n'));
    const conflict = await kB.run(['-n', NS, 'create', 'configmap', 'from-kubectl']);
    assert.notEqual(conflict.code, 0);
    assert.match(conflict.stderr, /configmaps "from-kubectl" already exists/);
  });

  it('keeps serving, losing no acknowledged write, when an etcd member is killed -9 under writes', async (t) => {
    const acknowledged: string[] = [];
    const failures: string[] = [];
    let stop = false;
    const writer = async (api: Api, who: string): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const name = `load-${who}-${i}`;
        const r = await api.request(cmPath(NS), { method: 'POST', body: configMap(name, {}, { suite: 'load' }) });
        if (r.status === 201) acknowledged.push(name);
        else failures.push(`${r.status} ${r.text.slice(0, 200)}`);
      }
    };
    const watchB = await watch(apiB, `${cmPath(NS)}?watch=true&labelSelector=suite%3Dload`);
    const writers = [writer(apiA, 'a'), writer(apiB, 'b')];
    await new Promise((resolve) => setTimeout(resolve, 500));
    await etcd.members[0]!.kill();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const before = acknowledged.length;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    stop = true;
    await Promise.all(writers);
    assert.ok(acknowledged.length > before, `writes stopped after the member died (${before} acknowledged)${logs()}`);
    t.diagnostic(
      `${acknowledged.length} creates acknowledged, ${failures.length} refused: ${failures.slice(0, 3).join('; ')}`,
    );
    for (const failure of failures) assert.match(failure, /^5\d\d \{"kind":"Status"/, 'a refused write is a Status');
    for (const api of [apiA, apiB]) {
      const listed = await api.list(`${cmPath(NS)}?labelSelector=suite%3Dload`);
      const names = new Set(listed.items.map((i) => i.metadata.name));
      for (const name of acknowledged) assert.ok(names.has(name), `${name} was acknowledged but ${api.url} lacks it`);
    }
    await watchB
      .until((events) => events.length >= acknowledged.length, `${acknowledged.length} ADDED events`, 20_000)
      .catch((err: Error) => assert.fail(err.message + logs()));
    const added = watchB.events.map((e) => e.object.metadata.name).sort();
    assert.deepEqual(added, [...acknowledged].sort(), 'the watch saw each acknowledged create once, and nothing else');
    const revisions = watchB.events.map((e) => Number(e.object.metadata.resourceVersion));
    assert.deepEqual(
      revisions,
      [...revisions].sort((x, y) => x - y),
      'in revision order',
    );
  });

  it('answers 410 Expired for a watch from before a compaction, on every server, and a restarted server has it all', async () => {
    const old = await apiA.create(cmPath(NS), configMap('before-compaction'));
    for (let i = 0; i < 3; i++) await apiB.mergePatch(cmPath(NS, 'before-compaction'), { data: { i: String(i) } });
    // A third API server compacting every second: the first round records a revision, the next compacts to it.
    const c = await startServer([
      '--etcd-servers',
      etcd.endpoints,
      '--etcd-compaction-interval',
      '1s',
      '--nodes',
      '0',
      '--controllers',
      '-*',
    ]);
    try {
      const path = `${cmPath(NS)}?watch=true&resourceVersion=${old.metadata.resourceVersion}`;
      for (const api of [apiA, apiB, new Api(c.url)]) {
        for (let i = 0; ; i++) {
          const w = await watch(api, path);
          await w.count(1).catch(() => undefined);
          const first = w.events[0];
          w.close();
          if (first?.type === 'ERROR') {
            assert.equal(first.object.code, 410);
            assert.equal(first.object.reason, 'Expired');
            assert.match(String(first.object.message), /^too old resource version: \d+ \(\d+\)$/);
            break;
          }
          if (i > 60)
            assert.fail(`no 410 from ${api.url} after compaction: ${summarize(w.events)}${logs()}\n${c.stderr()}`);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
      assert.throws(
        () => etcd.ctl(['get', '--rev', old.metadata.resourceVersion!, `/registry/configmaps/${NS}/before-compaction`]),
        /required revision has been compacted/,
      );
    } finally {
      await c.stop();
    }
    // B restarted over the same etcd serves the cluster as it is.
    await b.stop();
    b = await startServer([
      '--etcd-servers',
      etcd.endpoints,
      '--etcd-compaction-interval',
      '0',
      '--nodes',
      '0',
      '--controllers',
      '-*',
    ]);
    apiB = new Api(b.url);
    const cm = await apiB.get(cmPath(NS, 'before-compaction'));
    assert.equal((cm.data as Record<string, string>).i, '2');
    const fromA = await apiA.get(cmPath(NS, 'before-compaction'));
    assert.equal(cm.metadata.resourceVersion, fromA.metadata.resourceVersion);
  });

  it('logged no internal error on either server through all of it', () => {
    for (const server of [a, b]) {
      assert.doesNotMatch(server.stderr(), /\n\s+at |internal error|unhandled/i, `the log:\n${server.stderr()}`);
    }
  });
});

describe('sim serve --etcd-servers without etcd', () => {
  it('refuses --data with --etcd-servers, and a URL that is none, in one line', async () => {
    await assert.rejects(
      startServer(['--etcd-servers', 'http://127.0.0.1:1', '--data', '/tmp/kube-sim-never']),
      /cannot start: --data and --etcd-servers are exclusive/,
    );
    await assert.rejects(
      startServer(['--etcd-servers', 'not-a-url']),
      /--etcd-servers: "not-a-url" is not an etcd client URL/,
    );
  });
});
