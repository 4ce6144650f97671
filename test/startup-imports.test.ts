import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { SHIPPED_YAML, shippedDocuments } from '../src/kubelet/shipped-yaml.js';
import Fastify from 'fastify';
import { LAZY_SCHEMA_COMPILERS } from '../src/server/schema-compilers.js';
import { track } from './helpers/processes.js';

// What a plain `sim serve` start must not load: each is loaded where it is first needed (a YAML body, the first
// CronJob, a protobuf body, a CRD rule, an HTTP client, etcd, the exec shell, replay, a route schema), and each
// took milliseconds of a start that is meant to take ≤ 0.25 s.
const LAZY_PACKAGES = [
  'yaml',
  'cron-parser',
  'protobufjs',
  '@bufbuild/cel',
  'undici',
  'etcd3',
  'web-tree-sitter',
  // fastify's schema compilers (no route has a schema) and what they bring
  '@fastify/ajv-compiler',
  '@fastify/fast-json-stringify-compiler',
  'ajv',
];
const LAZY_MODULES = [
  '/src/kubelet/shell/index.js',
  '/src/kubelet/shell/parse.js',
  '/src/cli/replay.js',
  '/src/scenario/',
  '/src/storage/etcd-store.js',
];

const MAIN = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const RECORDER = new URL('./helpers/record-imports.js', import.meta.url).href;
const dir = mkdtempSync(join(tmpdir(), 'kube-sim-imports-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Starts the unbundled CLI (the bundle's chunks follow the same imports) and returns what it had loaded by then. */
async function loadedByServe(): Promise<string[]> {
  const file = join(dir, 'loaded.txt');
  const child = track(
    spawn(process.execPath, ['--import', RECORDER, MAIN, 'serve', '--port', '0', '--log-level', 'warn'], {
      cwd: dir,
      env: { ...process.env, KUBE_SIM_RECORD_IMPORTS: file },
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('serving on')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`sim serve exited with ${code} before listening`)));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
  return readFileSync(file, 'utf8').split('\n');
}

test('a plain sim serve start loads none of the modules it loads on first use', async () => {
  const loaded = await loadedByServe();
  const packages = new Set(
    loaded.flatMap((entry) => {
      const m = /^(?:import|require):((?:@[^/]+\/)?[^/]+)/.exec(entry);
      return m ? [m[1]!] : [];
    }),
  );
  // The recording works: the server's own framework and its startup modules are there.
  assert.ok(packages.has('fastify'), `fastify among ${[...packages].join(', ')}`);
  assert.ok(loaded.some((u) => u.endsWith('/src/cli/serve.js')));
  assert.deepEqual(
    LAZY_PACKAGES.filter((name) => packages.has(name)),
    [],
  );
  assert.deepEqual(
    LAZY_MODULES.filter((part) => loaded.some((url) => url.includes(`/dist${part}`))),
    [],
  );
});

test("the shipped YAML files' JSON twins, which a start reads instead, hold what the YAML says", () => {
  for (const name of SHIPPED_YAML) {
    const path = fileURLToPath(new URL(`../../fixtures/${name}`, import.meta.url));
    const twin = shippedDocuments(path);
    assert.ok(twin, `the build wrote a twin of ${name} newer than it`);
    assert.deepEqual(
      twin,
      parseAllDocuments(readFileSync(path, 'utf8')).map((doc) => doc.toJS() as unknown),
    );
  }
});

test('with the schema compilers loaded on first use, a route with a schema still validates and serialises', async () => {
  const app = Fastify({ schemaController: { compilersFactory: LAZY_SCHEMA_COMPILERS } });
  app.post(
    '/things',
    {
      schema: {
        body: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
        response: { 200: { type: 'object', properties: { name: { type: 'string' } } } },
      },
    },
    (request) => ({ name: (request.body as { name: string }).name, dropped: 'by the serialiser' }),
  );
  const ok = await app.inject({ method: 'POST', url: '/things', payload: { name: 'a' } });
  assert.equal(ok.statusCode, 200);
  assert.deepEqual(ok.json(), { name: 'a' });
  const bad = await app.inject({ method: 'POST', url: '/things', payload: { other: 1 } });
  assert.equal(bad.statusCode, 400);
  await app.close();
});
