import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { describe, test, type TestContext } from 'node:test';
import { ApiError } from '../src/api/errors.js';
import type { KubeObject } from '../src/api/types.js';
import { Resources, type KubeClient } from '../src/client/client.js';
import { HttpClient } from '../src/client/http.js';
import { Cluster } from '../src/cluster/cluster.js';
import { InProcessClient } from '../src/cluster/in-process-client.js';
import { buildServer } from '../src/server/server.js';

// One contract for the client interface, run against each implementation (as Hono runs the same router cases for
// every router): what a controller sees must not depend on whether it runs in the server's process or talks HTTP.

interface Setup {
  name: string;
  /** A client of a fresh cluster (no controllers), closed when the test ends. */
  client(t: TestContext, options?: { watchHistory?: number }): Promise<KubeClient>;
}

const inProcess: Setup = {
  name: 'InProcessClient',
  client: async (t, options = {}) => {
    const cluster = await Cluster.start({ clock: 'real', seed: 1, ...options });
    t.after(() => cluster.close());
    return new InProcessClient(cluster);
  },
};

const overHttp: Setup = {
  name: 'HttpClient',
  client: async (t, options = {}) => {
    const cluster = await Cluster.start({ clock: 'real', seed: 1, ...options });
    const app = buildServer(cluster);
    await app.listen({ host: '127.0.0.1', port: 0 });
    t.after(async () => {
      await app.close();
      await cluster.close();
    });
    return new HttpClient(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
  },
};

const configMap = (name: string, data: Record<string, string> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data,
});

const deployment = (name: string): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
  },
});

/** The error a call failed with: an ApiError carrying the server's Status. */
async function failure(call: Promise<unknown>): Promise<ApiError> {
  try {
    await call;
  } catch (err) {
    assert.ok(err instanceof ApiError, `not an ApiError: ${String(err)}`);
    return err;
  }
  assert.fail('the call succeeded');
}

/** A watch's events as `TYPE name`, and how it closed. */
function watchAll(
  client: KubeClient,
  resourceVersion: string,
): { events: string[]; closed: Promise<Error | undefined>; stop(): void; objects: KubeObject[] } {
  const events: string[] = [];
  const objects: KubeObject[] = [];
  let resolveClosed!: (error: Error | undefined) => void;
  const closed = new Promise<Error | undefined>((resolve) => (resolveClosed = resolve));
  const handle = client.watch(
    Resources.configmaps,
    'default',
    { resourceVersion },
    (type, obj) => {
      if (type === 'BOOKMARK') return;
      events.push(`${type} ${obj.metadata.name}`);
      objects.push(obj);
    },
    (error) => resolveClosed(error),
  );
  return { events, objects, closed, stop: () => handle.stop() };
}

/** Waits (on the wall clock: this is I/O) until `done` holds. */
async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

for (const setup of [inProcess, overHttp]) {
  describe(`the client contract: ${setup.name}`, () => {
    test('get returns the stored object; a missing one is a 404 NotFound Status', async (t) => {
      const client = await setup.client(t);
      const created = await client.create(Resources.configmaps, 'default', configMap('a', { k: 'v' }));
      const got = await client.get(Resources.configmaps, 'default', 'a');
      assert.deepEqual(
        [got.metadata.name, got.metadata.uid, got.metadata.resourceVersion, got.data],
        ['a', created.metadata.uid, created.metadata.resourceVersion, { k: 'v' }],
      );
      const err = await failure(client.get(Resources.configmaps, 'default', 'nope'));
      assert.deepEqual([err.code, err.reason, err.message], [404, 'NotFound', 'configmaps "nope" not found']);
    });

    test('list pages with limit and continue, in name order, at one resourceVersion', async (t) => {
      const client = await setup.client(t);
      for (const name of ['e', 'b', 'd', 'a', 'c'])
        await client.create(Resources.configmaps, 'default', configMap(name));
      const names: string[] = [];
      const versions = new Set<string>();
      let token: string | undefined;
      let pages = 0;
      do {
        const page = await client.list(Resources.configmaps, 'default', { limit: 2, continue: token });
        pages++;
        names.push(...page.items.map((o) => o.metadata.name!));
        versions.add(page.metadata.resourceVersion);
        if (pages === 1) assert.equal(page.metadata.remainingItemCount, 3);
        token = page.metadata.continue || undefined;
      } while (token);
      assert.deepEqual(names, ['a', 'b', 'c', 'd', 'e']);
      assert.equal(pages, 3);
      assert.equal(versions.size, 1, 'every page is of the first page’s snapshot');
    });

    test('a watch from a resourceVersion sees what came after it, and resumes from the last one it saw', async (t) => {
      const client = await setup.client(t);
      const start = (await client.list(Resources.configmaps, 'default')).metadata.resourceVersion;
      const first = watchAll(client, start);
      const created = await client.create(Resources.configmaps, 'default', configMap('w'));
      await client.update(Resources.configmaps, { ...created, data: { n: '1' } });
      await until(() => first.events.length === 2, 'two events');
      first.stop();
      const last = first.objects.at(-1)!.metadata.resourceVersion!;
      await client.delete(Resources.configmaps, 'default', 'w');
      await client.create(Resources.configmaps, 'default', configMap('x'));
      const resumed = watchAll(client, last);
      await until(() => resumed.events.length === 2, 'the events after the resume point');
      resumed.stop();
      assert.deepEqual(first.events, ['ADDED w', 'MODIFIED w']);
      assert.deepEqual(resumed.events, ['DELETED w', 'ADDED x']);
    });

    test('a watch from a resourceVersion older than the history ends with a 410 Expired', async (t) => {
      const client = await setup.client(t, { watchHistory: 5 });
      const old = (await client.create(Resources.configmaps, 'default', configMap('old'))).metadata.resourceVersion!;
      for (let i = 0; i < 10; i++) await client.create(Resources.configmaps, 'default', configMap(`n${i}`));
      const watch = watchAll(client, old);
      const error = await watch.closed;
      assert.ok(error instanceof ApiError, `closed with ${String(error)}`);
      assert.deepEqual([error.code, error.reason], [410, 'Expired']);
      assert.match(error.message, /^too old resource version: \d+ \(\d+\)$/);
      assert.deepEqual(watch.events, []);
    });

    test('an update from a stale resourceVersion is a 409 Conflict; from the current one it goes through', async (t) => {
      const client = await setup.client(t);
      const v1 = await client.create(Resources.configmaps, 'default', configMap('c', { n: '1' }));
      const v2 = await client.update(Resources.configmaps, { ...v1, data: { n: '2' } });
      const err = await failure(client.update(Resources.configmaps, { ...v1, data: { n: 'stale' } }));
      assert.deepEqual(
        [err.code, err.reason, err.message],
        [
          409,
          'Conflict',
          'Operation cannot be fulfilled on configmaps "c": the object has been modified; please apply your changes to the latest version and try again',
        ],
      );
      const v3 = await client.update(Resources.configmaps, { ...v2, data: { n: '3' } });
      assert.deepEqual(v3.data, { n: '3' });
    });

    test('updateStatus writes status only; update leaves status as it was', async (t) => {
      const client = await setup.client(t);
      const d = await client.create(Resources.deployments, 'default', deployment('s'));
      const withStatus = await client.updateStatus(Resources.deployments, {
        ...d,
        spec: { ...(d.spec as object), replicas: 7 },
        status: { observedGeneration: 1, replicas: 1 },
      });
      assert.equal((withStatus.spec as { replicas: number }).replicas, 1, 'spec is not written through /status');
      assert.deepEqual(withStatus.status, { observedGeneration: 1, replicas: 1 });
      const updated = await client.update(Resources.deployments, {
        ...withStatus,
        spec: { ...(withStatus.spec as object), replicas: 2 },
        status: { replicas: 99 },
      });
      assert.equal((updated.spec as { replicas: number }).replicas, 2);
      assert.deepEqual(updated.status, { observedGeneration: 1, replicas: 1 }, 'status is not written by an update');
      assert.equal(updated.metadata.generation, 2);
    });

    test('the scale subresource reads and writes a Deployment’s replicas as an autoscaling/v1 Scale', async (t) => {
      const client = await setup.client(t);
      await client.create(Resources.deployments, 'default', deployment('sc'));
      assert.ok(client.getScale && client.updateScale, 'both implementations serve scale');
      const scale = await client.getScale(Resources.deployments, 'default', 'sc');
      assert.deepEqual(
        [scale.apiVersion, scale.kind, (scale.spec as { replicas: number }).replicas],
        ['autoscaling/v1', 'Scale', 1],
      );
      assert.deepEqual(scale.status, { replicas: 0, selector: 'app=sc' });
      const written = await client.updateScale(Resources.deployments, { ...scale, spec: { replicas: 4 } });
      assert.equal((written.spec as { replicas: number }).replicas, 4);
      const d = await client.get(Resources.deployments, 'default', 'sc');
      assert.equal((d.spec as { replicas: number }).replicas, 4);
      const err = await failure(client.getScale(Resources.configmaps, 'default', 'sc'));
      assert.equal(err.code, 404);
    });
  });
}
