import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { track } from './helpers/processes.js';
import { ROOT, serverFor } from './helpers/server.js';
import { runSim, SIM_BIN } from './helpers/sim.js';

/**
 * `sim replay` as CI runs it: the timeline streamed step by step, Ctrl-C writing what ran, JUnit XML, a scenario
 * that cannot run on a server refused before it changes anything, a missing manifest refused before it starts.
 */

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-replay-ci-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A CronJob every minute for a month: the long advance takes a while of wall time, which is what Ctrl-C meets. */
const LONG = `name: a long month
steps:
  - apply:
      manifest:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: first}
  - apply:
      manifest:
        apiVersion: batch/v1
        kind: CronJob
        metadata: {name: tick}
        spec:
          schedule: "* * * * *"
          jobTemplate:
            spec:
              template:
                metadata: {annotations: {kube-sim.dev/duration: 5s}}
                spec:
                  restartPolicy: Never
                  containers: [{name: c, image: busybox}]
  - name: a month
    advance: 30d
  - expect: {object: {kind: ConfigMap, name: first}}
`;

test('sim replay streams each step as it ends; SIGINT writes the partial reports, says where, exits 130', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'long.yaml');
  writeFileSync(file, LONG);
  const json = join(dir, 'out.json');
  const xml = join(dir, 'out.xml');
  const child = track(
    spawn(process.execPath, [SIM_BIN, 'replay', file, '--report', json, '--junit', xml], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let stdout = '';
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  // Step 2 is printed while step 3 (the month) still runs: that is the stream.
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no step 2 line within 60 s: ${stdout}${stderr}`)), 60_000);
    child.stdout!.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
      if (/^ {2}T\+0s +2 {2}apply CronJob tick {2}ok$/m.test(stdout)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  assert.match(stdout, /^a long month {2}\(long\.yaml, seed 1, embedded, starts 2025-01-01T00:00:00\.000Z\)$/m);
  assert.doesNotMatch(stdout, /PASS|FAIL/);
  child.kill('SIGINT');
  const code = await exited;
  assert.equal(code, 130, stdout + stderr);
  assert.match(stdout, /^ {2}T\+0s +3 {2}a month {2}INTERRUPTED$/m);
  assert.match(stdout, /^ {16}4 {2}expect \(1 assertion\) {2}skipped$/m);
  assert.match(stdout, /^FAIL a long month: 4 steps \(2 passed, 1 failed, 1 skipped\)/m);
  assert.match(stdout, /✗ interrupted at step 3: the steps after it did not run/);
  assert.match(stderr, /^sim replay: interrupted at step 3 of long\.yaml$/m);
  const report = JSON.parse(readFileSync(json, 'utf8')) as {
    result: string;
    scenarios: Array<{ interruptedAt: number; file: string; steps: Array<{ status: string; interrupted?: boolean }> }>;
  };
  assert.equal(report.result, 'failed');
  assert.equal(report.scenarios[0]!.interruptedAt, 3);
  assert.equal(report.scenarios[0]!.file, 'long.yaml');
  assert.deepEqual(
    report.scenarios[0]!.steps.map((s) => (s.interrupted ? 'interrupted' : s.status)),
    ['passed', 'passed', 'interrupted', 'skipped'],
  );
  const junit = readFileSync(xml, 'utf8');
  assert.match(junit, /<testcase classname="long\.yaml" name="step 3: a month"[^>]*>\s*<error message="interrupted/);
  assert.match(junit, /<testcase classname="long\.yaml" name="step 4: expect \(1 assertion\)"[^>]*>\s*<skipped\/>/);
});

test('on a terminal, a long advance shows a progress line on stderr, rewritten in place', async (t) => {
  if (spawnSync('sh', ['-c', 'command -v script']).status !== 0) {
    t.skip('script (util-linux) is not installed: no pseudo-terminal to try');
    return;
  }
  const dir = tempDir(t);
  const file = join(dir, 'days.yaml');
  writeFileSync(file, 'name: two days\nsteps:\n  - advance: 2d\n');
  // script(1) gives the replay a pseudo-terminal and copies what it wrote there to stdout.
  const run = spawnSync('script', ['-q', '-e', '-c', `${process.execPath} ${SIM_BIN} replay ${file}`, '/dev/null'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  // Carriage return and "erase line" (ESC [K) before each: the line is rewritten where it stands.
  const rewrite = '\r\u001b[K';
  assert.ok(run.stdout.includes(`${rewrite}  step 1 advance 2d: 1h of 2d (2%)`), JSON.stringify(run.stdout));
  assert.ok(run.stdout.includes(`${rewrite}  step 1 advance 2d: 1d of 2d (50%)`));
  assert.match(run.stdout, /PASS two days/);
  // Piped (not a terminal), the same replay prints no progress line.
  const piped = await runSim(['replay', file]);
  assert.ok(!piped.stderr.includes(rewrite), piped.stderr);
});

test('sim replay --junit: a testsuite per scenario, a testcase per step, failures with what was found', async (t) => {
  const dir = tempDir(t);
  const xml = join(dir, 'junit.xml');
  const run = await runSim([
    'replay',
    'test/fixtures/scenarios/determinism.yaml',
    'test/fixtures/scenarios/broken.yaml',
    '--junit',
    xml,
  ]);
  assert.equal(run.code, 1, run.stderr);
  const junit = readFileSync(xml, 'utf8');
  assert.match(
    junit,
    /^<\?xml version="1\.0" encoding="UTF-8"\?>\n<testsuites name="sim replay" tests="\d+" failures="1"/,
  );
  assert.equal([...junit.matchAll(/<testsuite /g)].length, 2);
  assert.match(
    junit,
    /<testsuite name="broken on purpose" timestamp="2025-01-01T00:00:00" time="11" tests="4" failures="1" errors="0" skipped="0">/,
  );
  assert.match(
    junit,
    /<testcase classname="test\/fixtures\/scenarios\/broken\.yaml" name="step 3: count the pods" time="0">\s*<failure message="expected count of Pod app=web in default equals 2; found 3: web-[^"]*" type="ExpectationFailed"\/>/,
  );
  assert.match(junit, /<property name="seed" value="5"\/>/);
  // Same scenarios, same file: the times are cluster time.
  await runSim([
    'replay',
    'test/fixtures/scenarios/determinism.yaml',
    'test/fixtures/scenarios/broken.yaml',
    '--junit',
    `${xml}.2`,
  ]);
  assert.equal(readFileSync(`${xml}.2`, 'utf8'), junit);
});

test('an apply of a missing file is an invalid scenario (exit 2) before anything runs; paths are relative to the scenario', async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n');
  writeFileSync(join(dir, 'bad.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: [oops\n');
  writeFileSync(
    join(dir, 'scenario.yaml'),
    'name: files\nsteps:\n  - apply: cm.yaml\n  - apply: {file: nowhere.yaml}\n  - create: bad.yaml\n',
  );
  const run = await runSim(['replay', join(dir, 'scenario.yaml')], { cwd: ROOT });
  assert.equal(run.code, 2, run.stdout);
  assert.equal(run.stdout, '');
  assert.match(
    run.stderr,
    new RegExp(
      `scenario\\.yaml: invalid scenario:\\n {2}- steps\\[1\\]\\.apply: no file nowhere\\.yaml \\(paths are relative to the scenario file's directory, ${dir.replace(/[/.]/g, '\\$&')}\\)\\n {2}- steps\\[2\\]\\.create: bad\\.yaml: invalid YAML`,
    ),
  );
});

test('with --server, what the scenario needs of the server is checked before its first step changes anything', async (t) => {
  const real = await serverFor(t, ['--nodes', '0']);
  const dir = tempDir(t);
  const file = join(dir, 'needs.yaml');
  writeFileSync(
    file,
    'name: needs\nsteps:\n  - apply:\n      manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: needs}}\n  - advance: 1h\n',
  );
  const refused = await runSim(['replay', '--server', real.url, file]);
  assert.equal(refused.code, 1, refused.stdout + refused.stderr);
  assert.match(
    refused.stdout,
    /✗ the server's clock is real, and the scenario advances it \(step 2\): start sim serve with --clock virtual/,
  );
  assert.match(refused.stdout, /^FAIL needs: 2 steps \(0 passed, 0 failed, 2 skipped\)/m);
  const cm = await fetch(`${real.url}/api/v1/namespaces/default/configmaps/needs`);
  assert.equal(cm.status, 404, 'nothing was applied');

  const virtual = await serverFor(t, ['--nodes', '0', '--clock', 'virtual']);
  assert.equal((await runSim(['replay', '--server', virtual.url, file])).code, 0);
  const again = await runSim(['replay', '--server', virtual.url, file]);
  assert.equal(again.code, 1);
  assert.match(
    again.stdout,
    /✗ the server already has configmaps\/needs in default, which the scenario creates: run it on a fresh server/,
  );
});
