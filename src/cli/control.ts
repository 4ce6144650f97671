import { ApiError } from '../api/errors.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { connectionFetch, errorOf, fetchTransport, HttpClient, type HttpTransport } from '../client/http.js';
import { parseDuration, wallClock } from '../clock/clock.js';
import { findServer, type FoundServer, type RemoteFlags } from './remote.js';

/**
 * `sim clock` and `sim node`: the simulator's own controls (/sim/v1) and node registration, on a running server
 * found as kubectl would find it (remote.ts). Each prints one line saying what happened, and fails with one line
 * saying why.
 */
export class CommandFailure extends Error {}

interface Session {
  found: FoundServer;
  http: HttpTransport;
  client: HttpClient;
}

async function connect(flags: RemoteFlags): Promise<Session> {
  let found: FoundServer;
  try {
    found = findServer(flags, true)!;
  } catch (err) {
    throw new CommandFailure((err as Error).message);
  }
  const base = found.connection.server.replace(/\/$/, '');
  const fetchFn = await connectionFetch(found.connection);
  const http = fetchTransport(base, fetchFn);
  const reachable: HttpTransport = async (request) => {
    try {
      return await http(request);
    } catch (err) {
      // fetch says only "fetch failed"; its cause says why (refused, a certificate it cannot verify …).
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why =
        cause?.code === 'ECONNREFUSED'
          ? 'connection refused: is sim serve running?'
          : (cause?.message ?? (err as Error).message);
      throw new CommandFailure(`cannot reach ${base} (${found.from}): ${why}`);
    }
  };
  return { found, http: reachable, client: new HttpClient(base, reachable, fetchFn) };
}

async function simCall(
  s: Session,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<Record<string, unknown>> {
  const reply = await s.http({ method, path, body: body === undefined ? undefined : JSON.stringify(body) });
  if (reply.status === 404 && !reply.contentType.includes('json'))
    throw new CommandFailure(`${s.found.connection.server} is not a kube-sim server (${method} ${path}: 404)`);
  if (reply.status < 200 || reply.status >= 300) {
    const err = errorOf(reply, `${method} ${path}`);
    if (err.code === 404 && path.startsWith('/sim/') && /could not find the requested resource/.test(err.message))
      throw new CommandFailure(`${s.found.connection.server} does not serve ${path}: is it a kube-sim server?`);
    if (err.code === 401)
      throw new CommandFailure(
        `${s.found.connection.server}: 401 Unauthorized: give a token (--token, or a kubeconfig with one)`,
      );
    throw new CommandFailure(err.message);
  }
  return JSON.parse(reply.text) as Record<string, unknown>;
}

/** `sim clock`: the cluster's time and whether it is virtual. */
export async function clockNow(flags: RemoteFlags): Promise<string> {
  const s = await connect(flags);
  const state = await simCall(s, 'GET', '/sim/v1/clock');
  return `${state.now} (${state.mode} clock)`;
}

/** `sim clock advance 5m`: moves a virtual clock on; answers once the work due by then has run. */
export async function clockAdvance(flags: RemoteFlags, by: string): Promise<string> {
  try {
    parseDuration(by);
  } catch {
    throw new CommandFailure(`"${by}" is not a duration (e.g. 90s, 5m, 1h30m, 7d)`);
  }
  const s = await connect(flags);
  const before = await simCall(s, 'GET', '/sim/v1/clock');
  if (before.mode !== 'virtual')
    throw new CommandFailure(
      `the clock of ${s.found.connection.server} is real: time passes by itself (start sim serve with --clock virtual to move it)`,
    );
  const after = await simCall(s, 'POST', '/sim/v1/clock/advance', { by });
  return `${after.now} (virtual clock, advanced ${by} from ${before.now})`;
}

/** `sim node fail|recover NAME`: stops or restarts a simulated node's kubelet. */
export async function nodeFault(flags: RemoteFlags, action: 'fail' | 'recover', name: string): Promise<string> {
  const s = await connect(flags);
  await simCall(s, 'POST', `/sim/v1/nodes/${encodeURIComponent(name)}/${action}`, {});
  return action === 'fail'
    ? `node ${name} failed: its kubelet stopped (no heartbeats, its pods stop progressing); after 50 s of silence the node goes NotReady and is tainted unreachable, and its pods are evicted 300 s later (sim node recover ${name} brings it back)`
    : `node ${name} recovered: its kubelet runs again and reports Ready`;
}

export interface NodeAddOptions {
  capacity?: string;
  label?: string[];
  taint?: string[];
}

/** "key=value:Effect", "key:Effect" → a taint, as kubectl taint reads them. */
export function parseTaint(text: string): Record<string, string> {
  const m = /^([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$/.exec(text);
  if (!m) throw new CommandFailure(`--taint "${text}": expected key[=value]:NoSchedule|PreferNoSchedule|NoExecute`);
  return { key: m[1]!, ...(m[2] ? { value: m[2] } : {}), effect: m[3]! };
}

function parsePairs(flag: string, items: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of items.flatMap((i) => i.split(','))) {
    const part = item.trim();
    if (part === '') continue;
    const eq = part.indexOf('=');
    if (eq <= 0) throw new CommandFailure(`${flag}: expected name=value, got "${part}"`);
    out[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return out;
}

/** The next free node-N after the highest one there is. */
function nextNodeName(nodes: readonly KubeObject[]): string {
  let highest = 0;
  for (const n of nodes) {
    const m = /^node-(\d+)$/.exec(n.metadata.name ?? '');
    if (m) highest = Math.max(highest, Number(m[1]));
  }
  return `node-${highest + 1}`;
}

function ready(node: KubeObject): string | undefined {
  const conditions = isPlainObject(node.status) && Array.isArray(node.status.conditions) ? node.status.conditions : [];
  const c = conditions.find((x) => isPlainObject(x) && x.type === 'Ready') as { status?: string } | undefined;
  return c?.status;
}

/**
 * `sim node add [NAME]`: registers a Node as a joining kubelet would; the server's node simulator adopts it (labels,
 * pod CIDR, Lease, status). Waits briefly for it to report Ready and says so, or says that nothing adopted it.
 */
export async function nodeAdd(flags: RemoteFlags, name: string | undefined, options: NodeAddOptions): Promise<string> {
  const capacity = options.capacity ? parsePairs('--capacity', [options.capacity]) : {};
  const labels = parsePairs('--label', options.label ?? []);
  const taints = (options.taint ?? []).map(parseTaint);
  const s = await connect(flags);
  const nodeName = name ?? nextNodeName((await s.client.list(Resources.nodes, undefined)).items);
  const node: KubeObject = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: nodeName, ...(Object.keys(labels).length > 0 ? { labels } : {}) },
    ...(taints.length > 0 ? { spec: { taints } } : {}),
    ...(Object.keys(capacity).length > 0 ? { status: { capacity, allocatable: capacity } } : {}),
  };
  try {
    await s.client.create(Resources.nodes, undefined, node);
  } catch (err) {
    throw new CommandFailure(err instanceof ApiError ? err.message : String(err));
  }
  // A virtual clock moves only when told: let the work due now (the kubelet's registration) run.
  const clock = await simCall(s, 'GET', '/sim/v1/clock');
  for (let i = 0; i < 50; i++) {
    if (clock.mode === 'virtual') await simCall(s, 'POST', '/sim/v1/clock/advance', { by: '0s' });
    const current = await s.client.get(Resources.nodes, undefined, nodeName);
    if (ready(current) === 'True') {
      const alloc =
        isPlainObject(current.status) && isPlainObject(current.status.allocatable) ? current.status.allocatable : {};
      const shown = ['cpu', 'memory', 'pods']
        .filter((k) => alloc[k] !== undefined)
        .map((k) => `${k}=${String(alloc[k])}`)
        .join(', ');
      return `node/${nodeName} added and Ready (${shown})`;
    }
    await new Promise<void>((resolve) => wallClock.setTimer(100, resolve));
  }
  return `node/${nodeName} created, but no kubelet reported it Ready within 5 s (does the server simulate nodes? sim serve --nodes 0 runs none)`;
}
