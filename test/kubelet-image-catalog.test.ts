import assert from 'node:assert/strict';
import { test } from 'node:test';
import { normalizeImage, referenceError } from '../src/kubelet/image-ref.js';
import { defaultImageCatalog, Images, parseImageCatalog, parseImageList } from '../src/kubelet/images.js';
import { PodRecord } from '../src/kubelet/pod-record.js';
import { programOf } from '../src/kubelet/programs.js';

const HEX64 = 'a'.repeat(64);

test('image references as distribution/reference parses them (the kubelet: InvalidImageName)', () => {
  for (const ok of [
    'nginx',
    'nginx:1.27',
    'library/nginx:latest',
    'docker.io/library/nginx',
    'localhost:5000/app:1',
    'registry.example.com:443/team/web-app_v2:1.0.0-rc.1',
    `nginx@sha256:${HEX64}`,
    `nginx:1.27@sha256:${HEX64}`,
    '[::1]:5000/app',
  ])
    assert.equal(referenceError(ok), undefined, ok);
  const cases: Array<[string, string]> = [
    ['Nginx:1.27', 'invalid reference format: repository name (library/Nginx) must be lowercase'],
    ['registry.example.com/Team/app', 'invalid reference format: repository name (Team/app) must be lowercase'],
    ['nginx:', 'invalid reference format'],
    ['nginx:-1', 'invalid reference format'],
    ['a//b', 'invalid reference format'],
    ['nginx@sha256:abc', 'invalid reference format'],
    [`nginx@sha256:${'a'.repeat(32)}`, 'invalid checksum digest length'],
    [`nginx@md5:${'a'.repeat(32)}`, 'unsupported digest algorithm'],
    [`nginx@sha256:${'A'.repeat(64)}`, 'invalid checksum digest format'],
    [HEX64, `invalid repository name (${HEX64}), cannot specify 64-byte hexadecimal strings`],
    [`x/${'a'.repeat(260)}`, 'repository name must not be more than 255 characters'],
  ];
  for (const [image, error] of cases) assert.equal(referenceError(image), error, image);
  assert.equal(normalizeImage('nginx'), 'docker.io/library/nginx:latest');
  assert.equal(normalizeImage('docker.io/nginx:1'), 'docker.io/library/nginx:1');
  assert.equal(normalizeImage('localhost:5000/app'), 'localhost:5000/app:latest');
});

test('the catalog: missing references (markers, names, tags, globs) and what images run', () => {
  const images = new Images(defaultImageCatalog());
  for (const image of [
    'nginx:does-not-exist',
    'busybox:nonexistent',
    'registry.example.com/team/web:no-such-tag',
    'nginx:1.161',
    'docker.io/library/nginx:1.161',
  ])
    assert.equal(images.missing(image), true, image);
  for (const image of ['nginx', 'nginx:1.16.1', 'nginx:1.27', 'busybox', 'registry.example.com/team/web:1.0'])
    assert.equal(images.missing(image), false, image);
  assert.equal(images.missing('app:1', ['app']), true, 'a name: every tag');
  assert.equal(images.missing('docker.io/library/app:2', ['app']), true, 'the name normalized');
  assert.equal(images.missing('app:1', ['app:2']), false, 'a tag: that tag only');
  assert.equal(images.missing('ghcr.io/acme/tool:1', ['ghcr.io/acme/*']), true, 'a glob');
  assert.equal(images.missing('ghcr.io/other/tool:1', ['ghcr.io/acme/*']), false);
  assert.deepEqual(parseImageList('a:1, b\n# note\nc:* # all of c\n\n'), ['a:1', 'b', 'c:*']);

  assert.equal(images.lookup('nginx:1.27')?.serves, true);
  assert.equal(images.lookup('gcr.io/google-samples/hello-app:1.0')?.serves, true);
  assert.deepEqual(images.lookup('docker.io/library/busybox:1.36')?.cmd, ['sh']);
  assert.equal(images.lookup('registry.example.com/team/web:1.0'), undefined);
  assert.equal(images.stopDelayMs('nginx'), 1000);

  const program = (c: Record<string, unknown>) => programOf({ name: 'c', ...c }, images);
  assert.deepEqual(program({ image: 'busybox' }), { kind: 'command', argv: ['sh'] }, "busybox's CMD");
  assert.deepEqual(program({ image: 'busybox', args: ['sleep', '5'] }), { kind: 'command', argv: ['sleep', '5'] });
  assert.deepEqual(program({ image: 'nginx:1.27' }), { kind: 'serves' });
  assert.deepEqual(
    program({ image: 'nginx:1.27', args: ['nginx-debug', '-g', 'daemon off;'] }),
    { kind: 'command', argv: ['/docker-entrypoint.sh', 'nginx-debug', '-g', 'daemon off;'] },
    'args follow the ENTRYPOINT',
  );
  assert.deepEqual(program({ image: 'nginx', command: ['sh', '-c', 'echo hi'] }), {
    kind: 'command',
    argv: ['sh', '-c', 'echo hi'],
  });
  assert.deepEqual(program({ image: 'registry.example.com/team/web:1.0' }), { kind: 'unknown' });
});

test('image catalogs: their errors name the file and the field', () => {
  assert.throws(() => parseImageCatalog('kind: Other\n', 'f.yaml'), /^Error: f\.yaml: kind must be ImageCatalog$/);
  assert.throws(
    () => parseImageCatalog('kind: ImageCatalog\nimages: [{cmd: [sh]}]\n', 'f.yaml'),
    /f\.yaml: images\[0\]: images must name at least one repository/,
  );
  assert.throws(
    () => parseImageCatalog('kind: ImageCatalog\nstopDelay: soon\n', 'f.yaml'),
    /f\.yaml: stopDelay: "soon" is not a duration/,
  );
  const catalog = parseImageCatalog('kind: ImageCatalog\nstopDelay: 3s\nmissing: [app]\n');
  assert.deepEqual(catalog, { stopDelayMs: 3000, missing: ['app'], images: [] });
  assert.throws(
    () => parseImageCatalog('kind: ImageCatalog\nimages: [{images: [app], http: {paths: {}}}]\n', 'f.yaml'),
    /^Error: f\.yaml: images\[0\]\.http\.otherwise: must be an object$/,
  );
  assert.throws(
    () =>
      parseImageCatalog(
        'kind: ImageCatalog\nimages: [{images: [app], http: {otherwise: {status: 7, body: x}}}]\n',
        'f.yaml',
      ),
    /^Error: f\.yaml: images\[0\]\.http\.otherwise\.status: must be an HTTP status code$/,
  );
});

test("the catalog's http answers: nginx's pages per path with its Server header, a 404 page for any other path", () => {
  const nginx = new Images(defaultImageCatalog()).lookup('nginx:1.27')?.http;
  assert.equal(nginx?.paths?.['/']?.status, 200);
  assert.deepEqual(nginx?.paths?.['/']?.headers, { Server: 'nginx/1.27.3', 'Content-Type': 'text/html' });
  assert.equal(nginx?.paths?.['/index.html']?.body, nginx?.paths?.['/']?.body);
  assert.equal(nginx?.otherwise.status, 404);
  assert.equal(new Images(defaultImageCatalog()).lookup('redis')?.http, undefined);
});

test("the pod record's image back-off: 10 s after the first failed pull, doubling to 5 min, over once pulled", () => {
  const record = new PodRecord();
  assert.equal(record.pullRetryAt('app:2'), undefined);
  const waits: number[] = [];
  let at = 0;
  for (let i = 0; i < 8; i++) {
    record.pullFailed('app:2', at);
    const next = record.pullRetryAt('app:2')!;
    waits.push((next - at) / 1000);
    at = next;
  }
  assert.deepEqual(waits, [10, 20, 40, 80, 160, 300, 300, 300]);
  assert.equal(record.empty, false, 'a back-off is remembered');
  record.pulled('app:2');
  assert.equal(record.pullRetryAt('app:2'), undefined);
  assert.equal(record.empty, true);
});
