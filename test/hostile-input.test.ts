import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Api, assertStatus, cmPath, configMap, withoutRootCa, type ObjList, type Reply } from './helpers/http.js';
import { startServer, type SimServer } from './helpers/server.js';
import { httpWatch } from './helpers/watch.js';

/**
 * A request whose path is sent byte for byte: fetch (WHATWG URL) resolves `.`, `..` and even `%2e%2e` before
 * sending, so the server's own handling of such names could not be reached through it.
 */
function rawRequest(base: string, path: string, method = 'GET', body?: string): Promise<Reply> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path,
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
          resolve({ status: res.statusCode!, headers, text, body: parsed });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('hostile input gets the Status kube-apiserver gives, and writes nothing', () => {
  let server: SimServer;
  let api: Api;
  let before_: ObjList;
  const ns = 'hostile';

  before(async () => {
    server = await startServer(['--nodes', '0']);
    api = new Api(server.url);
    await api.namespace(ns);
    await api.create(cmPath(ns), configMap('kept', { k: 'v' }));
    before_ = await api.list(cmPath(ns));
  });
  after(() => server?.stop());

  test('absurd limit: beyond int64 is 400, not a number is 400, zero or negative means no limit', async () => {
    const huge = await api.request(`${cmPath(ns)}?limit=99999999999999999999`);
    assert.equal(
      assertStatus(huge, 400, 'BadRequest').message,
      // The ParameterCodec's error: strconv.ParseInt's own text.
      'strconv.ParseInt: parsing "99999999999999999999": value out of range',
    );
    assertStatus(await api.request(`${cmPath(ns)}?limit=ten`), 400, 'BadRequest');
    assertStatus(await api.request(`${cmPath(ns)}?limit=1.5`), 400, 'BadRequest');
    for (const limit of ['0', '-5']) {
      const list = await api.list(`${cmPath(ns)}?limit=${limit}`);
      assert.equal(list.metadata.continue, undefined, `limit=${limit} is no limit`);
      assert.deepEqual(
        withoutRootCa(list.items).map((o) => o.metadata.name),
        ['kept'],
      );
    }
    // A limit far above the number of objects is just "all of them".
    assert.equal(withoutRootCa((await api.list(`${cmPath(ns)}?limit=9007199254740991`)).items).length, 1);
  });

  test('absurd timeoutSeconds: malformed is 400 on lists and watches; negative ends the watch; huge is served (and capped)', async () => {
    const list = await api.request(`${cmPath(ns)}?timeoutSeconds=soon`);
    assert.equal(assertStatus(list, 400, 'BadRequest').message, 'strconv.ParseInt: parsing "soon": invalid syntax');
    assertStatus(await api.request(`${cmPath(ns)}?watch=true&timeoutSeconds=soon`), 400, 'BadRequest');
    assertStatus(await api.request(`${cmPath(ns)}?watch=true&timeoutSeconds=1e999`), 400, 'BadRequest');
    assertStatus(await api.request(`${cmPath(ns)}?watch=true&timeoutSeconds=99999999999999999999`), 400, 'BadRequest');
    // A negative timeout has expired already: the watch answers 200 and ends.
    const expired = await api.request(
      `${cmPath(ns)}?watch=true&resourceVersion=${before_.metadata.resourceVersion}&timeoutSeconds=-1`,
    );
    assert.equal(expired.status, 200);
    assert.equal(expired.text, '');
    // A timeout beyond what a timer can hold must not fire at once: the watch is open and sees a change.
    const watch = await httpWatch(
      server.url,
      `${cmPath(ns)}?watch=true&resourceVersion=${before_.metadata.resourceVersion}&timeoutSeconds=9000000000`,
    );
    try {
      await api.create(cmPath(ns), configMap('seen-by-long-watch'));
      await watch.count(1);
      assert.deepEqual(
        watch.events.map((e) => [e.type, e.object.metadata.name]),
        [['ADDED', 'seen-by-long-watch']],
      );
    } finally {
      watch.close();
      await api.delete(cmPath(ns, 'seen-by-long-watch'));
    }
  });

  test("names from the URL: '.', '..' and '%' are 400 'Name parameter invalid', for every verb", async () => {
    const cases: Array<[string, string]> = [
      ['%2e%2e', `"..": may not be '..'`],
      ['..', `"..": may not be '..'`],
      ['.', `".": may not be '.'`],
    ];
    for (const [segment, detail] of cases) {
      for (const method of ['GET', 'DELETE', 'PUT', 'PATCH']) {
        const body = method === 'PUT' ? JSON.stringify(configMap('..')) : method === 'PATCH' ? '{}' : undefined;
        const reply = await rawRequest(server.url, `${cmPath(ns)}/${segment}`, method, body);
        if (method === 'PATCH') {
          // A PATCH is checked for its patch type after the name: either answer is a 400 or 415 Status, never a write.
          assert.ok([400, 415].includes(reply.status), `${method} ${segment}: ${reply.status} ${reply.text}`);
          continue;
        }
        assert.equal(
          assertStatus(reply, 400, 'BadRequest').message,
          `Name parameter invalid: ${detail}`,
          `${method} ${segment}`,
        );
      }
    }
    // A percent sign reaches the name check once decoded: "%2561" is the name "a%61", not the object "aa".
    await api.create(cmPath(ns), configMap('aa'));
    assert.equal(
      assertStatus(await rawRequest(server.url, `${cmPath(ns)}/a%2561`), 400, 'BadRequest').message,
      `Name parameter invalid: "a%61": may not contain '%'`,
    );
    assert.equal(
      (await rawRequest(server.url, `${cmPath(ns)}/a%61`)).status,
      200,
      'a plain escape still names the object',
    );
    await api.delete(cmPath(ns, 'aa'));
    // Cluster-scoped objects too.
    assert.equal(
      assertStatus(await rawRequest(server.url, '/api/v1/namespaces/%2e%2e', 'DELETE'), 400, 'BadRequest').message,
      `Name parameter invalid: "..": may not be '..'`,
    );
    // An encoded slash makes the name two segments: no such route.
    assertStatus(await rawRequest(server.url, `${cmPath(ns)}/a%2Fb`), 404, 'NotFound');
  });

  test('names in the body with slashes, dots or percent signs are 422 by the kind’s name rule', async () => {
    for (const name of ['a/b', '..', '.', 'a%b', 'UPPER', 'a_b']) {
      const reply = await api.request(cmPath(ns), { method: 'POST', body: configMap(name) });
      const status = assertStatus(reply, 422, 'Invalid');
      assert.match(
        status.message!,
        /metadata\.name: Invalid value: .*a lowercase RFC 1123 subdomain must consist of/,
        name,
      );
      assert.deepEqual(
        status.details?.causes?.map((c) => [c.reason, c.field]),
        [['FieldValueInvalid', 'metadata.name']],
      );
    }
    // Dots are fine in a subdomain (ConfigMap) but not in a label (Namespace) or a DNS-1035 label (Service).
    await api.create(cmPath(ns), configMap('dotted.name'));
    await api.delete(cmPath(ns, 'dotted.name'));
    const namespace = await api.request('/api/v1/namespaces', {
      method: 'POST',
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a.b' } },
    });
    assert.match(
      assertStatus(namespace, 422, 'Invalid').message!,
      /^Namespace "a\.b" is invalid: metadata\.name: Invalid value: "a\.b": a lowercase RFC 1123 label must consist of/,
    );
    const service = await api.request(`/api/v1/namespaces/${ns}/services`, {
      method: 'POST',
      body: { apiVersion: 'v1', kind: 'Service', metadata: { name: 'svc.x' }, spec: { ports: [{ port: 80 }] } },
    });
    assert.match(
      assertStatus(service, 422, 'Invalid').message!,
      /^Service "svc\.x" is invalid: metadata\.name: Invalid value: "svc\.x": a DNS-1035 label must consist of/,
    );
    // 253 characters is the longest subdomain; 254 is too long.
    const longest = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    assert.equal(longest.length, 253);
    await api.create(cmPath(ns), configMap(longest));
    await api.delete(cmPath(ns, longest));
    const tooLong = await api.request(cmPath(ns), { method: 'POST', body: configMap(`${longest}e`) });
    assert.match(assertStatus(tooLong, 422, 'Invalid').message!, /must be no more than 253 characters/);
  });

  test('labels over their size limits are 422: value 63, name part 63, prefix 253', async () => {
    const label = (labels: Record<string, string>) =>
      api.request(cmPath(ns), { method: 'POST', body: configMap('labelled', {}, labels) });
    // The largest allowed label: a 253-character prefix (a subdomain), a 63-character name, a 63-character value.
    const prefix = `${'p'.repeat(63)}.${'q'.repeat(63)}.${'r'.repeat(63)}.${'s'.repeat(61)}`;
    const created = await label({ [`${prefix}/${'n'.repeat(63)}`]: 'v'.repeat(63) });
    assert.equal(created.status, 201, created.text);
    await api.delete(cmPath(ns, 'labelled'));

    const value = assertStatus(await label({ app: 'v'.repeat(64) }), 422, 'Invalid');
    assert.equal(
      value.message,
      `ConfigMap "labelled" is invalid: metadata.labels: Invalid value: "${'v'.repeat(64)}": must be no more than 63 characters`,
    );
    assert.deepEqual(
      value.details?.causes?.map((c) => [c.reason, c.field]),
      [['FieldValueInvalid', 'metadata.labels']],
    );
    const name = assertStatus(await label({ ['n'.repeat(64)]: 'v' }), 422, 'Invalid');
    assert.match(
      name.message!,
      /metadata\.labels: Invalid value: "n{64}": name part must be no more than 63 characters/,
    );
    const longPrefix = assertStatus(await label({ [`${prefix}x/name`]: 'v' }), 422, 'Invalid');
    assert.match(longPrefix.message!, /prefix part must be no more than 253 characters/);
  });

  test('annotations over 256 KiB in total are 422 FieldValueTooLong; exactly 256 KiB is accepted', async () => {
    const LIMIT = 256 * 1024;
    // The size counts keys and values: "a" + value.
    const atLimit = await api.request(cmPath(ns), {
      method: 'POST',
      body: { ...configMap('annotated'), metadata: { name: 'annotated', annotations: { a: 'x'.repeat(LIMIT - 1) } } },
    });
    assert.equal(atLimit.status, 201, atLimit.text.slice(0, 300));
    await api.delete(cmPath(ns, 'annotated'));

    // Spread over many keys, one byte over.
    const annotations: Record<string, string> = {};
    for (let i = 0; i < 64; i++)
      annotations[`key-${String(i).padStart(2, '0')}`] = 'y'.repeat(LIMIT / 64 - 'key-00'.length);
    annotations.x = '';
    const total = Object.entries(annotations).reduce((sum, [k, v]) => sum + k.length + v.length, 0);
    assert.equal(total, LIMIT + 1);
    const over = await api.request(cmPath(ns), {
      method: 'POST',
      body: { ...configMap('annotated'), metadata: { name: 'annotated', annotations } },
    });
    const status = assertStatus(over, 422, 'Invalid');
    assert.equal(
      status.message,
      'ConfigMap "annotated" is invalid: metadata.annotations: Too long: must have at most 262144 bytes',
    );
    assert.deepEqual(
      status.details?.causes?.map((c) => [c.reason, c.field]),
      [['FieldValueTooLong', 'metadata.annotations']],
    );

    // An update that pushes an existing object over the limit is refused the same way and leaves it as it was.
    const kept = await api.get(cmPath(ns, 'kept'));
    const patched = await api.request(cmPath(ns, 'kept'), {
      method: 'PATCH',
      body: { metadata: { annotations } },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assertStatus(patched, 422, 'Invalid');
    assert.deepEqual(await api.get(cmPath(ns, 'kept')), kept);
  });

  test('invalid UTF-8 and deeply nested JSON are 400, for creates and every patch type', async () => {
    const invalidUtf8 = Buffer.concat([
      Buffer.from('{"metadata":{"name":"u'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}}'),
    ]);
    assert.equal(
      assertStatus(await api.request(cmPath(ns), { method: 'POST', body: invalidUtf8 }), 400, 'BadRequest').message,
      'the request body is not valid UTF-8',
    );
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    assert.equal(
      assertStatus(await api.request(cmPath(ns), { method: 'POST', body: deep }), 400, 'BadRequest').message,
      'json: exceeded max depth of 10000',
    );
    const deepObject = `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`;
    assertStatus(await api.request(cmPath(ns), { method: 'POST', body: deepObject }), 400, 'BadRequest');
    for (const type of [
      'application/merge-patch+json',
      'application/strategic-merge-patch+json',
      'application/json-patch+json',
      'application/apply-patch+yaml',
    ]) {
      const path = `${cmPath(ns, 'kept')}${type.includes('apply') ? '?fieldManager=hostile' : ''}`;
      assertStatus(
        await api.request(path, { method: 'PATCH', body: invalidUtf8, headers: { 'content-type': type } }),
        400,
        'BadRequest',
      );
      assertStatus(
        await api.request(path, { method: 'PATCH', body: deep, headers: { 'content-type': type } }),
        400,
        'BadRequest',
      );
    }
    // YAML aliases that would expand exponentially ("billion laughs") are refused, not expanded.
    const laughs = [
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      ...Array.from(
        { length: 8 },
        (_, i) =>
          `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(9)
            .fill(`*${String.fromCharCode(97 + i)}`)
            .join(',')}]`,
      ),
    ].join('\n');
    const yaml = await api.request(cmPath(ns), {
      method: 'POST',
      body: `metadata: {name: laughs}\ndata:\n  ${laughs.replaceAll('\n', '\n  ')}\n`,
      headers: { 'content-type': 'application/yaml' },
    });
    assertStatus(yaml, 400, 'BadRequest');
  });

  test("a malformed %-escape in the URL is a 400 Status, not fastify's own error body", async () => {
    for (const path of ['/api/%', `${cmPath(ns)}/%zz`, '/apis/%E0%A4%A']) {
      const status = assertStatus(await rawRequest(server.url, path), 400, 'BadRequest');
      assert.ok(status.message, path);
    }
  });

  test('afterwards nothing the hostile requests sent was written', async () => {
    const now = await api.list(cmPath(ns));
    assert.deepEqual(withoutRootCa(now.items), withoutRootCa(before_.items));
    assert.deepEqual(
      withoutRootCa(now.items).map((o) => o.metadata.name),
      ['kept'],
    );
  });
});
