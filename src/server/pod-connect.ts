import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { ApiError, Errors } from '../api/errors.js';
import { queryBool } from '../api/query-params.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import type { ServedCluster } from './served-cluster.js';
import type { ExecTarget, KubeletConnector, LogLine } from '../api/kubelet-connector.js';
import type { KindInfo } from '../registry/types.js';
import { ExecInputQueue } from './exec-input.js';

/**
 * The connect subresources of pods: pods/log (plain text, streamed with follow=true) and pods/exec (WebSocket,
 * the v5.channel.k8s.io / v4.channel.k8s.io subprotocols kubectl 1.30+ speaks). The API server checks the
 * request against the pod, as kube-apiserver's LogLocation/ExecLocation do, then hands it to the node's kubelet.
 */

type Query = Record<string, string | string[] | undefined>;

function one(query: Query, key: string): string | undefined {
  const v = query[key];
  return Array.isArray(v) ? v[v.length - 1] : v;
}

function flag(query: Query, key: string): boolean {
  return queryBool(query[key]);
}

function containerNames(pod: KubeObject, lists: string[]): string[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const names: string[] = [];
  for (const list of lists) {
    const items = spec[list];
    if (Array.isArray(items))
      for (const c of items) if (isPlainObject(c) && typeof c.name === 'string') names.push(c.name);
  }
  return names;
}

/** kube-apiserver's validateContainer: the only container by default, else the named one must exist. */
export function resolveContainer(pod: KubeObject, requested: string | undefined): string {
  const name = pod.metadata.name ?? '';
  if (requested === undefined || requested === '') {
    const containers = containerNames(pod, ['containers']);
    if (containers.length === 1) return containers[0]!;
    if (containers.length === 0) throw Errors.badRequest(`a container name must be specified for pod ${name}`);
    const all = containerNames(pod, ['initContainers', 'containers', 'ephemeralContainers']);
    throw Errors.badRequest(`a container name must be specified for pod ${name}, choose one of: [${all.join(' ')}]`);
  }
  if (!containerNames(pod, ['initContainers', 'containers', 'ephemeralContainers']).includes(requested)) {
    throw Errors.badRequest(`container ${requested} is not valid for pod ${name}`);
  }
  return requested;
}

/** What the API server answers when it cannot reach a node's kubelet. */
function kubeletUnreachable(pod: KubeObject, path: string): ApiError {
  const host =
    isPlainObject(pod.status) && typeof pod.status.hostIP === 'string'
      ? pod.status.hostIP
      : String((pod.spec as { nodeName?: string }).nodeName);
  return new ApiError(
    500,
    'InternalError',
    `Get "https://${host}:10250/${path}": dial tcp ${host}:10250: connect: connection refused`,
  );
}

function nodeName(pod: KubeObject): string {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return typeof spec.nodeName === 'string' ? spec.nodeName : '';
}

/** RFC 3339 with nanoseconds, as the container runtime stamps log lines. */
function nanoTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
}

function nonNegative(query: Query, key: string): number | undefined {
  const v = one(query, key);
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) {
    throw Errors.invalid('', 'PodLogOptions', '', [
      { reason: 'FieldValueInvalid', message: `Invalid value: ${v}: must be greater than or equal to 0`, field: key },
    ]);
  }
  return n;
}

/** GET pods/NAME/log: the container's lines as text/plain; with follow=true a chunked stream until it exits. */
export function podLog(
  cluster: ServedCluster,
  kubelet: KubeletConnector | undefined,
  info: KindInfo,
  namespace: string | undefined,
  name: string,
  query: Query,
  reply: FastifyReply,
): void {
  const pod = cluster.api.get(info, namespace, name);
  const container = resolveContainer(pod, one(query, 'container'));
  const tail = nonNegative(query, 'tailLines');
  const limitBytes = nonNegative(query, 'limitBytes');
  const sinceSeconds = nonNegative(query, 'sinceSeconds');
  const sinceTime = one(query, 'sinceTime');
  const timestamps = flag(query, 'timestamps');
  const send = (text: string): void => void reply.code(200).header('content-type', 'text/plain').send(text);
  // A pod that has no node yet has no logs anywhere: kube-apiserver answers with an empty body.
  if (nodeName(pod) === '') return send('');
  if (!kubelet) throw kubeletUnreachable(pod, `containerLogs/${namespace}/${name}/${container}`);
  const source = kubelet.logs(pod, container, flag(query, 'previous'));

  const now = cluster.clock.now();
  let since = -Infinity;
  if (sinceSeconds !== undefined) since = now - sinceSeconds * 1000;
  else if (sinceTime) since = Date.parse(sinceTime);
  let lines = source.lines().filter((l) => l.at >= since);
  if (tail !== undefined) lines = tail === 0 ? [] : lines.slice(-tail);
  let budget = limitBytes ?? Infinity;
  const render = (line: LogLine): string => {
    if (budget <= 0) return '';
    let text = `${timestamps ? `${nanoTimestamp(line.at)} ` : ''}${line.text}\n`;
    if (Buffer.byteLength(text) > budget) text = Buffer.from(text).subarray(0, budget).toString('utf8');
    budget -= Buffer.byteLength(text);
    return text;
  };
  const initial = lines.map(render).join('');
  if (!flag(query, 'follow') || !source.follow || budget <= 0) return send(initial);

  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/plain',
    'cache-control': 'no-cache, private',
    'transfer-encoding': 'chunked',
  });
  if (initial) res.write(initial);
  else res.flushHeaders();
  res.socket?.setNoDelay(true);
  let done = false;
  const finish = (): void => {
    if (done) return;
    done = true;
    unsubscribe();
    if (!res.writableEnded) res.end();
  };
  const unsubscribe = source.follow(
    (line) => {
      if (done) return;
      res.write(render(line));
      if (budget <= 0) finish();
    },
    () => finish(),
  );
  res.on('close', finish);
}

const SUBPROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io'];

/** The Status an exec ends with on the error channel (kubelet's remotecommand v4+ protocol). */
export function exitStatus(command: readonly string[], code: number): Record<string, unknown> {
  if (code === 0) return { metadata: {}, status: 'Success' };
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: error executing command [${command.join(' ')}], exit code ${code}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(code) }] },
  };
}

/**
 * Serves exec upgrades. Validation happens before the handshake so that errors reach kubectl as a Status
 * (kubectl falls back from WebSocket to SPDY on any non-101 answer, and prints the Status of the second try).
 */
export class ExecServer {
  private readonly wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => SUBPROTOCOLS.find((p) => protocols.has(p)) ?? false,
  });

  constructor(
    private readonly cluster: ServedCluster,
    private readonly kubelet: KubeletConnector | undefined,
  ) {}

  /** Handles one upgrade request for pods/NAME/exec; `reject` writes an HTTP error answer on the socket. */
  upgrade(
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    url: URL,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    reject: (err: ApiError, contentType?: string) => void,
  ): void {
    const pod = this.cluster.api.get(info, namespace, name);
    const params = url.searchParams;
    const container = resolveContainer(pod, params.get('container') ?? undefined);
    if (nodeName(pod) === '') throw Errors.badRequest(`pod ${name} does not have a host assigned`);
    const command = params.getAll('command');
    if (command.length === 0) throw Errors.badRequest('you must specify at least 1 command');
    const wants = (key: string): boolean => queryBool(params.getAll(key));
    const stdin = wants('stdin');
    const tty = wants('tty');
    if (!stdin && !wants('stdout') && !wants('stderr'))
      throw Errors.badRequest('you must specify at least one of stdin, stdout, stderr');
    if (!this.kubelet) throw kubeletUnreachable(pod, `exec/${namespace}/${name}/${container}`);
    let target: ExecTarget;
    try {
      target = this.kubelet.exec(pod, container);
    } catch (err) {
      // The kubelet's own refusals come back as plain text, which kubectl shows as "unable to upgrade connection: …".
      if (err instanceof ApiError && err.code === 500) return reject(err, 'text/plain');
      throw err;
    }
    const upgrade = String(req.headers.upgrade ?? '').toLowerCase();
    if (upgrade !== 'websocket') {
      throw Errors.badRequest(
        `kube-sim serves exec over WebSocket only (subprotocols ${SUBPROTOCOLS.join(', ')}); the ${req.headers.upgrade ?? 'HTTP'} upgrade is not supported: use kubectl 1.30 or newer`,
      );
    }
    const offered = String(req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim());
    if (!SUBPROTOCOLS.some((p) => offered.includes(p))) {
      throw Errors.badRequest(
        `none of the offered subprotocols [${offered.filter((p) => p).join(', ')}] is supported: use ${SUBPROTOCOLS.join(' or ')}`,
      );
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => void this.run(ws, target, command, stdin, tty));
  }

  private async run(ws: WebSocket, target: ExecTarget, command: string[], stdin: boolean, tty: boolean): Promise<void> {
    const v5 = ws.protocol === 'v5.channel.k8s.io';
    /** Sends one frame; past a megabyte not yet sent, the promise holds the writer until the client reads. */
    const frame = (channel: number, data: string | Uint8Array): void | Promise<void> => {
      if (ws.readyState !== ws.OPEN) return;
      const payload = Buffer.concat([Buffer.from([channel]), typeof data === 'string' ? Buffer.from(data) : data]);
      if (ws.bufferedAmount < 1024 * 1024) return ws.send(payload);
      return new Promise<void>((resolve) => ws.send(payload, () => resolve()));
    };
    const input = stdin ? new ExecInputQueue({ pause: () => ws.pause(), resume: () => ws.resume() }) : undefined;
    let onClosed!: () => void;
    const closed = new Promise<void>((resolve) => (onClosed = resolve));
    ws.on('close', () => {
      input?.end();
      onClosed();
    });
    ws.on('message', (data: RawData) => {
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
      if (buf.length === 0) return;
      const channel = buf[0]!;
      if (channel === 0) input?.push(buf.subarray(1));
      else if (channel === 255 && v5 && buf[1] === 0) input?.end(); // v5: the client closed its stdin
    });
    let code: number;
    try {
      code = await target.run(command, {
        stdout: (data) => frame(1, data),
        // A terminal has one output stream.
        stderr: (data) => frame(tty ? 1 : 2, data),
        tty,
        ...(input ? { stdin: input } : {}),
        closed,
      });
    } catch (err) {
      void frame(
        3,
        JSON.stringify({
          metadata: {},
          status: 'Failure',
          message: err instanceof Error ? err.message : String(err),
          reason: 'InternalError',
          code: 500,
        }),
      );
      ws.close(1000);
      return;
    }
    void frame(3, JSON.stringify(exitStatus(command, code)));
    ws.close(1000);
  }

  close(): void {
    for (const client of this.wss.clients) client.terminate();
    this.wss.close();
  }
}
