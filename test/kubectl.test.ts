import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { Api, cmPath, type Obj } from './helpers/http.js';
import { kubectl, skipWithoutKubectl, spawnKubectl } from './helpers/kubectl.js';
import { serverFor } from './helpers/server.js';

// The first "Done when": the real kubectl's create -f / get / apply --validate=false / delete / label /
// annotate on configmaps, namespaces and secrets, and `get -w` seeing another kubectl's changes.

const manifest = (value: string): string => `
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: team-a
data:
  greeting: ${value}
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
  namespace: team-a
type: Opaque
stringData:
  password: hunter2
`;

test('kubectl create -f, get, apply, label, annotate and delete configmaps, namespaces and secrets', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const server = await serverFor(t);
  const api = new Api(server.url);
  const k = (args: string[], input?: string) => kubectl(server.url, args, input === undefined ? {} : { input });

  const created = await k(['create', '-f', '-'], manifest('hello'));
  assert.equal(created.code, 0, created.stderr);
  assert.match(created.stdout, /^namespace\/team-a created$/m);
  assert.match(created.stdout, /^configmap\/app-config created$/m);
  assert.match(created.stdout, /^secret\/app-secret created$/m);

  const again = await k(['create', '-f', '-'], manifest('hello'));
  assert.equal(again.code, 1);
  assert.match(again.stderr, /Error from server \(AlreadyExists\).*configmaps "app-config" already exists/);

  const table = await k(['get', 'configmaps,secrets', '-n', 'team-a']);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^configmap\/app-config\s+1\s+\S+$/m);
  assert.match(table.stdout, /^secret\/app-secret\s+Opaque\s+1\s+\S+$/m);
  const ns = await k(['get', 'ns', 'team-a']);
  assert.match(ns.stdout, /^team-a\s+Active\s+\S+$/m);

  const cm = JSON.parse((await k(['get', 'cm', 'app-config', '-n', 'team-a', '-o', 'json'])).stdout) as Obj;
  assert.deepEqual(cm.data, { greeting: 'hello' });
  const password = await k(['get', 'secret', 'app-secret', '-n', 'team-a', '-o', 'jsonpath={.data.password}']);
  assert.equal(
    Buffer.from(password.stdout, 'base64').toString(),
    'hunter2',
    'stringData is stored base64-encoded in data',
  );

  // Client-side apply over objects made by create: a patch adding last-applied-configuration and the new data.
  const applied = await k(['apply', '--validate=false', '-f', '-'], manifest('bonjour'));
  assert.equal(applied.code, 0, applied.stderr);
  assert.match(applied.stdout, /^configmap\/app-config configured$/m);
  const afterApply = await api.get(cmPath('team-a', 'app-config'));
  assert.deepEqual(afterApply.data, { greeting: 'bonjour' });
  assert.ok(
    afterApply.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration'],
    'apply records last-applied-configuration',
  );

  // Applying the same manifest again changes nothing, so the resourceVersion stays.
  const unchanged = await k(['apply', '--validate=false', '-f', '-'], manifest('bonjour'));
  assert.equal(unchanged.code, 0, unchanged.stderr);
  assert.match(unchanged.stdout, /^configmap\/app-config unchanged$/m);
  assert.match(unchanged.stdout, /^namespace\/team-a unchanged$/m);
  assert.equal(
    (await api.get(cmPath('team-a', 'app-config'))).metadata.resourceVersion,
    afterApply.metadata.resourceVersion,
  );

  for (const [kind, name, extra] of [
    ['configmap', 'app-config', ['-n', 'team-a']],
    ['secret', 'app-secret', ['-n', 'team-a']],
    ['namespace', 'team-a', []],
  ] as const) {
    const labeled = await k(['label', kind, name, ...extra, 'tier=backend']);
    assert.equal(labeled.code, 0, labeled.stderr);
    assert.equal(labeled.stdout.trim(), `${kind}/${name} labeled`);
    const annotated = await k(['annotate', kind, name, ...extra, 'owner=team-a']);
    assert.equal(annotated.code, 0, annotated.stderr);
    assert.equal(annotated.stdout.trim(), `${kind}/${name} annotated`);
  }
  const labeledCm = await api.get(cmPath('team-a', 'app-config'));
  assert.equal(labeledCm.metadata.labels?.tier, 'backend');
  assert.equal(labeledCm.metadata.annotations?.owner, 'team-a');
  const labeledNs = await api.get('/api/v1/namespaces/team-a');
  assert.equal(labeledNs.metadata.labels?.tier, 'backend');
  assert.equal(labeledNs.metadata.labels?.['kubernetes.io/metadata.name'], 'team-a');
  const selected = await k(['get', 'cm,secret', '-n', 'team-a', '-l', 'tier=backend', '-o', 'name']);
  assert.deepEqual(selected.stdout.trim().split('\n').sort(), ['configmap/app-config', 'secret/app-secret']);

  // Changing a label needs --overwrite; removing one uses `key-`; an invalid value is the server's 422.
  const clash = await k(['label', 'cm', 'app-config', '-n', 'team-a', 'tier=frontend']);
  assert.equal(clash.code, 1);
  assert.match(clash.stderr, /already has a value \(backend\)/);
  assert.equal((await k(['label', 'cm', 'app-config', '-n', 'team-a', '--overwrite', 'tier=frontend'])).code, 0);
  assert.equal((await api.get(cmPath('team-a', 'app-config'))).metadata.labels?.tier, 'frontend');
  assert.equal((await k(['label', 'cm', 'app-config', '-n', 'team-a', 'tier-'])).code, 0);
  assert.equal((await api.get(cmPath('team-a', 'app-config'))).metadata.labels?.tier, undefined);
  // kubectl checks label syntax itself, so an invalid label reaches the server only through a manifest.
  const invalid = await k(
    ['apply', '--validate=false', '-f', '-'],
    manifest('bonjour').replace('  name: app-config\n', '  name: app-config\n  labels:\n    tier: -bad-\n'),
  );
  assert.equal(invalid.code, 1);
  assert.match(invalid.stderr, /The ConfigMap "app-config" is invalid: metadata\.labels: Invalid value: "-bad-"/);

  // Contents first: deleting the namespace first would let the namespace controller race kubectl for them.
  const documents = manifest('bonjour').split('---\n');
  const deleted = await k(['delete', '-f', '-'], [...documents.slice(1), documents[0]].join('---\n'));
  assert.equal(deleted.code, 0, deleted.stderr);
  assert.match(deleted.stdout, /^configmap "app-config" deleted/m);
  assert.match(deleted.stdout, /^secret "app-secret" deleted/m);
  assert.match(deleted.stdout, /^namespace "team-a" deleted/m);
  assert.equal((await api.request(cmPath('team-a', 'app-config'))).status, 404);
  assert.equal((await api.request('/api/v1/namespaces/team-a/secrets/app-secret')).status, 404);
  assert.equal((await api.request('/api/v1/namespaces/team-a')).status, 404);
  const missing = await k(['get', 'cm', 'app-config', '-n', 'default']);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /Error from server \(NotFound\): configmaps "app-config" not found/);
  // kubectl explains a 404 in a missing namespace by asking for the namespace.
  const gone = await k(['get', 'cm', 'app-config', '-n', 'team-a']);
  assert.match(gone.stderr, /Error from server \(NotFound\): namespaces "team-a" not found/);
});

test('kubectl get cm -w prints the changes another kubectl makes, each once', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const server = await serverFor(t);
  const api = new Api(server.url);
  await api.namespace('watched');
  await api.create(cmPath('watched'), { metadata: { name: 'before' }, data: { a: '1' } });

  const events = spawnKubectl(server.url, ['get', 'cm', '-n', 'watched', '-w', '--output-watch-events']);
  t.after(() => events.stop());
  const rows = spawnKubectl(server.url, ['get', 'cm', '-n', 'watched', '-w']);
  t.after(() => rows.stop());
  await events.until((out) => /^ADDED\s+before\s+1\s/m.test(out), 'the initial ADDED row');
  await rows.until((out) => /^before\s+1\s/m.test(out), 'the initial row');

  const other = (args: string[], input?: string) => kubectl(server.url, args, input === undefined ? {} : { input });
  const cm = JSON.stringify({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'live', namespace: 'watched' },
    data: { k: 'v' },
  });
  assert.equal((await other(['create', '-f', '-'], cm)).code, 0);
  assert.equal((await other(['label', 'cm', 'live', '-n', 'watched', 'stage=one'])).code, 0);
  assert.equal((await other(['annotate', 'cm', 'live', '-n', 'watched', 'note=two'])).code, 0);
  assert.equal((await other(['delete', 'cm', 'live', '-n', 'watched'])).code, 0);

  await events.until((out) => /^DELETED\s+live\s/m.test(out), 'the DELETED row of live');
  const eventLines = events.lines.filter((l) => /\slive\s/.test(l)).map((l) => l.split(/\s+/)[0]);
  assert.deepEqual(eventLines, ['ADDED', 'MODIFIED', 'MODIFIED', 'DELETED'], events.stdout);
  assert.equal(
    events.lines.filter((l) => /\sbefore\s/.test(l)).length,
    1,
    `the existing object is listed once:\n${events.stdout}`,
  );

  await rows.until((out) => out.split('\n').filter((l) => l.startsWith('live ')).length >= 4, 'four rows for live');
  assert.equal(rows.lines.filter((l) => l.startsWith('live ')).length, 4, rows.stdout);
  assert.equal(rows.lines.filter((l) => l.startsWith('NAME ')).length, 1, 'one header');
});

// One client per discovery/validation regime of ../shared/KUBECTL-WIRE.md (v2beta1 discovery and the protobuf
// /openapi/v2 for 1.27; /openapi/v3 from 1.29; v2 discovery from 1.30; 1.33), each validating as it does by default.
test('kubectl clients from 1.27 to 1.33 can create -f and get', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const versions = [27, 29, 31, 33]
    .map((minor) => `/usr/lib/google-cloud-sdk/bin/kubectl.1.${minor}`)
    .filter((path) => existsSync(path));
  if (versions.length === 0) {
    t.skip('no versioned kubectl binaries under /usr/lib/google-cloud-sdk/bin');
    return;
  }
  const server = await serverFor(t);
  for (const binary of versions) {
    const name = `v-${binary.split('.').pop()}`;
    const cm = JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: 'default' },
      data: { k: 'v' },
    });
    await t.test(binary, async () => {
      const created = await kubectl(server.url, ['create', '-f', '-'], { binary, input: cm });
      assert.equal(created.code, 0, created.stderr);
      assert.equal(created.stdout.trim(), `configmap/${name} created`);
      const table = await kubectl(server.url, ['get', 'cm', name], { binary });
      assert.match(table.stdout, new RegExp(`^${name}\\s+1\\s`, 'm'), table.stderr);
    });
  }
});
