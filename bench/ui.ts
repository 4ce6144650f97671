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
 *
 * `--pages NAME=DIR,NAME=DIR` runs the whole benchmark once per page bundle (a fresh server each time), the page's
 * files taken from DIR instead of the server's dist/ui: e.g. a bundle built from an older commit beside this one,
 * measured side by side in one run on the same machine. `--rounds N` repeats them, alternating. `--profile DIR`
 * records a chromium trace of each phase (DIR/NAME-phase.json, openable in DevTools' Performance panel) and
 * prints where the renderer's main thread spent its time: the trace's top-level tasks by kind, and JS by function.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { extname, join, resolve } from 'node:path';
import { type Browser, type CDPSession, chromium, type Page } from 'playwright-core';
import { spawnServer } from './server-process.js';

function option(flag: string, fallback: string): string {
  const i = process.argv.indexOf(flag);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

const NODES = Number(option('--nodes', '100'));
const REPLICAS = Number(option('--replicas', '5000'));
const CHROMIUM = option('--chromium', process.env.KUBE_SIM_CHROMIUM ?? '/usr/bin/chromium');
const TIMEOUT_MS = Number(option('--timeout', '600')) * 1000;
const PAGES = option('--pages', '')
  .split(',')
  .filter(Boolean)
  .map((spec) => {
    const [name, dir] = spec.includes('=') ? (spec.split('=', 2) as [string, string]) : [spec, spec];
    return { name, dir: resolve(dir) };
  });
const ROUNDS = Number(option('--rounds', '1'));
const PROFILE_DIR = option('--profile', '');

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

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
};

/** While a phase runs: a chromium trace of the page and a CPU profile of its JS. */
interface Recording {
  stop(file: string): Promise<string>;
}

async function record(browser: Browser, page: Page): Promise<Recording> {
  const cdp: CDPSession = await page.context().newCDPSession(page);
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.setSamplingInterval', { interval: 500 });
  await cdp.send('Profiler.start');
  await browser.startTracing(page, {
    categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8', 'blink.user_timing'],
  });
  return {
    async stop(file) {
      const trace = await browser.stopTracing();
      const { profile } = (await cdp.send('Profiler.stop')) as { profile: CpuProfile };
      await cdp.detach();
      writeFileSync(`${file}.json`, trace);
      writeFileSync(`${file}.cpuprofile`, JSON.stringify(profile));
      return `${summariseTrace(JSON.parse(trace.toString('utf8')) as { traceEvents: TraceEvent[] })}\n${summariseProfile(profile)}`;
    },
  };
}

interface TraceEvent {
  name: string;
  ph: string;
  ts: number;
  dur?: number;
  pid: number;
  tid: number;
  args?: { name?: string };
}

/** The renderer main thread's time by trace event, each event's own time (its children's taken out). */
function summariseTrace(trace: { traceEvents: TraceEvent[] }): string {
  const events = trace.traceEvents;
  const main = events.find((e) => e.name === 'thread_name' && e.args?.name === 'CrRendererMain');
  if (!main) return 'no renderer main thread in the trace';
  const spans = events
    .filter((e) => e.pid === main.pid && e.tid === main.tid && e.ph === 'X' && (e.dur ?? 0) > 0)
    .sort((a, b) => a.ts - b.ts || b.dur! - a.dur!);
  const self = new Map<string, { ms: number; count: number }>();
  const stack: Array<{ e: TraceEvent; end: number; child: number }> = [];
  const close = (until: number) => {
    while (stack.length > 0 && stack[stack.length - 1]!.end <= until) {
      const top = stack.pop()!;
      const entry = self.get(top.e.name) ?? { ms: 0, count: 0 };
      entry.ms += (top.e.dur! - top.child) / 1000;
      entry.count++;
      self.set(top.e.name, entry);
      if (stack.length > 0) stack[stack.length - 1]!.child += top.e.dur!;
    }
  };
  let busy = 0;
  for (const e of spans) {
    close(e.ts);
    if (stack.length === 0) busy += e.dur!;
    stack.push({ e, end: e.ts + e.dur!, child: 0 });
  }
  close(Number.POSITIVE_INFINITY);
  const top = [...self].sort((a, b) => b[1].ms - a[1].ms).slice(0, 16);
  return `main thread busy ${(busy / 1000).toFixed(0)} ms; self time by trace event:\n${top
    .map(([name, { ms, count }]) => `  ${ms.toFixed(0).padStart(7)} ms  ${String(count).padStart(6)}×  ${name}`)
    .join('\n')}`;
}

interface CpuProfile {
  nodes: Array<{
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  }>;
  samples: number[];
  timeDeltas: number[];
}

/** JS self time by function (unminified bundles name them; see --pages). */
function summariseProfile(profile: CpuProfile): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const frame = byId.get(profile.samples[i]!)!.callFrame;
    const file = frame.url.slice(frame.url.lastIndexOf('/') + 1);
    const name = `${frame.functionName || '(anonymous)'}${file ? ` ${file}:${frame.lineNumber + 1}` : ''}`;
    self.set(name, (self.get(name) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  }
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 30);
  return `JS self time by function:\n${top.map(([name, ms]) => `  ${ms.toFixed(0).padStart(7)} ms  ${name}`).join('\n')}`;
}

async function main(): Promise<void> {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM} (apt-get install chromium)`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // A page fulfilled by the bench (--pages) has no address of its own, so chromium would take it for a public
    // site and refuse its WebSockets to 127.0.0.1 (local network access checks).
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--enable-precise-memory-info',
      '--disable-features=LocalNetworkAccessChecks',
    ],
  });
  const rows: string[] = [];
  try {
    const variants = PAGES.length > 0 ? PAGES : [{ name: '', dir: '' }];
    for (let round = 0; round < ROUNDS; round++)
      for (const variant of variants) rows.push(...(await run(browser, variant.name, variant.dir)));
  } finally {
    await browser.close();
  }
  const label = PAGES.length > 0 ? '| page ' : '';
  process.stdout.write(
    `${label}| phase | API done | page shows it | page fps | frame gap p95 / max | long tasks | longest | long total | pod events shown | event → DOM p50 / p95 / max | page JS heap |\n${label ? '|---' : ''}|---|---|---|---|---|---|---|---|---|---|---|\n${rows.join('\n')}\n`,
  );
}

/** The three phases against a fresh server, with the page's files from `dir` (the server's own when ''). */
async function run(browser: Browser, name: string, dir: string): Promise<string[]> {
  const server = await spawnServer(['--nodes', String(NODES), '--stop-delay', '0s']);
  const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
  try {
    const page = await context.newPage();
    await page.addInitScript(PAGE_PROBE);
    page.on('pageerror', (err) => process.stderr.write(`page error: ${err.stack ?? err.message}\n`));
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning')
        process.stderr.write(`page console ${m.type()}: ${m.text()}\n`);
    });
    if (dir)
      await page.route(
        (url) => url.pathname.startsWith('/sim/ui/'),
        async (route) => {
          const file = new URL(route.request().url()).pathname.slice('/sim/ui/'.length) || 'index.html';
          if (file.includes('/') || file.includes('..')) return route.fulfill({ status: 404 });
          const body = await readFile(join(dir, file)).catch(() => undefined);
          if (!body) return route.fulfill({ status: 404 });
          return route.fulfill({ body, contentType: CONTENT_TYPES[extname(file)] ?? 'application/octet-stream' });
        },
      );
    let recording: Recording | undefined;
    const startRecording = async () => {
      if (PROFILE_DIR) recording = await record(browser, page);
    };
    const stopRecording = async (phase: string) => {
      if (!recording) return;
      const file = join(PROFILE_DIR, `${name || 'page'}-${phase}`);
      process.stderr.write(`--- ${name || 'page'}, ${phase} (${file}.json) ---\n${await recording.stop(file)}\n`);
      recording = undefined;
    };
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
    const prefix = name ? `| ${name} ` : '';
    const report = (phase: string, start: number, apiAt: number, pageAt: number, probe: Probe) => {
      const seconds = (pageAt - start) / 1000;
      const long = probe.longTasks;
      const lat = probe.latencies;
      rows.push(
        `${prefix}| ${phase} | ${((apiAt - start) / 1000).toFixed(1)} s | ${seconds.toFixed(1)} s | ${(probe.frames.length / seconds).toFixed(0)} | ${ms(quantile(probe.frames, 0.95))} / ${ms(Math.max(0, ...probe.frames))} | ${long.length} | ${ms(Math.max(0, ...long))} | ${ms(long.reduce((a, b) => a + b, 0))} | ${lat.length} | ${ms(quantile(lat, 0.5))} / ${ms(quantile(lat, 0.95))} / ${ms(Math.max(0, ...lat))} | ${(probe.heap / 2 ** 20).toFixed(0)} MiB |`,
      );
      process.stderr.write(`${rows[rows.length - 1]}\n`);
    };

    await startRecording();
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
    await stopRecording('create');

    await startRecording();
    await takeProbe(page);
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
        async () => ({
          readyNew: await readyInLanes(`${newRs}-`),
          lanePods: await lanePods(),
          header: await page.textContent('header.top'),
        }),
      ).then((t) => (pageAt = t)),
    ]);
    report('rolling update (maxSurge 25%, maxUnavailable 25%)', start, apiAt, pageAt, await takeProbe(page));
    await stopRecording('rollout');

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
    await startRecording();
    await takeProbe(page);
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
    await stopRecording('node-failure');

    return rows;
  } finally {
    await context.close();
    await server.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
