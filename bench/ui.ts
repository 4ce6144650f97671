/**
 * `node dist/bench/ui.js [--nodes 100] [--replicas 5000] [--chromium PATH]` (`npm run bench:ui`)
 *
 * The live view at size, in Debian's headless chromium (playwright-core): `sim serve --nodes N --stop-delay 0s`
 * (real clock, the default stages), the page opened, then a Deployment of `replicas` pods created; once the page
 * shows them all ready, rolled to a new image; then one node's kubelet failed, until its pods are evicted (they
 * tolerate the unreachable taint for 10 s) and replaced elsewhere. For each phase: how long until the API says it
 * is done, how long until the page shows it, the page's frames (per second, and the 95th percentile and longest
 * gap between two), its long tasks (over 50 ms: count, longest, total), how long a pod's watch event takes to
 * show in the DOM (from the WebSocket message to the mutation of its chip: median, 95th percentile, longest),
 * and its JS heap at the end. The server and the browser share the machine's cores, so the figures include the
 * server's work. Prints a Markdown table row per phase.
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
const TIMEOUT_MS = Number(option('--timeout', '600')) * 1000;

/**
 * What the page counts in itself: frame gaps, long tasks, and for each pod the time its latest watch event came
 * in (read off the message before the page's own handler runs), matched with the next time its chip is added or
 * changes state in the DOM (a MutationObserver: the DOM, not the paint).
 */
const PAGE_PROBE = `
  const fresh = () => ({ frames: [], longTasks: [], latencies: [] });
  window.__probe = fresh();
  window.__probeFresh = fresh;
  let last = performance.now();
  const frame = (now) => { window.__probe.frames.push(now - last); last = now; requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) window.__probe.longTasks.push(entry.duration);
  }).observe({ type: 'longtask', buffered: true });
  const arrivals = new Map();
  const Native = WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      if (!String(args[0]).includes('/pods?')) return;
      this.addEventListener('message', (m) => {
        if (typeof m.data !== 'string') return;
        // A ReplicaSet's pod names its owner before itself: its own name is the one that starts with generateName.
        const generated = /"generateName":"([^"]+)"/.exec(m.data);
        const name = generated
          ? new RegExp('"name":"(' + generated[1].replace(/[.*+?^$()|[]\\]/g, '\\$&') + '[^"]*)"').exec(m.data)
          : /"name":"([^"]+)"/.exec(m.data);
        if (name) arrivals.set(name[1], performance.now());
      });
    }
  };
  const seen = (el, now) => {
    const at = arrivals.get(el.dataset.pod);
    if (at === undefined) return;
    arrivals.delete(el.dataset.pod);
    window.__probe.latencies.push(now - at);
  };
  addEventListener('DOMContentLoaded', () => {
    new MutationObserver((records) => {
      const now = performance.now();
      for (const r of records) {
        if (r.type === 'attributes') { if (r.target.classList.contains('pod')) seen(r.target, now); continue; }
        for (const n of r.addedNodes) {
          if (n.nodeType !== 1) continue;
          if (n.classList.contains('pod')) seen(n, now);
          else for (const el of n.querySelectorAll('.pod')) seen(el, now);
        }
      }
    }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-state'] });
  });
`;

interface Probe {
  frames: number[];
  longTasks: number[];
  latencies: number[];
  heap: number;
}

async function takeProbe(page: Page): Promise<Probe> {
  return page.evaluate(`(() => {
    const p = window.__probe;
    const out = { frames: p.frames, longTasks: p.longTasks, latencies: p.latencies, heap: performance.memory ? performance.memory.usedJSHeapSize : 0 };
    window.__probe = window.__probeFresh();
    return out;
  })()`) as Promise<Probe>;
}

function quantile(values: number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function until(what: string, check: () => Promise<boolean>, seen?: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  while (!(await check())) {
    if (performance.now() - start > TIMEOUT_MS)
      throw new Error(`timed out waiting for ${what}${seen ? `; found ${JSON.stringify(await seen())}` : ''}`);
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
    // A rolling update surges to 125% and a failed node's pods stay as they are replaced: room for every pod, so
    // that a relist mid-run (a watch the server ends) does not turn the page to a sample of 5,000.
    await page.goto(`${server.url}/sim/ui/?maxPods=${REPLICAS * 2}`);
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
    const ms = (n: number) => `${Math.round(n)} ms`;
    const report = (phase: string, start: number, apiAt: number, pageAt: number, probe: Probe) => {
      const seconds = (pageAt - start) / 1000;
      const long = probe.longTasks;
      const lat = probe.latencies;
      rows.push(
        `| ${phase} | ${((apiAt - start) / 1000).toFixed(1)} s | ${seconds.toFixed(1)} s | ${(probe.frames.length / seconds).toFixed(0)} | ${ms(quantile(probe.frames, 0.95))} / ${ms(Math.max(0, ...probe.frames))} | ${long.length} | ${ms(Math.max(0, ...long))} | ${ms(long.reduce((a, b) => a + b, 0))} | ${lat.length} | ${ms(quantile(lat, 0.5))} / ${ms(quantile(lat, 0.95))} / ${ms(Math.max(0, ...lat))} | ${(probe.heap / 2 ** 20).toFixed(0)} MiB |`,
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
            spec: {
              containers: [{ name: 'web', image: 'nginx:1.26' }],
              // Evicted 10 s after their node is found unreachable (the API server's default is 300 s).
              tolerations: [
                {
                  key: 'node.kubernetes.io/unreachable',
                  operator: 'Exists',
                  effect: 'NoExecute',
                  tolerationSeconds: 10,
                },
              ],
            },
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

    // A node fails: NotReady once its lease is 40 s old, its pods evicted 10 s later and replaced elsewhere.
    const victim = `node-${Math.ceil(NODES / 2)}`;
    const onVictim = () =>
      page.evaluate(
        (node) =>
          (
            globalThis as unknown as { document: { querySelectorAll(s: string): { length: number } } }
          ).document.querySelectorAll(
            `.lane[data-node="${node}"] .pod:not(.leaving):not([data-state="terminating"]):not([data-state="failed"])`,
          ).length,
        victim,
      );
    const pods = async () =>
      (
        (await (
          await fetch(`${server.url}/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3D${victim}`)
        ).json()) as {
          items: Array<{ metadata: { deletionTimestamp?: string } }>;
        }
      ).items;
    const evictedCount = (await pods()).length;
    start = performance.now();
    await api(`/sim/v1/nodes/${victim}/fail`, { method: 'POST', body: {} });
    await Promise.all([
      until('the evictions and the replacements', async () => {
        const now = await pods();
        return now.every((p) => p.metadata.deletionTimestamp !== undefined) && (await apiDone());
      }).then((t) => (apiAt = t)),
      until(
        `the page to show ${victim} NotReady, without pods, and every pod ready elsewhere`,
        async () =>
          (await page.locator(`.lane[data-node="${victim}"] [data-ready="Unknown"]`).count()) === 1 &&
          (await onVictim()) === 0 &&
          (await readyInLanes(`${newRs}-`)) === REPLICAS,
        async () => ({
          notReady: await page.locator(`.lane[data-node="${victim}"] [data-ready="Unknown"]`).count(),
          onVictim: await onVictim(),
          readyNew: await readyInLanes(`${newRs}-`),
          lanePods: await lanePods(),
          header: await page.textContent('header.top'),
        }),
      ).then((t) => (pageAt = t)),
    ]);
    report(`${victim} fails: ${evictedCount} pods evicted and replaced`, start, apiAt, pageAt, await takeProbe(page));

    process.stdout.write(
      `| phase | API done | page shows it | page fps | frame gap p95 / max | long tasks | longest | long total | pod events shown | event → DOM p50 / p95 / max | page JS heap |\n|---|---|---|---|---|---|---|---|---|---|---|\n${rows.join('\n')}\n`,
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
