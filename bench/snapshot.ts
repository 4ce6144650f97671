/**
 * Snapshots (issue 18): a `sim serve --nodes N --clock virtual` cluster with D Deployments of R replicas (scheduled,
 * run by the kubelets) and a tenth of its nodes labelled pool=spot is
 * - exported: `sim snapshot export --server URL` as YAML and as `-o json`, wall time and file size;
 * - booted: `sim serve --snapshot FILE` from spawn until it listens (every object loaded, every node's kubelet
 *   registered), for both files, with the server's RSS after a full GC;
 * - replayed: `sim replay` of a what-if scenario on the JSON snapshot — the spot pool fails, its pods are evicted
 *   after 5 min and rescheduled — wall time for the whole run.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { spawnServer, trackChild, type ServerUsage } from './server-process.js';
import { fmt, mib, table } from './stats.js';

const SIM = fileURLToPath(new URL('../../bin/sim.js', import.meta.url));

export interface SnapshotOptions {
  nodes: number;
  deployments: number;
  replicas: number;
}

export interface SnapshotFigures extends SnapshotOptions {
  pods: number;
  objects: number;
  export: Record<'yaml' | 'json', { ms: number; bytes: number }>;
  boot: Record<'yaml' | 'json', { ms: number; memory: ServerUsage }>;
  replay: { ms: number; exitCode: number | null; summary: string };
}

async function call(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  type = 'application/json',
): Promise<unknown> {
  const res = await fetch(url + path, {
    method,
    headers: { 'content-type': type, accept: 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as unknown;
}

/** Runs `sim ARGS` with stdout to `out` (or collected); resolves with the wall time and exit code. */
function runSim(
  args: string[],
  out?: string,
): Promise<{ ms: number; code: number | null; stdout: string; stderr: string }> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SIM, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    trackChild(child);
    let stdout = '';
    let stderr = '';
    if (out) child.stdout!.pipe(createWriteStream(out));
    else child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.once('error', reject);
    child.once('close', (code) => resolve({ ms: performance.now() - start, code, stdout, stderr }));
  });
}

export async function measureSnapshot(options: SnapshotOptions): Promise<SnapshotFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-bench-snapshot-'));
  try {
    const source = await spawnServer(['--nodes', String(options.nodes), '--clock', 'virtual', '--seed', '1']);
    const pods = options.deployments * options.replicas;
    let objects = 0;
    let exported: SnapshotFigures['export'];
    try {
      const url = source.url;
      const spot = Math.max(1, Math.floor(options.nodes / 10));
      for (let i = 0; i < spot; i += 100)
        await Promise.all(
          Array.from({ length: Math.min(100, spot - i) }, (_, j) =>
            call(
              url,
              'PATCH',
              `/api/v1/nodes/node-${options.nodes - i - j}`,
              { metadata: { labels: { pool: 'spot' } } },
              'application/merge-patch+json',
            ),
          ),
        );
      for (let d = 0; d < options.deployments; d++)
        await call(url, 'POST', '/apis/apps/v1/namespaces/default/deployments', {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name: `app-${d}` },
          spec: {
            replicas: options.replicas,
            selector: { matchLabels: { app: `app-${d}` } },
            template: {
              metadata: { labels: { app: `app-${d}` } },
              spec: {
                containers: [
                  { name: 'app', image: 'nginx:1.27', resources: { requests: { cpu: '100m', memory: '128Mi' } } },
                ],
              },
            },
          },
        });
      // Virtual time stands still: move it until every Deployment is available (the scheduler and kubelets run).
      for (let i = 0; i < 600; i++) {
        await call(url, 'POST', '/sim/v1/clock/advance', { by: '1s' });
        const list = (await call(url, 'GET', '/apis/apps/v1/namespaces/default/deployments')) as {
          items: Array<{ status?: { availableReplicas?: number } }>;
        };
        if (list.items.every((d) => d.status?.availableReplicas === options.replicas)) break;
      }
      const exportOf = async (output: 'yaml' | 'json'): Promise<{ ms: number; bytes: number }> => {
        const file = join(dir, `cluster.${output}.yaml`);
        const run = await runSim(['snapshot', 'export', '--server', url, '-o', output], file);
        if (run.code !== 0) throw new Error(`sim snapshot export -o ${output} exited with ${run.code}: ${run.stderr}`);
        objects = Number(/snapshot: ([\d,]+) objects/.exec(run.stderr)?.[1]?.replaceAll(',', '') ?? 0);
        return { ms: run.ms, bytes: statSync(file).size };
      };
      exported = { yaml: await exportOf('yaml'), json: await exportOf('json') };
    } finally {
      await source.stop();
    }
    const bootOf = async (output: 'yaml' | 'json'): Promise<{ ms: number; memory: ServerUsage }> => {
      const start = performance.now();
      const server = await spawnServer(['--snapshot', join(dir, `cluster.${output}.yaml`)]);
      const ms = performance.now() - start;
      const memory = await server.usage(true);
      await server.stop();
      return { ms, memory };
    };
    const boot = { yaml: await bootOf('yaml'), json: await bootOf('json') };
    const scenario = join(dir, 'what-if.yaml');
    writeFileSync(
      scenario,
      `name: the spot pool fails
snapshot: cluster.json.yaml
steps:
  - fault: {type: node-fail, selector: pool=spot}
  - advance: 6m
  - waitFor:
      count: {kind: Pod, where: {'{.status.conditions[?(@.type=="Ready")].status}': "True", '{.metadata.deletionTimestamp}': null}}
      equals: ${pods}
      timeout: 10m
`,
    );
    const replay = await runSim(['replay', '--no-changes', scenario]);
    const summary =
      replay.stdout
        .trim()
        .split('\n')
        .find((l) => /^(PASS|FAIL) /.test(l)) ?? '';
    return {
      ...options,
      pods,
      objects,
      export: exported,
      boot,
      replay: { ms: replay.ms, exitCode: replay.code, summary },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printSnapshot(f: SnapshotFigures): void {
  console.log(
    `\nsnapshots: ${f.nodes.toLocaleString('en-US')} nodes, ${f.deployments} Deployments × ${f.replicas} = ${f.pods.toLocaleString('en-US')} pods`,
  );
  console.log(
    table([
      ['', 'export', 'file', 'boot (sim serve --snapshot to listening)', 'RSS after boot'],
      ...(['yaml', 'json'] as const).map((o) => [
        `-o ${o}`,
        `${fmt(f.export[o].ms / 1000, 1)} s`,
        mib(f.export[o].bytes),
        `${fmt(f.boot[o].ms / 1000, 1)} s`,
        mib(f.boot[o].memory.rss),
      ]),
    ]),
  );
  console.log(
    `replay of a what-if on the JSON snapshot (spot pool fails, pods rescheduled): ${fmt(f.replay.ms / 1000, 1)} s, exit ${f.replay.exitCode}: ${f.replay.summary}`,
  );
}
