/**
 * `sim replay --ui`: the live view of a replay's cluster, opened in headless chromium while the replay runs. The
 * replay waits for the page, paces cluster time so that the page shows it happen, and keeps the cluster up after
 * the last step until Ctrl-C; `--html` still writes its offline page.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { browserMissing, openBrowser, screenshot, waitForCount } from './helpers/browser.js';
import { track } from './helpers/processes.js';
import { runSim, SIM_BIN } from './helpers/sim.js';

const SCENARIO = `name: a node fails under a Deployment
seed: 4
nodes: 2
steps:
  - apply:
      manifest:
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec:
          replicas: 3
          selector: {matchLabels: {app: web}}
          template:
            metadata: {labels: {app: web}, annotations: {kube-sim.dev/ready-delay: 5s}}
            spec: {containers: [{name: web, image: nginx}]}
  - waitFor: {object: {kind: Deployment, name: web}, jsonpath: '{.status.availableReplicas}', equals: 3, timeout: 1m}
  - fault: {type: node-fail, node: node-2}
  - name: the pods of node-2 are evicted and replaced
    advance: 6m
  - expect:
      - object: {kind: Deployment, name: web}
        jsonpath: '{.status.availableReplicas}'
        equals: 3
`;

test('sim replay --ui serves the live view of the replay: it starts once the page is open, paces time, stays up after the end until Ctrl-C', {
  skip: browserMissing(),
}, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-replay-ui-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'node-fails.yaml');
  writeFileSync(file, SCENARIO);
  const html = join(dir, 'out.html');
  // 60 cluster seconds a second: the 6 minutes take 6 s of wall time.
  const child = track(
    spawn(process.execPath, [SIM_BIN, 'replay', file, '--ui', '--pace', '60', '--html', html], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const printed = (pattern: RegExp, what: string, ms = 60_000) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const look = () => {
        const found = pattern.exec(stderr);
        if (!found) return false;
        clearTimeout(timer);
        child.stderr!.off('data', onData);
        resolve(found);
        return true;
      };
      const onData = (c: string) => {
        stderr += c;
        look();
      };
      const timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms: ${stdout}${stderr}`)), ms);
      child.stderr!.setEncoding('utf8').on('data', onData);
      look();
    });
  const url = (
    await printed(/^live view of the replay's cluster: (http:\/\/127\.0\.0\.1:\d+\/sim\/ui\/)$/m, 'URL')
  )[1]!;
  assert.match(stderr, /^the replay starts when it is open$/m);
  // Nothing runs until the page is open.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assert.doesNotMatch(stdout, /apply Deployment web/, 'the first step waits for the page');

  const { page, errors } = await openBrowser(t);
  const openedAt = performance.now();
  await page.goto(url);
  await page.waitForSelector('[data-watches="live"]');
  // Its pods appear and turn ready as the replay runs, and node-2 fails, all as they happen.
  await waitForCount(page, '.lane .pod[data-state="ready"]', 3);
  await page.waitForSelector('[data-node="node-2"] .badge:text("kubelet stopped")');
  await page.waitForSelector('[data-node="node-2"] [data-ready="Unknown"]');
  await printed(/^replay finished: the live view stays up/m, 'end of the replay');
  // Paced: the 6 minutes of cluster time took at least 6 s of the wall's (unpaced, the whole replay takes ~1 s).
  const took = performance.now() - openedAt;
  assert.ok(took >= 6000, `the replay ran for ${Math.round(took)} ms after the page opened`);
  assert.match(stdout, /PASS/);
  // The cluster as the replay left it: three ready pods on node-1, none ready on node-2.
  await waitForCount(page, '.lane[data-node="node-1"] .pod[data-state="ready"]', 3);
  assert.equal(await page.locator('.lane[data-node="node-2"] .pod[data-state="ready"]').count(), 0);
  await page.waitForSelector('.events td.reason:text("TaintManagerEviction")');
  t.diagnostic(`screenshot: ${await screenshot(page, 'replay-ui-finished')}`);
  // Still a live cluster: the page steps its paused virtual clock.
  const before = await page.getAttribute('.clock-face', 'data-now');
  await page.locator('[data-action="+1m"]:enabled').click();
  await page.waitForFunction(
    (then) =>
      (
        globalThis as unknown as { document: { querySelector(s: string): { getAttribute(n: string): string } } }
      ).document
        .querySelector('.clock-face')
        .getAttribute('data-now') !== then,
    before,
  );
  assert.deepEqual(errors, []);

  child.kill('SIGINT');
  assert.equal(await exited, 0, `the replay passed, so Ctrl-C after it exits 0: ${stdout}${stderr}`);
  const offline = readFileSync(html, 'utf8');
  assert.match(offline, /a node fails under a Deployment/);
  assert.doesNotMatch(offline, /<script/, '--html is still a page without script, for offline use');
});

test('sim replay: --port without --ui, and --pace with --server, are refused in one line (exit 2)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-replay-ui-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'node-fails.yaml');
  writeFileSync(file, SCENARIO);
  const noUi = await runSim(['replay', file, '--port', '8099']);
  assert.equal(noUi.code, 2, noUi.stderr);
  assert.equal(noUi.stderr, 'sim replay: --port is where --ui serves the live view: give --ui too\n');
  const remote = await runSim(['replay', file, '--server', 'http://127.0.0.1:9', '--pace', '5']);
  assert.equal(remote.code, 2, remote.stderr);
  assert.equal(remote.stderr, 'sim replay: --port and --pace are for the embedded cluster, not a --server\n');
});
