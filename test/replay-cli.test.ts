import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { kubectlMissing } from './helpers/kubectl.js';
import { ROOT, serverFor } from './helpers/server.js';

const SIM = join(ROOT, 'bin/sim.js');

/**
 * Shipped scenarios that pass with the components in this tree. A scenario joins this list once the
 * controllers and the node simulator it needs have landed and it passes; the rest are still checked
 * against the schema (scenario.test.ts).
 */
export const PASSING_SHIPPED_SCENARIOS: string[] = [
  'config-watcher.yaml',
  'cronjob-week.yaml',
  'daemonset-nodes.yaml',
  'hpa-walkthrough.yaml',
  'job-failures.yaml',
  'pdb-drain.yaml',
  'rollback-bad-release.yaml',
  'rolling-update-node-failure.yaml',
  'statefulset-pvcs.yaml',
  'what-if-spot-pool.yaml',
];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function sim(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SIM, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-replay-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('sim replay: a broken scenario exits 1 naming the step, the expectation and what it found', async () => {
  const run = await sim(['replay', 'test/fixtures/scenarios/broken.yaml']);
  assert.equal(run.code, 1, run.stderr);
  assert.match(
    run.stdout,
    /^FAIL broken on purpose: 4 steps \(3 passed, 1 failed, 0 skipped\), 2 expectations \(1 passed, 1 failed\)/m,
  );
  assert.match(
    run.stdout,
    /✗ step 3 "count the pods" \(expect\): expected count of Pod app=web in default equals 2; found 3: web-/,
  );
  // The timeline: time, step, the changes it caused.
  assert.match(run.stdout, /^ {2}T\+0s +1 {2}apply Deployment web {2}ok$/m);
  assert.match(run.stdout, /^ +T\+0s +\+ Pod default\/web-\S+ {2}Pending$/m);
  assert.match(run.stdout, /^ {2}T\+10s +3 {2}count the pods {2}FAILED$/m);
});

test('sim replay: an invalid scenario exits 2 with every problem; no file exits 2', async () => {
  const run = await sim(['replay', 'test/fixtures/scenarios/invalid.yaml']);
  assert.equal(run.code, 2);
  assert.match(run.stderr, /invalid\.yaml: invalid scenario:\n {2}- steps\[0\]\.advance: "soon" is not valid here/);
  assert.equal((await sim(['replay'])).code, 2);
  const missing = await sim(['replay', 'no/such/file.yaml']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /no\/such\/file\.yaml: cannot read/);
});

test('sim replay --report and --html: the JSON timeline and a self-contained page with pods per owner and the steps', async (t) => {
  const dir = tempDir(t);
  const json = join(dir, 'out.json');
  const html = join(dir, 'out.html');
  const run = await sim([
    'replay',
    'test/fixtures/scenarios/determinism.yaml',
    'test/fixtures/scenarios/broken.yaml',
    '--report',
    json,
    '--html',
    html,
    '--no-changes',
  ]);
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stdout, /^2 scenarios: 1 passed, 1 failed$/m);

  const report = JSON.parse(readFileSync(json, 'utf8')) as {
    kind: string;
    result: string;
    scenarios: Array<{
      name: string;
      result: string;
      steps: Array<{ index: number; at: string; changes: Array<{ resourceVersion: number }> }>;
      pods: Array<{ owner: string; pods: unknown[] }>;
    }>;
  };
  assert.equal(report.kind, 'ReplayReport');
  assert.equal(report.result, 'failed');
  assert.deepEqual(
    report.scenarios.map((s) => [s.name, s.result]),
    [
      ['determinism workout', 'passed'],
      ['broken on purpose', 'failed'],
    ],
  );
  const steps = report.scenarios[0]!.steps;
  const rvs = steps.flatMap((s) => s.changes.map((c) => c.resourceVersion));
  assert.deepEqual(
    rvs,
    [...rvs].sort((a, b) => a - b),
    'changes are in resourceVersion order',
  );
  assert.ok(
    report.scenarios[0]!.pods.some((g) => g.owner.startsWith('Deployment default/web')),
    JSON.stringify(report.scenarios[0]!.pods.map((g) => g.owner)),
  );

  const page = readFileSync(html, 'utf8');
  assert.match(page, /^<!DOCTYPE html>/);
  assert.doesNotMatch(page, /<script|<link|src=|url\((?!#)|@import/i, 'no scripts or external assets');
  assert.doesNotMatch(page, /href="(?!#)/, 'links only within the page');
  assert.equal((page.match(/<svg class="timeline"/g) ?? []).length, 2, 'one timeline per scenario');
  const timelines = [...page.matchAll(/<svg class="timeline"[\s\S]*?<\/svg>/g)].map((m) => m[0]).join('');
  assert.equal((timelines.match(/<g class="step[ "]/g) ?? []).length, 10 + 4, 'every step marked on its timeline');
  assert.equal((timelines.match(/<g class="step failed"/g) ?? []).length, 1);
  assert.equal((timelines.match(/<g class="broke"/g) ?? []).length, 1, 'where the failed step broke');
  assert.match(page, /class="owner">Deployment default\/web</);
  assert.match(page, /<rect [^>]*fill="#bbbbbb"><title>web-\S+: Pending from T\+0s/);
  assert.match(page, /<tr class="failed" id="s2-step3"><td>3<\/td>/);
  assert.match(page, /found: 3: web-/);
});

test('sim replay --server drives a running sim serve over HTTP', async (t) => {
  const server = await serverFor(t, ['--clock', 'virtual', '--seed', '5']);
  const dir = tempDir(t);
  const file = join(dir, 'remote.yaml');
  writeFileSync(
    file,
    `name: remote
steps:
  - apply:
      manifest:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: remote-cm}
        data: {a: "1"}
  - apply:
      manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: remote-cm}, data: {a: "2"}}
  - advance: 90s
  - expect:
      - object: {kind: ConfigMap, name: remote-cm}
        jsonpath: '{.data.a}'
        equals: 2
      - events: {kind: ConfigMap, name: remote-cm, event: modified}
        equals: 1
      - order:
          first: {kind: ConfigMap, name: remote-cm, event: created}
          then: {kind: ConfigMap, name: remote-cm, event: modified}
`,
  );
  const run = await sim(['replay', '--server', server.url, file]);
  assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
  assert.match(run.stdout, /remote {2}\(.*remote\.yaml, seed 1, remote,/);
  assert.match(run.stdout, /^ {2}T\+1m30s +4 {2}expect \(3 assertions\) {2}ok$/m);
  const clock = (await (await fetch(`${server.url}/sim/v1/clock`)).json()) as { now: string };
  assert.equal(clock.now, '2025-01-01T00:01:30Z', 'the scenario moved the server clock');
});

test('sim replay against sim serve --auth --tls: credentials from --kubeconfig, or --token and a CA choice; none is a 401 it names', async (t) => {
  const server = await serverFor(t, ['--auth', '--tls', '--clock', 'virtual', '--nodes', '0']);
  const kubeconfig = /kubeconfig written to (\S+)/.exec(server.stdout())?.[1];
  const token = /admin token \(user kubernetes-admin, group system:masters\): (\S+)/.exec(server.stdout())?.[1];
  assert.ok(kubeconfig && token, server.stdout());
  const dir = tempDir(t);
  const file = join(dir, 'authed.yaml');
  // The kubectl step, when there is a kubectl, shows its run gets the credentials too.
  const kubectlStep = kubectlMissing()
    ? ''
    : `
  - kubectl:
      args: get configmap authed -o jsonpath={.data.a}
      contains: "2"`;
  writeFileSync(
    file,
    `name: authed
steps:
  - apply:
      manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: authed}, data: {a: "1"}}
  - apply:
      manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: authed}, data: {a: "2"}}
  - advance: 10s${kubectlStep}
  - expect:
      - events: {kind: ConfigMap, name: authed, event: modified}
        equals: 1
`,
  );
  // The server, its CA and the admin token, all from the kubeconfig sim serve wrote.
  const fromKubeconfig = await sim(['replay', '--kubeconfig', kubeconfig, file]);
  assert.equal(fromKubeconfig.code, 0, `${fromKubeconfig.stdout}\n${fromKubeconfig.stderr}`);
  assert.match(fromKubeconfig.stdout, /^PASS authed/m);
  // Or the flags kubectl has: no CA (an https server's certificate then fails), no token (a 401).
  const noCa = await sim(['replay', '--server', server.url, '--token', token, file]);
  assert.equal(noCa.code, 1);
  assert.match(noCa.stderr, /cannot run: cannot reach https:\/\/127\.0\.0\.1:\d+: fetch failed: .*certificate/);
  const noToken = await sim(['replay', '--server', server.url, '--insecure-skip-tls-verify', file]);
  assert.equal(noToken.code, 1);
  assert.match(noToken.stderr, /answered 401 Unauthorized: give a token \(--token, or --kubeconfig with one\)/);
  const flags = await sim(['replay', '--server', server.url, '--insecure-skip-tls-verify', '--token', token, file]);
  // Connected and authorized, it finds the ConfigMap the first run left there, and says so before any step.
  assert.equal(flags.code, 1, `${flags.stdout}\n${flags.stderr}`);
  assert.match(flags.stdout, /✗ the server already has configmaps\/authed in default, which the scenario creates/);
  // Credentials without a server to use them on are a usage error.
  const stray = await sim(['replay', '--token', token, file]);
  assert.equal(stray.code, 2);
  assert.equal(
    stray.stderr,
    'sim replay: --token, --certificate-authority and --insecure-skip-tls-verify need --server or --kubeconfig\n',
  );
});

test('sim replay: the kubectl step runs the real kubectl against the scenario cluster', async (t) => {
  const missing = kubectlMissing();
  if (missing) return t.skip(missing);
  const dir = tempDir(t);
  const file = join(dir, 'kubectl.yaml');
  writeFileSync(
    file,
    `name: kubectl steps
steps:
  - kubectl:
      args: create configmap made-by-kubectl --from-literal=k=v
  - expect: {object: {kind: ConfigMap, name: made-by-kubectl}, jsonpath: '{.data.k}', equals: v}
  - kubectl:
      args: [get, configmap, made-by-kubectl, -o, 'jsonpath={.data.k}']
      contains: v
  - kubectl:
      args: get configmap nope
      exitCode: 1
  - name: wrong on purpose
    kubectl: get configmap nope
`,
  );
  const run = await sim(['replay', file], { KUBE_SIM_KUBECTL: process.env.KUBE_SIM_KUBECTL ?? '/usr/bin/kubectl' });
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stdout, /^ +T\+0s +\+ ConfigMap default\/made-by-kubectl/m);
  assert.match(run.stdout, /^ +\| v$/m);
  assert.match(
    run.stdout,
    /✗ step 5 "wrong on purpose" \(kubectl\): kubectl exited with 1, expected 0: Error from server \(NotFound\): configmaps "nope" not found/,
  );
});

test('sim replay fixtures/scenarios/*.yaml passes, and twice gives the same report byte for byte', async (t) => {
  let files = PASSING_SHIPPED_SCENARIOS.map((f) => `fixtures/scenarios/${f}`);
  const missing = kubectlMissing();
  if (missing) {
    const without = files.filter((f) => !/^\s*(- )?kubectl:/m.test(readFileSync(join(ROOT, f), 'utf8')));
    t.diagnostic(
      `${missing}: skipping the scenarios with kubectl steps (${files.filter((f) => !without.includes(f)).join(', ')})`,
    );
    files = without;
  }
  if (files.length === 0) return t.skip('no shipped scenario to run');
  const dir = tempDir(t);
  const first = await sim(['replay', '--no-changes', '--report', join(dir, '1.json'), ...files]);
  assert.equal(first.code, 0, `${first.stdout}\n${first.stderr}`);
  assert.match(first.stdout, new RegExp(`^${files.length} scenarios: ${files.length} passed, 0 failed$`, 'm'));
  const second = await sim(['replay', '--no-changes', '--report', join(dir, '2.json'), ...files]);
  assert.equal(second.code, 0, `${second.stdout}\n${second.stderr}`);
  assert.ok(readFileSync(join(dir, '1.json')).equals(readFileSync(join(dir, '2.json'))), 'the two reports differ');
  assert.equal(second.stdout, first.stdout);
});
