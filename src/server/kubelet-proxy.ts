import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { ApiError } from '../api/errors.js';
import { kubeletEndpointOf, type KubeletConnector, type KubeletEndpoint } from '../api/kubelet-connector.js';
import { podNodeName } from '../api/pod-util.js';
import type { KubeObject } from '../api/types.js';
import type { ServedCluster } from './served-cluster.js';

/**
 * pods/log, exec, attach and portforward for a pod whose node's kubelet runs in another process (sim serve over
 * etcd, --components kubelets elsewhere): as kube-apiserver, the API server checks the request against the pod, then
 * reaches the kubelet at the node's address and status.daemonEndpoints.kubeletEndpoint.Port, on the kubelet's own
 * paths (/containerLogs, /exec, /attach, /portForward), streaming the answer back; an upgraded connection is passed
 * through byte for byte, so the kubelet negotiates the protocol (SPDY or WebSocket) with the client itself.
 */

/** The endpoint of the pod's node's kubelet when it runs in another process; undefined when it runs here or nowhere known. */
export function remoteKubelet(
  cluster: ServedCluster,
  kubelet: KubeletConnector | undefined,
  pod: KubeObject,
): KubeletEndpoint | undefined {
  return remoteNodeKubelet(cluster, kubelet, podNodeName(pod));
}

/** The endpoint of a node's kubelet when it runs in another process. */
export function remoteNodeKubelet(
  cluster: ServedCluster,
  kubelet: KubeletConnector | undefined,
  node: string,
): KubeletEndpoint | undefined {
  if (node === '' || kubelet?.runs(node)) return undefined;
  const nodes = cluster.registry.lookup('', 'v1', 'nodes');
  if (!nodes) return undefined;
  try {
    return kubeletEndpointOf(cluster.api.get(nodes, undefined, node));
  } catch {
    return undefined;
  }
}

/** Go's words for a failed dial, as kube-apiserver passes them on. */
function dialError(endpoint: KubeletEndpoint, path: string, err: unknown): ApiError {
  const code = (err as { code?: string }).code;
  const why =
    code === 'ECONNREFUSED'
      ? 'connect: connection refused'
      : code === 'ECONNRESET'
        ? 'read: connection reset by peer'
        : String((err as Error).message ?? err);
  const at = `${endpoint.host}:${endpoint.port}`;
  return new ApiError(500, '', `Get "http://${at}/${path}": dial tcp ${at}: ${why}`);
}

/**
 * Sends a request to the kubelet endpoint (GET /containerLogs/NS/POD/CONTAINER, POST /sim/v1/nodes/NAME/fail) and
 * streams its answer (status, type, body) to the client.
 */
export function proxyToKubelet(
  endpoint: KubeletEndpoint,
  path: string,
  search: string,
  reply: FastifyReply,
  method = 'GET',
): void {
  reply.hijack();
  const res = reply.raw;
  const upstream = httpRequest(
    { host: endpoint.host, port: endpoint.port, method, path: `/${path}${search}` },
    (answer: IncomingMessage) => {
      const headers: Record<string, string> = {
        'content-type': String(answer.headers['content-type'] ?? 'text/plain'),
      };
      if (answer.headers['cache-control']) headers['cache-control'] = String(answer.headers['cache-control']);
      res.writeHead(answer.statusCode ?? 502, headers);
      res.socket?.setNoDelay(true);
      answer.pipe(res);
    },
  );
  upstream.on('error', (err) => {
    if (res.headersSent) return void res.destroy();
    const error = dialError(endpoint, path, err);
    res.writeHead(error.code, { 'content-type': 'application/json' });
    res.end(`${JSON.stringify(error.toStatus())}\n`);
  });
  res.on('close', () => upstream.destroy());
  upstream.end();
}

/** Headers not passed on to the kubelet: hop-by-hop ones are written anew, credentials are the API server's own. */
const DROPPED = new Set(['host', 'authorization', 'content-length']);

/**
 * Passes an upgrade request (exec, attach, portforward) on to the kubelet at `path` and pipes the two connections
 * together: the kubelet's answer, a 101 or its refusal, reaches the client as it wrote it.
 */
export function proxyUpgrade(
  endpoint: KubeletEndpoint,
  path: string,
  search: string,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  reject: (err: ApiError, contentType?: string) => void,
): void {
  const lines = [`${req.method ?? 'GET'} /${path}${search} HTTP/1.1`, `Host: ${endpoint.host}:${endpoint.port}`];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!;
    if (!DROPPED.has(name.toLowerCase())) lines.push(`${name}: ${req.rawHeaders[i + 1]}`);
  }
  const upstream: Socket = netConnect({ host: endpoint.host, port: endpoint.port });
  let connected = false;
  upstream.once('connect', () => {
    connected = true;
    upstream.setNoDelay(true);
    upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) upstream.write(head);
    upstream.pipe(socket);
    socket.pipe(upstream);
  });
  upstream.on('error', (err) => {
    if (!connected) return reject(dialError(endpoint, path, err));
    socket.destroy();
  });
  upstream.on('close', () => socket.destroy());
  socket.on('close', () => upstream.destroy());
  socket.on('error', () => upstream.destroy());
}

/** The kubelet's path for a connect subresource of `pod`. */
export function kubeletPath(
  subresource: 'log' | 'exec' | 'attach' | 'portforward',
  pod: KubeObject,
  container: string,
): string {
  const where = `${pod.metadata.namespace}/${pod.metadata.name}`;
  switch (subresource) {
    case 'log':
      return `containerLogs/${where}/${container}`;
    case 'portforward':
      return `portForward/${where}`;
    default:
      return `${subresource}/${where}/${container}`;
  }
}

/**
 * A TCP connection to `port` of a pod whose node's kubelet runs in another process, for the API server's pods and
 * services proxy: the simulated pod network lives in that process, which connects it over an upgrade of its
 * kubelet endpoint (kube-sim's /podNetwork path). Rejects with the dial's error, as a direct dial would.
 */
export function dialThrough(endpoint: KubeletEndpoint, pod: KubeObject, port: number): Promise<Duplex> {
  const path = `/podNetwork/${pod.metadata.namespace}/${pod.metadata.name}/${port}`;
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: endpoint.host, port: endpoint.port });
    let answer = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      answer = Buffer.concat([answer, chunk]);
      const end = answer.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      const head = answer.subarray(0, end).toString('latin1');
      const rest = answer.subarray(end + 4);
      if (/^HTTP\/1\.1 101 /.test(head)) {
        if (rest.length > 0) socket.unshift(rest);
        return resolve(socket);
      }
      // The refusal's body is the dial error; it ends with the connection.
      let body = rest.toString('utf8');
      socket.on('data', (more: Buffer) => (body += more.toString('utf8')));
      socket.once('close', () => reject(new Error(body.trim() || head.split('\r\n')[0])));
    };
    socket.on('data', onData);
    socket.once('connect', () =>
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: ${endpoint.host}:${endpoint.port}\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n`,
      ),
    );
    socket.once('error', (err) => reject(dialError(endpoint, path.slice(1), err)));
  });
}
