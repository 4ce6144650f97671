import { yaml } from '../api/yaml.js';
import { wallClock, rfc3339 } from '../clock/clock.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import {
  DROPPED_FIELDS,
  forSnapshot,
  groupResource,
  SECRETS_SKIPPED,
  SKIPPED_RESOURCES,
  SNAPSHOT_API_VERSION,
  SNAPSHOT_KIND,
  skippedObject,
  snapshotOrder,
  type SkippedEntry,
  type Snapshot,
  type SnapshotHeader,
} from '../api/snapshot.js';
import { connectionFetch, errorOf, fetchTransport, resourcePath, type HttpTransport } from '../client/http.js';
import { kubeconfigFiles, readKubeconfigFiles, type Connection } from '../client/kubeconfig.js';
import { ApiResources, type ApiResource } from '../scenario/resources.js';
import { findServer, type RemoteFlags } from './remote.js';

/**
 * `sim snapshot export`: reads any cluster through its API — discovery, then every listable resource page by page
 * (limit/continue) — and writes what a restore needs (api/snapshot.ts decides what is dropped and skipped).
 */
export interface ReadOptions {
  /** Only these namespaces' namespaced objects (cluster-scoped objects are all read). */
  namespaces?: string[];
  includeSecrets?: boolean;
  keepManagedFields?: boolean;
  /** Objects per list request (default 500, as kubectl's --chunk-size). */
  pageSize?: number;
  /** A line of progress (stderr). */
  progress?: (line: string) => void;
}

export interface ExportFlags extends RemoteFlags, ReadOptions {
  namespace?: string[];
  output: 'yaml' | 'json';
}

/** The server to read: --server or --kubeconfig (and --context), else the kubeconfig kubectl reads, any context. */
export function sourceConnection(flags: RemoteFlags): { connection: Connection; context?: string } {
  if (flags.server !== undefined || flags.kubeconfig !== undefined) {
    const found = findServer(flags, false)!;
    return { connection: found.connection, context: flags.context };
  }
  const read = readKubeconfigFiles(kubeconfigFiles(), flags.context);
  if (!read) throw new Error('give --kubeconfig FILE (and --context NAME) or --server URL: no kubeconfig was found');
  return { connection: read.connection, context: read.context };
}

async function getJson<T>(http: HttpTransport, path: string): Promise<T> {
  const reply = await http({ method: 'GET', path });
  if (reply.status !== 200) throw errorOf(reply, `GET ${path}`);
  return JSON.parse(reply.text) as T;
}

/** Groups served by another server through the aggregator (metrics.k8s.io): their objects are not stored state. */
async function aggregatedGroupVersions(http: HttpTransport): Promise<Set<string>> {
  const out = new Set<string>();
  try {
    const list = await getJson<{ items: KubeObject[] }>(http, '/apis/apiregistration.k8s.io/v1/apiservices');
    for (const svc of list.items) {
      const spec = isPlainObject(svc.spec) ? svc.spec : {};
      if (spec.service !== null && spec.service !== undefined) out.add(`${spec.group}/${spec.version}`);
    }
  } catch {
    // no aggregator, or not allowed to list it: every group is taken as the server's own
  }
  return out;
}

/** The resources to read: listable, not skipped (api/snapshot.ts), one version of each (the preferred). */
function resourcesToRead(
  all: readonly ApiResource[],
  aggregated: ReadonlySet<string>,
  includeSecrets: boolean,
): { read: ApiResource[]; skipped: SkippedEntry[] } {
  const seen = new Set<string>();
  const read: ApiResource[] = [];
  const skipped: SkippedEntry[] = [];
  for (const r of all) {
    const gr = groupResource(r.gvr.group, r.gvr.resource);
    if (seen.has(gr)) continue;
    seen.add(gr);
    if (!r.verbs.includes('list')) continue;
    if (aggregated.has(r.apiVersion)) continue;
    const why = SKIPPED_RESOURCES[gr] ?? (gr === 'secrets' && !includeSecrets ? SECRETS_SKIPPED : undefined);
    if (why !== undefined) {
      skipped.push({ resource: gr, why });
      continue;
    }
    read.push(r);
  }
  return { read, skipped };
}

/**
 * Reads a cluster into a snapshot: its objects (sorted: CRDs, namespaces, then by kind and name) and a header with
 * the source and the time (the server's own clock when it is a kube-sim one, else now).
 */
export async function readCluster(
  connection: Connection,
  options: ReadOptions & { context?: string } = {},
): Promise<Snapshot> {
  const progress = options.progress ?? (() => undefined);
  const baseUrl = connection.server.replace(/\/$/, '');
  const http = fetchTransport(baseUrl, await connectionFetch(connection));
  let version: string | undefined;
  try {
    version = (await getJson<{ gitVersion?: string }>(http, '/version')).gitVersion;
  } catch (err) {
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    throw new Error(`cannot reach ${baseUrl}: ${(err as Error).message}${cause ? `: ${cause}` : ''}`);
  }
  let time = wallClock.now();
  try {
    time = Date.parse((await getJson<{ now: string }>(http, '/sim/v1/clock')).now);
  } catch {
    // not a kube-sim server: its time is the wall clock's
  }
  const resources = new ApiResources(http);
  await resources.load();
  const { read, skipped } = resourcesToRead(
    resources.all(),
    await aggregatedGroupVersions(http),
    options.includeSecrets === true,
  );
  const namespaces = options.namespaces?.length ? [...new Set(options.namespaces)] : undefined;
  const pageSize = options.pageSize ?? 500;
  const objects: KubeObject[] = [];
  const started = wallClock.now();
  for (const resource of read) {
    const gr = groupResource(resource.gvr.group, resource.gvr.resource);
    const scopes = resource.namespaced && namespaces ? namespaces : [undefined];
    let count = 0;
    for (const namespace of scopes) {
      const items = await listAll(http, resource, namespace, pageSize, (n) =>
        progress(`  ${gr}: ${n.toLocaleString('en-US')} so far…`),
      );
      for (const item of items) {
        const obj: KubeObject = { ...item, apiVersion: resource.apiVersion, kind: resource.kind };
        if (gr === 'namespaces' && namespaces && !namespaces.includes(obj.metadata.name!)) continue;
        const why = skippedObject(gr, obj);
        if (why !== undefined) {
          const entry = skipped.find((e) => e.resource === gr && e.why === why);
          if (entry) entry.objects = (entry.objects ?? 0) + 1;
          else skipped.push({ resource: gr, objects: 1, why });
          continue;
        }
        objects.push(forSnapshot(obj, options));
        count++;
      }
    }
    if (count > 0) progress(`  ${gr}: ${count.toLocaleString('en-US')}`);
  }
  objects.sort(snapshotOrder);
  const header: SnapshotHeader = {
    apiVersion: SNAPSHOT_API_VERSION,
    kind: SNAPSHOT_KIND,
    time: rfc3339(time),
    source: {
      server: baseUrl,
      ...(options.context !== undefined ? { context: options.context } : {}),
      ...(version !== undefined ? { version } : {}),
      ...(namespaces ? { namespaces } : {}),
    },
    objects: objects.length,
    dropped: options.keepManagedFields
      ? DROPPED_FIELDS.filter((f) => !f.startsWith('metadata.managedFields'))
      : [...DROPPED_FIELDS],
    skipped,
  };
  progress(
    `snapshot: ${objects.length.toLocaleString('en-US')} objects of ${read.length} resources from ${baseUrl} in ${((wallClock.now() - started) / 1000).toFixed(1)} s`,
  );
  return { header, objects };
}

/**
 * Every object of a resource, page by page. A continue token that expired (410: the server compacted past the
 * list's resourceVersion) starts the list again, as kubectl would have to; twice in a row is an error.
 */
async function listAll(
  http: HttpTransport,
  resource: ApiResource,
  namespace: string | undefined,
  pageSize: number,
  progress: (n: number) => void,
): Promise<KubeObject[]> {
  for (let attempt = 0; ; attempt++) {
    const items: KubeObject[] = [];
    let token: string | undefined;
    let pages = 0;
    let expired = false;
    do {
      const q = new URLSearchParams({ limit: String(pageSize) });
      if (token) q.set('continue', token);
      const path = `${resourcePath(resource.gvr, namespace)}?${q}`;
      const reply = await http({ method: 'GET', path });
      if (reply.status === 410 && token && attempt === 0) {
        expired = true;
        break;
      }
      if (reply.status !== 200) throw errorOf(reply, `GET ${path}`);
      const list = JSON.parse(reply.text) as { items?: KubeObject[]; metadata?: { continue?: string } };
      for (const item of list.items ?? []) items.push(item);
      token = list.metadata?.continue || undefined;
      if (++pages % 20 === 0 && token) progress(items.length);
    } while (token);
    if (!expired) return items;
  }
}

/**
 * The snapshot as text, a piece at a time: the header, then one document per object — YAML, or with `json` one JSON
 * line per object (still a YAML stream, and far faster to read back: BENCHMARKS.md).
 */
export function* snapshotText(snapshot: Snapshot, output: 'yaml' | 'json'): Generator<string> {
  yield yaml().stringify(snapshot.header);
  for (const obj of snapshot.objects)
    yield output === 'json' ? `---\n${JSON.stringify(obj)}\n` : `---\n${yaml().stringify(obj)}`;
}

/** Writes pieces of text to a stream, waiting while it is full (a snapshot of a big cluster is hundreds of MB). */
export async function writeAll(stream: NodeJS.WritableStream, pieces: Iterable<string>): Promise<void> {
  let buffer: string[] = [];
  let size = 0;
  const flush = async (): Promise<void> => {
    if (buffer.length === 0) return;
    const text = buffer.join('');
    buffer = [];
    size = 0;
    if (!stream.write(text)) await new Promise<void>((resolve) => stream.once('drain', resolve));
  };
  for (const piece of pieces) {
    buffer.push(piece);
    size += piece.length;
    if (size >= 1 << 20) await flush();
  }
  await flush();
}

/** `sim snapshot export`: the snapshot on stdout, progress and the summary on stderr. */
export async function exportSnapshot(flags: ExportFlags): Promise<void> {
  let source: { connection: Connection; context?: string };
  try {
    source = sourceConnection(flags);
  } catch (err) {
    process.stderr.write(`sim snapshot export: ${(err as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  let snapshot: Snapshot;
  try {
    snapshot = await readCluster(source.connection, {
      context: source.context,
      namespaces: flags.namespace?.flatMap((n) => n.split(',')).filter((n) => n !== ''),
      includeSecrets: flags.includeSecrets,
      keepManagedFields: flags.keepManagedFields,
      pageSize: flags.pageSize,
      progress: (line) => process.stderr.write(`${line}\n`),
    });
  } catch (err) {
    process.stderr.write(`sim snapshot export: ${(err as Error).message}\n`);
    process.exitCode = 1;
    return;
  }
  await writeAll(process.stdout, snapshotText(snapshot, flags.output));
}
