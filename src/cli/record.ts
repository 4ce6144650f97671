import { writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { yaml } from '../api/yaml.js';
import { parseDuration, wallClock, type TimerHandle } from '../clock/clock.js';
import type { KubeObject } from '../api/types.js';
import { connectionFetch, fetchTransport, HttpClient } from '../client/http.js';
import type { Connection } from '../client/kubeconfig.js';
import { ApiError } from '../api/errors.js';
import { ApiResources, type ApiResource } from '../scenario/resources.js';
import { buildTrace, changedBy, type SeenChange } from '../scenario/trace.js';
import type { RemoteFlags } from './remote.js';
import { readCluster, snapshotText, sourceConnection, writeAll } from './snapshot.js';
import { createWriteStream } from 'node:fs';

/**
 * `sim record`: a snapshot of the cluster, then a watch of the resources chosen for --duration (or until Ctrl-C),
 * written as a trace — a scenario (scenario/trace.ts) that starts from the snapshot and re-applies the changes
 * users made at their times, ending with how the source cluster looked.
 */
export interface RecordFlags extends RemoteFlags {
  duration: string;
  out: string;
  resources?: string;
}

export const DEFAULT_RECORDED = [
  'nodes',
  'pods',
  'deployments',
  'replicasets',
  'statefulsets',
  'daemonsets',
  'jobs',
  'cronjobs',
  'services',
  'configmaps',
  'poddisruptionbudgets',
  'horizontalpodautoscalers',
];

function key(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
}

/** The cluster's time: a kube-sim server's own clock (virtual or not), read every 100 ms; else the wall clock. */
async function clusterClock(http: ReturnType<typeof fetchTransport>): Promise<{ now(): number; stop(): void }> {
  const read = async (): Promise<number | undefined> => {
    try {
      const reply = await http({ method: 'GET', path: '/sim/v1/clock' });
      return reply.status === 200 ? Date.parse((JSON.parse(reply.text) as { now: string }).now) : undefined;
    } catch {
      return undefined;
    }
  };
  let current = await read();
  if (current === undefined) return { now: () => wallClock.now(), stop: () => undefined };
  let timer: TimerHandle | undefined;
  let stopped = false;
  const poll = (): void => {
    if (stopped) return;
    timer = wallClock.setTimer(100, () => {
      void read().then((t) => {
        current = t ?? current;
        poll();
      });
    });
  };
  poll();
  const stop = (): void => {
    stopped = true;
    timer?.cancel();
  };
  return { now: () => current!, stop };
}

/** When a user's change was written, by the server's clock: its field manager entry's time (to the second). */
function writtenAt(change: SeenChange): number | undefined {
  const by = changedBy(change);
  if (!by.user || change.type === 'DELETED') return undefined;
  const entries = (change.object.metadata.managedFields ?? []) as Array<{ manager?: string; time?: string }>;
  const times = entries.filter((e) => e.manager === by.manager && e.time).map((e) => Date.parse(e.time!));
  return times.length > 0 ? Math.max(...times) : undefined;
}

/** Watches one resource from a list's resourceVersion, again after each close; a 410 lists it again. */
function follow(
  client: HttpClient,
  resource: ApiResource,
  cache: Map<string, KubeObject>,
  from: string,
  seen: (type: SeenChange['type'], obj: KubeObject, previous: KubeObject | undefined) => void,
  warn: (message: string) => void,
): { stop(): void } {
  let stopped = false;
  let handle: { stop(): void } | undefined;
  let resourceVersion = from;
  const start = (): void => {
    if (stopped) return;
    handle = client.watch(
      resource.gvr,
      undefined,
      { resourceVersion },
      (type, obj) => {
        if (type === 'BOOKMARK') {
          resourceVersion = obj.metadata.resourceVersion ?? resourceVersion;
          return;
        }
        const full = { ...obj, apiVersion: resource.apiVersion, kind: resource.kind };
        resourceVersion = obj.metadata.resourceVersion ?? resourceVersion;
        const previous = cache.get(key(full));
        if (type === 'DELETED') cache.delete(key(full));
        else cache.set(key(full), full);
        seen(type, full, previous);
      },
      (error) => {
        if (stopped) return;
        if (error instanceof ApiError && error.code === 410) {
          warn(
            `${resource.gvr.resource}: the watch expired (410): changes since resourceVersion ${resourceVersion} are lost; watching from now`,
          );
          void listAll(client, resource).then(({ items, resourceVersion: rv }) => {
            cache.clear();
            for (const item of items) cache.set(key(item), item);
            resourceVersion = rv;
            start();
          });
          return;
        }
        wallClock.setTimer(error ? 1000 : 0, start);
      },
    );
  };
  start();
  return {
    stop: () => {
      stopped = true;
      handle?.stop();
    },
  };
}

async function listAll(
  client: HttpClient,
  resource: ApiResource,
): Promise<{ items: KubeObject[]; resourceVersion: string }> {
  const items: KubeObject[] = [];
  let token: string | undefined;
  let resourceVersion = '';
  do {
    const page = await client.list(resource.gvr, undefined, { limit: 500, continue: token });
    resourceVersion ||= page.metadata?.resourceVersion ?? '';
    for (const item of page.items) items.push({ ...item, apiVersion: resource.apiVersion, kind: resource.kind });
    token = page.metadata?.continue || undefined;
  } while (token);
  return { items, resourceVersion };
}

/** `sim record`: writes OUT (the trace) and OUT's .snapshot.yaml beside it. */
export async function record(flags: RecordFlags): Promise<void> {
  const log = (line: string): void => void process.stderr.write(`${line}\n`);
  let source: { connection: Connection; context?: string };
  let durationMs: number;
  try {
    source = sourceConnection(flags);
    durationMs = parseDuration(flags.duration);
  } catch (err) {
    log(`sim record: ${(err as Error).message}`);
    process.exitCode = 2;
    return;
  }
  const connection = source.connection;
  const baseUrl = connection.server.replace(/\/$/, '');
  const fetchFn = await connectionFetch(connection);
  const http = fetchTransport(baseUrl, fetchFn);
  const client = new HttpClient(baseUrl, http, fetchFn);
  const snapshotFile = join(dirname(flags.out), `${basename(flags.out).replace(/\.ya?ml$/, '')}.snapshot.yaml`);
  let clock: Awaited<ReturnType<typeof clusterClock>>;
  const changes: SeenChange[] = [];
  const watches: Array<{ stop(): void }> = [];
  let start: number;
  try {
    const resources = new ApiResources(http);
    await resources.load();
    const wanted = (flags.resources ?? DEFAULT_RECORDED.join(','))
      .split(',')
      .map((r) => r.trim())
      .filter((r) => r !== '')
      .map((r) => resources.resolve(r));
    clock = await clusterClock(http);
    // Lists first, then the snapshot: a change between the two is in the watch, and applies to its object.
    const lists = await Promise.all(wanted.map((r) => listAll(client, r)));
    const snapshot = await readCluster(connection, { context: source.context, progress: log });
    start = Date.parse(snapshot.header.time);
    const stream = createWriteStream(snapshotFile);
    await writeAll(stream, snapshotText(snapshot, snapshot.objects.length > 5000 ? 'json' : 'yaml'));
    await new Promise<void>((resolve, reject) => stream.end((err?: Error | null) => (err ? reject(err) : resolve())));
    wanted.forEach((resource, i) => {
      const cache = new Map(lists[i]!.items.map((o) => [key(o), o]));
      watches.push(
        follow(
          client,
          resource,
          cache,
          lists[i]!.resourceVersion,
          (type, object, previous) => {
            const change: SeenChange = { at: clock.now(), type, object, ...(previous ? { previous } : {}) };
            change.at = Math.max(writtenAt(change) ?? change.at, start);
            changes.push(change);
          },
          log,
        ),
      );
    });
    log(
      `recording ${wanted.map((r) => r.gvr.resource).join(', ')} from ${baseUrl} for ${flags.duration} (Ctrl-C stops and writes the trace)…`,
    );
  } catch (err) {
    log(`sim record: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
    return;
  }
  await new Promise<void>((resolve) => {
    // A plain timer, not wallClock's (which does not hold the process open): it is what keeps `sim record` running.
    const timer = setTimeout(resolve, durationMs);
    const onSignal = (): void => {
      clearTimeout(timer);
      resolve();
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });
  for (const w of watches) w.stop();
  const end = Math.max(clock.now(), start);
  clock.stop();
  const pods = await listAll(client, podsResource());
  changes.sort((a, b) => a.at - b.at);
  const trace = buildTrace({
    source: baseUrl,
    snapshotFile: basename(snapshotFile),
    start,
    end,
    changes,
    finalPods: pods.items,
  });
  writeFileSync(
    flags.out,
    `# yaml-language-server: $schema=https://kube-sim.dev/schemas/scenario.schema.json\n# Recorded by sim record: replay it with sim replay ${basename(flags.out)}\n${yaml().stringify(trace, { lineWidth: 0 })}`,
  );
  log(
    `sim record: ${changes.length} changes seen, ${trace.recorded.userChanges} by users; wrote ${flags.out} (and ${snapshotFile})`,
  );
}

function podsResource(): ApiResource {
  return {
    gvr: { group: '', version: 'v1', resource: 'pods' },
    apiVersion: 'v1',
    kind: 'Pod',
    namespaced: true,
    verbs: ['list'],
    names: ['pods'],
  };
}
