import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as k8s from '@kubernetes/client-node';
import { Api, cmPath, configMap, type Obj } from './helpers/http.js';
import { TestRandom } from './helpers/random.js';
import { serverFor } from './helpers/server.js';

const NS = 'informed';

function kubeConfig(server: string): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'sim', server, skipTLSVerify: true }],
    users: [{ name: 'sim' }],
    contexts: [{ name: 'sim', cluster: 'sim', user: 'sim' }],
    currentContext: 'sim',
  });
  return kc;
}

interface Row {
  name: string;
  rv: string;
  labels: Record<string, string>;
  data: Record<string, string>;
}

const row = (o: {
  metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
}): Row => ({
  name: o.metadata?.name ?? '',
  rv: o.metadata?.resourceVersion ?? '',
  labels: o.metadata?.labels ?? {},
  data: o.data ?? {},
});
const sorted = (rows: Row[]): Row[] => rows.sort((a, b) => a.name.localeCompare(b.name));

test('the @kubernetes/client-node informer stays equal to the server’s list through a burst of writes', async (t) => {
  const server = await serverFor(t);
  const api = new Api(server.url);
  await api.namespace(NS);
  for (let i = 0; i < 20; i++)
    await api.create(cmPath(NS), configMap(`pre-${i}`, { i: String(i) }, i % 2 ? { tier: 'web' } : { tier: 'db' }));

  const kc = kubeConfig(server.url);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const path = `/api/v1/namespaces/${NS}/configmaps`;
  const all = k8s.makeInformer<k8s.V1ConfigMap>(kc, path, () => core.listNamespacedConfigMap({ namespace: NS }));
  const web = k8s.makeInformer<k8s.V1ConfigMap>(
    kc,
    path,
    () => core.listNamespacedConfigMap({ namespace: NS, labelSelector: 'tier=web' }),
    'tier=web',
  );
  const errors: unknown[] = [];
  for (const informer of [all, web]) {
    informer.on('error', (err) => errors.push(err));
    t.after(() => informer.stop());
  }
  // Resolves once an informer has stored the object with this name (rejects after a while, not to hang the run).
  const added = (informer: typeof all, name: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`informer never saw ${name}`)), 10_000);
      const check = (obj: k8s.V1ConfigMap): void => {
        if (obj.metadata?.name !== name) return;
        informer.off('add', check);
        clearTimeout(timer);
        setImmediate(resolve); // the callback runs before the informer records the resourceVersion
      };
      informer.on('add', check);
    });

  await all.start();
  await web.start();
  assert.deepEqual(sorted(all.list(NS).map(row)), (await api.list(cmPath(NS))).items.map(row), 'initial list');

  // A burst: creates, updates (moving objects in and out of tier=web), deletes, ten at a time in flight.
  const random = new TestRandom(4242);
  const names = Array.from({ length: 30 }, (_, i) => `burst-${i}`);
  const ops: Array<() => Promise<unknown>> = [];
  for (let i = 0; i < 300; i++) {
    const name = random.pick([...names, `pre-${random.int(20)}`]);
    const roll = random.next();
    const tier = random.pick(['web', 'db', 'cache']);
    if (roll < 0.35)
      ops.push(() => api.request(cmPath(NS), { method: 'POST', body: configMap(name, { n: String(i) }, { tier }) }));
    else if (roll < 0.7)
      ops.push(() =>
        api.request(cmPath(NS, name), {
          method: 'PATCH',
          body: { metadata: { labels: { tier } }, data: { n: String(i) } },
          headers: { 'content-type': 'application/merge-patch+json' },
        }),
      );
    else ops.push(() => api.request(cmPath(NS, name), { method: 'DELETE' }));
  }
  for (let i = 0; i < ops.length; i += 10) await Promise.all(ops.slice(i, i + 10).map((op) => op()));

  // A last write both informers see; events arrive in order, so once it is in, everything before it is.
  const finalSeen = Promise.all([added(all, 'zz-final'), added(web, 'zz-final')]);
  const final = await api.create(cmPath(NS), configMap('zz-final', { last: 'yes' }, { tier: 'web' }));
  await finalSeen;

  assert.deepEqual(errors, []);
  const list = await api.list(cmPath(NS));
  assert.deepEqual(sorted(all.list(NS).map(row)), list.items.map(row), 'the informer’s cache equals the list');
  assert.deepEqual(
    sorted(web.list(NS).map(row)),
    list.items.filter((o: Obj) => o.metadata.labels?.tier === 'web').map(row),
    'the tier=web informer holds exactly the objects with that label',
  );
  assert.equal(all.get('zz-final', NS)?.metadata?.resourceVersion, final.metadata.resourceVersion);
});
