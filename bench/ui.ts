/**
 * `node dist/bench/ui.js [--nodes 100] [--replicas 5000] [--chromium PATH]`
 *
 * The live view at size, in Debian's headless chromium (playwright-core): `sim serve --nodes N --stop-delay 0s`
 * (real clock, the default stages), the page opened, then a Deployment of `replicas` pods created and, once the
 * page shows them all ready, rolled to a new image. For each phase: how long until the API says it is done
 * (Deployment available / fully updated), how long until the page shows it (every pod ready in the lanes; the new
 * ReplicaSet's pods all ready and the old one's gone), the page's frames per second while it ran, its long tasks
 * (over 50 ms: count, longest, total), and its JS heap at the end. The server and the browser share the machine's
 * cores, so the figures include the server's work. Prints a Markdown table row per phase.
 */
import { existsSync } from 'node:fs';
import { chromium, type Page } from 'playwright-core';
import { spawnServer } from './server-process.js';

function option(flag: string, fallback: string): string {
  const i = process.argv.indexOf(flag);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

const NODES = Number(option('--nodes', '100'));
const REPLICAS = Number(option('--replicas', '5000'));
const CHROMIUM = option('--chromium', process.env.KUBE_SIM_CHROMIUM ?? '/usr/bin/chromium');
const TIMEOUT_MS = 600_000;

/** What the page counts in itself: frames and long tasks since the last `take`, its heap. */
const PAGE_PROBE = `
  window.__probe = { frames: 0, longTasks: [] };
  const frame = () => { window.__probe.frames++; requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) window.__probe.longTasks.push(entry.duration);
  }).observe({ type: 'longtask', buffered: true });
`;

interface Probe {
  frames: number;
  longTasks: number[];
  heap: number;
}

async function takeProbe(page: Page): Promise<Probe> {
  return page.evaluate(`(() => {
    const p = window.__probe;
    const out = { frames: p.frames, longTasks: p.longTasks, heap: performance.memory ? performance.memory.usedJSHeapSize : 0 };
    window.__probe = { frames: 0, longTasks: [] };
    return out;
  })()`) as Promise<Probe>;
}

async function until(what: string, check: () => Promise<boolean>): Promise<number> {
  const start = performance.now();
  while (!(await check())) {
    if (performance.now() - start > TIMEOUT_MS) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return performance.now();
}

async function main(): Promise<void> {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM} (apt-get install chromium)`);
  const server = await spawnServer(['--nodes', String(NODES), '--stop-delay', '0s']);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--enable-precise-memory-info'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    await page.addInitScript(PAGE_PROBE);
    await page.goto(`${server.url}/sim/ui/`);
    await page.waitForSelector('[data-watches="live"]');
    const api = async (path: string, init: { method: string; body: unknown; type?: string }) => {
      const reply = await fetch(`${server.url}${path}`, {
        method: init.method,
        headers: { 'content-type': init.type ?? 'application/json' },
        body: JSON.stringify(init.body),
      });
      if (!reply.ok) throw new Error(`${init.method} ${path}: ${reply.status} ${await reply.text()}`);
    };
    const deployment = async () =>
      (await (await fetch(`${server.url}/apis/apps/v1/namespaces/default/deployments/web`)).json()) as {
        metadata: { generation: number };
        status?: {
          observedGeneration?: number;
          updatedReplicas?: number;
          availableReplicas?: number;
          replicas?: number;
        };
      };
    const apiDone = async () => {
      const d = await deployment();
      const s = d.status ?? {};
      return (
        s.observedGeneration === d.metadata.generation &&
        s.updatedReplicas === REPLICAS &&
        s.availableReplicas === REPLICAS &&
        s.replicas === REPLICAS
      );
    };
    const readyInLanes = (image?: string) =>
      page.evaluate(
        ([rs]) =>
          (
            globalThis as unknown as { document: { querySelectorAll(s: string): { length: number } } }
          ).document.querySelectorAll(
            rs ? `.lane .pod[data-state="ready"][data-pod^="${rs}"]` : '.lane .pod[data-state="ready"]',
          ).length,
        [image] as const,
      );
    const lanePods = () =>
      page.evaluate(
        () =>
          (
            globalThis as unknown as { document: { querySelectorAll(s: string): { length: number } } }
          ).document.querySelectorAll('.lane .pod:not(.leaving)').length,
      );
    const rows: string[] = [];
    const report = (phase: string, start: number, apiAt: number, pageAt: number, probe: Probe) => {
      const seconds = (pageAt - start) / 1000;
      const long = probe.longTasks;
      rows.push(
        `| ${phase} | ${((apiAt - start) / 1000).toFixed(1)} s | ${seconds.toFixed(1)} s | ${(probe.frames / seconds).toFixed(0)} | ${long.length} | ${Math.round(Math.max(0, ...long))} ms | ${Math.round(long.reduce((a, b) => a + b, 0))} ms | ${(probe.heap / 2 ** 20).toFixed(0)} MiB |`,
      );
    };

    await takeProbe(page);
    let start = performance.now();
    await api('/apis/apps/v1/namespaces/default/deployments', {
      method: 'POST',
      body: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'web' },
        spec: {
          replicas: REPLICAS,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: { containers: [{ name: 'web', image: 'nginx:1.26' }] },
          },
        },
      },
    });
    let apiAt = 0;
    let pageAt = 0;
    await Promise.all([
      until('the Deployment to be available', apiDone).then((t) => (apiAt = t)),
      until('the page to show every pod ready', async () => (await readyInLanes()) === REPLICAS).then(
        (t) => (pageAt = t),
      ),
    ]);
    report(`create ${REPLICAS} pods on ${NODES} nodes`, start, apiAt, pageAt, await takeProbe(page));

    start = performance.now();
    await api('/apis/apps/v1/namespaces/default/deployments/web', {
      method: 'PATCH',
      type: 'application/strategic-merge-patch+json',
      body: { spec: { template: { spec: { containers: [{ name: 'web', image: 'nginx:1.27' }] } } } },
    });
    let newRs = '';
    await until('the new ReplicaSet', async () => {
      const list = (await (await fetch(`${server.url}/apis/apps/v1/namespaces/default/replicasets`)).json()) as {
        items: Array<{ metadata: { name: string; annotations?: Record<string, string> } }>;
      };
      newRs =
        list.items.find((rs) => rs.metadata.annotations?.['deployment.kubernetes.io/revision'] === '2')?.metadata
          .name ?? '';
      return newRs !== '';
    });
    await Promise.all([
      until('the rollout to finish', apiDone).then((t) => (apiAt = t)),
      until(
        'the page to show only new pods, all ready',
        async () => (await readyInLanes(`${newRs}-`)) === REPLICAS && (await lanePods()) === REPLICAS,
      ).then((t) => (pageAt = t)),
    ]);
    report('rolling update (maxSurge 25%, maxUnavailable 25%)', start, apiAt, pageAt, await takeProbe(page));

    process.stdout.write(
      `| phase | API done | page shows it | page fps | long tasks | longest | long total | page JS heap |\n|---|---|---|---|---|---|---|---|\n${rows.join('\n')}\n`,
    );
  } finally {
    await browser.close();
    await server.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
