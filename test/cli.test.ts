import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { track } from './helpers/processes.js';
import { ROOT } from './helpers/server.js';
import { runSim, SIM_BIN } from './helpers/sim.js';

/** Starts `sim ARGS`, reads until `enough` of its stdout arrived, closes the pipe (as `| head` does) and waits. */
function closeEarly(args: string[], enough: number): Promise<{ code: number | null; stderr: string; read: string }> {
  return new Promise((resolve) => {
    const child = track(spawn(process.execPath, [SIM_BIN, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] }));
    let read = '';
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.stdout!.setEncoding('utf8').on('data', (c: string) => {
      read += c;
      if (read.length >= enough) child.stdout!.destroy();
    });
    child.on('close', (code) => resolve({ code, stderr, read }));
  });
}

test('sim replay --print-schema | head: the closed pipe is no crash (exit 0, nothing on stderr)', async () => {
  const run = await closeEarly(['replay', '--print-schema'], 1);
  assert.equal(run.stderr, '');
  assert.equal(run.code, 0);
});

test('sim replay … | head: the replay still runs to the end and exits with its result', async () => {
  const run = await closeEarly(['replay', 'fixtures/scenarios/config-watcher.yaml'], 1);
  assert.equal(run.stderr, '');
  assert.equal(run.code, 0);
});

test('sim serve --data on a read-only file system says EROFS (Node says ENOENT; under /proc it hung)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-rofs-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // A read-only tmpfs in a private mount namespace of our own: nothing is left mounted when it exits.
  const probe = spawnSync('unshare', ['-rm', 'sh', '-c', `mount -t tmpfs -o ro tmpfs ${dir}`]);
  if (probe.status !== 0) {
    t.skip(
      `cannot make a read-only mount here (unshare -rm + mount: ${probe.stderr?.toString().trim() || probe.error?.message})`,
    );
    return;
  }
  for (const data of [`${dir}/data`, `${dir}/deeper/still`, `${dir}/snapshot.json`]) {
    const r = spawnSync(
      'unshare',
      [
        '-rm',
        'sh',
        '-c',
        `mount -t tmpfs -o ro tmpfs ${dir} && exec "$0" "$1" serve --port 0 --data "$2"`,
        process.execPath,
        SIM_BIN,
        data,
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    assert.equal(r.status, 1, `${data}: ${r.stderr}`);
    assert.match(r.stderr, /^ERROR cannot start: EROFS: read-only file system/m, data);
  }
  const proc = await runSim(['serve', '--port', '0', '--data', '/proc/kube-sim-nowhere'], { timeoutMs: 20_000 });
  assert.equal(proc.code, 1, proc.stderr);
  assert.match(proc.stderr, /cannot start: ENOENT: no such file or directory, mkdir '\/proc\/kube-sim-nowhere'/);
});

test('every installed package allows the Node this runs on (npm install warns EBADENGINE otherwise)', () => {
  // semver is fastify's own dependency, so an install always has it.
  const semver = createRequire(import.meta.url)('semver') as {
    satisfies(version: string, range: string, options?: { includePrerelease?: boolean }): boolean;
  };
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { engines?: { node?: string } | string[]; dev?: boolean; optional?: boolean }>;
  };
  const refused: string[] = [];
  for (const [path, pkg] of Object.entries(lock.packages)) {
    const range = !Array.isArray(pkg.engines) ? pkg.engines?.node : undefined;
    if (!range || pkg.optional) continue;
    if (!semver.satisfies(process.versions.node, range, { includePrerelease: true }))
      refused.push(`${path || '(the project)'} wants node ${range}`);
  }
  assert.deepEqual(refused, [], `on Node ${process.versions.node}`);
});

test("README's sim serve table lists every option sim serve has", async () => {
  const help = await runSim(['serve', '--help']);
  const flags = [...help.stdout.matchAll(/^\s+(?:-\w, )?(--[a-z][a-z-]*)/gm)]
    .map((m) => m[1]!)
    .filter((f) => f !== '--help');
  assert.ok(flags.length > 20, help.stdout);
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const table = readme.slice(readme.indexOf('## `sim serve` options'));
  const rows = table.slice(0, table.indexOf('\n\n', table.indexOf('| option'))).split('\n');
  const listed = (flag: string): boolean =>
    rows.some(
      (row) =>
        row.startsWith(`| \`${flag} `) ||
        row.startsWith(`| \`${flag}\``) ||
        row.startsWith(`| \`--[no-]${flag.replace(/^--(no-)?/, '')}`) ||
        (flag.startsWith('--no-') && row.startsWith(`| \`${flag}`)),
    );
  assert.deepEqual(
    flags.filter((f) => !listed(f)),
    [],
  );
});

test("README's Layout names files and folders that exist", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const layout = readme.slice(readme.indexOf('## Layout'));
  const block = layout.slice(layout.indexOf('```\n') + 4, layout.indexOf('\n```', layout.indexOf('```\n') + 4));
  const paths = block
    .split('\n')
    .map((l) => /^(\S+)\s/.exec(l)?.[1])
    .filter((p): p is string => p !== undefined);
  assert.ok(paths.length > 10);
  assert.deepEqual(
    paths.filter((p) => !existsSync(join(ROOT, p))),
    [],
  );
});

test('npm install -g . gives a sim that works from any directory', async (t) => {
  const prefix = mkdtempSync(join(tmpdir(), 'kube-sim-global-'));
  t.after(() => rmSync(prefix, { recursive: true, force: true }));
  // As README says, from the repository; --offline and --ignore-scripts: the tree is built and installed already.
  const install = spawnSync(
    'npm',
    ['install', '-g', '--prefix', prefix, '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '.'],
    { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
  );
  assert.equal(install.status, 0, install.stderr);
  const elsewhere = mkdtempSync(join(tmpdir(), 'kube-sim-elsewhere-'));
  t.after(() => rmSync(elsewhere, { recursive: true, force: true }));
  const sim = [join(prefix, 'bin', 'sim')];
  const version = await runSim(['--version'], { command: sim, cwd: elsewhere });
  assert.equal(version.stdout, '0.1.0\n', version.stderr);
  // A replay runs a whole cluster (stage files, schemas, the exec shell's grammar) from outside the repository.
  const scenario = join(elsewhere, 'pod.yaml');
  writeFileSync(
    scenario,
    `name: from elsewhere
nodes: 1
steps:
  - apply:
      manifest:
        apiVersion: v1
        kind: Pod
        metadata: {name: p, namespace: default}
        spec: {containers: [{name: c, image: nginx}]}
  - waitFor: {object: {kind: Pod, name: p}, condition: Ready, equals: "True", timeout: 1m}
`,
  );
  const replay = await runSim(['replay', 'pod.yaml'], { command: sim, cwd: elsewhere });
  assert.equal(replay.code, 0, replay.stdout + replay.stderr);
  assert.match(replay.stdout, /passed/);
});
