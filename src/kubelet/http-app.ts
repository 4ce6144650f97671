import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Duplex } from 'node:stream';
import { isPlainObject, type KubeObject } from '../api/types.js';
import type { Clock } from '../clock/clock.js';
import { envAnnotation, expandVars } from './actions.js';
import type { HttpAnswer, Images } from './images.js';

/**
 * What listens on a simulated pod's ports: kube-sim runs no real processes, so every containerPort a Ready container
 * declares (TCP) is served by a simulated HTTP app, whatever the port number. It answers what the pod's
 * kube-sim.dev/http-* annotations say, else what the image catalog says its image answers (nginx's welcome page,
 * httpd's "It works!"), else a line naming the pod, its container and port, so that a client (curl through
 * `kubectl port-forward` or `kubectl proxy`) sees which pod served it. Any other port refuses the connection, as
 * one nobody listens on does.
 */
type Obj = Record<string, unknown>;

/** The pod annotation whose value is the body every port of the pod answers (`${name}`-style variables, `$(VAR)`). */
export const HTTP_BODY_ANNOTATION = 'kube-sim.dev/http-body';
/** The status code it answers with (default 200). */
export const HTTP_STATUS_ANNOTATION = 'kube-sim.dev/http-status';
/** Its Content-Type (default text/plain; charset=utf-8). */
export const HTTP_CONTENT_TYPE_ANNOTATION = 'kube-sim.dev/http-content-type';

const DEFAULT_ANSWER: HttpAnswer = {
  status: 200,
  headers: { 'Content-Type': 'text/plain; charset=utf-8' },
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the answer's own variables, filled in per request
  body: 'kube-sim app: pod ${name}, container ${container}, port ${port}: ${method} ${path}\n',
};

/** The container serving the pod's `port`: one that declares it (TCP) and is Ready. */
export function servingContainer(pod: KubeObject, port: number): Obj | undefined {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const containers = Array.isArray(spec.containers) ? (spec.containers as unknown[]).filter(isPlainObject) : [];
  const declaring = containers.find(
    (c) =>
      Array.isArray(c.ports) &&
      (c.ports as unknown[]).some(
        (p) => isPlainObject(p) && p.containerPort === port && (p.protocol ?? 'TCP') === 'TCP',
      ),
  );
  if (!declaring) return undefined;
  const status = isPlainObject(pod.status) ? pod.status : {};
  const statuses = Array.isArray(status.containerStatuses) ? (status.containerStatuses as unknown[]) : [];
  const cs = statuses.find((s) => isPlainObject(s) && s.name === declaring.name) as Obj | undefined;
  const running = cs && isPlainObject(cs.state) && isPlainObject(cs.state.running);
  return running && cs.ready === true ? declaring : undefined;
}

/** The answer the app gives to `path`: the pod's annotations, else its image's, else kube-sim's. */
function answerFor(pod: KubeObject, container: Obj, path: string, images: Images): HttpAnswer {
  const annotations = pod.metadata.annotations ?? {};
  const body = annotations[HTTP_BODY_ANNOTATION];
  if (body !== undefined) {
    const status = Number(annotations[HTTP_STATUS_ANNOTATION] ?? 200);
    return {
      status: Number.isInteger(status) && status >= 100 && status <= 999 ? status : 200,
      headers: { 'Content-Type': annotations[HTTP_CONTENT_TYPE_ANNOTATION] ?? 'text/plain; charset=utf-8' },
      body,
    };
  }
  const http = images.lookup(String(container.image))?.http;
  if (!http) return DEFAULT_ANSWER;
  return http.paths?.[path.split('?')[0]!] ?? http.otherwise;
}

/** The container's environment as it started (the kubelet keeps it in an annotation), for `$(VAR)`. */
function envOf(pod: KubeObject, container: string): Map<string, string> {
  try {
    const env = JSON.parse(pod.metadata.annotations?.[envAnnotation(container)] ?? '{}') as Record<string, string>;
    return new Map(Object.entries(env));
  } catch {
    return new Map();
  }
}

/** Replaces ${name}, ${namespace}, ${podIP}, ${nodeName}, ${container}, ${port}, ${method} and ${path}. */
function substitute(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\{(\w+)\}/g, (m, k: string) => vars[k] ?? m);
}

/** One connection to a pod's port: what the app's request handler reads off its socket. */
interface Connection {
  pod: KubeObject;
  container: Obj;
  port: number;
}

/** Two connected streams: what one writes, the other reads; ending or destroying one ends the other. */
export function duplexPair(): [Duplex, Duplex] {
  const make = (peer: () => Duplex): Duplex =>
    new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, callback) {
        peer().push(chunk);
        callback();
      },
      final(callback) {
        peer().push(null);
        callback();
      },
      destroy(err, callback) {
        const other = peer();
        if (!other.destroyed) other.destroy();
        callback(err);
      },
    });
  const a: Duplex = make(() => b);
  const b: Duplex = make(() => a);
  return [a, b];
}

/** The simulated HTTP apps of a node fleet's pods: one HTTP server, fed each connection to a serving port. */
export class HttpApps {
  private readonly connections = new WeakMap<object, Connection>();
  private readonly server = createServer((req, res) => this.answer(req, res));

  constructor(
    private readonly images: Images,
    private readonly clock: Clock,
  ) {
    // Keep-alive connections end with their client; nothing here times out on the wall clock.
    this.server.keepAliveTimeout = 0;
    this.server.requestTimeout = 0;
    this.server.headersTimeout = 0;
  }

  /** Serves `stream` as a connection to the pod's `port`, if a container serves it; resolves when it is over. */
  serve(pod: KubeObject, port: number, stream: Duplex): Promise<void> | undefined {
    const container = servingContainer(pod, port);
    if (!container) return undefined;
    this.connections.set(stream, { pod, container, port });
    return new Promise((resolve) => {
      stream.once('close', () => resolve());
      this.server.emit('connection', stream);
    });
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    const connection = this.connections.get(req.socket);
    if (!connection) {
      res.destroy();
      return;
    }
    const { pod, container, port } = connection;
    const path = req.url ?? '/';
    const answer = answerFor(pod, container, path, this.images);
    const status = isPlainObject(pod.status) ? pod.status : {};
    const vars: Record<string, string> = {
      name: pod.metadata.name ?? '',
      namespace: pod.metadata.namespace ?? '',
      podIP: typeof status.podIP === 'string' ? status.podIP : '',
      nodeName: isPlainObject(pod.spec) && typeof pod.spec.nodeName === 'string' ? pod.spec.nodeName : '',
      container: String(container.name),
      port: String(port),
      method: req.method ?? 'GET',
      path,
    };
    const body = Buffer.from(expandVars(substitute(answer.body, vars), envOf(pod, String(container.name))));
    // The Date of the cluster clock, not the wall clock's.
    res.sendDate = false;
    res.statusCode = answer.status;
    res.setHeader('Date', new Date(this.clock.now()).toUTCString());
    for (const [k, v] of Object.entries(answer.headers)) res.setHeader(k, v);
    res.setHeader('Content-Length', body.length);
    // What the client sent is read and dropped.
    req.resume();
    res.end(req.method === 'HEAD' ? undefined : body);
  }
}
