import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { ROOT } from './server.js';

/** Debian's chromium (`.ci/run` installs it); KUBE_SIM_CHROMIUM points elsewhere. */
export const CHROMIUM = process.env.KUBE_SIM_CHROMIUM ?? '/usr/bin/chromium';

/** Where the page tests leave their screenshots, for a person to look at. */
export const SCREENSHOTS = process.env.KUBE_SIM_SCREENSHOTS ?? join(ROOT, 'dist', 'screenshots');

/** Why the browser tests cannot run here, or undefined when they can. */
export function browserMissing(): string | undefined {
  if (!existsSync(CHROMIUM))
    return `no browser: ${CHROMIUM} is absent (apt-get install chromium), so the page tests cannot run`;
  if (!existsSync(join(ROOT, 'dist', 'ui', 'main.js')))
    return 'the live view is not built (dist/ui/main.js is missing: npm run build:ui)';
  return undefined;
}

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface OpenBrowser {
  context: BrowserContext;
  page: Page;
  /** Errors the page threw or logged, to assert there were none. */
  errors: string[];
}

/**
 * Starts chromium with a fresh profile (closed, and its profile removed, when the test ends) and opens one page.
 * `ignoreHTTPSErrors` lets it load a --tls server's page, whose CA the browser does not know.
 */
export async function openBrowser(
  t: Pick<TestContext, 'after'>,
  viewport = { width: 1400, height: 900 },
): Promise<OpenBrowser> {
  const { chromium } = await import('playwright-core');
  const profile = mkdtempSync(join(tmpdir(), 'kube-sim-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport,
    ignoreHTTPSErrors: true,
  });
  t.after(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    if (process.env.UI_DEBUG) process.stderr.write(`console: ${message.text()}\n`);
    if (message.type() === 'error') errors.push(`console error: ${message.text()}`);
  });
  return { context, page, errors };
}

/**
 * Saves a screenshot of the page under SCREENSHOTS and returns its path. Transitions and animations are finished
 * first, so the picture shows what the page settles on rather than a frame of a bar growing; pods just deleted
 * (which fade out where they were for 0.7 s) are let go first, or the still would show the holes they leave.
 */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page
    .waitForFunction(
      () => (globalThis as unknown as PageGlobals).document.querySelectorAll('.pod.leaving').length === 0,
      undefined,
      {
        timeout: 3000,
      },
    )
    .catch(() => undefined);
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, animations: 'disabled' });
  return path;
}

/** The little of the page's DOM the tests read inside the browser (they compile without the DOM's types). */
interface PageGlobals {
  document: {
    querySelectorAll(selector: string): { length: number };
    querySelector(selector: string): { textContent: string | null; getAttribute(name: string): string | null } | null;
  };
}

/** Waits until `selector` matches exactly `count` elements; a timeout says what the page showed instead. */
export async function waitForCount(page: Page, selector: string, count: number, timeout = 30_000): Promise<void> {
  try {
    await page.waitForFunction(
      ([s, n]) => (globalThis as unknown as PageGlobals).document.querySelectorAll(s).length === n,
      [selector, count] as const,
      { timeout },
    );
  } catch (err) {
    const seen = await page
      .evaluate((s) => {
        const { document } = globalThis as unknown as PageGlobals;
        return {
          matches: document.querySelectorAll(s).length,
          header: document.querySelector('header.top')?.textContent,
          watches: document.querySelector('[data-watches]')?.getAttribute('title'),
          dialog: document.querySelector('.dialog')?.textContent,
          notices: document.querySelector('.notices')?.textContent,
        };
      }, selector)
      .catch((e: Error) => e.message);
    throw new Error(
      `${(err as Error).message}\nwaiting for ${count} × ${selector}, the page showed ${JSON.stringify(seen)}`,
    );
  }
}
