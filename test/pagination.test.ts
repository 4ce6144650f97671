import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api, assertStatus, cmPath, configMap, type Obj, type ObjList } from './helpers/http.js';
import { startServer, type SimServer } from './helpers/server.js';

/** Follows `continue` tokens to the end; returns every page. */
async function pages(
  api: Api,
  path: string,
  limit: number,
  between?: (page: number) => Promise<void>,
): Promise<ObjList[]> {
  const out: ObjList[] = [];
  let token: string | undefined;
  const sep = path.includes('?') ? '&' : '?';
  do {
    const page = await api.list(`${path}${sep}limit=${limit}${token ? `&continue=${encodeURIComponent(token)}` : ''}`);
    out.push(page);
    token = page.metadata.continue;
    if (token && between) await between(out.length);
  } while (token);
  return out;
}

const keyOf = (o: Obj): string => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

describe('pagination with limit and continue', () => {
  let server: SimServer;
  let api: Api;
  const namespaces = ['page-a', 'page-b', 'page-c'];
  after(() => server?.stop());
  before(async () => {
    server = await startServer();
    api = new Api(server.url);
    for (const ns of namespaces) {
      await api.namespace(ns);
      for (let i = 0; i < 37; i++) {
        await api.create(
          cmPath(ns),
          configMap(`cm-${String(i).padStart(3, '0')}`, { i: String(i) }, { parity: i % 2 === 0 ? 'even' : 'odd', ns }),
        );
      }
    }
  });

  test('every object of a namespace exactly once, in key order, with a consistent resourceVersion and remaining count', async () => {
    const full = await api.list(cmPath('page-a'));
    for (const limit of [1, 5, 10, 36, 37, 500]) {
      const all = await pages(api, cmPath('page-a'), limit);
      const items = all.flatMap((p) => p.items);
      assert.deepEqual(items.map(keyOf), full.items.map(keyOf), `limit ${limit}`);
      assert.equal(new Set(items.map(keyOf)).size, items.length, 'no duplicates');
      assert.equal(all.length, Math.ceil(full.items.length / limit), `limit ${limit}: page count`);
      let seen = 0;
      for (const [i, page] of all.entries()) {
        assert.ok(page.items.length <= limit);
        seen += page.items.length;
        assert.equal(
          page.metadata.resourceVersion,
          all[0]!.metadata.resourceVersion,
          'every page reports the first page’s resourceVersion',
        );
        if (i < all.length - 1) {
          assert.equal(page.items.length, limit, 'only the last page is short');
          assert.equal(page.metadata.remainingItemCount, full.items.length - seen, 'remainingItemCount');
        } else {
          assert.equal(page.metadata.continue, undefined, 'the last page has no continue token');
          assert.equal(page.metadata.remainingItemCount, undefined);
        }
      }
    }
  });

  test('across all namespaces, and with a label selector', async () => {
    const full = await api.list('/api/v1/configmaps');
    const all = (await pages(api, '/api/v1/configmaps', 7)).flatMap((p) => p.items);
    assert.deepEqual(all.map(keyOf), full.items.map(keyOf));
    for (const ns of namespaces) assert.equal(all.filter((o) => o.metadata.namespace === ns).length >= 37, true);

    const even = (await pages(api, `/api/v1/configmaps?labelSelector=${encodeURIComponent('parity=even')}`, 4)).flatMap(
      (p) => p.items,
    );
    assert.deepEqual(even.map(keyOf), full.items.filter((o) => o.metadata.labels?.parity === 'even').map(keyOf));
    assert.equal(even.length, 3 * 19);

    const odd = (
      await pages(api, `${cmPath('page-b')}?labelSelector=${encodeURIComponent('parity!=even,ns=page-b')}`, 6)
    ).flatMap((p) => p.items);
    assert.deepEqual(
      odd.map((o) => o.metadata.name),
      Array.from({ length: 18 }, (_, i) => `cm-${String(2 * i + 1).padStart(3, '0')}`),
    );
  });

  test('objects that exist throughout are returned exactly once while others are written between pages', async () => {
    const ns = 'page-c';
    const stable = (await api.list(cmPath(ns))).items.map(keyOf);
    let n = 0;
    const all = await pages(api, cmPath(ns), 5, async () => {
      // New objects before and after the cursor, and an update of one already returned.
      await api.create(cmPath(ns), configMap(`aaa-${n}`));
      await api.create(cmPath(ns), configMap(`zzz-${n}`));
      await api.mergePatch(cmPath(ns, 'cm-000'), { data: { touched: String(n) } });
      n++;
    });
    const keys = all.flatMap((p) => p.items).map(keyOf);
    assert.equal(new Set(keys).size, keys.length, 'no object twice');
    for (const k of stable) assert.equal(keys.filter((x) => x === k).length, 1, `${k} exactly once`);
    assert.ok(!keys.some((k) => k.includes('/aaa-')), 'objects sorting before the cursor are not returned late');
  });

  test('a malformed continue token is a 400', async () => {
    const reply = await api.request(`${cmPath('page-a')}?limit=5&continue=not-a-token`);
    assertStatus(reply, 400, 'BadRequest');
  });
});
