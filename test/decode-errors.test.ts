import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { goJsonSyntaxError } from '../src/api/go-json.js';
import { Api, cmPath, configMap, type Reply } from './helpers/http.js';
import { startServer, type SimServer } from './helpers/server.js';
import { httpWatch } from './helpers/watch.js';

// Bad input is refused as kube-apiserver refuses it, in its words, and nothing is written: DeleteOptions that do not
// decode, unparsable resourceVersions, ListOptions and write options ValidateListOptions & co. refuse, data over
// MaxSecretSize, bodies that are not JSON. And every JSON answer is written as Go writes it: Status fields in the
// struct's order, a trailing newline (json.Encoder), or indented without one for curl and ?pretty=true.

test("Go's JSON scanner's words for what is not JSON", () => {
  const cases: Array<[string, string | undefined]> = [
    ['{"a":1}', undefined],
    ['', 'unexpected end of JSON input'],
    ['{"a":', 'unexpected end of JSON input'],
    ['nope', "invalid character 'o' in literal null (expecting 'u')"],
    ['tru', 'unexpected end of JSON input'],
    ['{a:1}', "invalid character 'a' looking for beginning of object key string"],
    ['{"a" 1}', "invalid character '1' after object key"],
    ['{"a":1 "b":2}', `invalid character '"' after object key:value pair`],
    ['[1 2]', "invalid character '2' after array element"],
    ['[1,]', "invalid character ']' looking for beginning of value"],
    ['{"a":1}}', "invalid character '}' after top-level value"],
    ['01', "invalid character '1' after top-level value"],
    ['-x', "invalid character 'x' in numeric literal"],
    ['1.x', "invalid character 'x' after decimal point in numeric literal"],
    ['1ex', "invalid character 'x' in exponent of numeric literal"],
    ['"a\\x"', "invalid character 'x' in string escape code"],
    ['"\\u12g4"', "invalid character 'g' in \\u hexadecimal character escape"],
    ['"a\nb"', "invalid character '\\n' in string literal"],
    ["'a'", "invalid character '\\'' looking for beginning of value"],
    ['\u0000', "invalid character '\\x00' looking for beginning of value"],
    ['é', "invalid character 'Ã' looking for beginning of value"],
    [`${'['.repeat(5000)}x`, "invalid character 'x' looking for beginning of value"],
  ];
  for (const [text, expected] of cases)
    assert.equal(goJsonSyntaxError(Buffer.from(text, 'utf8')), expected, JSON.stringify(text));
});

describe('bad input refused in kube-apiserver’s words, and nothing written', () => {
  let server: SimServer;
  let api: Api;
  const ns = 'decode';
  const kept = cmPath(ns, 'kept');
  let keptText = '';

  before(async () => {
    server = await startServer(['--nodes', '0']);
    api = new Api(server.url);
    await api.namespace(ns);
    await api.create(cmPath(ns), configMap('kept', { k: 'v' }));
    keptText = (await api.request(kept)).text;
  });
  after(() => server?.stop());

  const assertKept = async (what: string): Promise<void> =>
    assert.equal((await api.request(kept)).text, keptText, `${what} changed the object`);
  const message = (reply: Reply): string => (reply.body as { message: string }).message;

  test('a DELETE whose DeleteOptions do not decode is a 400 with the decoder’s text, and deletes nothing', async () => {
    const cases: Array<[string, string]> = [
      [
        '{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":"x"}',
        'json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64',
      ],
      [
        '{"gracePeriodSeconds":1.5}',
        'json: cannot unmarshal number 1.5 into Go struct field DeleteOptions.gracePeriodSeconds of type int64',
      ],
      [
        '{"propagationPolicy":5}',
        'json: cannot unmarshal number into Go struct field DeleteOptions.propagationPolicy of type v1.DeletionPropagation',
      ],
      [
        '{"preconditions":"x"}',
        'json: cannot unmarshal string into Go struct field DeleteOptions.preconditions of type v1.Preconditions',
      ],
      [
        '{"preconditions":{"uid":5}}',
        'json: cannot unmarshal number into Go struct field Preconditions.preconditions.uid of type types.UID',
      ],
      [
        '{"preconditions":{"resourceVersion":true}}',
        'json: cannot unmarshal bool into Go struct field Preconditions.preconditions.resourceVersion of type string',
      ],
      ['{"dryRun":"All"}', 'json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string'],
      ['{"dryRun":[1]}', 'json: cannot unmarshal number into Go struct field DeleteOptions.dryRun of type string'],
      [
        '{"orphanDependents":"true"}',
        'json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents of type bool',
      ],
      [
        '{"ignoreStoreReadErrorWithClusterBreakingPotential":1}',
        'json: cannot unmarshal number into Go struct field DeleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential of type bool',
      ],
      [
        '{"kind":"fixed"}',
        'no kind "fixed" is registered for version "meta.k8s.io/v1" in scheme "pkg/apis/meta/internalversion/scheme/register.go:27"',
      ],
      ['{"kind":"ListOptions","apiVersion":"v1"}', 'decoded object cannot be converted to DeleteOptions'],
      [
        '{"kind":5}',
        "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string",
      ],
      [
        '[]',
        'couldn\'t get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }',
      ],
      ['{"gracePeriodSeconds":', "couldn't get version/kind; json parse error: unexpected end of JSON input"],
    ];
    for (const [body, expected] of cases) {
      const reply = await api.request(kept, { method: 'DELETE', body });
      assert.equal(reply.status, 400, `${body}: ${reply.text}`);
      assert.equal(message(reply), expected, body);
      await assertKept(body);
    }
    // The same collection-wide: deletecollection decodes its DeleteOptions the same way.
    const all = await api.request(cmPath(ns), { method: 'DELETE', body: '{"gracePeriodSeconds":"x"}' });
    assert.equal(all.status, 400);
    await assertKept('a deletecollection');
  });

  test('DeleteOptions that ValidateDeleteOptions refuses are a 422 DeleteOptions, and delete nothing', async () => {
    const cases: Array<[string, string]> = [
      [
        '{"propagationPolicy":"Bogus"}',
        'propagationPolicy: Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil"',
      ],
      [
        '{"propagationPolicy":"Orphan","orphanDependents":true}',
        'propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set',
      ],
      ['{"dryRun":["x"]}', 'dryRun: Unsupported value: []string{"x"}: supported values: "All"'],
    ];
    for (const [body, expected] of cases) {
      const reply = await api.request(kept, { method: 'DELETE', body });
      assert.equal(reply.status, 422, `${body}: ${reply.text}`);
      assert.equal(message(reply), `DeleteOptions.meta.k8s.io "" is invalid: ${expected}`);
      assert.deepEqual((reply.body as { details: unknown }).details, {
        group: 'meta.k8s.io',
        kind: 'DeleteOptions',
        causes: [
          {
            reason: expected.includes('Unsupported') ? 'FieldValueNotSupported' : 'FieldValueInvalid',
            message: expected.slice(expected.indexOf(': ') + 2),
            field: expected.slice(0, expected.indexOf(':')),
          },
        ],
      });
      await assertKept(body);
    }
    const query = await api.request(`${kept}?propagationPolicy=Bogus`, { method: 'DELETE' });
    assert.equal(query.status, 422);
    const grace = await api.request(`${kept}?gracePeriodSeconds=soon`, { method: 'DELETE' });
    assert.equal(grace.status, 400);
    assert.equal(message(grace), 'strconv.ParseInt: parsing "soon": invalid syntax');
    await assertKept('options in the query');
  });

  test('a DELETE with a body reads its options from the body only, as kube-apiserver does', async () => {
    await api.create(cmPath(ns), configMap('dry', { k: 'v' }));
    // dryRun in the query alone: a dry run.
    assert.equal((await api.request(`${cmPath(ns, 'dry')}?dryRun=All`, { method: 'DELETE' })).status, 200);
    assert.equal((await api.request(cmPath(ns, 'dry'))).status, 200, 'a dry run deletes nothing');
    // With a body, the query is not read: this one deletes.
    const reply = await api.request(`${cmPath(ns, 'dry')}?dryRun=All`, {
      method: 'DELETE',
      body: '{"kind":"DeleteOptions","apiVersion":"v1"}',
    });
    assert.equal(reply.status, 200, reply.text);
    assert.equal((await api.request(cmPath(ns, 'dry'))).status, 404);
  });

  test('an unparsable resourceVersion on a list, get, watch or deletecollection is a 400 with ParseUint’s text', async () => {
    for (const rv of ['abc', '-5', '1.0', '+1', ' 1', '99999999999999999999']) {
      const why = rv === '99999999999999999999' ? 'value out of range' : 'invalid syntax';
      const expected = `resourceVersion: Invalid value: ${JSON.stringify(rv)}: strconv.ParseUint: parsing ${JSON.stringify(rv)}: ${why}`;
      const q = `resourceVersion=${encodeURIComponent(rv)}`;
      for (const [path, method] of [
        [`${cmPath(ns)}?${q}`, 'GET'],
        [`${kept}?${q}`, 'GET'],
        [`${cmPath(ns)}?watch=true&${q}`, 'GET'],
        [`${cmPath(ns)}?${q}`, 'DELETE'],
      ] as const) {
        const reply = await api.request(path, { method });
        assert.equal(reply.status, 400, `${method} ${path}: ${reply.text}`);
        assert.equal((reply.body as { reason: string }).reason, 'BadRequest');
        assert.equal(message(reply), expected, path);
      }
    }
    await assertKept('the deletecollections');
    for (const rv of ['', '0']) assert.equal((await api.request(`${cmPath(ns)}?resourceVersion=${rv}`)).status, 200);
  });

  test('ListOptions that ValidateListOptions refuses are a 422 ListOptions with its messages', async () => {
    const cases: Array<[string, string]> = [
      [
        'resourceVersionMatch=bogus',
        '[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: "bogus": supported values: "Exact", "NotOlderThan", ""]',
      ],
      [
        'resourceVersionMatch=NotOlderThan',
        'resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided',
      ],
      [
        'resourceVersion=1&resourceVersionMatch=bogus',
        'resourceVersionMatch: Unsupported value: "bogus": supported values: "Exact", "NotOlderThan", ""',
      ],
      [
        'resourceVersion=0&resourceVersionMatch=Exact',
        'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
      ],
      [
        'resourceVersion=1&resourceVersionMatch=Exact&continue=abc',
        'resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided',
      ],
      ['sendInitialEvents=true', 'sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list'],
      [
        'watch=true&resourceVersionMatch=NotOlderThan',
        'resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
      ],
      [
        'watch=true&sendInitialEvents=true',
        'resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
      ],
      [
        'watch=true&sendInitialEvents=false&resourceVersionMatch=Exact',
        '[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"]',
      ],
    ];
    for (const [q, expected] of cases) {
      const reply = await api.request(`${cmPath(ns)}?${q}`);
      assert.equal(reply.status, 422, `${q}: ${reply.text}`);
      assert.equal((reply.body as { reason: string }).reason, 'Invalid');
      assert.equal(message(reply), `ListOptions.meta.k8s.io "" is invalid: ${expected}`, q);
    }
    // What the rules allow is served.
    assert.equal((await api.request(`${cmPath(ns)}?resourceVersion=1&resourceVersionMatch=NotOlderThan`)).status, 200);
    const watch = await httpWatch(
      server.url,
      `${cmPath(ns)}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan`,
    );
    assert.equal(watch.status, 200);
    watch.close();
  });

  test('write options CreateOptions, UpdateOptions and PatchOptions refuse are a 422, before the body is read', async () => {
    const body = configMap('never', { k: 'v' });
    const cases: Array<[string, string]> = [
      ['dryRun=x', 'dryRun: Unsupported value: []string{"x"}: supported values: "All"'],
      [
        'fieldValidation=bogus',
        'fieldValidation: Unsupported value: "bogus": supported values: "", "Ignore", "Strict", "Warn"',
      ],
      [`fieldManager=${'m'.repeat(129)}`, 'fieldManager: Too long: must have at most 128 bytes'],
      ['fieldManager=a%07b', 'fieldManager: Invalid value: "a\\ab": invalid character U+0007 (at position 1)'],
    ];
    for (const [q, expected] of cases) {
      const created = await api.request(`${cmPath(ns)}?${q}`, { method: 'POST', body });
      assert.equal(created.status, 422, `${q}: ${created.text}`);
      assert.equal(message(created), `CreateOptions.meta.k8s.io "" is invalid: ${expected}`);
      const updated = await api.request(`${kept}?${q}`, { method: 'PUT', body: 'not even JSON' });
      assert.equal(message(updated), `UpdateOptions.meta.k8s.io "" is invalid: ${expected}`);
    }
    assert.equal((await api.request(cmPath(ns, 'never'))).status, 404);
    await assertKept('refused writes');
  });

  test('ConfigMap and Secret data over 1 MiB (MaxSecretSize) is a 422; 1 MiB exactly is stored', async () => {
    const big = 'x'.repeat(1024 * 1024);
    const cm = await api.request(cmPath(ns), { method: 'POST', body: configMap('big', { a: big, b: 'y' }) });
    assert.equal(cm.status, 422, cm.text.slice(0, 300));
    assert.equal(message(cm), 'ConfigMap "big" is invalid: []: Too long: must have at most 1048576 bytes');
    const binary = await api.request(cmPath(ns), {
      method: 'POST',
      body: { ...configMap('bin', { a: big.slice(1) }), binaryData: { b: Buffer.from('ab').toString('base64') } },
    });
    assert.equal(binary.status, 422, 'data and binaryData count together');
    const secrets = `/api/v1/namespaces/${ns}/secrets`;
    for (const secret of [
      { metadata: { name: 'big' }, stringData: { a: `${big}y` } },
      { metadata: { name: 'big' }, data: { a: Buffer.from(`${big}y`).toString('base64') } },
    ]) {
      const reply = await api.request(secrets, {
        method: 'POST',
        body: { apiVersion: 'v1', kind: 'Secret', ...secret },
      });
      assert.equal(reply.status, 422, reply.text.slice(0, 300));
      assert.equal(message(reply), 'Secret "big" is invalid: data: Too long: must have at most 1048576 bytes');
    }
    assert.equal((await api.request(cmPath(ns), { method: 'POST', body: configMap('exact', { a: big }) })).status, 201);
    const grown = await api.request(cmPath(ns, 'exact'), {
      method: 'PATCH',
      body: { data: { more: 'z' } },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assert.equal(grown.status, 422, 'an update past the limit is refused too');
  });

  test('bodies that do not decode get transformDecodeError’s texts on create and update, the patch handlers’ on patch', async () => {
    const post = (body: string) => api.request(cmPath(ns), { method: 'POST', body });
    const unrecognized = (why: string, summary: string) =>
      `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: ${why} (${summary})`;
    assert.equal(message(await post('')), unrecognized('unexpected end of JSON input', '<empty>'));
    assert.equal(message(await post('{"a":')), unrecognized('unexpected end of JSON input', '{"a":'));
    assert.equal(
      message(await post('nope')),
      unrecognized("invalid character 'o' in literal null (expecting 'u')", '6e6f7065'),
    );
    assert.equal(
      message(await post(`{"metadata":{"name":"x"},"data":{"a":"${'b'.repeat(40)}"},}`)),
      unrecognized(
        `invalid character '}' looking for beginning of object key string`,
        `{"metadata":{"name":"x"},"data ...`,
      ),
    );
    assert.equal(
      message(await post('{"kind":["ConfigMap"]}')),
      unrecognized('json: cannot unmarshal array into Go struct field .kind of type string', '{"kind":["ConfigMap"]}'),
    );
    assert.equal(
      message(await post('{"metadata":{"name":"x"},"data":"x"}')),
      'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal string into Go struct field ConfigMap.data of type map[string]string',
    );
    assert.equal(
      message(await post('{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}')),
      'Namespace in version "v1" cannot be handled as a ConfigMap: converting (v1.Namespace) to (core.ConfigMap): unknown conversion',
    );
    assert.equal(
      message(await post('{"apiVersion":"v1","kind":"Widget","metadata":{"name":"x"}}')),
      'Widget in version "v1" cannot be handled as a ConfigMap: no kind "Widget" is registered for version "v1" in scheme "pkg/api/legacyscheme/scheme.go:30"',
    );
    const put = await api.request(kept, { method: 'PUT', body: '{' });
    assert.equal(message(put), unrecognized('unexpected end of JSON input', '{'));
    const patch = (type: string, body: string) =>
      api.request(kept, { method: 'PATCH', body, headers: { 'content-type': `application/${type}` } });
    assert.equal(
      message(await patch('merge-patch+json', '{"data":')),
      'error decoding patch: unexpected end of JSON input',
    );
    assert.equal(
      message(await patch('json-patch+json', '[{]')),
      `error decoding patch: invalid character ']' looking for beginning of object key string`,
    );
    assert.equal(
      message(await patch('strategic-merge-patch+json', 'x')),
      "invalid character 'x' looking for beginning of value",
    );
    await assertKept('undecodable writes');
  });
});

describe('JSON answers as Go writes them', () => {
  let server: SimServer;
  let api: Api;
  const ns = 'wire';

  before(async () => {
    server = await startServer(['--nodes', '0']);
    api = new Api(server.url);
    await api.namespace(ns);
    await api.create(cmPath(ns), configMap('one', { k: 'v' }));
  });
  after(() => server?.stop());

  test('a Status in metav1.Status field order, details in StatusDetails order, ending with a newline', async () => {
    const missing = await api.request(cmPath(ns, 'nope'));
    assert.equal(
      missing.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \\"nope\\" not found","reason":"NotFound","details":{"name":"nope","kind":"configmaps"},"code":404}\n',
    );
    const deployment = await api.request('/apis/apps/v1/namespaces/wire/deployments/nope');
    assert.equal(
      deployment.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \\"nope\\" not found","reason":"NotFound","details":{"name":"nope","group":"apps","kind":"deployments"},"code":404}\n',
    );
    const invalid = await api.request(cmPath(ns), {
      method: 'POST',
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: {} },
    });
    assert.equal(
      invalid.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ConfigMap \\"\\" is invalid: metadata.name: Required value: name or generateName is required","reason":"Invalid","details":{"kind":"ConfigMap","causes":[{"reason":"FieldValueRequired","message":"Required value: name or generateName is required","field":"metadata.name"}]},"code":422}\n',
    );
    const gone = await api.request(cmPath(ns, 'one'), { method: 'DELETE' });
    assert.equal(gone.status, 200);
    await api.create(cmPath(ns), configMap('one', { k: 'v' }));
  });

  test('objects, lists, tables and discovery end with a newline; watch events one a line; /version is indented', async () => {
    for (const [path, accept] of [
      [cmPath(ns, 'one'), undefined],
      [cmPath(ns), undefined],
      [cmPath(ns), 'application/json;as=Table;v=v1;g=meta.k8s.io'],
      [cmPath(ns), 'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io'],
      ['/api', undefined],
      ['/apis', undefined],
      ['/api/v1', undefined],
      ['/apis/apps', undefined],
      ['/apis/apps/v1', undefined],
      ['/api', 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList'],
    ] as const) {
      const reply = await api.request(path, accept ? { headers: { accept } } : {});
      assert.equal(reply.status, 200, path);
      assert.ok(reply.text.endsWith('}\n'), `${path} ${accept ?? ''} ends with a newline`);
      assert.ok(!reply.text.slice(0, -1).includes('\n'), `${path} is compact`);
    }
    const version = await api.request('/version');
    assert.ok(version.text.startsWith('{\n  "major": "1",\n  "minor": "'), version.text);
    assert.ok(version.text.endsWith('\n}'), 'MarshalIndent: no trailing newline');
  });

  test('pretty JSON for curl, Wget and browsers and for ?pretty=true (strconv.ParseBool), without the newline', async () => {
    const compact = (await api.request(cmPath(ns, 'one'))).text;
    const indented = JSON.stringify(JSON.parse(compact), null, 2);
    for (const [query, agent, pretty] of [
      ['', 'curl/8.5.0', true],
      ['', 'Wget/1.21', true],
      ['', 'Mozilla/5.0 (X11; Linux x86_64)', true],
      ['', 'kubectl/v1.32.0', false],
      ['?pretty=true', 'kubectl/v1.32.0', true],
      ['?pretty=1', 'python', true],
      ['?pretty=false', 'curl/8.5.0', false],
      ['?pretty=0', 'curl/8.5.0', false],
      ['?pretty=yes', 'curl/8.5.0', false],
    ] as const) {
      const reply = await api.request(`${cmPath(ns, 'one')}${query}`, { headers: { 'user-agent': agent } });
      assert.equal(reply.text, pretty ? indented : compact, `${query} ${agent}`);
    }
    const missing = await api.request(`${cmPath(ns, 'nope')}?pretty=true`);
    assert.ok(missing.text.startsWith('{\n  "kind": "Status",') && missing.text.endsWith('\n}'), missing.text);
    const list = await api.request(`${cmPath(ns)}?pretty=true`);
    assert.deepEqual(JSON.parse(list.text), JSON.parse((await api.request(cmPath(ns))).text));
    assert.ok(list.text.includes('\n  "items": ['));
  });
});
