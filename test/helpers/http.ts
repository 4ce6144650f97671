import assert from 'node:assert/strict';

/** A Kubernetes object as the tests see it on the wire. */
export interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    generateName?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    finalizers?: string[];
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export interface ObjList {
  kind: string;
  apiVersion: string;
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
  items: Obj[];
}

export interface StatusBody {
  kind: string;
  apiVersion: string;
  status: string;
  message?: string;
  reason?: string;
  code: number;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: Array<{ reason: string; message: string; field?: string }>;
  };
}

export interface Reply<T = unknown> {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON (undefined when it is not JSON). */
  body: T;
}

export interface RequestOptions {
  method?: string;
  /** An object is sent as JSON; a string or Buffer is sent as is. */
  body?: unknown;
  headers?: Record<string, string>;
}

/** One HTTP request against the server; never throws on an error status. */
export async function request<T = unknown>(
  base: string,
  path: string,
  options: RequestOptions = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  let body: string | Buffer | undefined;
  if (options.body !== undefined) {
    if (typeof options.body === 'string' || Buffer.isBuffer(options.body)) body = options.body;
    else body = JSON.stringify(options.body);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
      headers['content-type'] = 'application/json';
  }
  const res = await fetch(base + path, { method: options.method ?? 'GET', headers, body });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, text, body: parsed as T };
}

/** The ConfigMap the root-ca-cert-publisher puts in every namespace. */
export const ROOT_CA = 'kube-root-ca.crt';

/** Objects but kube-root-ca.crt, for tests that expect a namespace's ConfigMaps to be theirs alone. */
export function withoutRootCa<T extends { metadata: { name?: string } }>(items: readonly T[]): T[] {
  return items.filter((o) => o.metadata.name !== ROOT_CA);
}

/** A client bound to one server, with the verbs the tests use. */
export class Api {
  constructor(readonly url: string) {}

  request<T = unknown>(path: string, options: RequestOptions = {}): Promise<Reply<T>> {
    return request<T>(this.url, path, options);
  }

  /** Like request, but fails the test unless the status is the one expected. */
  async expect<T = unknown>(status: number, path: string, options: RequestOptions = {}): Promise<T> {
    const reply = await this.request<T>(path, options);
    assert.equal(
      reply.status,
      status,
      `${options.method ?? 'GET'} ${path}: expected ${status}, got ${reply.status}: ${reply.text.slice(0, 500)}`,
    );
    return reply.body;
  }

  get(path: string): Promise<Obj> {
    return this.expect<Obj>(200, path);
  }

  list(path: string): Promise<ObjList> {
    return this.expect<ObjList>(200, path);
  }

  create(path: string, body: unknown): Promise<Obj> {
    return this.expect<Obj>(201, path, { method: 'POST', body });
  }

  put(path: string, body: unknown): Promise<Obj> {
    return this.expect<Obj>(200, path, { method: 'PUT', body });
  }

  mergePatch(path: string, patch: unknown): Promise<Obj> {
    return this.expect<Obj>(200, path, {
      method: 'PATCH',
      body: patch,
      headers: { 'content-type': 'application/merge-patch+json' },
    });
  }

  delete(path: string, options?: unknown): Promise<Reply<Obj | StatusBody>> {
    return this.request<Obj | StatusBody>(path, { method: 'DELETE', body: options });
  }

  /**
   * Creates a namespace (no error if it exists) and waits, a second at most, for the root-ca-cert-publisher's
   * kube-root-ca.crt in it, so that what a test lists or watches there next does not race that controller's write.
   */
  async namespace(name: string): Promise<void> {
    const reply = await this.request('/api/v1/namespaces', {
      method: 'POST',
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
    });
    assert.ok(
      reply.status === 201 || reply.status === 409,
      `creating namespace ${name}: ${reply.status} ${reply.text}`,
    );
    for (let i = 0; i < 100; i++) {
      if ((await this.request(`/api/v1/namespaces/${name}/configmaps/${ROOT_CA}`)).status === 200) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

/** Asserts a reply is a Failure Status with this code and reason, and returns it. */
export function assertStatus(reply: Reply, code: number, reason: string): StatusBody {
  assert.equal(reply.status, code, `expected HTTP ${code} ${reason}, got ${reply.status}: ${reply.text.slice(0, 500)}`);
  const status = reply.body as StatusBody;
  assert.ok(status && typeof status === 'object', `expected a Status body, got: ${reply.text.slice(0, 200)}`);
  assert.equal(status.kind, 'Status');
  assert.equal(status.apiVersion, 'v1');
  assert.equal(status.status, 'Failure');
  assert.equal(status.code, code);
  assert.equal(status.reason, reason);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/json/);
  return status;
}

/** Path of a configmap (or the collection) in a namespace. */
export function cmPath(namespace: string, name?: string): string {
  return `/api/v1/namespaces/${namespace}/configmaps${name === undefined ? '' : `/${name}`}`;
}

export function configMap(name: string, data: Record<string, string> = {}, labels?: Record<string, string>): Obj {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: labels ? { name, labels } : { name }, data };
}

/** Retries a read-modify-write on 409 Conflict, as client-go's RetryOnConflict does. */
export async function retryOnConflict<T>(fn: () => Promise<Reply<T>>, attempts = 10): Promise<Reply<T>> {
  for (let i = 1; ; i++) {
    const reply = await fn();
    if (reply.status !== 409 || i >= attempts) return reply;
  }
}
