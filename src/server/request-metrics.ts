import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ApiRequestMetrics, RequestScope, RequestSeries, RequestVerb } from '../metrics/metrics.js';
import type { ResourceTarget } from './resources.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The series an API request is counted in when it is answered (long-running ones count themselves). */
    apiSeries: RequestSeries | null;
  }
}

/** metrics.go's validConnectRequests: these subresources are CONNECT, and long-running. */
const CONNECT_SUBRESOURCES = new Set(['log', 'exec', 'portforward', 'attach', 'proxy']);
const APPLY_PATCH = 'application/apply-patch+yaml';

type QueryValue = string | string[] | undefined;

function first(value: QueryValue): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** getVerbIfWatch: the first `watch` value, unless it is 0 or false. */
function watchRequested(value: QueryValue): boolean {
  const v = first(value);
  return v !== undefined && v !== '0' && v.toLowerCase() !== 'false';
}

/** CleanScope: a name (or a create) is a resource, else the namespace, else the cluster. */
function scopeOf(method: string, target: ResourceTarget): RequestScope {
  if (target.name !== undefined || method === 'POST') return 'resource';
  return target.namespace !== undefined ? 'namespace' : 'cluster';
}

/** CanonicalVerb then CleanVerb: GET or LIST by scope, WATCH, APPLY for a server-side apply, CONNECT. */
function verbOf(
  method: string,
  scope: RequestScope,
  target: ResourceTarget,
  watch: QueryValue,
  contentType: string | undefined,
): RequestVerb {
  if (target.subresource !== undefined && CONNECT_SUBRESOURCES.has(target.subresource)) return 'CONNECT';
  switch (method) {
    case 'GET':
      if (target.watchPath || watchRequested(watch)) return 'WATCH';
      return scope === 'resource' ? 'GET' : 'LIST';
    case 'PATCH':
      return contentType !== undefined && contentType.split(';')[0]!.trim() === APPLY_PATCH ? 'APPLY' : 'PATCH';
    case 'POST':
    case 'PUT':
    case 'DELETE':
      return method;
    default:
      return 'GET';
  }
}

/** cleanDryRun: "All" (the one valid value, however often given), or "invalid". */
function dryRunOf(value: QueryValue): '' | 'All' | 'invalid' {
  if (value === undefined) return '';
  const values = Array.isArray(value) ? value : [value];
  if (values.length === 0) return '';
  return values.every((v) => v === 'All') ? 'All' : 'invalid';
}

type Query = Record<string, QueryValue>;

/**
 * kube-apiserver's request instrumentation (endpoints/metrics): each API request routed to a resource is counted
 * in apiserver_request_total and apiserver_request_duration_seconds once answered, from the arrival of its
 * first byte; a long-running one (a watch, a CONNECT: logs, exec, attach, port-forward) is in
 * apiserver_longrunning_requests while it is open, and counted when it ends. Other requests are in
 * apiserver_current_inflight_requests while they are served.
 */
export class RequestInstrumentation {
  constructor(private readonly metrics: ApiRequestMetrics) {}

  private series(
    target: ResourceTarget,
    method: string,
    watch: QueryValue,
    contentType: string | undefined,
    dryRun: QueryValue,
  ): RequestSeries {
    const scope = scopeOf(method, target);
    const verb = verbOf(method, scope, target, watch, contentType);
    const { info } = target;
    const subresource = target.subresource ?? '';
    return this.metrics.series(
      info,
      info.group,
      info.version,
      info.resource,
      subresource,
      verb,
      scope,
      dryRunOf(dryRun),
    );
  }

  /** Called once a request is routed to `target`. */
  routed(target: ResourceTarget, request: FastifyRequest, reply: FastifyReply): void {
    const method = request.method;
    const query = request.query as Query;
    const series = this.series(target, method, query.watch, request.headers['content-type'], query.dryRun);
    if (series.longRunningVerb) {
      const open = series.longRunning;
      open.value++;
      // A watch ends when either side closes it; 'close' comes either way ('finish' only when the server ends it).
      reply.raw.once('close', () => {
        open.value--;
        series.done(reply.raw.statusCode, reply.elapsedTime / 1000);
      });
      return;
    }
    this.metrics.begin(method !== 'GET');
    request.apiSeries = series;
  }

  /** The onResponse hook of the API routes. */
  readonly answered = (request: FastifyRequest, reply: FastifyReply, done: () => void): void => {
    const series = request.apiSeries;
    if (series !== null) {
      series.done(reply.statusCode, reply.elapsedTime / 1000);
      this.metrics.end(request.method !== 'GET');
    }
    done();
  };

  /**
   * A WebSocket (or SPDY) upgrade routed to `target`: open while its socket is, counted when it closes, with the
   * code it was answered (101 once upgraded). Returns what to call with the code of a refusal.
   */
  upgrade(
    target: ResourceTarget,
    query: URLSearchParams,
    socket: { once(event: 'close', fn: () => void): unknown },
    startedAt: number,
    now: () => number,
  ): (code: number) => void {
    const series = this.series(target, 'GET', query.get('watch') ?? undefined, undefined, query.getAll('dryRun'));
    const open = series.longRunning;
    open.value++;
    let code = 101;
    socket.once('close', () => {
      open.value--;
      series.done(code, now() - startedAt);
    });
    return (refused) => {
      code = refused;
    };
  }
}
