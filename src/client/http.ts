import { ApiError } from '../api/errors.js';
import { PATCH_CONTENT_TYPES, type PatchType } from '../api/patch.js';
import { isPlainObject, type KubeObject, type DeleteOptions, type KubeList } from '../api/types.js';
import type { Gvr, KubeClient, ListOptions, WatchEventHandler, WatchHandle, WatchOptions } from './client.js';
import type { Connection } from './kubeconfig.js';
import { LineSplitter } from './watch-lines.js';

/** A plain HTTP answer. */
export interface HttpReply {
  status: number;
  contentType: string;
  text: string;
}

export interface HttpRequest {
  method: string;
  path: string;
  body?: string;
  contentType?: string;
}

/** Something that answers API requests: fetch against a URL, or fastify's inject against an in-process server. */
export type HttpTransport = (request: HttpRequest) => Promise<HttpReply>;

/** The part of fetch the HTTP client uses: the global one, or one that carries a connection's credentials. */
export type Fetch = (
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; signal?: AbortSignal },
) => Promise<FetchReply>;

export interface FetchReply {
  ok: boolean;
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
  body: unknown;
}

/**
 * A fetch for one server: its bearer token on every request and, for https, its CA (or no verification) through
 * an undici Agent, as the global fetch takes no per-request TLS options. undici is loaded only when needed.
 */
export async function connectionFetch(connection: Connection): Promise<Fetch> {
  let base: Fetch = fetch;
  const clientCertificate =
    connection.clientCert !== undefined && connection.clientKey !== undefined
      ? { cert: connection.clientCert, key: connection.clientKey }
      : {};
  if (
    connection.server.startsWith('https:') &&
    (connection.caCert !== undefined || connection.insecureSkipTlsVerify || clientCertificate.cert !== undefined)
  ) {
    const { Agent, fetch: undiciFetch } = await import('undici');
    const dispatcher = new Agent({
      connect: {
        ...(connection.insecureSkipTlsVerify ? { rejectUnauthorized: false } : { ca: connection.caCert }),
        ...clientCertificate,
      },
    });
    base = (url, init) => undiciFetch(url, { ...init, dispatcher });
  }
  const token = connection.token;
  if (token === undefined) return base;
  return (url, init) => base(url, { ...init, headers: { ...init.headers, authorization: `Bearer ${token}` } });
}

export function fetchTransport(baseUrl: string, fetchFn: Fetch = fetch): HttpTransport {
  const base = baseUrl.replace(/\/$/, '');
  return async ({ method, path, body, contentType }) => {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = contentType ?? 'application/json';
    const res = await fetchFn(base + path, { method, headers, body });
    return { status: res.status, contentType: res.headers.get('content-type') ?? '', text: await res.text() };
  };
}

/** The API path of a resource collection (namespace undefined: cluster-scoped or every namespace). */
export function resourcePath(gvr: Gvr, namespace: string | undefined, name?: string, subresource?: string): string {
  let path = gvr.group === '' ? `/api/${gvr.version}` : `/apis/${gvr.group}/${gvr.version}`;
  if (namespace !== undefined) path += `/namespaces/${encodeURIComponent(namespace)}`;
  path += `/${gvr.resource}`;
  if (name !== undefined) path += `/${encodeURIComponent(name)}`;
  if (subresource !== undefined) path += `/${subresource}`;
  return path;
}

/** The ApiError a failed reply stands for (its Status when it has one). */
export function errorOf(reply: HttpReply, what: string): ApiError {
  try {
    const status = JSON.parse(reply.text) as {
      kind?: string;
      code?: number;
      reason?: string;
      message?: string;
      details?: ApiError['details'];
    };
    if (status.kind === 'Status')
      return new ApiError(
        status.code ?? reply.status,
        status.reason ?? 'Unknown',
        status.message ?? what,
        status.details,
      );
  } catch {
    // not JSON
  }
  return new ApiError(
    reply.status,
    reply.status === 404 ? 'NotFound' : 'Unknown',
    `${what}: HTTP ${reply.status}: ${reply.text.slice(0, 200)}`,
  );
}

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const text = q.toString();
  return text === '' ? '' : `?${text}`;
}

/**
 * KubeClient over HTTP, for driving a server in another process (`sim replay --server`). Writes and reads go
 * through the transport; watches stream newline-delimited JSON over fetch from `baseUrl`.
 */
export class HttpClient implements KubeClient {
  private readonly transport: HttpTransport;

  constructor(
    private readonly baseUrl: string,
    transport?: HttpTransport,
    private readonly fetchFn: Fetch = fetch,
  ) {
    this.transport = transport ?? fetchTransport(baseUrl, fetchFn);
  }

  private async call<T>(method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
    const reply = await this.transport({
      method,
      path,
      body: body === undefined ? undefined : JSON.stringify(body),
      contentType,
    });
    if (reply.status < 200 || reply.status >= 300) throw errorOf(reply, `${method} ${path}`);
    return JSON.parse(reply.text) as T;
  }

  get(gvr: Gvr, namespace: string | undefined, name: string): Promise<KubeObject> {
    return this.call('GET', resourcePath(gvr, namespace, name));
  }

  list(gvr: Gvr, namespace: string | undefined, options: ListOptions = {}): Promise<KubeList> {
    const q = query({
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
      limit: options.limit,
      continue: options.continue,
    });
    return this.call('GET', resourcePath(gvr, namespace) + q);
  }

  create(gvr: Gvr, namespace: string | undefined, obj: KubeObject): Promise<KubeObject> {
    return this.call('POST', resourcePath(gvr, namespace), obj);
  }

  update(gvr: Gvr, obj: KubeObject): Promise<KubeObject> {
    return this.call('PUT', resourcePath(gvr, obj.metadata.namespace, obj.metadata.name), obj);
  }

  updateStatus(gvr: Gvr, obj: KubeObject): Promise<KubeObject> {
    return this.call('PUT', resourcePath(gvr, obj.metadata.namespace, obj.metadata.name, 'status'), obj);
  }

  finalizeNamespace(obj: KubeObject): Promise<KubeObject> {
    return this.call(
      'PUT',
      resourcePath({ group: '', version: 'v1', resource: 'namespaces' }, undefined, obj.metadata.name, 'finalize'),
      obj,
    );
  }

  updateApproval(obj: KubeObject): Promise<KubeObject> {
    return this.call(
      'PUT',
      resourcePath(
        { group: 'certificates.k8s.io', version: 'v1', resource: 'certificatesigningrequests' },
        undefined,
        obj.metadata.name,
        'approval',
      ),
      obj,
    );
  }

  patch(
    gvr: Gvr,
    namespace: string | undefined,
    name: string,
    type: PatchType,
    patch: unknown,
    subresource?: 'status',
  ): Promise<KubeObject> {
    const contentType = Object.entries(PATCH_CONTENT_TYPES).find(([, t]) => t === type)![0];
    return this.call('PATCH', resourcePath(gvr, namespace, name, subresource), patch, contentType);
  }

  async delete(gvr: Gvr, namespace: string | undefined, name: string, options: DeleteOptions = {}): Promise<void> {
    // DeleteOptions as the API has them: dryRun is a list of stages (`["All"]`), not a flag.
    const { dryRun, ...rest } = options;
    await this.call('DELETE', resourcePath(gvr, namespace, name), {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      ...rest,
      ...(dryRun ? { dryRun: ['All'] } : {}),
    });
  }

  /** POST to a subresource that acts on the object (pods/NAME/binding, pods/NAME/eviction): resolves to the Status. */
  createSubresource(
    gvr: Gvr,
    namespace: string | undefined,
    name: string,
    subresource: string,
    body: unknown,
  ): Promise<unknown> {
    return this.call('POST', resourcePath(gvr, namespace, name, subresource), body);
  }

  getScale(gvr: Gvr, namespace: string | undefined, name: string): Promise<KubeObject> {
    return this.call('GET', resourcePath(gvr, namespace, name, 'scale'));
  }

  updateScale(gvr: Gvr, scale: KubeObject): Promise<KubeObject> {
    return this.call('PUT', resourcePath(gvr, scale.metadata.namespace, scale.metadata.name, 'scale'), scale);
  }

  watch(
    gvr: Gvr,
    namespace: string | undefined,
    options: WatchOptions,
    onEvent: WatchEventHandler,
    onClose: (error?: Error) => void,
  ): WatchHandle {
    const abort = new AbortController();
    const q = query({
      watch: 'true',
      allowWatchBookmarks: 'true',
      resourceVersion: options.resourceVersion,
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
    });
    const url = this.baseUrl.replace(/\/$/, '') + resourcePath(gvr, namespace) + q;
    let closed = false;
    const finish = (error?: Error): void => {
      if (closed) return;
      closed = true;
      onClose(error);
    };
    void (async () => {
      const res = await this.fetchFn(url, { headers: { accept: 'application/json' }, signal: abort.signal });
      if (!res.ok || !res.body) {
        finish(
          errorOf(
            { status: res.status, contentType: res.headers.get('content-type') ?? '', text: await res.text() },
            `watch ${url}`,
          ),
        );
        return;
      }
      const decoder = new TextDecoder();
      const lines = new LineSplitter();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        for (const line of lines.push(decoder.decode(chunk, { stream: true }))) {
          if (closed) continue;
          const event = JSON.parse(line) as { type: string; object: KubeObject };
          if (event.type === 'ERROR') {
            const status = event.object as unknown as { code?: number; reason?: string; message?: string };
            finish(new ApiError(status.code ?? 500, status.reason ?? 'Unknown', status.message ?? 'watch error'));
            abort.abort();
            return;
          }
          if (
            isPlainObject(event.object) &&
            (event.type === 'ADDED' ||
              event.type === 'MODIFIED' ||
              event.type === 'DELETED' ||
              event.type === 'BOOKMARK')
          ) {
            onEvent(event.type, event.object);
          }
        }
      }
      finish();
    })().catch((err: unknown) => {
      // A connection that failed (the server went away) or a handler that threw: the stream is given up either way.
      const stopped = abort.signal.aborted;
      abort.abort();
      finish(stopped ? undefined : (err as Error));
    });
    return {
      stop: () => {
        closed = true;
        abort.abort();
      },
    };
  }
}
