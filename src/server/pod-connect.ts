import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { createWebSocketStream, WebSocketServer } from 'ws';
import { ApiError, Errors } from '../api/errors.js';
import { queryBool } from '../api/query-params.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import type { KubeletConnector, LogLine, PortForwardTarget } from '../api/kubelet-connector.js';
import type { KindInfo } from '../registry/types.js';
import { PORT_FORWARD_PROTOCOL, PORT_FORWARD_TUNNEL_PROTOCOL, servePortForward } from './port-forward.js';
import {
  forwardedPorts,
  PORT_FORWARD_CHANNEL_PROTOCOLS,
  servePortForwardOverChannels,
} from './port-forward-channels.js';
import {
  internalErrorStatus,
  SPDY_PROTOCOLS,
  serveOverSpdy,
  serveOverWebSocket,
  WEBSOCKET_PROTOCOLS,
  type ContainerProcess,
  type SessionStatus,
  type StreamOptions,
} from './remote-command.js';
import { guardWebSocket } from './connections.js';
import type { ServedCluster } from './served-cluster.js';
import { requesterOf } from '../auth/api-auth.js';
import { SpdyConnection, type StreamHandler } from './spdy.js';
import type { KubeletEndpoint } from '../api/kubelet-connector.js';
import { kubeletPath, proxyToKubelet, proxyUpgrade, remoteKubelet } from './kubelet-proxy.js';

/**
 * The connect subresources of pods: pods/log (plain text, streamed with follow=true), and pods/exec, pods/attach and
 * pods/portforward over an upgraded connection: WebSocket (kubectl 1.30+) or SPDY/3.1 (kubectl 1.27-1.29, and
 * client-go tools before 1.30). The API server checks the request against the pod, as kube-apiserver's
 * LogLocation/ExecLocation/AttachLocation/PortForwardLocation do, then hands it to the node's kubelet, whose
 * streaming server negotiates the protocol.
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
  return Errors.kubeletUnreachable(host, path);
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
  /** Pass the request on to a kubelet in another process (false: this is that kubelet's own endpoint). */
  forward = true,
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
  const remote = forward ? remoteKubelet(cluster, kubelet, pod) : undefined;
  if (remote) {
    const search = new URL(reply.request.raw.url ?? '/', 'http://localhost').search;
    return proxyToKubelet(remote, kubeletPath('log', pod, container), search, reply);
  }
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

/** The Status an exec ends with on the error channel (kubelet's remotecommand v4+ protocol). */
export function exitStatus(command: readonly string[], code: number): SessionStatus {
  if (code === 0) return { metadata: {}, status: 'Success' };
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: error executing command [${command.join(' ')}], exit code ${code}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(code) }] },
  };
}

const SUCCESS: SessionStatus = { metadata: {}, status: 'Success' };

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The connect subresources served over an upgraded connection. */
export type ConnectSubresource = 'exec' | 'attach' | 'portforward';

/** The options object a CONNECT's admission sees: PodExecOptions, PodAttachOptions or PodPortForwardOptions. */
function connectOptions(subresource: ConnectSubresource, params: URLSearchParams): KubeObject {
  if (subresource === 'portforward') {
    const ports = params
      .getAll('ports')
      .flatMap((p) => p.split(','))
      .map(Number)
      .filter(Number.isInteger);
    return {
      kind: 'PodPortForwardOptions',
      apiVersion: 'v1',
      ...(ports.length ? { ports } : {}),
    } as unknown as KubeObject;
  }
  const options: Record<string, unknown> = {
    kind: subresource === 'exec' ? 'PodExecOptions' : 'PodAttachOptions',
    apiVersion: 'v1',
  };
  for (const key of ['stdin', 'stdout', 'stderr', 'tty']) if (queryBool(params.getAll(key))) options[key] = true;
  const container = params.get('container');
  if (container) options.container = container;
  if (subresource === 'exec') {
    const command = params.getAll('command');
    if (command.length > 0) options.command = command;
  }
  return options as unknown as KubeObject;
}

/** What the kubelet was asked for: a session with a process in a container, or port-forwarding into the pod. */
type Connect =
  | { kind: 'command'; options: StreamOptions; process: ContainerProcess }
  | { kind: 'portforward'; target: PortForwardTarget }
  | { kind: 'remote'; endpoint: KubeletEndpoint; path: string };
type LocalConnect = Exclude<Connect, { kind: 'remote' }>;

type Reject = (err: ApiError, contentType?: string) => void;

/**
 * Serves exec, attach and port-forward upgrades. Validation happens before the handshake so that errors reach the
 * client as a Status (kubectl 1.30+ falls back from WebSocket to SPDY on any non-101 answer, and prints the Status of
 * the second try).
 */
export class PodConnect {
  private readonly wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => WEBSOCKET_PROTOCOLS.find((p) => protocols.has(p)) ?? false,
  });
  /**
   * Port-forward's tunnel. Its subprotocol has a '/', which is no RFC 7230 token and which ws refuses to parse: the
   * protocol is checked here, taken off the request, and put back on the answer.
   */
  private readonly tunnels = new WebSocketServer({ noServer: true }).on('headers', (headers: string[]) =>
    headers.push(`Sec-WebSocket-Protocol: ${PORT_FORWARD_TUNNEL_PROTOCOL}`),
  );
  /** Port-forward over channels, kubelet's own WebSocket protocol (the Python client's). */
  private readonly channels = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => PORT_FORWARD_CHANNEL_PROTOCOLS.find((p) => protocols.has(p)) ?? false,
  });
  private readonly spdy = new Set<SpdyConnection>();

  constructor(
    private readonly cluster: ServedCluster,
    private readonly kubelet: KubeletConnector | undefined,
    /** Pass requests on to kubelets in other processes (false: this serves a kubelet's own endpoint). */
    private readonly forward = true,
  ) {}

  /** Handles one upgrade request for pods/NAME/{exec,attach,portforward}; `reject` writes an HTTP error answer. */
  upgrade(
    subresource: ConnectSubresource,
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    url: URL,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    reject: Reject,
  ): void {
    const admitted = this.cluster.api.admitConnect(
      info,
      namespace,
      name,
      subresource,
      connectOptions(subresource, url.searchParams),
      requesterOf(req),
    );
    const proceed = (): void => this.serve(subresource, info, namespace, name, url, req, socket, head, reject);
    if (!(admitted instanceof Promise)) return proceed();
    // A webhook looks at the connection first: the socket waits, and a refusal is the answer to the upgrade.
    admitted.then(proceed).catch((err: unknown) => {
      if (socket.destroyed) return;
      reject(err instanceof ApiError ? err : Errors.internal(err instanceof Error ? err.message : String(err)));
    });
  }

  /** An admitted upgrade: the checks, then the kubelet's streaming server, here or in the process that runs it. */
  serve(
    subresource: ConnectSubresource,
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    url: URL,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    reject: Reject,
  ): void {
    const pod = this.cluster.api.get(info, namespace, name);
    let connect: Connect;
    try {
      connect = this.connect(subresource, pod, url.searchParams);
    } catch (err) {
      // The kubelet's own refusals come back as plain text, which kubectl shows as "unable to upgrade connection: …".
      if (err instanceof ApiError && err.code === 500) return reject(err, 'text/plain');
      throw err;
    }
    if (connect.kind === 'remote')
      return proxyUpgrade(connect.endpoint, connect.path, url.search, req, socket, head, reject);
    const upgrade = String(req.headers.upgrade ?? '').toLowerCase();
    if (upgrade === 'websocket') return this.webSocket(connect, subresource, url, req, socket, head, reject);
    this.spdyUpgrade(connect, req, socket, head, reject);
  }

  /** The API server's checks, then the kubelet's: what to connect the client to. */
  private connect(subresource: ConnectSubresource, pod: KubeObject, params: URLSearchParams): Connect {
    const name = pod.metadata.name ?? '';
    const namespace = pod.metadata.namespace ?? '';
    const remote = this.forward ? remoteKubelet(this.cluster, this.kubelet, pod) : undefined;
    if (subresource === 'portforward') {
      if (nodeName(pod) === '') throw Errors.badRequest(`pod ${name} does not have a host assigned`);
      if (remote) return { kind: 'remote', endpoint: remote, path: kubeletPath('portforward', pod, '') };
      if (!this.kubelet) throw kubeletUnreachable(pod, `portForward/${namespace}/${name}`);
      return { kind: 'portforward', target: this.kubelet.portForward(pod) };
    }
    const container = resolveContainer(pod, params.get('container') ?? undefined);
    if (nodeName(pod) === '') throw Errors.badRequest(`pod ${name} does not have a host assigned`);
    const command = params.getAll('command');
    if (subresource === 'exec' && command.length === 0) throw Errors.badRequest('you must specify at least 1 command');
    const wants = (key: string): boolean => queryBool(params.getAll(key));
    const options: StreamOptions = {
      stdin: wants('stdin'),
      stdout: wants('stdout'),
      stderr: wants('stderr'),
      tty: wants('tty'),
    };
    if (!options.stdin && !options.stdout && !options.stderr)
      throw Errors.badRequest('you must specify at least one of stdin, stdout, stderr');
    if (remote) return { kind: 'remote', endpoint: remote, path: kubeletPath(subresource, pod, container) };
    if (!this.kubelet) throw kubeletUnreachable(pod, `${subresource}/${namespace}/${name}/${container}`);
    if (subresource === 'attach') {
      const target = this.kubelet.attach(pod, container);
      return {
        kind: 'command',
        options,
        process: {
          run: async (streams) => {
            await target.run(streams);
            return 0;
          },
          // kubelet's ServeAttach: Success however the process ended.
          status: () => SUCCESS,
          failure: (err) => internalErrorStatus(`error attaching to container: ${errorText(err)}`),
        },
      };
    }
    const target = this.kubelet.exec(pod, container);
    return {
      kind: 'command',
      options,
      process: {
        run: (streams) => target.run(command, streams),
        status: (code) => exitStatus(command, code),
        failure: (err) => internalErrorStatus(`error executing command in container: ${errorText(err)}`),
      },
    };
  }

  private webSocket(
    connect: LocalConnect,
    subresource: ConnectSubresource,
    url: URL,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    reject: Reject,
  ): void {
    const offered = String(req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim());
    // kube-apiserver tunnels SPDY when the client asks for it; otherwise the kubelet serves its channels, also to
    // a client that names no subprotocol.
    if (
      connect.kind === 'portforward' &&
      !offered.includes(PORT_FORWARD_TUNNEL_PROTOCOL) &&
      (offered.every((p) => p === '') || PORT_FORWARD_CHANNEL_PROTOCOLS.some((p) => offered.includes(p)))
    ) {
      const ports = forwardedPorts(url.searchParams);
      if (!Array.isArray(ports)) return reject(new ApiError(400, 'BadRequest', ports.refusal), 'text/plain');
      const target = connect.target;
      this.channels.handleUpgrade(req, socket, head, (ws) => servePortForwardOverChannels(ws, ports, target));
      return;
    }
    const supported =
      connect.kind === 'portforward'
        ? [PORT_FORWARD_TUNNEL_PROTOCOL, ...PORT_FORWARD_CHANNEL_PROTOCOLS]
        : WEBSOCKET_PROTOCOLS;
    if (!supported.some((p) => offered.includes(p))) {
      throw Errors.badRequest(
        `none of the offered subprotocols [${offered.filter((p) => p).join(', ')}] is supported for ${subresource}: use ${supported.join(' or ')}`,
      );
    }
    if (connect.kind === 'command') {
      this.wss.handleUpgrade(req, socket, head, (ws) => void serveOverWebSocket(ws, connect.options, connect.process));
      return;
    }
    delete req.headers['sec-websocket-protocol'];
    this.tunnels.handleUpgrade(req, socket, head, (ws) => {
      // SPDY frames in binary messages: the same port-forward server, over the WebSocket as a byte stream.
      const tunnel = createWebSocketStream(guardWebSocket(ws));
      servePortForward((handler) => this.spdyConnection(tunnel, handler, Buffer.alloc(0)), connect.target);
    });
  }

  /** kubelet's streaming server over SPDY: httpstream.Handshake, then spdy's UpgradeResponse. */
  private spdyUpgrade(connect: LocalConnect, req: IncomingMessage, socket: Duplex, head: Buffer, reject: Reject): void {
    const supported = connect.kind === 'portforward' ? [PORT_FORWARD_PROTOCOL] : SPDY_PROTOCOLS;
    const offered = (req.headersDistinct['x-stream-protocol-version'] ?? [])
      .flatMap((h) => h.split(','))
      .map((p) => p.trim())
      .filter((p) => p !== '');
    const text = (code: number, reason: string, message: string): void =>
      reject(new ApiError(code, reason, message), 'text/plain');
    if (offered.length === 0)
      return text(400, 'BadRequest', 'unable to upgrade: X-Stream-Protocol-Version is required');
    const protocol = offered.find((p) => supported.includes(p));
    if (!protocol) {
      return text(
        403,
        'Forbidden',
        `unable to upgrade: unable to negotiate protocol: client supports [${offered.join(' ')}], server accepts [${supported.join(' ')}]`,
      );
    }
    const connection = String(req.headers.connection ?? '').toLowerCase();
    const upgrade = String(req.headers.upgrade ?? '').toLowerCase();
    if (!connection.includes('upgrade') || !upgrade.includes('spdy/3.1')) {
      return text(400, 'BadRequest', `unable to upgrade: missing upgrade headers in request: ${goHeaders(req)}`);
    }
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: ${protocol}\r\n\r\n`,
    );
    const accept = (handler: StreamHandler): SpdyConnection => this.spdyConnection(socket, handler, head);
    if (connect.kind === 'portforward') servePortForward(accept, connect.target);
    else serveOverSpdy(accept, protocol, connect.options, connect.process);
  }

  private spdyConnection(socket: Duplex, handler: StreamHandler, head: Buffer): SpdyConnection {
    const connection = new SpdyConnection(socket, handler, head);
    this.spdy.add(connection);
    connection.onClose(() => this.spdy.delete(connection));
    return connection;
  }

  close(): void {
    for (const server of [this.wss, this.tunnels, this.channels]) {
      for (const client of server.clients) client.terminate();
      server.close();
    }
    for (const connection of [...this.spdy]) connection.destroy();
  }
}

/** A request's headers as Go's %#v prints an http.Header: canonical names, sorted, each with its values. */
function goHeaders(req: IncomingMessage): string {
  const canonical = (name: string): string =>
    name
      .split('-')
      .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
      .join('-');
  const entries = Object.entries(req.headersDistinct)
    .filter(([name]) => name !== 'host')
    .map(([name, values]) => [canonical(name), values ?? []] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const quote = (s: string): string => JSON.stringify(s);
  return `http.Header{${entries.map(([name, values]) => `${quote(name)}:[]string{${values.map(quote).join(', ')}}`).join(', ')}}`;
}
