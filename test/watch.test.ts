import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Api, cmPath, configMap, withoutRootCa, type Obj, type StatusBody } from './helpers/http.js';
import { TestRandom } from './helpers/random.js';
import { serverFor } from './helpers/server.js';
import { httpWatch, summarize, webSocketWatch, type WatchClient, type WatchEvent } from './helpers/watch.js';

type Labels = Record<string, string>;

interface State {
  labels: Labels;
  data: Record<string, string>;
  rv: number;
}

/** One state change the writes imply: prev → next (either may be absent), at a known or bracketed revision. */
interface Change {
  index: number;
  namespace: string;
  name: string;
  prev?: State;
  next?: State;
  /** The revision of the write, when the response told us (creates and updates). */
  rv?: number;
  /** For deletes (whose Status reply carries no revision): the revision lies strictly between these. */
  after?: number;
  before?: number;
}

interface Expected {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  name: string;
  labels: Labels;
  data: Record<string, string>;
  change: Change;
}

/** What one watcher must see for these changes: kube-apiserver's cacheWatcher rules for entering/leaving a selector. */
function expectedEvents(
  changes: readonly Change[],
  matches: (namespace: string, name: string, labels: Labels) => boolean,
): Expected[] {
  const out: Expected[] = [];
  for (const c of changes) {
    const before = c.prev !== undefined && matches(c.namespace, c.name, c.prev.labels);
    const now = c.next !== undefined && matches(c.namespace, c.name, c.next.labels);
    const event = (type: Expected['type'], s: State): void =>
      void out.push({ type, name: c.name, labels: s.labels, data: s.data, change: c });
    if (now && before) event('MODIFIED', c.next!);
    else if (now) event('ADDED', c.next!);
    else if (before) event('DELETED', c.prev!); // leaving the selector or deleted: the last state it matched in
  }
  return out;
}

function describeEvent(e: { type: string; name: string; labels: Labels; data: Record<string, string> }): string {
  return `${e.type} ${e.name} ${JSON.stringify(e.labels)} ${JSON.stringify(e.data)}`;
}

/** Compares what a watcher received with what the writes imply: same events, same order, right revisions, nothing extra. */
function assertStream(
  label: string,
  received: readonly WatchEvent[],
  expected: readonly Expected[],
  seed: number,
): void {
  const got = received.map((e) => ({
    type: e.type,
    name: e.object.metadata.name ?? '',
    labels: e.object.metadata.labels ?? {},
    data: (e.object.data as Record<string, string> | undefined) ?? {},
  }));
  for (let i = 0; i < Math.max(got.length, expected.length); i++) {
    const g = got[i];
    const x = expected[i];
    const context = `${label} (seed ${seed}), event #${i}: expected ${x ? describeEvent(x) : 'no more events'}, got ${g ? describeEvent(g) : 'nothing'}`;
    assert.ok(g && x, context);
    assert.deepEqual(g, { type: x.type, name: x.name, labels: x.labels, data: x.data }, context);
    const rv = Number(received[i]!.object.metadata.resourceVersion);
    if (x.change.rv !== undefined) assert.equal(rv, x.change.rv, `${context}: resourceVersion`);
    else
      assert.ok(
        rv > x.change.after! && rv < x.change.before!,
        `${context}: delete revision ${rv} not in (${x.change.after}, ${x.change.before})`,
      );
    if (i > 0)
      assert.ok(
        rv > Number(received[i - 1]!.object.metadata.resourceVersion),
        `${context}: resourceVersions must increase`,
      );
  }
}

const NS = 'watch-e2e';
// Controllers may put objects of their own in a namespace (kube-root-ca.crt, say); the model is about ours.
const isOurs = (name: string | undefined): boolean =>
  name !== undefined && (name.startsWith('w-') || name.startsWith('zz-'));
const ours = (events: readonly WatchEvent[]): WatchEvent[] => events.filter((e) => isOurs(e.object.metadata.name));
const NAMES = Array.from({ length: 40 }, (_, i) => `w-${String(i).padStart(2, '0')}`);
const COLORS = ['red', 'blue', 'green', undefined] as const;
const TIERS = ['web', 'db', undefined] as const;

function randomLabels(random: TestRandom): Labels {
  const labels: Labels = {};
  const color = random.pick(COLORS);
  const tier = random.pick(TIERS);
  if (color) labels.color = color;
  if (tier) labels.tier = tier;
  return labels;
}

test('watch delivers every event exactly once, in order, across 1,000 mixed writes with label selectors', async (t) => {
  const seed = Number(process.env.KUBE_SIM_TEST_SEED ?? 20250101);
  const random = new TestRandom(seed);
  const server = await serverFor(t);
  const api = new Api(server.url);
  await api.namespace(NS);
  await api.namespace(`${NS}-other`);
  const start = (await api.list(cmPath(NS))).metadata.resourceVersion;

  // Watchers registered before the first write, from the list's revision (so no initial state is replayed).
  const at = `watch=true&resourceVersion=${start}`;
  const q = (selector: string): string => `labelSelector=${encodeURIComponent(selector)}`;
  const inNs = (ns: string): boolean => ns === NS;
  const watchers: Array<{
    label: string;
    client: WatchClient;
    matches: (ns: string, name: string, l: Labels) => boolean;
  }> = [
    { label: 'no selector', client: await httpWatch(server.url, `${cmPath(NS)}?${at}`), matches: (ns) => inNs(ns) },
    {
      label: 'color=red',
      client: await httpWatch(server.url, `${cmPath(NS)}?${at}&${q('color=red')}`),
      matches: (ns, _n, l) => inNs(ns) && l.color === 'red',
    },
    {
      label: 'websocket color in (red,blue),tier!=db',
      client: await webSocketWatch(server.url, `${cmPath(NS)}?${at}&${q('color in (red,blue),tier!=db')}`),
      matches: (ns, _n, l) => inNs(ns) && (l.color === 'red' || l.color === 'blue') && l.tier !== 'db',
    },
    {
      label: 'tier (exists)',
      client: await httpWatch(server.url, `${cmPath(NS)}?${at}&${q('tier')}`),
      matches: (ns, _n, l) => inNs(ns) && 'tier' in l,
    },
    {
      label: '!tier,color notin (green)',
      client: await httpWatch(server.url, `${cmPath(NS)}?${at}&${q('!tier,color notin (green)')}`),
      matches: (ns, _n, l) => inNs(ns) && !('tier' in l) && l.color !== 'green',
    },
    {
      label: 'fieldSelector metadata.name=w-07',
      client: await httpWatch(server.url, `${cmPath(NS)}?${at}&fieldSelector=metadata.name%3Dw-07`),
      matches: (ns, name) => inNs(ns) && name === 'w-07',
    },
    {
      label: 'all namespaces, color=blue,tier=web',
      client: await httpWatch(server.url, `/api/v1/configmaps?${at}&${q('color=blue,tier=web')}`),
      matches: (_ns, _n, l) => l.color === 'blue' && l.tier === 'web',
    },
  ];
  t.after(() => watchers.forEach((w) => w.client.close()));
  for (const w of watchers) assert.equal(w.client.status, w.label.startsWith('websocket') ? 101 : 200, w.label);

  const live = new Map<string, State>();
  const changes: Change[] = [];
  const openDeletes: Change[] = [];
  let lastRv = Number(start);
  const key = (ns: string, name: string): string => `${ns}/${name}`;
  const record = (change: Change): void => {
    changes.push(change);
    if (change.rv !== undefined) {
      assert.ok(
        change.rv > lastRv,
        `write #${change.index}: resourceVersion ${change.rv} must exceed ${lastRv} (seed ${seed})`,
      );
      for (const d of openDeletes.splice(0)) d.before = change.rv;
      lastRv = change.rv;
    } else {
      change.after = lastRv;
      openDeletes.push(change);
    }
  };
  const stateOf = (obj: Obj): State => ({
    labels: obj.metadata.labels ?? {},
    data: (obj.data as Record<string, string> | undefined) ?? {},
    rv: Number(obj.metadata.resourceVersion),
  });
  let noops = 0;
  let resumeFrom = '';
  let resumeIndex = 0;

  const write = async (
    index: number,
    ns: string,
    name: string,
    mode: 'random' | { labels: Labels; data: Record<string, string> },
  ): Promise<void> => {
    const path = cmPath(ns, name);
    const current = live.get(key(ns, name));
    if (!current) {
      const want = mode === 'random' ? { labels: randomLabels(random), data: { v: String(index) } } : mode;
      const created = await api.create(cmPath(ns), configMap(name, want.data, want.labels));
      const next = stateOf(created);
      assert.deepEqual({ labels: next.labels, data: next.data }, want);
      live.set(key(ns, name), next);
      return record({ index, namespace: ns, name, next, rv: next.rv });
    }
    const roll = mode === 'random' ? random.next() : 0;
    if (roll < 0.4) {
      // PUT with the current resourceVersion: new labels and (usually) new data.
      const want =
        mode === 'random'
          ? {
              labels: random.next() < 0.7 ? randomLabels(random) : current.labels,
              data: random.next() < 0.8 ? { v: String(index) } : current.data,
            }
          : mode;
      // Empty label maps are left out: Go's omitempty makes `labels: {}` and no labels the same object.
      const metadata =
        Object.keys(want.labels).length > 0 ? { name, namespace: ns, labels: want.labels } : { name, namespace: ns };
      const body = { ...configMap(name, want.data), metadata: { ...metadata, resourceVersion: String(current.rv) } };
      const updated = stateOf(await api.put(path, body));
      assert.deepEqual({ labels: updated.labels, data: updated.data }, want);
      if (updated.rv === current.rv) {
        noops++;
        return; // nothing changed after all: no new revision, no event
      }
      live.set(key(ns, name), updated);
      return record({ index, namespace: ns, name, prev: current, next: updated, rv: updated.rv });
    }
    if (roll < 0.6) {
      // Merge patch of one label: set, change or remove it (null).
      const labelKey = random.pick(['color', 'tier']);
      const value = labelKey === 'color' ? random.pick(COLORS) : random.pick(TIERS);
      const patched = stateOf(await api.mergePatch(path, { metadata: { labels: { [labelKey]: value ?? null } } }));
      const labels = { ...current.labels };
      if (value === undefined) delete labels[labelKey];
      else labels[labelKey] = value;
      assert.deepEqual(patched.labels, labels);
      if (patched.rv === current.rv) {
        assert.deepEqual(labels, current.labels, 'only a no-op may keep the resourceVersion');
        noops++;
        return;
      }
      live.set(key(ns, name), patched);
      return record({ index, namespace: ns, name, prev: current, next: patched, rv: patched.rv });
    }
    if (roll < 0.7) {
      // A no-op: the same labels again. Same resourceVersion back, and no event for anyone.
      const same = stateOf(await api.mergePatch(path, { metadata: { labels: current.labels } }));
      assert.equal(same.rv, current.rv, `write #${index}: a no-op patch must keep resourceVersion (seed ${seed})`);
      noops++;
      return;
    }
    const reply = await api.delete(path);
    assert.equal(reply.status, 200, reply.text);
    assert.equal((reply.body as StatusBody).status, 'Success');
    live.delete(key(ns, name));
    return record({ index, namespace: ns, name, prev: current });
  };

  for (let i = 0; i < 1000; i++) {
    // A few writes go to another namespace: only the all-namespaces watcher may see them.
    const ns = random.next() < 0.1 ? `${NS}-other` : NS;
    await write(i, ns, random.pick(NAMES), 'random');
    if (i === 499) {
      resumeFrom = (await api.list(cmPath(NS))).metadata.resourceVersion;
      resumeIndex = i + 1;
    }
  }
  // Last writes every watcher can see one of, so each stream ends on a known event.
  await write(1000, NS, 'w-07', { labels: { color: 'red', tier: 'web' }, data: { final: 'w-07' } });
  await write(1001, NS, 'zz-blue', { labels: { color: 'blue' }, data: { final: 'blue' } });
  await write(1002, `${NS}-other`, 'zz-blue-web', {
    labels: { color: 'blue', tier: 'web' },
    data: { final: 'blue-web' },
  });
  assert.equal(openDeletes.length, 0);
  assert.ok(noops > 20, `the run should include no-op writes (got ${noops})`);

  for (const w of watchers) {
    const expected = expectedEvents(changes, w.matches);
    await w.client
      .until((events) => ours(events).length >= expected.length, `${expected.length} events`)
      .catch((err: Error) => {
        throw new Error(
          `${w.label} (seed ${seed}): ${err.message}\nexpected ends with: ${expected.slice(-5).map(describeEvent).join('; ')}`,
        );
      });
  }
  await api.get('/version'); // one more round trip: any stray extra event would be in by now
  for (const w of watchers) {
    assert.deepEqual(
      w.client.events.filter((e) => !['ADDED', 'MODIFIED', 'DELETED'].includes(e.type)),
      [],
      `${w.label}: only object events`,
    );
    assertStream(w.label, ours(w.client.events), expectedEvents(changes, w.matches), seed);
  }

  // The selectors really were crossed: objects entered and left `color=red` through updates.
  const red = expectedEvents(changes, watchers[1]!.matches);
  assert.ok(
    red.filter((e) => e.type === 'ADDED' && e.change.prev).length > 10,
    'objects entered the selector by update',
  );
  assert.ok(
    red.filter((e) => e.type === 'DELETED' && e.change.next).length > 10,
    'objects left the selector by update',
  );

  // A watch resumed from the middle replays exactly the tail, from the retained history.
  const resumed = await httpWatch(
    server.url,
    `${cmPath(NS)}?watch=true&resourceVersion=${resumeFrom}&${q('color=red')}`,
  );
  t.after(() => resumed.close());
  const tail = expectedEvents(
    changes.filter((c) => c.index >= resumeIndex),
    watchers[1]!.matches,
  );
  await resumed.until((events) => ours(events).length >= tail.length, `${tail.length} events`);
  await api.get('/version');
  assertStream('resumed color=red', ours(resumed.events), tail, seed);

  // And the list agrees with what the writes imply.
  const list = await api.list(cmPath(NS));
  const model = [...live.entries()]
    .filter(([k]) => k.startsWith(`${NS}/`))
    .map(([k, s]) => ({ name: k.slice(NS.length + 1), labels: s.labels, data: s.data, rv: String(s.rv) }));
  assert.deepEqual(
    list.items
      .filter((o) => isOurs(o.metadata.name))
      .map((o) => ({
        name: o.metadata.name,
        labels: o.metadata.labels ?? {},
        data: o.data ?? {},
        rv: o.metadata.resourceVersion,
      })),
    model.sort((a, b) => a.name.localeCompare(b.name)),
  );
});

test('a watch without resourceVersion starts with the current objects as ADDED, then follows changes', async (t) => {
  const server = await serverFor(t);
  const api = new Api(server.url);
  await api.namespace('initial');
  const a = await api.create(cmPath('initial'), configMap('a', { k: '1' }, { app: 'x' }));
  await api.create(cmPath('initial'), configMap('b', { k: '2' }, { app: 'y' }));
  const watch = await httpWatch(server.url, `${cmPath('initial')}?watch=true&labelSelector=app%3Dx`);
  t.after(() => watch.close());
  assert.match(watch.contentType, /^application\/json/);
  await watch.count(1);
  assert.deepEqual(
    watch.events.map((e) => [e.type, e.object.metadata.name, e.object.metadata.resourceVersion]),
    [['ADDED', 'a', a.metadata.resourceVersion]],
  );
  const b = await api.mergePatch(cmPath('initial', 'b'), { metadata: { labels: { app: 'x' } } });
  await watch.count(2);
  assert.deepEqual(
    [watch.events[1]!.type, watch.events[1]!.object.metadata.resourceVersion],
    ['ADDED', b.metadata.resourceVersion],
  );
});

test('a no-op update or patch keeps resourceVersion and sends no watch event', async (t) => {
  const server = await serverFor(t);
  const api = new Api(server.url);
  await api.namespace('noop');
  const obj = await api.create(cmPath('noop'), configMap('same', { k: 'v' }, { app: 'same' }));
  const rv = obj.metadata.resourceVersion!;
  const watch = await httpWatch(server.url, `${cmPath('noop')}?watch=true&resourceVersion=${rv}`);
  t.after(() => watch.close());
  const ws = await webSocketWatch(server.url, `${cmPath('noop')}?watch=true&resourceVersion=${rv}`);
  t.after(() => ws.close());

  const put = await api.put(cmPath('noop', 'same'), obj);
  assert.equal(put.metadata.resourceVersion, rv, 'PUT of the unchanged object');
  const putWithoutRv = await api.put(cmPath('noop', 'same'), {
    ...obj,
    metadata: { ...obj.metadata, resourceVersion: undefined },
  });
  assert.equal(putWithoutRv.metadata.resourceVersion, rv, 'unconditional PUT of the unchanged object');
  assert.equal(
    (await api.mergePatch(cmPath('noop', 'same'), { data: { k: 'v' } })).metadata.resourceVersion,
    rv,
    'merge patch',
  );
  const strategic = await api.expect<Obj>(200, cmPath('noop', 'same'), {
    method: 'PATCH',
    body: { metadata: { labels: { app: 'same' } } },
    headers: { 'content-type': 'application/strategic-merge-patch+json' },
  });
  assert.equal(strategic.metadata.resourceVersion, rv, 'strategic merge patch');
  const json = await api.expect<Obj>(200, cmPath('noop', 'same'), {
    method: 'PATCH',
    body: [{ op: 'replace', path: '/data/k', value: 'v' }],
    headers: { 'content-type': 'application/json-patch+json' },
  });
  assert.equal(json.metadata.resourceVersion, rv, 'json patch');
  assert.equal((await api.get(cmPath('noop', 'same'))).metadata.resourceVersion, rv);

  // A real change: it must be the first (and only) event either watcher sees.
  const changed = await api.mergePatch(cmPath('noop', 'same'), { data: { k: 'w' } });
  assert.ok(Number(changed.metadata.resourceVersion) > Number(rv));
  for (const w of [watch, ws]) {
    await w.count(1);
    await api.get('/version');
    assert.deepEqual(
      w.events.map((e) => [e.type, e.object.metadata.resourceVersion]),
      [['MODIFIED', changed.metadata.resourceVersion]],
      w.description,
    );
  }
});

test('WebSocket watch on the same URL carries the same events as HTTP, and refuses non-watch upgrades', async (t) => {
  const server = await serverFor(t);
  const api = new Api(server.url);
  await api.namespace('ws');
  const from = (await api.list(cmPath('ws'))).metadata.resourceVersion;
  const path = `${cmPath('ws')}?watch=true&resourceVersion=${from}`;
  const overHttp = await httpWatch(server.url, path);
  t.after(() => overHttp.close());
  const overWs = await webSocketWatch(server.url, path);
  t.after(() => overWs.close());
  // The legacy /watch/ prefix and a single object's watch work over WebSocket too.
  const legacy = await webSocketWatch(server.url, `/api/v1/watch/namespaces/ws/configmaps/one?resourceVersion=${from}`);
  t.after(() => legacy.close());

  await api.create(cmPath('ws'), configMap('one', { a: '1' }));
  await api.create(cmPath('ws'), configMap('two', { a: '2' }));
  await api.mergePatch(cmPath('ws', 'one'), { data: { a: '3' } });
  await api.delete(cmPath('ws', 'one'));
  await overHttp.count(4);
  await overWs.count(4);
  await legacy.count(3);
  const shape = (events: readonly WatchEvent[]) =>
    events.map((e) => [e.type, e.object.metadata.name, e.object.metadata.resourceVersion]);
  assert.deepEqual(shape(overWs.events), shape(overHttp.events));
  assert.deepEqual(
    shape(overWs.events).map(([type, name]) => `${type} ${name}`),
    ['ADDED one', 'ADDED two', 'MODIFIED one', 'DELETED one'],
  );
  assert.deepEqual(
    shape(legacy.events),
    shape(overHttp.events).filter(([, name]) => name === 'one'),
  );

  await assert.rejects(webSocketWatch(server.url, cmPath('ws', 'two')), /Unexpected server response: 400/);
});

test('a watch from a resourceVersion older than the history gets one ERROR event with a 410 Expired Status', async (t) => {
  const server = await serverFor(t, ['--watch-history', '5']);
  const api = new Api(server.url);
  await api.namespace('expiry');
  const first = await api.create(cmPath('expiry'), configMap('x', { n: '0' }));
  const old = first.metadata.resourceVersion!;
  for (let i = 1; i <= 10; i++) await api.mergePatch(cmPath('expiry', 'x'), { data: { n: String(i) } });

  const watch = await httpWatch(server.url, `${cmPath('expiry')}?watch=true&resourceVersion=${old}`);
  t.after(() => watch.close());
  assert.equal(watch.status, 200, 'kube-apiserver answers the watch itself with 200');
  await watch.done;
  assert.equal(watch.events.length, 1, summarize(watch.events));
  const event = watch.events[0]!;
  assert.equal(event.type, 'ERROR');
  assert.equal(event.object.kind, 'Status');
  assert.equal(event.object.status, 'Failure');
  assert.equal(event.object.code, 410);
  assert.equal(event.object.reason, 'Expired');
  assert.match(event.object.message ?? '', /^too old resource version: \d+ \(\d+\)$/);

  // The same over WebSocket.
  const ws = await webSocketWatch(server.url, `${cmPath('expiry')}?watch=true&resourceVersion=${old}`);
  t.after(() => ws.close());
  await ws.done;
  assert.deepEqual(
    ws.events.map((e) => [e.type, e.object.code, e.object.reason]),
    [['ERROR', 410, 'Expired']],
  );

  // List and get are unaffected, and a watch from a recent version still works.
  const list = await api.list(cmPath('expiry'));
  assert.deepEqual(
    withoutRootCa(list.items).map((o) => o.data),
    [{ n: '10' }],
  );
  const current = await api.get(cmPath('expiry', 'x'));
  assert.deepEqual(current.data, { n: '10' });
  assert.equal(current.metadata.uid, first.metadata.uid);
  const fresh = await httpWatch(
    server.url,
    `${cmPath('expiry')}?watch=true&resourceVersion=${list.metadata.resourceVersion}`,
  );
  t.after(() => fresh.close());
  const next = await api.mergePatch(cmPath('expiry', 'x'), { data: { n: '11' } });
  await fresh.count(1);
  assert.deepEqual(
    [fresh.events[0]!.type, fresh.events[0]!.object.metadata.resourceVersion],
    ['MODIFIED', next.metadata.resourceVersion],
  );

  // The history is per resource: writes to secrets do not expire configmap watches.
  const cmRv = next.metadata.resourceVersion!;
  for (let i = 0; i < 10; i++)
    await api.create('/api/v1/namespaces/expiry/secrets', { metadata: { name: `s${i}` }, stringData: { k: 'v' } });
  const stillOk = await httpWatch(server.url, `${cmPath('expiry')}?watch=true&resourceVersion=${cmRv}`);
  t.after(() => stillOk.close());
  const after = await api.mergePatch(cmPath('expiry', 'x'), { data: { n: '12' } });
  await stillOk.count(1);
  assert.deepEqual(
    [stillOk.events[0]!.type, stillOk.events[0]!.object.metadata.resourceVersion],
    ['MODIFIED', after.metadata.resourceVersion],
  );
});
