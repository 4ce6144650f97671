import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { WebSocketServer } from 'ws';
import { rfc3339, rfc3339Micro, parseDuration } from '../clock/clock.js';
import { ClockRunner } from '../clock/runner.js';
import { ApiError, Errors } from '../api/errors.js';
import { queryBool } from '../api/query-params.js';
import { isPlainObject } from '../api/types.js';
import type { ServedCluster } from './served-cluster.js';
import { MAX_BODY_BYTES, parseJson } from './body.js';
import {
  answerClientError,
  guardWebSocket,
  limitSlowClients,
  onUpgrade,
  rejectUpgrade,
  statusText,
} from './connections.js';
import { KUBERNETES_VERSION } from '../api/version.js';
import { Discovery } from './discovery.js';
import { isPrettyPrint, parseMediaTypes, prettyJson } from './negotiation.js';
import { OpenApi } from './openapi.js';
import { OPENAPI_V2_PROTOBUF, OPENAPI_V2_PROTOBUF_ACCEPTED, OpenApiV2 } from './openapi-v2.js';
import type { KubeletConnector } from '../api/kubelet-connector.js';
import type { ApiAuth } from '../auth/api-auth.js';
import { PodConnect } from './pod-connect.js';
import { proxyToKubelet, remoteNodeKubelet } from './kubelet-proxy.js';
import { ApiProxy } from './proxy.js';
import { ResourceHandler, resolveTarget, type ResourceTarget } from './resources.js';
import { isUiRequest, registerUiRoutes } from './ui.js';
import { RequestInstrumentation } from './request-metrics.js';
import { EXPOSITION_CONTENT_TYPE } from '../metrics/metrics.js';
import { LAZY_SCHEMA_COMPILERS } from './schema-compilers.js';
import { processSeconds } from '../clock/clock.js';

export interface ServerOptions {
  /** Address clients are told to use in /api's serverAddressByClientCIDRs (host:port). */
  advertiseAddress?: () => string;
  logger?: (line: string) => void;
  /** The simulated kubelets, for pods/log, pods/exec and /sim/v1/nodes faults. */
  kubelet?: KubeletConnector;
  /** `--auth`: authenticate, impersonate and authorize every request (HTTP and WebSocket) before it is served. */
  auth?: ApiAuth;
  /**
   * `--tls`: serve HTTPS with this PEM certificate (chain) and key. With `clientCa`, a client may present a
   * certificate signed by it, which --auth's x509 authenticator reads (CN the user, O the groups).
   */
  https?: { cert: string; key: string; clientCa?: string };
}

/**
 * The TLS server's options. A client certificate is asked for but never required, and a bad one does not end the
 * handshake: as kube-apiserver, the request goes on and authentication decides (a token may still do).
 */
function httpsOptions(https: NonNullable<ServerOptions['https']>): Record<string, unknown> {
  const { cert, key, clientCa } = https;
  return clientCa === undefined
    ? { cert, key }
    : { cert, key, ca: clientCa, requestCert: true, rejectUnauthorized: false };
}

/** Writes a Status as the body, with its code. */
export function sendError(reply: FastifyReply, err: ApiError): void {
  reply.raw.statusMessage = statusText(err.code);
  const text = wantsPretty(reply.request) ? JSON.stringify(err.toStatus(), null, 2) : statusJson(err);
  void reply.code(err.code).header('content-type', 'application/json').send(text);
}

/** Whether the request asks for pretty JSON (`?pretty=true`, or curl, Wget or a browser as its User-Agent). */
function wantsPretty(request: FastifyRequest | undefined): boolean {
  if (!request) return false;
  const query = request.query as Record<string, string | string[] | undefined> | undefined;
  return isPrettyPrint(query?.pretty, request.headers['user-agent']);
}

/** A Status as kube-apiserver's JSON serializer writes it (json.Encoder: with a trailing newline). */
export function statusJson(err: ApiError): string {
  return `${JSON.stringify(err.toStatus())}\n`;
}

/** Maps anything thrown to a Kubernetes Status: ours as they are, fastify's by status code, the rest 500 without a stack. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { statusCode?: number; code?: string; message?: string };
  switch (e.statusCode) {
    case 413:
      return Errors.tooLarge(MAX_BODY_BYTES);
    case 415:
      return Errors.unsupportedMediaType('');
    case 400:
      return Errors.badRequest(e.message ?? 'bad request');
    case 404:
      return Errors.pathNotFound();
  }
  if (err instanceof RangeError) return Errors.badRequest('the request is too deeply nested or too large to process');
  return Errors.internal(e.message ?? 'unknown error');
}

const MAX_DRAIN_BYTES = 64 * 1024 * 1024;

/** Reads and discards what is left of a request body; destroys the connection past `limit` bytes. */
function drainRequest(raw: IncomingMessage, limit: number): Promise<void> {
  if (raw.readableEnded || raw.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    raw.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > limit) raw.destroy();
    });
    raw.once('end', () => resolve());
    raw.once('close', () => resolve());
    raw.resume();
  });
}

/** The path of a request URL, percent-decoded once (a malformed escape is a 400). */
function decodedPath(url: string): string {
  try {
    return decodeURIComponent(url.split('?')[0]!);
  } catch {
    throw Errors.badRequest('malformed path');
  }
}

/** The segments of a raw request path, decoded once, then split (so an encoded slash splits too, as in Go). */
function pathSegments(path: string): string[] {
  return decodedPath(path)
    .split('/')
    .filter((s) => s !== '');
}

/**
 * The HTTP face of a cluster: Kubernetes REST and watch routes derived from the registry, discovery, OpenAPI,
 * /version and health, and the simulator's own /sim/v1 controls. Returns a fastify instance (not listening).
 */
export function buildServer(cluster: ServedCluster, options: ServerOptions = {}): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: MAX_BODY_BYTES,
    routerOptions: { maxParamLength: 1000 },
    schemaController: { compilersFactory: LAZY_SCHEMA_COMPILERS },
    return503OnClosing: false,
    forceCloseConnections: true,
    // Errors fastify raises before routing (a malformed %-escape in the URL) get a Status like every other error.
    frameworkErrors: (err, _request, reply) => sendError(reply, toApiError(err)),
    // Requests that cannot even be parsed get Go's answer, not fastify's JSON.
    clientErrorHandler: answerClientError,
    // An https server is an http one to every route and upgrade handler here; only fastify's types tell them apart.
    ...(options.https ? { https: httpsOptions(options.https) } : {}),
  }) as FastifyInstance;
  limitSlowClients(app.server);
  const discovery = new Discovery(cluster.registry, options.advertiseAddress ?? (() => '127.0.0.1:8080'));
  const openapi = new OpenApi(cluster.registry);
  const openapiV2 = new OpenApiV2(cluster.registry, openapi);
  const resources = new ResourceHandler(cluster, options.kubelet);
  const proxy = new ApiProxy(cluster, options.kubelet);
  const instrumentation = new RequestInstrumentation(cluster.metrics.requests);
  app.decorateRequest('apiSeries', null);

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES }, (_req, body, done) =>
    done(null, body),
  );

  app.setErrorHandler(async (err, request, reply) => {
    const apiError = toApiError(err);
    // 500 only: a 5xx answered on purpose (504 for a resourceVersion from the future) is no internal error, nor is
    // a 500 with kube-apiserver's empty reason (StatusReasonUnknown): an unreachable kubelet's dial error.
    if (apiError.code === 500 && apiError.reason !== '')
      options.logger?.(`internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    // A client still sending an oversized body would see its connection reset instead of the 413: read the
    // rest (up to a bound; beyond it the connection is dropped) so that it gets the Status.
    if (apiError.code === 413) await drainRequest(request.raw, MAX_DRAIN_BYTES);
    sendError(reply, apiError);
  });
  app.setNotFoundHandler((_request, reply) => sendError(reply, Errors.pathNotFound()));
  const auth = options.auth;
  if (auth)
    app.addHook('onRequest', async (request) => {
      if (!isUiRequest(request.raw.url)) auth.check(request.raw);
    });

  const json = (reply: FastifyReply, text: string, contentType = 'application/json'): void => {
    void reply.code(200).header('content-type', contentType).send(text);
  };
  /** An API object (discovery) as kube-apiserver's serializer writes it: json.Encoder's trailing newline. */
  const apiJson = (reply: FastifyReply, text: string, contentType = 'application/json'): void =>
    json(reply, wantsPretty(reply.request) ? prettyJson(text) : `${text}\n`, contentType);

  for (const path of ['/version', '/version/'])
    app.get(path, (_req, reply) =>
      // WriteRawJSON: json.MarshalIndent with two spaces, and no trailing newline.
      json(
        reply,
        JSON.stringify(
          {
            ...KUBERNETES_VERSION,
            gitCommit: '0000000000000000000000000000000000000000',
            gitTreeState: 'clean',
            buildDate: '2024-12-11T18:00:00Z',
            goVersion: 'go1.23.4',
            compiler: 'gc',
            platform: 'linux/amd64',
          },
          null,
          2,
        ),
      ),
    );
  // kube-apiserver's /metrics: authorized as a non-resource URL (system:monitoring and cluster-admin may get it).
  app.get('/metrics', async (_req, reply) => {
    const text = await cluster.metrics.exposition();
    void reply.code(200).header('content-type', EXPOSITION_CONTENT_TYPE).send(text);
  });
  for (const path of ['/healthz', '/livez', '/readyz'])
    app.get(path, (_req, reply) => void reply.code(200).header('content-type', 'text/plain; charset=utf-8').send('ok'));

  /** Aggregated discovery when the Accept header asks for it, else the legacy document. */
  const aggregatedVersion = (request: FastifyRequest): 'v2' | 'v2beta1' | undefined => {
    for (const t of parseMediaTypes(request.headers.accept)) {
      if (
        t.params.g === 'apidiscovery.k8s.io' &&
        t.params.as === 'APIGroupDiscoveryList' &&
        (t.params.v === 'v2' || t.params.v === 'v2beta1')
      )
        return t.params.v;
      if (t.type === 'application/json' && t.params.as === undefined) return undefined;
    }
    return undefined;
  };
  const discoveryRoute = (legacy: boolean) => (request: FastifyRequest, reply: FastifyReply) => {
    const version = aggregatedVersion(request);
    if (version) {
      return apiJson(
        reply,
        discovery.aggregated(legacy, version),
        `application/json;g=apidiscovery.k8s.io;v=${version};as=APIGroupDiscoveryList`,
      );
    }
    return apiJson(reply, legacy ? discovery.apiVersions() : discovery.apiGroupList());
  };
  // go-restful serves a WebService's root route with a trailing slash too: the Python client asks for /version/,
  // /api/ and /apis/.
  for (const path of ['/api', '/api/']) app.get(path, discoveryRoute(true));
  for (const path of ['/apis', '/apis/']) app.get(path, discoveryRoute(false));

  // kubectl 1.27 and 1.28 ask for protobuf (and send If-None-Match with the ETag they have cached).
  app.get('/openapi/v2', (request, reply) => {
    const protobuf = parseMediaTypes(request.headers.accept).some((t) => OPENAPI_V2_PROTOBUF_ACCEPTED.includes(t.type));
    const doc = protobuf ? openapiV2.protobufDocument() : openapiV2.document();
    void reply.header('etag', doc.etag).header('vary', 'Accept');
    if (request.headers['if-none-match'] === doc.etag) return void reply.code(304).send();
    if ('bytes' in doc) return void reply.code(200).header('content-type', OPENAPI_V2_PROTOBUF).send(doc.bytes);
    json(reply, doc.text);
  });
  app.get('/openapi/v3', (_req, reply) => json(reply, openapi.indexDocument()));
  app.get('/openapi/v3/*', (request, reply) => {
    const path = (request.params as { '*': string })['*'].replace(/\/$/, '');
    const doc = openapi.document(path);
    if (!doc) throw Errors.pathNotFound();
    void reply.header('etag', `"${doc.hash}"`);
    json(reply, doc.text);
  });

  const handleApi = async (request: FastifyRequest, reply: FastifyReply, legacy: boolean): Promise<void> => {
    // From the raw URL, decoded once and then split, as Go's URL.Path is: fastify's wildcard param is decoded
    // already, and decoding it again read "a%2561" as the object "aa" instead of the name "a%61".
    const rest = pathSegments(request.raw.url ?? '').slice(1);
    let group = '';
    let version: string | undefined;
    let segments: string[];
    if (legacy) {
      version = rest[0];
      segments = rest.slice(1);
    } else {
      group = rest[0] ?? '';
      version = rest[1];
      segments = rest.slice(2);
      if (version === undefined) {
        if (request.method !== 'GET') throw Errors.methodNotAllowed();
        const doc = discovery.apiGroup(group);
        if (!doc) throw Errors.pathNotFound();
        return apiJson(reply, doc);
      }
    }
    if (version === undefined) throw Errors.pathNotFound();
    // pods/NAME/proxy/... and services/NAME/proxy/...: the rest of the path is the pod's.
    if (
      legacy &&
      version === 'v1' &&
      segments.length >= 5 &&
      segments[0] === 'namespaces' &&
      (segments[2] === 'pods' || segments[2] === 'services') &&
      segments[4] === 'proxy'
    ) {
      const rawPath = (request.raw.url ?? '').split('?')[0]!;
      return proxy.handle(segments[2], segments[1]!, segments[3]!, rawPath, request, reply);
    }
    if (segments.length === 0) {
      if (request.method !== 'GET') throw Errors.methodNotAllowed();
      const doc = discovery.resourceList(group, version);
      if (!doc) throw Errors.pathNotFound();
      return apiJson(reply, doc);
    }
    const target = resolveTarget(cluster, group, version, segments);
    if (!target) throw Errors.pathNotFound();
    instrumentation.routed(target, request, reply);
    await resources.handle(target, request, reply);
  };
  const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
  const onResponse = instrumentation.answered;
  app.route({ method: [...methods], url: '/api/*', onResponse, handler: (req, reply) => handleApi(req, reply, true) });
  app.route({
    method: [...methods],
    url: '/apis/*',
    onResponse,
    handler: (req, reply) => handleApi(req, reply, false),
  });

  registerSimRoutes(app, cluster, options.kubelet);
  registerUiRoutes(app);
  attachWebSockets(
    app,
    cluster,
    resources,
    new PodConnect(cluster, options.kubelet),
    instrumentation,
    auth,
    options.logger,
  );
  return app;
}

/** The JSON body of a /sim/v1 request: an object, or {} when there is none. */
function simBody(request: FastifyRequest): Record<string, unknown> {
  const raw = request.body as Buffer | undefined;
  const body = raw && raw.length > 0 ? parseJson(raw.toString('utf8')) : {};
  if (!isPlainObject(body)) throw Errors.badRequest('body must be a JSON object');
  return body;
}

/** Where `POST /sim/v1/clock/advance` should take the clock: by a duration, to a time, or to the next timer. */
type AdvanceTarget = { byMs: number } | { toMs: number } | 'next-timer';

function advanceTarget(body: Record<string, unknown>): AdvanceTarget {
  const { by, to } = body;
  if (by !== undefined && to !== undefined) throw Errors.badRequest('give either "by" or "to", not both');
  if (to === 'next-timer') return 'next-timer';
  if (typeof to === 'string') {
    const toMs = Date.parse(to);
    if (Number.isNaN(toMs) || !/^\d{4}-\d{2}-\d{2}T/.test(to))
      throw Errors.badRequest(`invalid time ${JSON.stringify(to)}: use RFC 3339, e.g. "2025-01-01T00:10:00Z"`);
    return { toMs };
  }
  if (typeof by !== 'string' && typeof by !== 'number')
    throw Errors.badRequest(
      'body must be {"by": "<duration>"}, e.g. {"by": "90s"}, {"to": "<RFC 3339 time>"} or {"to": "next-timer"}',
    );
  let ms: number;
  try {
    ms = typeof by === 'number' ? by * 1000 : parseDuration(by);
  } catch {
    throw Errors.badRequest(
      `invalid duration ${JSON.stringify(by)}: use Go duration syntax such as "90s", "5m" or "1h30m"`,
    );
  }
  if (!(ms >= 0)) throw Errors.badRequest('duration must not be negative');
  return { byMs: ms };
}

/** Cluster seconds per wall second that `POST /sim/v1/clock/run` accepts. */
const MAX_RUN_RATE = 86_400;

/**
 * POST /sim/v1/nodes/NAME/{fail,recover}: stops or restarts a node's kubelet, here or (over etcd, `forward`) in the
 * process that runs it, through its kubelet endpoint.
 */
export function registerNodeFaults(
  app: FastifyInstance,
  cluster: ServedCluster,
  kubelet: KubeletConnector | undefined,
  forward = true,
): void {
  for (const action of ['fail', 'recover'] as const) {
    app.post(`/sim/v1/nodes/:name/${action}`, async (request, reply) => {
      const name = (request.params as { name: string }).name;
      // A node whose kubelet runs in another process (over etcd): that process fails or recovers it.
      const remote = forward ? remoteNodeKubelet(cluster, kubelet, name) : undefined;
      if (remote)
        return proxyToKubelet(remote, `sim/v1/nodes/${encodeURIComponent(name)}/${action}`, '', reply, 'POST');
      if (!kubelet) throw Errors.badRequest('no simulated kubelets run in this server');
      const found = action === 'fail' ? kubelet.failNode(name) : kubelet.recoverNode(name);
      if (!found) throw Errors.notFound({ group: '', resource: 'nodes' }, name);
      await cluster.virtualClock?.settle();
      void reply
        .header('content-type', 'application/json')
        .send(JSON.stringify({ node: name, kubelet: action === 'fail' ? 'stopped' : 'running' }));
    });
  }
}

/**
 * Simulator controls under /sim/v1 (not a Kubernetes group): the clock (read, advance, run and pause a virtual
 * one) and node faults.
 */
function registerSimRoutes(app: FastifyInstance, cluster: ServedCluster, kubelet: KubeletConnector | undefined): void {
  registerNodeFaults(app, cluster, kubelet);
  // What only the simulator knows of a node: whether its kubelet is failed (the Node's conditions follow later).
  app.get('/sim/v1/nodes', (_req, reply) => {
    const items = (kubelet?.kubelets() ?? [])
      .map(({ node, failed }) => ({ node, kubelet: failed ? 'stopped' : 'running' }))
      .sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
    void reply.header('content-type', 'application/json').send(JSON.stringify({ items }));
  });
  const virtual = cluster.virtualClock;
  const runner = virtual ? new ClockRunner(virtual) : undefined;
  app.addHook('preClose', async () => {
    await runner?.pause();
  });
  const clockState = (): string => {
    const state: Record<string, unknown> = { now: rfc3339(cluster.clock.now()), mode: cluster.clock.mode };
    if (virtual && runner) {
      state.running = runner.running;
      if (runner.running) state.rate = runner.rate;
      const next = virtual.nextTimerAt();
      if (next !== undefined) state.nextTimerAt = rfc3339Micro(next);
    }
    return JSON.stringify(state);
  };
  const sendClock = (reply: FastifyReply): void =>
    void reply.header('content-type', 'application/json').send(clockState());
  const virtualOnly = (what: string) => {
    if (!virtual || !runner)
      throw Errors.badRequest(`the clock is real: start the server with --clock virtual to ${what} it`);
    return { clock: virtual, runner };
  };
  app.get('/sim/v1/clock', (_req, reply) => sendClock(reply));
  app.post('/sim/v1/clock/advance', async (request, reply) => {
    const { clock } = virtualOnly('advance');
    const target = advanceTarget(simBody(request));
    if (target === 'next-timer') await clock.advanceToNextTimer();
    else if ('toMs' in target) {
      if (target.toMs < clock.now())
        throw Errors.badRequest(`${rfc3339(target.toMs)} is in the past (the clock is at ${rfc3339(clock.now())})`);
      await clock.advanceTo(target.toMs);
    } else await clock.advance(target.byMs);
    sendClock(reply);
  });
  app.post('/sim/v1/clock/run', async (request, reply) => {
    const { runner } = virtualOnly('run');
    const rate = simBody(request).rate ?? 1;
    if (typeof rate !== 'number' || !(rate > 0 && rate <= MAX_RUN_RATE))
      throw Errors.badRequest(
        `rate must be a number of cluster seconds per second, above 0 and at most ${MAX_RUN_RATE}`,
      );
    runner.run(rate);
    sendClock(reply);
  });
  app.post('/sim/v1/clock/pause', async (_request, reply) => {
    await virtualOnly('pause').runner.pause();
    sendClock(reply);
  });
}

/** Watches over WebSocket on the same URLs as HTTP watches, and pods/exec, pods/attach and pods/portforward. */
function attachWebSockets(
  app: FastifyInstance,
  cluster: ServedCluster,
  resources: ResourceHandler,
  connect: PodConnect,
  instrumentation: RequestInstrumentation,
  auth: ApiAuth | undefined,
  logger: ((line: string) => void) | undefined,
): void {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_BODY_BYTES });
  const rejectWith = (socket: Duplex, err: ApiError, contentType = 'application/json'): void =>
    rejectUpgrade(socket, err.code, contentType, contentType === 'application/json' ? statusJson(err) : err.message);
  onUpgrade(
    app.server,
    (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const startedAt = processSeconds();
      let refused: ((code: number) => void) | undefined;
      const reject = (socket: Duplex, err: ApiError, contentType = 'application/json'): void => {
        refused?.(err.code);
        rejectWith(socket, err, contentType);
      };
      try {
        auth?.check(req);
        const url = new URL(req.url ?? '/', 'http://localhost');
        const segments = pathSegments(url.pathname);
        let target: ResourceTarget | undefined;
        if (segments[0] === 'api' && segments.length >= 3)
          target = resolveTarget(cluster, '', segments[1]!, segments.slice(2));
        else if (segments[0] === 'apis' && segments.length >= 4)
          target = resolveTarget(cluster, segments[1]!, segments[2]!, segments.slice(3));
        if (!target) return reject(socket, Errors.pathNotFound());
        refused = instrumentation.upgrade(target, url.searchParams, socket, startedAt, processSeconds);
        const sub = target.subresource;
        if (
          (sub === 'exec' || sub === 'attach' || sub === 'portforward') &&
          target.info.resource === 'pods' &&
          target.name
        ) {
          return connect.upgrade(sub, target.info, target.namespace, target.name, url, req, socket, head, (err, type) =>
            reject(socket, err, type),
          );
        }
        const query: Record<string, string> = Object.fromEntries(url.searchParams.entries());
        const isWatch = target.watchPath || queryBool(url.searchParams.getAll('watch'));
        if (!isWatch || (target.name !== undefined && !target.watchPath)) {
          return reject(socket, Errors.badRequest(`upgrade to WebSocket is supported for watch requests only`));
        }
        resources.checkWatch(target, query);
        wss.handleUpgrade(req, socket, head, (ws) => {
          guardWebSocket(ws);
          try {
            resources.watchWebSocket(target!, query, req.headers.accept, ws);
          } catch (err) {
            // The 101 is out: a failure now can only close the WebSocket (1011: internal error).
            logger?.(
              `internal error in a WebSocket watch: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
            );
            ws.close(1011);
          }
        });
      } catch (err) {
        reject(socket, toApiError(err));
      }
    },
    logger,
  );
  // preClose, not onClose: fastify's own onClose waits for every socket to end, upgraded ones included.
  app.addHook('preClose', (done) => {
    connect.close();
    for (const client of wss.clients) client.terminate();
    wss.close(() => done());
  });
}
