import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { CHROMIUM, SCREENSHOTS } from './helpers/browser.js';
import { runSim } from './helpers/sim.js';

/**
 * The --html report in Debian's chromium (driven by playwright-core): it tells the story of a rollout with a
 * node failure and of a broken scenario — node lanes, pods by ReplicaSet and revision, the rollout chart with
 * its band, the legend beside the chart, where an assertion broke, markers that lead to their steps — and a
 * screenshot is left in dist/screenshots/ for a person to look at.
 */

test('the HTML report in headless chromium: nodes, pods by revision, the rollout band, failures marked, linked steps', {
  skip: existsSync(CHROMIUM) ? false : `no browser: ${CHROMIUM} is absent (apt-get install chromium)`,
}, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-html-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const html = join(dir, 'report.html');
  const run = await runSim([
    'replay',
    'fixtures/scenarios/rolling-update-node-failure.yaml',
    'test/fixtures/scenarios/broken.yaml',
    '--html',
    html,
  ]);
  assert.equal(run.code, 1, run.stderr);

  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  t.after(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1200, height: 1000 } });
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(err.message));
  page.on('requestfailed', (request) => errors.push(`request ${request.url()} failed`));
  await page.goto(pathToFileURL(html).href);

  const first = page.locator('section#s1');
  // Node lanes: node-2 goes Unknown with the unreachable taints while it is down.
  const node2 = first.locator('svg.timeline rect title', { hasText: /^node-2: Unknown; taints .*unreachable/ });
  assert.ok((await node2.count()) >= 1, 'node-2 has an Unknown segment with its taints');
  // Pods grouped by ReplicaSet, each with its revision.
  const sets = await first.locator('svg.timeline text.muted', { hasText: /^ReplicaSet web-/ }).allTextContents();
  assert.deepEqual(
    sets.map((s) => s.replace(/web-\w+/, 'web-…')),
    ['ReplicaSet web-… · revision 1', 'ReplicaSet web-… · revision 2'],
  );
  // The rollout chart: maxSurge 1 / maxUnavailable 1 of 6 replicas is the band 5…7.
  const rollout = first.locator('.chart', { has: page.locator('svg.rollout') });
  assert.match((await rollout.locator('.legend').textContent()) ?? '', /Deployment default\/web.*now 5…7/);
  // The legend sits beside the chart it explains, above the plot, not at the foot of the page.
  const legendBox = await first.locator('.chart .legend').first().boundingBox();
  const plotBox = await first.locator('svg.timeline').boundingBox();
  assert.ok(legendBox && plotBox && legendBox.y < plotBox.y && plotBox.y - (legendBox.y + legendBox.height) < 40);
  // The axis says where it is not linear.
  assert.match(
    (await first.locator('.axisnote').textContent()) ?? '',
    /^Time axis: linear within each step, broken at steps/,
  );

  // The broken scenario: the failed expectation is marked on the chart, and the mark leads to its step.
  const second = page.locator('section#s2');
  const broke = second.locator('svg.timeline g.broke');
  assert.equal(await broke.count(), 1);
  assert.match((await broke.locator('title').textContent()) ?? '', /^step 3 failed at .*expected count of Pod app=web/);
  await broke.locator('xpath=..').click();
  assert.match(page.url(), /#s2-step3$/);
  assert.equal(await page.locator('tr:target td.status').textContent(), 'failed');
  // Every step marker leads to a row of the table.
  for (const href of await page.locator('svg a').evaluateAll((as) => as.map((a) => a.getAttribute('href')))) {
    assert.equal(await page.locator(`tr${href}`).count(), 1, `${href} names a step row`);
  }
  assert.deepEqual(errors, []);

  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.goto(pathToFileURL(html).href);
  const shot = join(SCREENSHOTS, 'replay-report.png');
  await page.screenshot({ path: shot, fullPage: true });
  await second.screenshot({ path: join(SCREENSHOTS, 'replay-report-failed.png') });
  t.diagnostic(`screenshots: ${shot}, ${join(SCREENSHOTS, 'replay-report-failed.png')}`);
});
