import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { Api } from './helpers/http.js';
import { kubectlAgainst, skipWithoutKubectl } from './helpers/kubectl.js';
import { track } from './helpers/processes.js';
import { ROOT, startServer, type SimServer } from './helpers/server.js';
import { runSim, SIM_BIN } from './helpers/sim.js';

interface Expectation {
  ok: boolean;
  description: string;
  found?: string;
}
interface ReportStep {
  name: string;
  status: string;
  expectations: Expectation[];
}

test('sim record of a kubectl session, replayed on a snapshot-booted cluster, ends as the source did', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-record-'));
  const servers: SimServer[] = [];
  t.after(async () => {
    for (const s of servers) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const source = await startServer(['--clock', 'virtual', '--nodes', '3', '--seed', '3']);
  servers.push(source);
  const api = new Api(source.url);
  const k = kubectlAgainst(source);
  const advance = (by: string): Promise<unknown> =>
    api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
  // Before the recording: a Deployment the session will delete.
  await k.ok(['create', 'deployment', 'api', '--image', 'nginx:1.27', '--replicas', '2']);
  await advance('10s');

  const trace = join(dir, 'trace.yaml');
  const recorder = track(
    spawn(process.execPath, [SIM_BIN, 'record', '--server', source.url, '--duration', '2m', '--out', trace], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let err = '';
  recorder.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<number | null>((resolve) => recorder.once('exit', (code) => resolve(code)));
  for (let i = 0; i < 200 && !err.includes('recording '); i++) await new Promise((r) => setTimeout(r, 50));
  assert.match(err, /recording nodes, pods, deployments/, err);

  // The session: create, scale, roll out, a ConfigMap, a delete; the clock moves between them.
  await k.ok(['create', 'deployment', 'web', '--image', 'nginx:1.27', '--replicas', '3']);
  await advance('30s');
  await k.ok(['scale', 'deployment', 'web', '--replicas', '5']);
  await advance('30s');
  await k.ok(['set', 'image', 'deployment/web', 'nginx=nginx:1.28']);
  await k.ok(['annotate', 'deployment', 'web', 'team=shop']);
  await advance('1m');
  await k.ok(['create', 'configmap', 'settings', '--from-literal=mode=fast']);
  await k.ok(['delete', 'deployment', 'api']);
  await advance('20s');
  await new Promise((r) => setTimeout(r, 500)); // the watches deliver what is in flight
  recorder.kill('SIGINT');
  assert.equal(await exited, 0, err);
  assert.match(err, /sim record: \d+ changes seen, 6 by users; wrote /);

  const scenario = parseYaml(readFileSync(trace, 'utf8')) as {
    snapshot: string;
    steps: Array<Record<string, unknown>>;
    recorded: { userChanges: number; otherChanges: number; others: string[] };
  };
  assert.equal(scenario.snapshot, 'trace.snapshot.yaml');
  const actions = scenario.steps.map((s) => Object.keys(s).find((key) => key !== 'name'));
  assert.deepEqual(
    actions.filter((a) => a !== 'advance' && a !== 'expect'),
    ['apply', 'scale', 'patch', 'patch', 'apply', 'delete'],
    "the users' changes, in order, as steps",
  );
  const offsets = scenario.steps.filter((s) => s.advance !== undefined && s.name === undefined).map((s) => s.advance);
  assert.deepEqual(offsets, ['30s', '30s', '1m', '20s'], 'at the times they were made');
  assert.equal(scenario.recorded.userChanges, 6);
  assert.ok(
    scenario.recorded.others.some((line) => /^\+\S+ ADDED Pod default\/web-/.test(line)),
    "the controllers' changes are kept apart, for the reader",
  );

  const report = join(dir, 'report.json');
  const replay = await runSim(['replay', '--no-changes', '--report', report, trace]);
  const steps = (JSON.parse(readFileSync(report, 'utf8')) as { scenarios: Array<{ steps: ReportStep[] }> })
    .scenarios[0]!.steps;
  const end = steps.find((s) => s.name === 'as the source ended')!;
  const failed = end.expectations.filter((e) => !e.ok);
  // Where the simulation's scheduler placed pods may differ from the source's choices (ties between equal nodes):
  // that is divergence the report shows, not a failure of the replay.
  assert.deepEqual(
    failed.filter((e) => !/pods? on node-/.test(e.description)).map((e) => `${e.description}: ${e.found}`),
    [],
    replay.stdout,
  );
  for (const expected of [
    'source: 0 pods pending',
    'source: 5 pods',
    'source: Deployment default/web ended at generation 4',
    'source: Deployment default/api was deleted',
    'source: ConfigMap default/settings exists',
  ])
    assert.ok(
      end.expectations.some((e) => e.ok && e.description.startsWith(`${expected} (`)),
      `${expected}\n${replay.stdout}`,
    );
  assert.ok(
    end.expectations.some((e) => e.ok && /rolled out in/.test(e.description)),
    `the rollouts finished within the time they took in the source\n${replay.stdout}`,
  );
  assert.ok(
    steps.slice(0, -1).every((s) => s.status === 'passed'),
    replay.stdout,
  );
});
