import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, Errors } from '../api/errors.js';
import type { KubeletConnector } from '../api/kubelet-connector.js';
import { dialThrough, remoteKubelet } from './kubelet-proxy.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import type { ServedCluster } from './served-cluster.js';

/**
 * pods/proxy and services/proxy, as kube-apiserver serves them (`kubectl proxy` to
 * /api/v1/namespaces/N/services/web:80/proxy/): the id names the object, a port and a scheme (`name`, `name:port`,
 * `scheme:name:port`, utilnet.SplitSchemeNamePort), the API server picks the address as the pod and service
 * REST's ResourceLocation do, dials it from the cluster network (the simulated app behind the pod's port) and hands
 * the request on, and the answer back, as its UpgradeAwareHandler does. Its refusals are kube-apiserver's: 503
 * `no endpoints available for service "web"`, `no service port 81 found for service "web"`, `error trying to reach
 * service: dial tcp 10.244.0.5:81: connect: connection refused`.
 */
type Obj = Record<string, unknown>;

const VALID_SCHEMES = new Set(['', 'http', 'https']);

/** utilnet.SplitSchemeNamePort: `name`, `name:port` or `scheme:name:port`, the scheme http, https or none. */
export function splitSchemeNamePort(id: string): { scheme: string; name: string; port: string } | undefined {
  const parts = id.split(':');
  let scheme = '';
  let name: string;
  let port = '';
  if (parts.length === 1) name = parts[0]!;
  else if (parts.length === 2) [name, port] = parts as [string, string];
  else if (parts.length === 3) [scheme, name, port] = parts as [string, string, string];
  else return undefined;
  return name !== '' && VALID_SCHEMES.has(scheme) ? { scheme, name, port } : undefined;
}

function serviceUnavailable(message: string): ApiError {
  return new ApiError(503, 'ServiceUnavailable', message);
}

function podIP(pod: KubeObject): string {
  return isPlainObject(pod.status) && typeof pod.status.podIP === 'string' ? pod.status.podIP : '';
}

/** Whether an IPv4 address is global unicast (net.IP.IsGlobalUnicast): not loopback, link-local, multicast, 0/8. */
function globalUnicast(ip: string): boolean {
  const octets = ip.split('.').map(Number);
  if (octets.length !== 4 || octets.some((o) => !Number.isInteger(o) || o < 0 || o > 255)) return false;
  const [a, b] = octets as [number, number];
  if (a === 0 || a === 127 || a >= 224 || (a === 169 && b === 254)) return false;
  return ip !== '255.255.255.255';
}

/** Where a proxied request goes: the pod to dial, the port, and the request's path on it. */
interface Location {
  pod: KubeObject;
  port: number;
  /** For the dial error: the address as written (ip:port). */
  address: string;
}

export class ApiProxy {
  /** Round-robin over a service's ready addresses, per service port: requests spread evenly and replay the same way. */
  private readonly nextAddress = new Map<string, number>();

  constructor(
    private readonly cluster: ServedCluster,
    private readonly kubelet: KubeletConnector | undefined,
  ) {}

  /**
   * Serves /api/v1/namespaces/NS/{pods,services}/ID/proxy[/PATH]; `rawPath` is the request's path as sent (no
   * query), from which the part after `/proxy` goes on unchanged.
   */
  async handle(
    resource: 'pods' | 'services',
    namespace: string,
    id: string,
    rawPath: string,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<void> {
    const raw = request.raw.url ?? '/';
    const query = raw.includes('?') ? raw.slice(raw.indexOf('?')) : '';
    // /api/v1/namespaces/NS/RESOURCE/ID/proxy, then the path on the pod as sent.
    const parts = rawPath.split('/');
    const rest = parts.length > 8 ? `/${parts.slice(8).join('/')}` : '';
    const location = resource === 'pods' ? this.podLocation(namespace, id) : this.serviceLocation(namespace, id);
    // kube-apiserver's redirect of an empty path to one that ends in '/' (issue 4958).
    if (rest === '') {
      void reply.code(301).header('location', `${rawPath}/${query}`).send();
      return;
    }
    let socket: Duplex;
    try {
      const remote = remoteKubelet(this.cluster, this.kubelet, location.pod);
      if (remote) socket = await dialThrough(remote, location.pod, location.port);
      else if (!this.kubelet) throw new Error(`dial tcp ${location.address}: connect: connection refused`);
      else socket = await this.kubelet.dial(location.pod, location.port);
    } catch (err) {
      throw serviceUnavailable(`error trying to reach service: ${err instanceof Error ? err.message : String(err)}`);
    }
    await this.forward(socket, location, `${rest}${query}`, request, reply);
  }

  /** The pod REST's ResourceLocation: the pod's IP, the given port or its first container's first declared one (80). */
  private podLocation(namespace: string, id: string): Location {
    const parts = splitSchemeNamePort(id);
    if (!parts) throw Errors.badRequest(`invalid pod request "${id}"`);
    const pod = this.cluster.api.get(this.kind('pods'), namespace, parts.name);
    let port = parts.port;
    if (port === '') {
      const spec = isPlainObject(pod.spec) ? pod.spec : {};
      for (const c of Array.isArray(spec.containers) ? (spec.containers as unknown[]) : []) {
        const ports = isPlainObject(c) && Array.isArray(c.ports) ? (c.ports as unknown[]) : [];
        if (ports.length > 0 && isPlainObject(ports[0])) {
          port = String(ports[0].containerPort);
          break;
        }
      }
    }
    const ip = podIP(pod);
    if (!globalUnicast(ip)) throw Errors.badRequest('address not allowed');
    const number = port === '' ? 80 : Number(port);
    const address = `${ip}:${port === '' ? '80' : port}`;
    // A port by name (pods/x:http/proxy) is no number to dial, as in Go's net.Dial.
    if (!Number.isInteger(number))
      throw serviceUnavailable(`error trying to reach service: dial tcp: lookup ${ip}:${port}: unknown port`);
    return { pod, port: number, address };
  }

  /** The service REST's ResourceLocation: a port by number is the service port's name, then a ready endpoint address. */
  private serviceLocation(namespace: string, id: string): Location {
    const parts = splitSchemeNamePort(id);
    if (!parts) throw Errors.badRequest(`invalid service request "${id}"`);
    const { name } = parts;
    let portName = parts.port;
    if (/^-?\d+$/.test(portName)) {
      const service = this.cluster.api.get(this.kind('services'), namespace, name);
      const ports = isPlainObject(service.spec) && Array.isArray(service.spec.ports) ? service.spec.ports : [];
      const found = (ports as unknown[]).find((p) => isPlainObject(p) && p.port === Number(portName)) as
        | Obj
        | undefined;
      if (!found) throw serviceUnavailable(`no service port ${Number(portName)} found for service "${name}"`);
      portName = typeof found.name === 'string' ? found.name : '';
    }
    const endpoints = this.cluster.api.get(this.kind('endpoints'), namespace, name);
    const subsets = Array.isArray(endpoints.subsets) ? (endpoints.subsets as unknown[]).filter(isPlainObject) : [];
    if (subsets.length === 0) throw serviceUnavailable(`no endpoints available for service "${name}"`);
    // Every ready address serving the port, in a stable order, over which connections go round.
    const candidates: Array<{ ip: string; port: number; pod: KubeObject }> = [];
    for (const subset of subsets) {
      const port = (Array.isArray(subset.ports) ? (subset.ports as unknown[]) : []).find(
        (p) => isPlainObject(p) && (p.name ?? '') === portName,
      ) as Obj | undefined;
      if (!port) continue;
      for (const address of Array.isArray(subset.addresses) ? (subset.addresses as unknown[]) : []) {
        if (!isPlainObject(address) || typeof address.ip !== 'string') continue;
        const pod = this.podOf(namespace, address);
        // isValidAddress: the address must be a pod of the namespace that still has that IP.
        if (pod && podIP(pod) === address.ip) candidates.push({ ip: address.ip, port: Number(port.port), pod });
      }
    }
    if (candidates.length === 0) throw serviceUnavailable(`no endpoints available for service "${id}"`);
    const key = `${namespace}/${name}:${portName}`;
    const turn = this.nextAddress.get(key) ?? 0;
    if (!this.nextAddress.has(key) && this.nextAddress.size > 10_000) this.nextAddress.clear();
    this.nextAddress.set(key, turn + 1);
    const chosen = candidates[turn % candidates.length]!;
    return { pod: chosen.pod, port: chosen.port, address: `${chosen.ip}:${chosen.port}` };
  }

  private podOf(namespace: string, address: Obj): KubeObject | undefined {
    const ref = isPlainObject(address.targetRef) ? address.targetRef : undefined;
    if (ref?.kind !== 'Pod' || typeof ref.name !== 'string') return undefined;
    try {
      return this.cluster.api.get(
        this.kind('pods'),
        typeof ref.namespace === 'string' ? ref.namespace : namespace,
        ref.name,
      );
    } catch {
      return undefined;
    }
  }

  private kind(resource: string) {
    const info = this.cluster.registry.lookup('', 'v1', resource);
    if (!info) throw Errors.pathNotFound();
    return info;
  }

  /** Sends the request down the connection and streams the answer back, as the UpgradeAwareHandler's reverse proxy. */
  private forward(
    socket: Duplex,
    location: Location,
    path: string,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<void> {
    const headers = forwardedHeaders(request.headers);
    headers.host = location.address;
    const body = Buffer.isBuffer(request.body) ? request.body : undefined;
    if (body) headers['content-length'] = String(body.length);
    return new Promise((resolve, reject) => {
      let answered = false;
      const upstream = httpRequest(
        // No agent: the request goes down the connection dialled for it, and nowhere else.
        { method: request.method, path, headers, createConnection: () => socket as never },
        (answer) => {
          const out: Record<string, string | string[]> = {};
          for (const [k, v] of Object.entries(answer.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
          answered = true;
          reply.hijack();
          reply.raw.writeHead(answer.statusCode ?? 502, out);
          answer.pipe(reply.raw);
          answer.on('end', () => {
            socket.destroy();
            resolve();
          });
          answer.on('error', () => {
            reply.raw.destroy();
            resolve();
          });
        },
      );
      upstream.on('error', (err) => {
        socket.destroy();
        // Once the answer has begun, the client's connection is all there is to end.
        if (answered) {
          reply.raw.destroy();
          resolve();
        } else reject(serviceUnavailable(`error trying to reach service: ${err.message}`));
      });
      upstream.end(body);
    });
  }
}

/** Hop-by-hop headers (RFC 7230 §6.1), which a proxy does not pass on. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** The client's headers as the API server passes them on: hop-by-hop ones and its own credentials dropped. */
function forwardedHeaders(incoming: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(incoming)) {
    if (v === undefined || HOP_BY_HOP.has(k) || k === 'authorization' || k === 'host' || k === 'content-length')
      continue;
    out[k] = v;
  }
  return out;
}
